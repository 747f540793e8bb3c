// libFuzzer target. Tokenizers: byte 0 selects a vocabulary and flags (add_bos, parse_special, decode mode), the
// rest is text to encode (round trip checked) or int32 ids to decode (out-of-range ids must be
// Error(InvalidArgument)). Set SPECMOE_FUZZ_VOCAB=path.gguf to add a real vocabulary.
// Contract and entry point: fuzz_entry.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_tokenizer({data, size});
  return 0;
}
