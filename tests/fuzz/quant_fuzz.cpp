// libFuzzer target. Quantized blocks: byte 0 picks a tensor type, byte 1 the shape, byte 2 the
// activations; the rest are weight rows, dequantized, looked up, quantized again and multiplied
// on every CPU path against matmul_ref.
// Contract and entry point: fuzz_quant.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_quant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_quant({data, size});
  return 0;
}
