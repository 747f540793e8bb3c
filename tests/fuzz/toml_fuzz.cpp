// libFuzzer target. Experiment TOML: the input is an experiment file, parsed (with its prompts), sweep-expanded,
// hashed and serialized.
// Contract and entry point: fuzz_entry.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_toml({data, size});
  return 0;
}
