// libFuzzer target. Chat templates: byte 0 picks a format, add_assistant and a tokenizer; the
// rest is template text and messages separated by 0x1E (first byte of a message: its role).
// Detection, choice validation, rendering and the chat prompt's tokens.
// Contract and entry point: fuzz_chat_template.h (replayed by tests/unit/fuzz_regression_test.cpp).
#include "fuzz_chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  specmoe::fuzz::run_chat_template({data, size});
  return 0;
}
