// libFuzzer target. Result files read back by --resume and merge: byte 0 picks the run file,
// the experiment file, the run journal or the JSON text helpers; the rest is the file.
// Contract and entry point: fuzz_results.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_results.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_results({data, size});
  return 0;
}
