// libFuzzer target. GGUF reader: the input is a whole GGUF file, opened from memory, walked (metadata getters,
// tensor bytes, dequantized rows), then turned into a ModelConfig and a Tokenizer.
// Contract and entry point: fuzz_entry.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_gguf({data, size});
  return 0;
}
