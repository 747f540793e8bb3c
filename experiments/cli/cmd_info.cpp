// specmoe info: architecture, hyperparameters and architecture specifics (QK-norm, sliding windows,
// RoPE bases and scaling, soft-capping), tensor types, parameter count and memory of a model.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/chat_template.h"
#include "core/gguf.h"
#include "core/kv_cache.h"
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

const char* rope_scaling_name(core::RopeScaling s) {
  switch (s) {
    case core::RopeScaling::None: return "none";
    case core::RopeScaling::Linear: return "linear";
    case core::RopeScaling::Yarn: return "yarn";
    case core::RopeScaling::Llama3: return "llama3";
  }
  return "?";
}

// "0-4, 6-10, 12-16" for the layers whose flag is set.
std::string layer_ranges(const std::vector<uint8_t>& flags) {
  std::string out;
  for (size_t l = 0; l < flags.size(); ++l) {
    if (!flags[l] || (l > 0 && flags[l - 1])) continue;
    size_t e = l;
    while (e + 1 < flags.size() && flags[e + 1]) ++e;
    out += (out.empty() ? "" : ", ") + (e == l ? std::to_string(l) : fmt::format("{}-{}", l, e));
  }
  return out.empty() ? "none" : out;
}

// The RoPE line: style, dims, base (and the local layers' base), scaling and frequency factors.
std::string rope_line(const core::ModelConfig& c) {
  if (c.rope_style == core::RopeStyle::None) return rope_style_name(c.rope_style);
  std::string s = fmt::format("{}, dims {}, base {:g}", rope_style_name(c.rope_style), c.rope_dims, c.rope_freq_base);
  if (c.n_swa > 0) s += fmt::format(" (local layers {:g}, scale {:g})", c.rope_freq_base_swa, c.rope_freq_scale_swa);
  s += fmt::format(", scaling {}", rope_scaling_name(c.rope_scaling));
  if (c.rope_scaling == core::RopeScaling::Linear || c.rope_scaling == core::RopeScaling::Yarn)
    s += fmt::format(" x{:g} (freq scale {:g})", c.rope_scaling_factor, c.rope_freq_scale);
  if (c.rope_scaling == core::RopeScaling::Yarn) {
    const core::LayerRope r = c.rope_at(c.n_layer - 1);
    s += fmt::format(", original context {}, ext factor {:g}, magnitude {:.4f}, ramp pairs {:g}-{:g}",
                     c.rope_n_ctx_orig, r.ext_factor, r.attn_factor, r.corr_low, r.corr_high);
  }
  if (c.rope_freq_factors) s += ", per-pair frequency factors (llama3 rope_freqs)";
  if (c.rope_attn_factor != 1.0f) s += fmt::format(", attn factor {:g}", c.rope_attn_factor);
  return s;
}

// KV cache bytes per token (keys and values of every layer) for a cache type, or 0 when the
// type cannot hold this model's heads (Q8_0 needs head_dim % 32 == 0).
size_t kv_bytes_per_token(const core::ModelConfig& c, DType type) {
  const int64_t block = dtype_info(type).block_size;
  if (c.head_dim % block != 0) return 0;
  return 2 * static_cast<size_t>(c.n_layer) * dtype_row_bytes(type, c.kv_dim());
}

constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::Q8_0};

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
      j["rope_freq_scale"] = c.rope_freq_scale;
      j["rope_scaling"] = rope_scaling_name(c.rope_scaling);
      j["rope_freq_factors"] = c.rope_freq_factors;
      if (c.rope_scaling == core::RopeScaling::Yarn) {
        const core::LayerRope r = c.rope_at(c.n_layer - 1);
        j["rope_yarn"] = {{"original_context", c.rope_n_ctx_orig}, {"ext_factor", r.ext_factor},
                          {"magnitude", r.attn_factor}, {"corr_low", r.corr_low}, {"corr_high", r.corr_high}};
      }
      j["qk_norm"] = c.qk_norm;
      j["post_norms"] = c.post_norms;
      j["embedding_scale"] = c.embd_scale;
      j["ffn_activation"] = c.ffn_act == core::FfnActivation::GeluTanh ? "gelu_tanh" : "silu";
      j["attention_scale"] = c.attention_scale();
      j["final_logit_softcap"] = c.final_logit_softcap;
      j["sliding_window"] = c.n_swa;
      if (c.n_swa > 0) {
        j["sliding_window_pattern"] = c.swa_pattern;
        std::vector<int> local;
        for (int l = 0; l < c.n_layer; ++l)
          if (c.is_swa(l)) local.push_back(l);
        j["sliding_window_layers"] = local;
        j["rope_freq_base_swa"] = c.rope_freq_base_swa;
      }
      exp::set_text(j, "tokenizer", tok_model);
      j["chat_template"] = chat_format.empty() ? nlohmann::json(nullptr) : nlohmann::json(chat_format);
      j["chat_template_renderable"] = !chat_format.empty() && core::is_renderable_chat_format(chat_format);
      for (DType t : kKvTypes) {
        const size_t kv = kv_bytes_per_token(c, t);
        j["kv_bytes_per_token"][core::kv_cache_type_name(t)] = kv ? nlohmann::json(kv) : nlohmann::json(nullptr);
      }
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
    std::printf("attention:     %d heads, %d KV heads, head dim %d%s, scale %g%s\n", c.n_head, c.n_head_kv,
                c.head_dim, c.head_dim * c.n_head != c.n_embd ? " (not n_embd / n_head)" : "", c.attention_scale(),
                c.qk_norm ? ", QK-norm per head" : "");
    if (c.n_swa > 0) {
      int n_local = 0;
      for (int l = 0; l < c.n_layer; ++l) n_local += c.is_swa(l);
      const std::string pattern = c.swa_pattern > 0 ? fmt::format(", pattern {}", c.swa_pattern) : "";
      std::printf("local layers:  %d of %d (%s%s) attend to a sliding window of %d positions; the others are "
                  "global\n", n_local, c.n_layer, layer_ranges(c.swa_layers).c_str(), pattern.c_str(), c.n_swa);
    }
    std::printf("rope:          %s\n", rope_line(c).c_str());
    std::printf("norm eps:      %g%s\n", c.norm_eps, c.post_norms ? " (pre- and post-norms)" : "");
    if (c.embd_scale != 1.0f) std::printf("embedding:     scaled by %g\n", c.embd_scale);
    if (c.ffn_act == core::FfnActivation::GeluTanh) std::printf("feed-forward:  GELU (tanh) gated\n");
    if (c.final_logit_softcap > 0.0f) std::printf("logits:        soft-capped at %g\n", c.final_logit_softcap);
    std::printf("output head:   %s\n", c.tied_output ? "tied to the token embedding" : "separate");
    if (c.is_moe())
      std::printf("experts:       %d, %d active per token, expert ff %d, shared ff %d\n", c.n_expert,
                  c.n_expert_used, c.n_ff_expert, c.n_ff_shared_expert);
    std::printf("parameters:    %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
    std::printf("memory:        %.2f MiB of tensor data\n", bytes / (1024.0 * 1024.0));
    std::string kv_line;
    for (DType t : kKvTypes) {
      const size_t kv = kv_bytes_per_token(c, t);
      kv_line += fmt::format("{}{} {}", kv_line.empty() ? "" : ", ", core::kv_cache_type_name(t),
                             kv ? fmt::format("{} B", kv) : std::string("n/a (head dim not a multiple of 32)"));
    }
    std::printf("kv cache:      %s per token (keys + values, %d layers x %d)\n", kv_line.c_str(), c.n_layer,
                c.kv_dim());
    std::printf("tensor types:\n");
    for (const auto& [type, e] : by_type)
      std::printf("  %-6s %5d tensors, %lld elements\n", type.c_str(), e.first, static_cast<long long>(e.second));
  });
}

}  // namespace specmoe::cli
