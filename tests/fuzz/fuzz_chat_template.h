// Fuzz entry point of the chat templates (target fuzz_chat_template): detection on arbitrary
// template text and rendering of arbitrary conversations, then tokenizing them as a chat prompt.
// Shared by tests/fuzz/chat_template_fuzz.cpp and the regression replay
// (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: byte 0 picks the format (bits 1-6: an index into renderable_chat_formats(), or past its
// end the one detected from the template text) and bit 0 add_assistant; bit 7 the tokenizer
// (the synth byte vocabulary, or a byte-level BPE one with ChatML's control tokens). The
// rest is split at 0x1E bytes: the first field is the template text (or a format name), every
// later field one message whose first byte picks its role (0 system, 1 user, 2 assistant,
// otherwise the bytes up to a 0x1F are the role's name) and whose remaining bytes are its
// content, any bytes at all (invalid UTF-8 included).
//
// Oracles:
//  - detection returns "" or a known format; a known format name detects as itself;
//  - a choice is validated as auto, none or a renderable name, else Error(InvalidArgument);
//    resolving "auto" gives a renderable format (raw text only for an empty template), or an
//    Error(InvalidArgument) naming the model; messages from valid UTF-8 input are valid UTF-8;
//  - rendering is deterministic, keeps every user message's text (trimmed, for the formats that
//    trim), and turns valid UTF-8 messages into valid UTF-8;
//  - the prompt tokens are vocabulary ids, BOS first where the vocabulary adds it; a raw
//    conversation is accepted only as one user message.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/chat_template.h"
#include "experiments/json_text.h"
#include "fuzz_entry.h"

namespace specmoe::fuzz {

inline constexpr const char* kChatSource = "fuzz-model.gguf";

inline std::string_view trim_ascii_space(std::string_view s) {
  constexpr std::string_view ws = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

inline Outcome run_chat_template(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome::Rejected;
  const uint8_t sel = bytes[0];
  const std::string_view rest(reinterpret_cast<const char*>(bytes.data() + 1), bytes.size() - 1);
  std::vector<std::string_view> fields;
  for (size_t at = 0;;) {
    const size_t sep = rest.find('\x1e', at);
    fields.push_back(rest.substr(at, sep == std::string_view::npos ? std::string_view::npos : sep - at));
    if (sep == std::string_view::npos) break;
    at = sep + 1;
  }
  const std::string_view tmpl = fields[0];
  std::vector<core::ChatMessage> messages;
  bool valid_utf8 = exp::is_valid_utf8(tmpl);
  for (size_t i = 1; i < fields.size(); ++i) {
    std::string_view f = fields[i];
    core::ChatMessage m;
    const uint8_t r = f.empty() ? 1 : static_cast<uint8_t>(f[0]);
    if (!f.empty()) f.remove_prefix(1);
    if (r < 3) {
      m.role = r == 0 ? "system" : r == 1 ? "user" : "assistant";
    } else {
      const size_t end = f.find('\x1f');
      m.role = std::string(f.substr(0, end));
      f = end == std::string_view::npos ? std::string_view{} : f.substr(end + 1);
    }
    m.content = std::string(f);
    valid_utf8 &= exp::is_valid_utf8(m.role) && exp::is_valid_utf8(m.content);
    messages.push_back(std::move(m));
  }

  // Detection and choices.
  const std::string detected = core::detect_chat_format(tmpl);
  SPECMOE_FUZZ_CHECK(detected.empty() || core::is_known_chat_format(detected), "detected an unknown format: " + detected);
  if (core::is_known_chat_format(tmpl)) SPECMOE_FUZZ_CHECK(detected == tmpl, "a format name does not detect as itself");
  try {
    core::validate_chat_template_choice(tmpl);
    SPECMOE_FUZZ_CHECK(tmpl == "auto" || tmpl == "none" || core::is_renderable_chat_format(tmpl),
                       "validate accepted '" + std::string(tmpl) + "'");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "validate threw the wrong kind");
    SPECMOE_FUZZ_CHECK(!valid_utf8 || exp::is_valid_utf8(e.what()), "an error message is not valid UTF-8");
  }
  std::string resolved;
  try {
    const core::ChatTemplateChoice c = core::resolve_chat_template("auto", tmpl, kChatSource);
    SPECMOE_FUZZ_CHECK(c.templated() ? core::is_renderable_chat_format(c.format) : tmpl.empty(),
                       "auto resolved '" + std::string(tmpl.substr(0, 80)) + "' to '" + c.format + "'");
    SPECMOE_FUZZ_CHECK(!c.templated() || c.format == detected, "auto resolved to another format than detected");
    resolved = c.format;
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "resolve threw the wrong kind");
    check_names_input(e, kChatSource);
    SPECMOE_FUZZ_CHECK(!valid_utf8 || exp::is_valid_utf8(e.what()),
                       std::string("an error message is not valid UTF-8: ") + e.what());
  }

  // Rendering, in the chosen format.
  const std::vector<std::string> formats = core::renderable_chat_formats();
  const size_t index = (sel >> 1) & 63;
  const std::string format = index < formats.size() ? formats[index] : resolved;
  const bool add_assistant = sel & 1;
  core::ChatTemplateChoice choice;
  if (!format.empty()) {
    const std::string text = core::render_chat(format, messages, add_assistant);
    SPECMOE_FUZZ_CHECK(text == core::render_chat(format, messages, add_assistant), format + ": rendering is not deterministic");
    for (const auto& m : messages)
      if (m.role == "user")
        SPECMOE_FUZZ_CHECK(text.find(trim_ascii_space(m.content)) != std::string::npos,
                           format + ": a user message's text is missing from the rendered prompt");
    SPECMOE_FUZZ_CHECK(!valid_utf8 || exp::is_valid_utf8(text), format + ": valid UTF-8 messages render invalid UTF-8");
    choice = {format, "fuzzed"};
  }

  // Tokens, as the runner makes them: the synth byte vocabulary, or a byte-level BPE one with
  // ChatML's control tokens (fuzz_tokenizers(): "byte-spm" first, "bpe-gpt-2" third).
  const auto& toks = fuzz_tokenizers();
  const core::Tokenizer& tok = *toks[(sel & 0x80) ? 2 : 0].tok;
  const bool raw_ok = messages.size() == 1 && messages[0].role == "user";
  try {
    const std::vector<int32_t> ids = core::chat_prompt_tokens(tok, choice, messages);
    SPECMOE_FUZZ_CHECK(choice.templated() || raw_ok, "a raw prompt accepted a conversation");
    for (int32_t id : ids) SPECMOE_FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "a prompt token is out of range");
    if (tok.add_bos_by_default() && tok.bos() >= 0)
      SPECMOE_FUZZ_CHECK(!ids.empty() && ids[0] == tok.bos(), "the prompt does not start with BOS");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(!choice.templated() && !raw_ok, std::string("a chat prompt failed to tokenize: ") + e.what());
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "a raw conversation threw the wrong kind");
  }
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
