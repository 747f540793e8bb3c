// libFuzzer target. Token trees: byte 0 picks a TokenTree (validate, shape, verify batch,
// truncate), a TreeSpec (sampling name, widths text, node budget) or the n-gram drafter's trie
// over a hostile context.
// Contract and entry point: fuzz_tree.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_tree.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_tree({data, size});
  return 0;
}
