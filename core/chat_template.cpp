// Chat template detection (marker substrings of a template's text) and the built-in formats. The
// markers, their order and the formats' output follow llama.cpp's src/llama-chat.cpp (2026-10), so
// that a model gets the same prompt text from specmoe as from llama.cpp's non-Jinja path.
#include "core/chat_template.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "base/error.h"
#include "core/tokenizer.h"

namespace specmoe::core {
namespace {

// The template text under test.
struct Probe {
  std::string_view text;
  bool has(std::string_view s) const { return text.find(s) != std::string_view::npos; }
};

// Recognition rules, tried in order; the first that matches names the format. A format's marker
// may also appear in another family's template, so the order is part of the definition (it is
// llama.cpp's): ChatML's <|im_start|> wins over everything after it, Mistral/Llama-2's [INST]
// over Phi-3's markers, and so on. Formats sharing a marker are listed most specific first.
struct Rule {
  std::string_view format;
  bool (*when)(const Probe&);
};

bool mistral_family(const Probe& p) { return p.text.starts_with("mistral") || p.has("[INST]"); }
// Official Mistral v1 / v3 / v3-tekken templates, told from Llama-2 style [INST] templates.
bool mistral_official(const Probe& p) {
  return mistral_family(p) && !p.has("[SYSTEM_PROMPT]") &&
         (p.has("' [INST] ' + system_message") || p.has("[AVAILABLE_TOOLS]"));
}
bool llama2_family(const Probe& p) { return mistral_family(p) && !p.has("[SYSTEM_PROMPT]") && !mistral_official(p); }
bool granite_tools(const Probe& p) { return p.has("<|start_of_role|>") && (p.has("<tool_call>") || p.has("<tools>")); }

constexpr Rule kRules[] = {
    {"phi4", [](const Probe& p) { return p.has("<|im_start|>") && p.has("<|im_sep|>"); }},
    // SmolVLM opens with <|im_start|> but is not ChatML.
    {"smolvlm", [](const Probe& p) { return p.has("<|im_start|>") && p.has("<end_of_utterance>"); }},
    {"chatml", [](const Probe& p) { return p.has("<|im_start|>"); }},
    {"mistral-v7", [](const Probe& p) { return mistral_family(p) && p.has("[SYSTEM_PROMPT]"); }},
    {"mistral-v1", [](const Probe& p) { return mistral_official(p) && p.has(" [INST]"); }},
    {"mistral-v3-tekken", [](const Probe& p) { return mistral_official(p) && p.has("\"[INST]\""); }},
    {"mistral-v3", mistral_official},
    {"llama2-sys-strip", [](const Probe& p) { return llama2_family(p) && p.has("content.strip()"); }},
    {"llama2-sys-bos", [](const Probe& p) { return llama2_family(p) && p.has("bos_token + '[INST]"); }},
    {"llama2-sys", [](const Probe& p) { return llama2_family(p) && p.has("<<SYS>>"); }},
    {"llama2", llama2_family},
    {"phi3", [](const Probe& p) { return p.has("<|assistant|>") && p.has("<|end|>"); }},
    {"chatglm4", [](const Probe& p) { return p.has("[gMASK]<sop>"); }},
    {"exaone-moe", [](const Probe& p) { return p.has("<|assistant|>") && p.has("<|user|>") && p.has("<|tool_declare|>"); }},
    {"falcon3", [](const Probe& p) { return p.has("<|assistant|>") && p.has("<|user|>") && p.has("</s>"); }},
    {"glmedge", [](const Probe& p) {
       return (p.has("<|assistant|>") && p.has("<|user|>")) ||
              (p.has("<|{{ item['role'] }}|>") && p.has("<|begin_of_image|>"));
     }},
    {"zephyr", [](const Probe& p) { return p.has("<|user|>") && p.has("<|endoftext|>"); }},
    {"monarch", [](const Probe& p) { return p.has("bos_token + message['role']"); }},
    {"gemma", [](const Probe& p) { return p.has("<start_of_turn>"); }},
    {"orion", [](const Probe& p) { return p.has(R"('\n\nAssistant: ' + eos_token)"); }},
    {"openchat", [](const Probe& p) { return p.has("GPT4 Correct "); }},
    {"vicuna-orca", [](const Probe& p) { return p.has("USER: ") && p.has("ASSISTANT: ") && p.has("SYSTEM: "); }},
    {"vicuna", [](const Probe& p) { return p.has("USER: ") && p.has("ASSISTANT: "); }},
    {"deepseek", [](const Probe& p) { return p.has("### Instruction:") && p.has("<|EOT|>"); }},
    {"command-r", [](const Probe& p) { return p.has("<|START_OF_TURN_TOKEN|>") && p.has("<|USER_TOKEN|>"); }},
    {"llama3", [](const Probe& p) { return p.has("<|start_header_id|>") && p.has("<|end_header_id|>"); }},
    {"chatglm3", [](const Probe& p) { return p.has("[gMASK]sop"); }},
    {"minicpm", [](const Probe& p) { return p.has("<用户>"); }},
    {"deepseek2", [](const Probe& p) { return p.has("'Assistant: ' + message['content'] + eos_token"); }},
    {"deepseek3", [](const Probe& p) {
       return p.has("<｜Assistant｜>") && p.has("<｜User｜>") && p.has("<｜end▁of▁sentence｜>");
     }},
    {"exaone4", [](const Probe& p) {
       return p.has("[|system|]") && p.has("[|assistant|]") && p.has("[|endofturn|]") && p.has("[|tool|]");
     }},
    {"exaone3", [](const Probe& p) { return p.has("[|system|]") && p.has("[|assistant|]") && p.has("[|endofturn|]"); }},
    {"rwkv-world", [](const Probe& p) {
       return p.has("rwkv-world") || p.has(R"({{- 'User: ' + message['content']|trim + '\n\n' -}})");
     }},
    {"granite-4.0", [](const Probe& p) { return granite_tools(p) && p.has("g4_default_system_message"); }},
    {"granite-4.1", granite_tools},
    {"granite", [](const Probe& p) { return p.has("<|start_of_role|>"); }},
    {"gigachat", [](const Probe& p) {
       return p.has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]");
     }},
    {"megrez", [](const Probe& p) { return p.has("<|role_start|>"); }},
    {"yandex", [](const Probe& p) { return p.has(" Ассистент:"); }},
    {"bailing", [](const Probe& p) { return p.has("<role>ASSISTANT</role>") && p.has("'HUMAN'"); }},
    {"bailing-think", [](const Probe& p) {
       return p.has("<role>ASSISTANT</role>") && p.has("\"HUMAN\"") && p.has("<think>");
     }},
    {"bailing2", [](const Probe& p) {
       return p.has("<role>ASSISTANT</role>") && p.has("<role>HUMAN</role>") && p.has("<|role_end|>");
     }},
    {"llama4", [](const Probe& p) { return p.has("<|header_start|>") && p.has("<|header_end|>"); }},
    {"dots1", [](const Probe& p) { return p.has("<|endofuserprompt|>"); }},
    {"hunyuan-moe", [](const Probe& p) { return p.has("<|extra_0|>") && p.has("<|extra_4|>"); }},
    {"gpt-oss", [](const Probe& p) { return p.has("<|start|>") && p.has("<|channel|>"); }},
    {"hunyuan-vl", [](const Probe& p) { return p.has("<｜hy_Assistant｜>") && p.has("<｜hy_begin▁of▁sentence｜>"); }},
    {"hunyuan-dense", [](const Probe& p) { return p.has("<｜hy_Assistant｜>") && p.has("<｜hy_place▁holder▁no▁3｜>"); }},
    {"kimi-k2", [](const Probe& p) { return p.has("<|im_assistant|>assistant<|im_middle|>"); }},
    {"seed_oss", [](const Probe& p) { return p.has("<seed:bos>"); }},
    {"grok-2", [](const Probe& p) { return p.has("'Assistant: '  + message['content'] + '<|separator|>"); }},
    {"pangu-embedded", [](const Probe& p) { return p.has("[unused9]系统：[unused10]"); }},
    {"solar-open", [](const Probe& p) { return p.has("<|begin|>") && p.has("<|end|>") && p.has("<|content|>"); }},
};

// Formats chosen only by name: no template text is recognised as them.
constexpr std::string_view kNameOnly[] = {"mistral-v7-tekken", "deepseek-ocr"};

// Whitespace as C's isspace in the "C" locale; formats that trim use it.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

using Messages = std::span<const ChatMessage>;
using Renderer = std::function<void(Messages, bool, std::string&)>;

// ChatML-like formats: every message is open + role + sep + content + close; `assistant_open` is
// the generation prompt.
Renderer tagged(std::string open, std::string sep, std::string close, std::string assistant_open, bool trim_content) {
  return [=](Messages msgs, bool add, std::string& out) {
    for (const ChatMessage& m : msgs)
      out += open + m.role + sep + std::string(trim_content ? trim(m.content) : m.content) + close;
    if (add) out += assistant_open;
  };
}

// Llama 2 [INST] formats; the variants differ in system handling, BOS between turns and trimming.
Renderer llama2(bool system_block, bool bos_between_turns, bool strip) {
  return [=](Messages msgs, bool, std::string& out) {
    bool in_turn = true;  // the first [INST] is written up front, the BOS before it by the tokenizer
    out += "[INST] ";
    for (const ChatMessage& m : msgs) {
      const std::string content(strip ? trim(m.content) : m.content);
      if (!in_turn) {
        in_turn = true;
        out += bos_between_turns ? "<s>[INST] " : "[INST] ";
      }
      if (m.role == "system") {
        out += system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
      } else if (m.role == "user") {
        out += content + " [/INST]";
      } else {
        out += content + "</s>";
        in_turn = false;
      }
    }
  };
}

// Official Mistral v1 / v3 / v3-tekken: a system message opens the first [INST] block.
Renderer mistral(std::string lead, std::string trail, bool trim_reply) {
  return [=](Messages msgs, bool, std::string& out) {
    bool in_turn = false;
    for (const ChatMessage& m : msgs) {
      if (!in_turn) {
        out += lead + "[INST]" + trail;
        in_turn = true;
      }
      if (m.role == "system") {
        out += m.content + "\n\n";
      } else if (m.role == "user") {
        out += m.content + lead + "[/INST]";
      } else {
        out += trail + std::string(trim_reply ? trim(m.content) : m.content) + "</s>";
        in_turn = false;
      }
    }
  };
}

Renderer mistral_v7(std::string sp) {
  return [=](Messages msgs, bool, std::string& out) {
    for (const ChatMessage& m : msgs) {
      if (m.role == "system") out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
      else if (m.role == "user") out += "[INST]" + sp + m.content + "[/INST]";
      else out += sp + m.content + "</s>";
    }
  };
}

// Gemma has no system role: system text is merged into the next user turn; "assistant" is "model".
void gemma(Messages msgs, bool add, std::string& out) {
  std::string system;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += std::string(trim(m.content)) + "<end_of_turn>\n";
  }
  if (add) out += "<start_of_turn>model\n";
}

