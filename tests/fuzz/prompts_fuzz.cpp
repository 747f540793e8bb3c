// libFuzzer target. Prompt files: byte 0 selects JSONL (MT-bench / HumanEval) or text-file format, turn, limit and
// category filter; the rest is the file's content.
// Contract and entry point: fuzz_entry.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_prompts({data, size});
  return 0;
}
