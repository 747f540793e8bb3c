// libFuzzer target. KL-divergence base files (llama.cpp's "_logits_" format) read against a tiny
// synth model. Contract and entry point: fuzz_kld.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_kld.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_kld({data, size});
  return 0;
}