// Formats that write each role with its own prefix and suffix (roles without an entry are left
// out); `assistant_open` is the generation prompt.
struct RoleText {
  std::string prefix, suffix;
};
Renderer by_role(std::map<std::string, RoleText> roles, std::string assistant_open, bool trim_content = false,
                 std::string preamble = "") {
  return [=](Messages msgs, bool add, std::string& out) {
    out += preamble;
    for (const ChatMessage& m : msgs) {
      auto it = roles.find(m.role);
      if (it == roles.end()) it = roles.find("*");  // any other role
      if (it == roles.end()) continue;
      out += it->second.prefix + std::string(trim_content ? trim(m.content) : m.content) + it->second.suffix;
    }
    if (add) out += assistant_open;
  };
}

void openchat(Messages msgs, bool add, std::string& out) {
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      out += m.content + "<|end_of_turn|>";
    } else {
      std::string role = m.role;
      if (!role.empty() && role[0] >= 'a' && role[0] <= 'z') role[0] = static_cast<char>(role[0] - 'a' + 'A');
      out += "GPT4 Correct " + role + ": " + m.content + "<|end_of_turn|>";
    }
  }
  if (add) out += "GPT4 Correct Assistant:";
}

// IBM Granite 4.0 / 4.1: granite's tags, with an assistant_tool_call role opening a tool call.
void granite4(Messages msgs, bool add, std::string& out) {
  for (const ChatMessage& m : msgs) {
    out += m.role == "assistant_tool_call" ? "<|start_of_role|>assistant<|end_of_role|><|tool_call|>"
                                           : "<|start_of_role|>" + m.role + "<|end_of_role|>";
    out += m.content + "<|end_of_text|>\n";
  }
  if (add) out += "<|start_of_role|>assistant<|end_of_role|>";
}

