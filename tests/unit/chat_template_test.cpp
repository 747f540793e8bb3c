// Chat templates against llama.cpp's built-in formatter (llama_chat_apply_template, 2026-10): every
// format specmoe renders gives exactly llama.cpp's string for a two-turn conversation with a system
// message (leading/trailing whitespace included, which some formats trim) and for a single turn;
// template texts are detected as llama.cpp detects them (snippets in each family's style, and the
// real models' own templates when present); auto/none/NAME resolution and its errors.
// Expected strings: tests/golden/chat_templates_llamacpp.json, produced by
// scripts/chat-template-golden.sh (a program calling llama.cpp's C API on the reference build).
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/chat_template.h"
#include "core/gguf.h"
#include "core/tokenizer.h"
#include "real_models.h"

namespace specmoe::core {
namespace {

nlohmann::json read_json(const std::string& rel) {
  std::ifstream in(std::string(SPECMOE_SOURCE_DIR) + "/" + rel, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + rel);
  return nlohmann::json::parse(in);
}

const nlohmann::json& inputs() {
  static const nlohmann::json j = read_json("tests/golden/chat_template_inputs.json");
  return j;
}
const nlohmann::json& golden() {
  static const nlohmann::json j = read_json("tests/golden/chat_templates_llamacpp.json");
  return j;
}

std::vector<ChatMessage> conversation(const std::string& name) {
  std::vector<ChatMessage> msgs;
  for (const auto& m : inputs()["conversations"][name]) msgs.push_back({m["role"], m["content"]});
  return msgs;
}

const char* const kConversations[] = {"two_turns_with_system", "one_turn"};

TEST(ChatTemplate, EveryRenderedFormatMatchesLlamaCpp) {
  const auto& formats = golden()["formats"];
  int checked = 0;
  for (const std::string& name : renderable_chat_formats()) {
    if (name == "dots1") {
      // llama.cpp has no name for it, only detection: checked through its snippet below.
      EXPECT_TRUE(golden()["snippets"].contains(name));
      continue;
    }
    ASSERT_TRUE(formats.contains(name)) << "'" << name << "' is not one of llama.cpp's built-in formats";
    for (const char* conv : kConversations) {
      const std::string want = formats[name][conv];
      ASSERT_FALSE(want.empty());
      EXPECT_EQ(render_chat(name, conversation(conv), true), want) << "format " << name << ", " << conv;
      ++checked;
    }
  }
  // The families the issue names, at least.
  for (const char* name : {"chatml", "llama3", "gemma", "phi3", "mistral-v7", "mistral-v3", "mistral-v1", "llama2-sys"})
    EXPECT_TRUE(is_renderable_chat_format(name)) << name;
  EXPECT_GE(checked, 54 * static_cast<int>(std::size(kConversations)));
}

TEST(ChatTemplate, KnowsEveryLlamaCppName) {
  // Every built-in name llama.cpp has is a known format here (so detection covers the same set and
  // order), and every one is rendered.
  for (const auto& [name, _] : golden()["formats"].items()) {
    EXPECT_TRUE(is_known_chat_format(name)) << name;
    EXPECT_EQ(detect_chat_format(name), name);
    EXPECT_TRUE(is_renderable_chat_format(name)) << name << ": every built-in format of llama.cpp is rendered";
  }
  for (const std::string& name : renderable_chat_formats()) EXPECT_TRUE(is_known_chat_format(name)) << name;
}

TEST(ChatTemplate, DetectsTemplateTextsAsLlamaCppDoes) {
  int recognised = 0;
  for (const auto& s : inputs()["snippets"]) {
    const std::string name = s["name"];
    const std::string text = s["template"];
    const auto& want = golden()["snippets"][name];
    const std::string detected = detect_chat_format(text);
    if (want["one_turn"].is_null()) {
      EXPECT_EQ(detected, "") << "snippet " << name << ": llama.cpp does not recognise it";
      continue;
    }
    ASSERT_TRUE(is_renderable_chat_format(detected)) << "snippet " << name << " detected as '" << detected << "'";
    for (const char* conv : kConversations)
      EXPECT_EQ(render_chat(detected, conversation(conv), true), want[conv].get<std::string>())
          << "snippet " << name << " detected as '" << detected << "', " << conv;
    ++recognised;
  }
  EXPECT_GE(recognised, 20);
  EXPECT_EQ(detect_chat_format("{{ '<|im_start|>' }}"), "chatml");
  EXPECT_EQ(detect_chat_format("{{ '<|im_start|>' }}<end_of_utterance>"), "smolvlm");
  EXPECT_EQ(detect_chat_format("mistral: anything"), "llama2");
  EXPECT_EQ(detect_chat_format("[gMASK]<sop>"), "chatglm4");
  EXPECT_EQ(detect_chat_format("{{ '<|endofuserprompt|>' }}"), "dots1");
  EXPECT_EQ(detect_chat_format(""), "");
}

class RealModelTemplate : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelTemplate, AutoRendersAsLlamaCpp) {
  const std::string model = GetParam();
  SPECMOE_REQUIRE_MODEL(model);
  ASSERT_TRUE(golden()["models"].contains(model)) << "no expected output for " << model
                                                  << " (scripts/chat-template-golden.sh)";
  const auto& want = golden()["models"][model];
  auto file = GGUFFile::open_metadata(specmoe::testing::model_path(model).string());
  const std::string tmpl = Tokenizer::from_gguf(*file)->chat_template();
  const ChatTemplateChoice c = resolve_chat_template("auto", tmpl, model);
  if (!want["has_template"].get<bool>()) {
    EXPECT_EQ(tmpl, "");
    EXPECT_FALSE(c.templated()) << c.reason;
    return;
  }
  ASSERT_TRUE(c.templated()) << c.reason;
  for (const char* conv : kConversations)
    EXPECT_EQ(render_chat(c.format, conversation(conv), true), want["rendered"][conv].get<std::string>())
        << model << " (" << c.format << "), " << conv;
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTemplate, ::testing::ValuesIn(specmoe::testing::kRealModels),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find(".gguf"));
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(ChatTemplate, ResolvesAutoNoneAndNames) {
  const std::string chatml = "{% for m in messages %}{{ '<|im_start|>' + m.role }}{% endfor %}";
  EXPECT_EQ(resolve_chat_template("auto", chatml, "m.gguf").format, "chatml");
  EXPECT_EQ(resolve_chat_template("none", chatml, "m.gguf").format, "");
  EXPECT_EQ(resolve_chat_template("llama3", chatml, "m.gguf").format, "llama3");
  // A model without a template is prompted with the raw text under auto; a name still applies.
  EXPECT_FALSE(resolve_chat_template("auto", "", "m.gguf").templated());
  EXPECT_EQ(resolve_chat_template("gemma", "", "m.gguf").format, "gemma");

  const std::string unknown = error_of([] { resolve_chat_template("auto", "{{ messages | my_filter }}", "m.gguf"); });
  EXPECT_NE(unknown.find("m.gguf"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("not one of the chat formats"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'none'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("chatml"), std::string::npos) << unknown;
  // Kimi K2's template (the last of llama.cpp's formats specmoe came to render) resolves to its format.
  EXPECT_EQ(resolve_chat_template("auto", "<|im_assistant|>assistant<|im_middle|>", "m.gguf").format, "kimi-k2");
  const std::string bad_name = error_of([] { validate_chat_template_choice("chatmlx"); });
  EXPECT_NE(bad_name.find("unknown chat template 'chatmlx'"), std::string::npos) << bad_name;
  EXPECT_NE(bad_name.find("auto, none"), std::string::npos) << bad_name;
  const std::string bad_render = error_of([] { render_chat("chatmlx", {}, true); });
  EXPECT_NE(bad_render.find("'chatmlx' is not rendered"), std::string::npos) << bad_render;
}

// Found by fuzz_chat_template (tests/regression/chat_template/excerpt-cut-inside-utf8.bin): the
// excerpt of an unrecognised template in the error was cut at 60 bytes, inside a three-byte
// character, and the message (which --json output carries) was no longer UTF-8. Every cut
// position: 57 ASCII bytes and then full-width bars put byte 60 at each offset of a character.
TEST(ChatTemplate, UnknownTemplateExcerptStaysUtf8) {
  for (int lead = 55; lead <= 60; ++lead) {
    std::string tmpl(static_cast<size_t>(lead), 'x');
    for (int i = 0; i < 8; ++i) tmpl += "\xef\xbd\x9c";  // U+FF5C FULLWIDTH VERTICAL LINE
    tmpl += " {{ messages | my_filter }}";
    const std::string msg = error_of([&] { resolve_chat_template("auto", tmpl, "m.gguf"); });
    EXPECT_NE(msg.find("not one of the chat formats"), std::string::npos) << msg;
    EXPECT_NO_THROW((void)nlohmann::json(msg).dump()) << "lead " << lead << ": " << msg;  // strict UTF-8
    EXPECT_NE(msg.find(std::string(static_cast<size_t>(lead), 'x')), std::string::npos) << msg;
  }
}

TEST(ChatTemplate, GenerationPromptAndRoles) {
  const std::vector<ChatMessage> one = {{"user", "hi"}};
  EXPECT_EQ(render_chat("chatml", one, false), "<|im_start|>user\nhi<|im_end|>\n");
  EXPECT_EQ(render_chat("chatml", one, true), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // Gemma has no system role: it joins the first user turn; assistant turns are "model".
  const std::vector<ChatMessage> conv = {{"system", " Be brief. "}, {"user", "hi"}, {"assistant", "hello"}};
  EXPECT_EQ(render_chat("gemma", conv, true),
            "<start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\nhello<end_of_turn>\n"
            "<start_of_turn>model\n");
  // A conversation's rendering starts with the rendering of its earlier turns (for the formats
  // with per-message text), which is what feeding generated answers back relies on.
  const auto earlier = render_chat("llama3", std::vector<ChatMessage>(conv.begin(), conv.end() - 1), false);
  EXPECT_TRUE(render_chat("llama3", conv, true).starts_with(earlier));
}

}  // namespace
}  // namespace specmoe::core
