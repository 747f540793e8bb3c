// libFuzzer target. Whole models: the input is a GGUF file, loaded as a Model (config, tensors
// bound for its architecture, tokenizer) and run on short batches; mutations are structure-aware
// (tests/fuzz/gguf_mutator.h) so they reach past the parser into every architecture's binding.
// Seeds: one shrunken model per `specmoe synth` preset, in several tensor types, and variants
// with the keys synth does not write (tests/fuzz/make_corpus.cpp).
// Contract and entry point: fuzz_model.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_model.h"
#include "gguf_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return specmoe::fuzz::gguf_custom_mutate(data, size, max_size, seed, LLVMFuzzerMutate);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_model({data, size});
  return 0;
}