// Seed-OSS: every turn "<seed:bos>role\n...<seed:eos>", the assistant's content trimmed.
void seed_oss(Messages msgs, bool add, std::string& out) {
  for (const ChatMessage& m : msgs)
    out += "<seed:bos>" + m.role + "\n" + std::string(m.role == "assistant" ? trim(m.content) : m.content) +
           "<seed:eos>";
  if (add) out += "<seed:bos>assistant\n";
}

// Ling / Ring (bailing): "<role>ROLE</role>" before each message, the role upper-cased and user
// named HUMAN; bailing-think opens the answer with <think>; bailing2 (Ling 2.0) closes each
// message with <|role_end|> and, without a system message, starts with one that turns thinking off.
Renderer bailing(bool think, bool v2) {
  return [=](Messages msgs, bool add, std::string& out) {
    if (v2 && (msgs.empty() || msgs[0].role != "system")) out += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
    for (const ChatMessage& m : msgs) {
      std::string role = m.role == "user" ? "HUMAN" : m.role;
      for (char& c : role)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      out += "<role>" + role + "</role>" + m.content + (v2 ? "<|role_end|>" : "");
    }
    if (add) out += think ? "<role>ASSISTANT</role><think>" : "<role>ASSISTANT</role>";
  };
}

// ChatGLM3 and GLM-4: a [gMASK] preamble, then "<|role|>\n" before each turn (ChatGLM3 with a
// space after the newline), no closing tags.
Renderer chatglm(std::string preamble, std::string sep, std::string assistant_open) {
  return [=](Messages msgs, bool add, std::string& out) {
    out += preamble;
    for (const ChatMessage& m : msgs) out += "<|" + m.role + "|>" + sep + m.content;
    if (add) out += assistant_open;
  };
}

