// libFuzzer target. MoE routers: byte 0-8 pick the family, its spec and the batch; the rest are
// the router logits, bias, hidden state and noise weights as floats.
// Contract and entry point: fuzz_router.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_router.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_router({data, size});
  return 0;
}
