// Chat templates: turning a conversation (system / user / assistant messages) into the prompt text
// an instruct model was trained on.
//
// A GGUF carries its template as Jinja source (tokenizer.chat_template). specmoe does not run
// Jinja: Debian 12 packages no C or C++ Jinja engine (only Python's Jinja2, R's jinjar and Rust's
// tera; inja and Jinja2Cpp are not packaged), and one written here would be a second project.
// Instead, as llama.cpp does without --jinja, the template text is recognised by the marker
// substrings of the well-known formats (in llama.cpp's order, so both pick the same format for the
// same text) and the conversation is rendered by that format's fixed rules, which produce exactly
// the strings llama.cpp's built-in formatter produces (tests/unit/chat_template_test.cpp). The
// formats are named as llama.cpp names them ("chatml", "llama3", "gemma", "phi3", "mistral-v7",
// ...), so --chat-template NAME means the same in both.
//
// Known difference from running the Jinja source: defaults a template adds on its own (Qwen2.5's
// "You are Qwen, created by Alibaba Cloud..." or SmolLM2's system message when the conversation has
// none) are not added, as in llama.cpp's built-in formats. Give a system message to have one.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specmoe::core {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Every format name detect_chat_format() can return (llama.cpp's built-in names), sorted.
std::vector<std::string> known_chat_formats();
// The formats render_chat() renders, sorted (a subset of known_chat_formats()).
std::vector<std::string> renderable_chat_formats();
bool is_known_chat_format(std::string_view name);
bool is_renderable_chat_format(std::string_view name);

// The format a template's text is recognised as ("" when none matches). A text that is itself a
// format name is that format.
std::string detect_chat_format(std::string_view template_text);

// Renders `messages` in `format`; add_assistant appends the opening of the assistant's reply (the
// generation prompt; some formats, such as mistral-v7, have none). Throws Error(InvalidArgument)
// for a format it does not render.
std::string render_chat(std::string_view format, std::span<const ChatMessage> messages, bool add_assistant);

// What a chat-template choice ("auto", "none" or a format name; --chat-template on the command
// line, [prompts] chat_template in an experiment) means for one model.
struct ChatTemplateChoice {
  std::string format;  // the format to render with; "" = the raw text, untemplated
  std::string reason;  // how it was chosen, for messages and reports ("detected from the GGUF's
                       // tokenizer.chat_template", "the GGUF has no tokenizer.chat_template", ...)
  bool templated() const { return !format.empty(); }
};

// Resolves `choice` against the model's template text (`gguf_template`, "" when the GGUF has
// none). auto: the detected format; a GGUF without a template gets the raw text (base models are
// prompted raw). Throws Error(InvalidArgument) naming `source` when auto meets a template that is
// not recognised or not rendered, or when `choice` is not auto, none or a renderable format name;
// the message suggests "none" or the format names.
ChatTemplateChoice resolve_chat_template(std::string_view choice, std::string_view gguf_template,
                                         std::string_view source);

// Checks a choice without a model (option and TOML validation): auto, none or a renderable name.
// Throws Error(InvalidArgument) listing the accepted values.
void validate_chat_template_choice(std::string_view choice);

// The prompt tokens of a conversation that the assistant answers next. Templated: rendered in
// choice.format with the generation prompt, then tokenized as llama.cpp tokenizes a formatted chat
// (the vocabulary's BOS, special-token texts parsed). Raw: the one user message's text, tokenized
// the same way (as llama-completion tokenizes a raw prompt). Throws
// Error(InvalidArgument) for a raw conversation of anything but one user message.
std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tok, const ChatTemplateChoice& choice,
                                        std::span<const ChatMessage> messages);

}  // namespace specmoe::core