// Hunyuan dense: a leading system message, then each user turn closed by the assistant's tag
// (which is also its generation prompt: there is no separate one) and each assistant turn tagged
// again, as llama.cpp writes it.
void hunyuan_dense(Messages msgs, bool, std::string& out) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (i == 0 && m.role == "system") out += m.content + "<｜hy_place▁holder▁no▁3｜>";
    if (m.role == "assistant") out += "<｜hy_Assistant｜>" + m.content + "<｜hy_place▁holder▁no▁2｜>";
    if (m.role == "user") out += "<｜hy_User｜>" + m.content + "<｜hy_Assistant｜>";
  }
}

void monarch(Messages msgs, bool add, std::string& out) {
  for (size_t i = 0; i < msgs.size(); ++i)
    out += (i == 0 ? "" : "<s>") + msgs[i].role + "\n" + msgs[i].content + "</s>\n";
  if (add) out += "<s>assistant\n";
}

// GigaChat: the system turn right after <s>; each user turn announces an empty function list.
void gigachat(Messages msgs, bool add, std::string& out) {
  const bool system = !msgs.empty() && msgs[0].role == "system";
  out += "<s>" + (system ? msgs[0].content + "<|message_sep|>" : std::string());
  for (size_t i = system ? 1 : 0; i < msgs.size(); ++i) {
    if (msgs[i].role == "user")
      out += "user<|role_sep|>" + msgs[i].content + "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>";
    else if (msgs[i].role == "assistant")
      out += "assistant<|role_sep|>" + msgs[i].content + "<|message_sep|>";
  }
  if (add) out += "assistant<|role_sep|>";
}

