// specmoe info: architecture, hyperparameters, tensor types, parameter count and memory of a model.
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/chat_template.h"
#include "core/gguf.h"
#include "core/model_config.h"
#include "experiments/json_text.h"
#include "experiments/result_json.h"

namespace specmoe::cli {
namespace {

const char* rope_style_name(core::RopeStyle s) {
  switch (s) {
    case core::RopeStyle::Adjacent: return "adjacent pairs (llama.cpp NORM)";
    case core::RopeStyle::SplitHalves: return "split halves (llama.cpp NEOX)";
    case core::RopeStyle::None: return "none (learned positions)";
  }
  return "?";
}

// What --chat-template auto makes of the GGUF's template, in words.
std::string chat_template_summary(const std::string& tmpl, std::string& format) {
  format = tmpl.empty() ? "" : core::detect_chat_format(tmpl);
  if (tmpl.empty()) return "none in the GGUF (prompts are used as raw text)";
  const std::string size = fmt::format("tokenizer.chat_template, {} bytes", tmpl.size());
  if (format.empty()) return fmt::format("not recognised ({}); --chat-template auto fails, use none or a format name", size);
  if (!core::is_renderable_chat_format(format))
    return fmt::format("{} (detected from {}), a llama.cpp format specmoe does not render; use none or another name",
                       format, size);
  return fmt::format("{} (detected from {})", format, size);
}

}  // namespace

void add_info_command(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("info", "show a model's architecture, sizes and tensor types");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a] {
    auto file = core::GGUFFile::open(a->model);
    const core::ModelConfig c = core::ModelConfig::from_gguf(*file);
    c.validate();
    std::map<std::string, std::pair<int, int64_t>> by_type;  // type -> (tensors, elements)
    int64_t params = 0;
    size_t bytes = 0;
    for (const auto& t : file->tensors()) {
      auto& e = by_type[dtype_name(t.type)];
      e.first += 1;
      e.second += t.n_elements;
      params += t.n_elements;
      bytes += t.nbytes;
    }
    const std::string tok_model = file->get_string("tokenizer.ggml.model", "");
    std::string chat_format;
    const std::string chat_summary = chat_template_summary(file->get_string("tokenizer.chat_template", ""), chat_format);
    if (a->json) {
      nlohmann::json j;
      // GGUF strings are whatever bytes their writer stored: valid UTF-8 with U+FFFD, plus
      // "<key>_bytes_b64" when something was replaced (json_text.h).
      exp::set_text(j, "file", a->model);
      exp::set_text(j, "architecture", c.arch_name);
      exp::set_text(j, "name", c.name);
      j["n_vocab"] = c.n_vocab;
      j["n_ctx_train"] = c.n_ctx_train;
      j["n_embd"] = c.n_embd;
      j["n_layer"] = c.n_layer;
      j["n_head"] = c.n_head;
      j["n_head_kv"] = c.n_head_kv;
      j["head_dim"] = c.head_dim;
      j["n_ff"] = c.n_ff;
      j["n_expert"] = c.n_expert;
      j["n_expert_used"] = c.n_expert_used;
      j["rope_freq_base"] = c.rope_freq_base;
      exp::set_text(j, "tokenizer", tok_model);
      j["chat_template"] = chat_format.empty() ? nlohmann::json(nullptr) : nlohmann::json(chat_format);
      j["chat_template_renderable"] = !chat_format.empty() && core::is_renderable_chat_format(chat_format);
      j["parameters"] = params;
      j["tensor_bytes"] = bytes;
      for (const auto& [type, e] : by_type) j["tensor_types"][type] = {{"tensors", e.first}, {"elements", e.second}};
      std::printf("%s\n", exp::dump_json(j, 2).c_str());
      return;
    }
    std::printf("file:          %s (GGUF v%u, %zu metadata keys, %zu tensors)\n", a->model.c_str(),
                file->version(), file->metadata().size(), file->tensors().size());
    std::printf("architecture:  %s%s%s\n", c.arch_name.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
    std::printf("vocabulary:    %d tokens (%s tokenizer)\n", c.n_vocab, tok_model.c_str());
    std::printf("chat template: %s\n", chat_summary.c_str());
    std::printf("context:       %d (training)\n", c.n_ctx_train);
    std::printf("layers:        %d, embedding %d, feed-forward %d\n", c.n_layer, c.n_embd, c.n_ff);
    std::printf("attention:     %d heads, %d KV heads, head dim %d\n", c.n_head, c.n_head_kv, c.head_dim);
    std::printf("rope:          %s, dims %d, base %g, scale %g\n", rope_style_name(c.rope_style), c.rope_dims,
                c.rope_freq_base, c.rope_freq_scale);
    std::printf("norm eps:      %g\n", c.norm_eps);
    std::printf("output head:   %s\n", c.tied_output ? "tied to the token embedding" : "separate");
    if (c.is_moe())
      std::printf("experts:       %d, %d active per token, expert ff %d, shared ff %d\n", c.n_expert,
                  c.n_expert_used, c.n_ff_expert, c.n_ff_shared_expert);
    std::printf("parameters:    %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
    std::printf("memory:        %.2f MiB of tensor data\n", bytes / (1024.0 * 1024.0));
    std::printf("tensor types:\n");
    for (const auto& [type, e] : by_type)
      std::printf("  %-6s %5d tensors, %lld elements\n", type.c_str(), e.first, static_cast<long long>(e.second));
  });
}

}  // namespace specmoe::cli