// Orion-14B-Chat: system text joins the next user turn; each user turn ends with the assistant's
// cue and </s>; no generation prompt beyond that cue.
void orion(Messages msgs, bool, std::string& out) {
  std::string system;
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system += m.content;
    } else if (m.role == "user") {
      out += "Human: " + (system.empty() ? std::string() : system + "\n\n") + m.content + "\n\nAssistant: </s>";
      system.clear();
    } else {
      out += m.content + "</s>";
    }
  }
}

// RWKV World: trimmed turns separated by blank lines; the assistant's cue follows a last user turn
// whether or not a generation prompt is asked for (llama.cpp's format).
void rwkv_world(Messages msgs, bool, std::string& out) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string_view c = trim(msgs[i].content);
    if (msgs[i].role == "system") {
      out += "System: " + std::string(c) + "\n\n";
    } else if (msgs[i].role == "user") {
      out += "User: " + std::string(c) + "\n\n";
      if (i + 1 == msgs.size()) out += "Assistant:";
    } else if (msgs[i].role == "assistant") {
      out += "Assistant: " + std::string(c) + "\n\n";
    }
  }
}

// openPangu-Embedded: every turn as [unused9]role：text[unused10], an empty system turn first when
// the conversation has none.
void pangu_embedded(Messages msgs, bool add, std::string& out) {
  static const std::map<std::string, std::string, std::less<>> names = {
      {"system", "系统"}, {"user", "用户"}, {"assistant", "助手"}, {"tool", "工具"}, {"function", "方法"}};
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i == 0 && msgs[i].role != "system") out += "[unused9]系统：[unused10]";
    auto it = names.find(msgs[i].role);
    if (it != names.end()) out += "[unused9]" + it->second + "：" + msgs[i].content + "[unused10]";
  }
  if (add) out += "[unused9]助手：";
}

// HunyuanOCR / Hunyuan-VL: a leading system turn, then each turn followed by its role's marker; no
// generation prompt.
void hunyuan_vl(Messages msgs, bool, std::string& out) {
  out += "<｜hy_begin▁of▁sentence｜>";
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i == 0 && msgs[i].role == "system")
      out += msgs[i].content + "<｜hy_place▁holder▁no▁3｜>";
    else if (msgs[i].role == "user")
      out += msgs[i].content + "<｜hy_User｜>";
    else if (msgs[i].role == "assistant")
      out += msgs[i].content + "<｜hy_Assistant｜>";
  }
}

const std::map<std::string, Renderer, std::less<>>& renderers() {
  static const std::map<std::string, Renderer, std::less<>> table = {
      {"chatml", tagged("<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false)},
      {"phi4", tagged("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", false)},
      {"phi3", tagged("<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false)},
      {"falcon3", tagged("<|", "|>\n", "\n", "<|assistant|>\n", false)},
      {"zephyr", tagged("<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false)},
      {"glmedge", tagged("<|", "|>\n", "", "<|assistant|>", false)},
      {"llama3", tagged("<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
                        "<|start_header_id|>assistant<|end_header_id|>\n\n", true)},
      {"llama4", tagged("<|header_start|>", "<|header_end|>\n\n", "<|eot|>", "<|header_start|>assistant<|header_end|>\n\n",
                        true)},
      {"granite", tagged("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n",
                         "<|start_of_role|>assistant<|end_of_role|>", false)},
      {"llama2", llama2(false, false, false)},
      {"llama2-sys", llama2(true, false, false)},
      {"llama2-sys-bos", llama2(true, true, false)},
      {"llama2-sys-strip", llama2(true, false, true)},
      {"mistral-v1", mistral(" ", " ", false)},
      {"mistral-v3", mistral("", " ", true)},
      {"mistral-v3-tekken", mistral("", "", false)},
      {"mistral-v7", mistral_v7(" ")},
      {"mistral-v7-tekken", mistral_v7("")},
      {"gemma", gemma},
      {"openchat", openchat},
      {"monarch", monarch},
      {"deepseek-ocr", by_role({{"*", {"", ""}}}, "")},  // the contents alone, no generation prompt
      {"vicuna", by_role({{"system", {"", "\n\n"}}, {"user", {"USER: ", "\n"}}, {"assistant", {"ASSISTANT: ", "</s>\n"}}},
                         "ASSISTANT:")},
      {"vicuna-orca", by_role({{"system", {"SYSTEM: ", "\n"}}, {"user", {"USER: ", "\n"}},
                               {"assistant", {"ASSISTANT: ", "</s>\n"}}},
                              "ASSISTANT:")},
      {"deepseek", by_role({{"system", {"", ""}}, {"user", {"### Instruction:\n", "\n"}},
                            {"assistant", {"### Response:\n", "\n<|EOT|>\n"}}},
                           "### Response:\n")},
      {"deepseek2", by_role({{"system", {"", "\n\n"}}, {"user", {"User: ", "\n\n"}},
                             {"assistant", {"Assistant: ", "<｜end▁of▁sentence｜>"}}},
                            "Assistant:")},
      {"deepseek3", by_role({{"system", {"", "\n\n"}}, {"user", {"<｜User｜>", ""}},
                             {"assistant", {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"}}},
                            "<｜Assistant｜>")},
      {"command-r", by_role({{"system", {"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}},
                             {"user", {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}},
                             {"assistant", {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}}},
                            "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", true)},
      {"chatglm3", chatglm("[gMASK]sop", "\n ", "<|assistant|>")},
      {"chatglm4", chatglm("[gMASK]<sop>", "\n", "<|assistant|>\n")},
      {"exaone3", by_role({{"system", {"[|system|]", "[|endofturn|]\n"}}, {"user", {"[|user|]", "\n"}},
                           {"assistant", {"[|assistant|]", "[|endofturn|]\n"}}},
                          "[|assistant|]", true)},
      {"exaone4", by_role({{"system", {"[|system|]", "[|endofturn|]\n"}}, {"user", {"[|user|]", "\n"}},
                           {"assistant", {"[|assistant|]", "[|endofturn|]\n"}}, {"tool", {"[|tool|]", "[|endofturn|]\n"}}},
                          "[|assistant|]", true)},
      // MiniCPM: the user's turns between <用户> and <AI>, the others' bare; no generation prompt.
      {"minicpm", by_role({{"user", {"<用户>", "<AI>"}}, {"*", {"", ""}}}, "", true)},
      {"seed_oss", seed_oss},
      // Hunyuan-A13B: no generation prompt (llama.cpp's format adds none).
      {"hunyuan-moe", [](Messages msgs, bool, std::string& out) {
         for (const ChatMessage& m : msgs)
           out += m.role == "system"      ? "<|startoftext|>" + m.content + "<|extra_4|>"
                  : m.role == "assistant" ? m.content + "<|eos|>"
                                          : "<|startoftext|>" + m.content + "<|extra_0|>";
       }},
      // gpt-oss's harmony format as llama.cpp's built-in renders it (no channels).
      {"gpt-oss", [](Messages msgs, bool add, std::string& out) {
         for (const ChatMessage& m : msgs)
           out += "<|start|>" + m.role + "<|message|>" + m.content + (m.role == "assistant" ? "<|return|>" : "<|end|>");
         if (add) out += "<|start|>assistant";
       }},
      {"bailing", bailing(false, false)},
      {"bailing-think", bailing(true, false)},
      {"bailing2", bailing(false, true)},
      {"dots1", by_role({{"system", {"<|system|>", "<|endofsystem|>"}},
                         {"user", {"<|userprompt|>", "<|endofuserprompt|>"}},
                         {"*", {"<|response|>", "<|endofresponse|>"}}},
                        "<|response|>")},
      {"hunyuan-dense", hunyuan_dense},
      {"granite-4.0", granite4},
      {"granite-4.1", granite4},
      {"megrez", tagged("<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>", false)},
      {"yandex", by_role({{"user", {" Пользователь: ", "\n\n"}}, {"assistant", {" Ассистент: ", "\n\n"}}},
                         " Ассистент:[SEP]")},
      {"kimi-k2", by_role({{"system", {"<|im_system|>system<|im_middle|>", "<|im_end|>"}},
                           {"user", {"<|im_user|>user<|im_middle|>", "<|im_end|>"}},
                           {"assistant", {"<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"}},
                           {"tool", {"<|im_system|>tool<|im_middle|>", "<|im_end|>"}}, {"*", {"", "<|im_end|>"}}},
                          "<|im_assistant|>assistant<|im_middle|>")},
      // Grok 2: system and user turns trimmed, the assistant's not.
      {"grok-2", [](Messages msgs, bool add, std::string& out) {
         for (const ChatMessage& m : msgs) {
           if (m.role == "system") out += "System: " + std::string(trim(m.content)) + "<|separator|>\n\n";
           else if (m.role == "user") out += "Human: " + std::string(trim(m.content)) + "<|separator|>\n\n";
           else if (m.role == "assistant") out += "Assistant: " + m.content + "<|separator|>\n\n";
         }
         if (add) out += "Assistant:";
       }},
      {"gigachat", gigachat},
      {"orion", orion},
      {"rwkv-world", rwkv_world},
      {"pangu-embedded", pangu_embedded},
      {"solar-open", tagged("<|begin|>", "<|content|>", "<|end|>", "<|begin|>assistant", false)},
      {"exaone-moe", by_role({{"system", {"<|system|>\n", "<|endofturn|>\n"}}, {"user", {"<|user|>\n", "<|endofturn|>\n"}},
                              {"assistant", {"<|assistant|>\n", "<|endofturn|>\n"}},
                              {"tool", {"<|tool|>\n", "<|endofturn|>\n"}}},
                             "<|assistant|>\n", true)},
      {"hunyuan-vl", hunyuan_vl},
      {"smolvlm", by_role({{"system", {"", "\n\n"}}, {"user", {"User: ", "<end_of_utterance>\n"}},
                           {"*", {"Assistant: ", "<end_of_utterance>\n"}}},
                          "Assistant:", false, "<|im_start|>")},
  };
  return table;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string suggestion() {
  return fmt::format("use 'none' for the raw text or name a format: {}", join(renderable_chat_formats()));
}

// The start of a template for messages: its first line, cut at 60 bytes, never inside a UTF-8
// sequence (the message goes into --json output, which must stay valid UTF-8; fuzz_chat_template
// found a DeepSeek template whose 60th byte was inside a full-width bar).
std::string excerpt(std::string_view t) {
  size_t cut = std::min(t.find('\n'), size_t{60});
  if (cut < t.size())
    while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;
  std::string_view line = t.substr(0, cut);
  return std::string(line) + (line.size() < t.size() ? "..." : "");
}

}  // namespace

std::vector<std::string> known_chat_formats() {
  std::vector<std::string> names;
  for (const Rule& r : kRules) names.emplace_back(r.format);
  for (std::string_view n : kNameOnly) names.emplace_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> renderable_chat_formats() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : renderers()) names.push_back(name);
  return names;  // std::map: sorted
}

bool is_known_chat_format(std::string_view name) {
  return std::any_of(std::begin(kRules), std::end(kRules), [&](const Rule& r) { return r.format == name; }) ||
         std::find(std::begin(kNameOnly), std::end(kNameOnly), name) != std::end(kNameOnly);
}

bool is_renderable_chat_format(std::string_view name) { return renderers().count(name) > 0; }

std::string detect_chat_format(std::string_view template_text) {
  if (is_known_chat_format(template_text)) return std::string(template_text);
  const Probe probe{template_text};
  for (const Rule& r : kRules)
    if (r.when(probe)) return std::string(r.format);
  return {};
}

std::string render_chat(std::string_view format, std::span<const ChatMessage> messages, bool add_assistant) {
  auto it = renderers().find(format);
  if (it == renderers().end())
    throw_error(ErrorKind::InvalidArgument, "chat format '{}' is not rendered by specmoe ({})", format, suggestion());
  std::string out;
  it->second(messages, add_assistant, out);
  return out;
}

void validate_chat_template_choice(std::string_view choice) {
  if (choice == "auto" || choice == "none" || is_renderable_chat_format(choice)) return;
  if (is_known_chat_format(choice))
    throw_error(ErrorKind::InvalidArgument, "chat template '{}' is a llama.cpp format specmoe does not render; {}",
                choice, suggestion());
  throw_error(ErrorKind::InvalidArgument, "unknown chat template '{}': expected auto, none or a format name ({})",
              choice, join(renderable_chat_formats()));
}

ChatTemplateChoice resolve_chat_template(std::string_view choice, std::string_view gguf_template,
                                         std::string_view source) {
  validate_chat_template_choice(choice);
  if (choice == "none") return {"", "none: the raw text"};
  if (choice != "auto") return {std::string(choice), "chosen by name"};
  if (gguf_template.empty()) return {"", "the GGUF has no tokenizer.chat_template: the raw text"};
  const std::string detected = detect_chat_format(gguf_template);
  if (detected.empty())
    throw_error(ErrorKind::InvalidArgument,
                "{}: tokenizer.chat_template ('{}') is not one of the chat formats specmoe recognises; {}", source,
                excerpt(gguf_template), suggestion());
  if (!is_renderable_chat_format(detected))
    throw_error(ErrorKind::InvalidArgument,
                "{}: tokenizer.chat_template is llama.cpp's '{}' format, which specmoe does not render; {}", source,
                detected, suggestion());
  return {detected, "detected from the GGUF's tokenizer.chat_template"};
}

std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tok, const ChatTemplateChoice& choice,
                                        std::span<const ChatMessage> messages) {
  if (choice.templated())
    return tok.encode(render_chat(choice.format, messages, true), tok.add_bos_by_default(), /*parse_special=*/true);
  if (messages.size() != 1 || messages[0].role != "user")
    throw_error(ErrorKind::InvalidArgument,
                "a conversation of {} messages{} needs a chat template, and the prompt is raw text ({}); name a "
                "chat format such as chatml",
                messages.size(), !messages.empty() && messages[0].role == "system" ? " with a system message" : "",
                choice.reason);
  // Special-token texts are parsed in raw prompts too, as llama-completion tokenizes a prompt, so a
  // hand-written template (or a FIM prompt) still reaches the model as its tokens.
  return tok.encode(messages[0].content, tok.add_bos_by_default(), /*parse_special=*/true);
}

}  // namespace specmoe::core
