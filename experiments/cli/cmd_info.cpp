// specmoe info: architecture, hyperparameters and architecture specifics (QK-norm, sliding windows,
// RoPE bases, scaling and factors, soft-capping, latent attention), the KV cache per token, the
// experts and router, tensor types, parameter count and memory of a model.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/chat_template.h"
#include "core/gguf.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "experiments/json_text.h"
#include "experiments/result_json.h"

namespace specmoe::cli {
namespace {

const char* rope_style_name(core::RopeStyle s) {
  switch (s) {
    case core::RopeStyle::Adjacent: return "adjacent pairs (llama.cpp NORM)";
    case core::RopeStyle::SplitHalves: return "split halves (llama.cpp NEOX)";
    case core::RopeStyle::None: return "none";
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
  if (c.rope_style == core::RopeStyle::None) {
    if (c.alibi()) return fmt::format("none: ALiBi, max bias {:g}", c.alibi_max_bias);
    return c.learned_positions() ? "none: learned positions" : "none: no positional encoding";
  }
  std::string s = fmt::format("{}, dims {}, base {:g}", rope_style_name(c.rope_style), c.rope_dims, c.rope_freq_base);
  if (c.n_swa > 0)
    s += fmt::format(" (local layers {:g}, scale {:g}{})", c.rope_freq_base_swa, c.rope_freq_scale_swa,
                     c.swa_plain_rope ? ", no YaRN or attn factor" : "");
  s += fmt::format(", scaling {}", rope_scaling_name(c.rope_scaling));
  if (c.rope_scaling == core::RopeScaling::Linear || c.rope_scaling == core::RopeScaling::Yarn)
    s += fmt::format(" x{:g} (freq scale {:g})", c.rope_scaling_factor, c.rope_freq_scale);
  if (c.rope_scaling == core::RopeScaling::Yarn) {
    const core::LayerRope r = c.rope_at(c.n_layer - 1);
    s += fmt::format(", original context {}, ext factor {:g}, magnitude {:.4f}, ramp pairs {:g}-{:g}",
                     c.rope_n_ctx_orig, r.ext_factor, r.attn_factor, r.corr_low, r.corr_high);
  }
  if (c.rope_freq_factors) s += ", per-pair frequency factors (llama3 rope_freqs)";
  if (c.rope_long_short_factors)
    s += fmt::format(", LongRoPE factors (rope_factors_short; rope_factors_long for contexts above {})",
                     c.rope_n_ctx_orig);
  if (c.rope_attn_factor != 1.0f) s += fmt::format(", attn factor {:g}", c.rope_attn_factor);
  return s;
}

// KV cache bytes per token (keys and values of every layer) for a cache type, or 0 when the
// type cannot hold this model's heads (Q8_0 needs head_dim % 32 == 0) or the model's cache is F32
// only (MLA's latent rows).
size_t kv_bytes_per_token(const core::ModelConfig& c, DType type) {
  if (c.is_mla()) return type == DType::F32 ? static_cast<size_t>(c.kv_bytes_per_token()) : 0;
  const int64_t block = dtype_info(type).block_size;
  if (c.head_dim % block != 0) return 0;
  size_t total = 0;  // lfm2's convolution layers keep n_embd F32 per token whatever the type; qwen35's
                     // DeltaNet layers a fixed-size state, no rows
  for (int l = 0; l < c.n_layer; ++l)
    total += c.is_conv_layer(l)                            ? static_cast<size_t>(c.n_embd) * 4
             : c.is_recurrent_layer(l) || !c.has_mixer(l) ? 0
                                                           : 2 * dtype_row_bytes(type, c.kv_dim());
  return total;
}

constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::Q8_0};

// The KV cache one token costs, F32 elements over all layers; for MLA next to what the same
// heads would cache uncompressed (keys of head_dim and values of v_head_dim per head).
std::string kv_line(const core::ModelConfig& c) {
  const double kib = c.kv_bytes_per_token() / 1024.0;
  if (const int conv = c.n_conv_layers(); conv > 0) {
    return fmt::format("{:.1f} KiB per token (F32; {} attention layers x keys and values of {}, {} convolution "
                       "layers x a state row of {})",
                       kib, c.n_layer - conv, c.kv_dim(), conv, c.n_embd);
  }
  if (const int rec = c.n_recurrent_layers(); rec > 0) {
    return fmt::format("{:.1f} KiB per token (F32; {} attention layers x keys and values of {}), and {} {} "
                       "layers x a state of {:.1f} KiB for each of the last tokens a rollback may return to (2 by "
                       "default; a speculative step's tokens + 1)",
                       kib, c.n_attention_layers(), c.kv_dim(), rec,
                       c.recurrent_mixer == core::RecurrentMixer::Mamba2 ? "Mamba-2" : "DeltaNet",
                       c.recurrent_state_floats() * 4 / 1024.0);
  }
  if (!c.is_mla())
    return fmt::format("{:.1f} KiB per token (F32; {} layers x keys and values of {})", kib, c.n_layer, c.kv_dim());
  const int64_t mha = static_cast<int64_t>(c.n_layer) * c.n_head * (c.head_dim + c.mla_v_head_dim) * 4;
  return fmt::format("{:.1f} KiB per token (F32; {} layers x one latent row of {} = kv_lora_rank {} + rope {}), "
                     "{:.1f}x less than the {:.1f} KiB of uncompressed keys and values",
                     kib, c.n_layer, c.kv_key_width(), c.kv_lora_rank, c.rope_dims,
                     static_cast<double>(mha) / c.kv_bytes_per_token(), mha / 1024.0);
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
    // The router as the model runs it: the first MoE layer's, with its selection bias if bound.
    const moe::RouterSpec router =
        c.is_moe() ? core::bind_weights(*file, c).layers[c.first_moe_layer()].moe.router : moe::RouterSpec{};
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
      if (c.n_layer_phys > 0) {  // nanbeige: a looped model's blocks and passes
        j["n_block"] = c.n_layer_phys;
        j["num_loops"] = c.n_layer / c.n_layer_phys;
        j["loop_final_norm"] = c.loop_final_norm;
      }
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
      j["qk_norm_full"] = c.qk_norm_full;
      j["qk_l2_norm"] = c.qk_l2_norm;
      j["kv_bytes_per_token"] = c.kv_bytes_per_token();
      j["kv_cache_type"] = "f32";
      if (c.is_mla())
        j["mla"] = {{"q_lora_rank", c.q_lora_rank},       {"kv_lora_rank", c.kv_lora_rank},
                    {"rope_dims", c.rope_dims},           {"qk_nope_head_dim", c.mla_qk_nope()},
                    {"v_head_dim", c.mla_v_head_dim},     {"cache_row_width", c.kv_key_width()},
                    {"uncompressed_kv_bytes_per_token",
                     static_cast<int64_t>(c.n_layer) * c.n_head * (c.head_dim + c.mla_v_head_dim) * 4}};
      j["attn_logit_softcap"] = c.attn_logit_softcap;
      j["alibi_max_bias"] = c.alibi_max_bias;
      j["clamp_kqv"] = c.clamp_kqv;
      j["ffn_gate_up_fused"] = c.ffn_gate_up_fused;
      j["rope_long_short_factors"] = c.rope_long_short_factors;
      if (c.n_recurrent_layers() > 0) {
        std::vector<int> rec;
        for (int l = 0; l < c.n_layer; ++l)
          if (c.is_recurrent_layer(l)) rec.push_back(l);
        j[c.recurrent_mixer == core::RecurrentMixer::Mamba2 ? "mamba2" : "gated_deltanet"] = {{"layers", rec},
                               {"conv_kernel", c.ssm_d_conv},
                               {"key_heads", c.ssm_n_group},
                               {"value_heads", c.ssm_dt_rank},
                               {"head_dim", c.ssm_d_state},
                               {"state_bytes_per_layer", c.recurrent_state_floats() * 4}};
      }
      if (c.has_conv_layers()) {
        std::vector<int> conv;
        for (int l = 0; l < c.n_layer; ++l)
          if (c.is_conv_layer(l)) conv.push_back(l);
        j["short_conv"] = {{"layers", conv}, {"l_cache", c.shortconv_l_cache}};
      }
      if (c.is_moe()) {
        const moe::RouterSpec& r = router;
        j["router"] = moe::router_kind_name(r.kind);
        j["expert_weights_norm"] = c.expert_weights_norm;
        j["expert_weights_scale"] = c.expert_weights_scale;
        j["expert_groups"] = {c.n_expert_group, c.n_expert_group_used};
        j["n_expert_shared"] = c.n_expert_shared;
        j["n_ff_expert"] = c.n_ff_expert;
        j["n_ff_shared_expert"] = c.n_ff_shared_expert;
        j["leading_dense_layers"] = c.n_layer_dense_lead;
        j["moe_layer_step"] = c.n_moe_layer_step;
      }
      j["post_norms"] = c.post_norms;
      j["pre_norms"] = c.pre_norms;
      j["norm"] = c.layer_norm ? "layer_norm" : "rms_norm";
      j["residual_scale"] = c.residual_scale;
      j["parallel_residual"] = c.parallel_residual;
      j["nextn_predict_layers"] = c.n_nextn;
      j["mtp_drafter"] = c.has_mtp();
      j["mtp_only"] = c.mtp_only;
      if (c.is_eagle3())
        j["eagle3"] = {{"target_layers", c.head_target_layers}, {"target_hidden_size", c.head_target_width},
                       {"draft_vocab", c.n_draft_vocab}, {"norm_before_fc", c.eagle3_norm_before_fc},
                       {"norm_before_residual", c.eagle3_norm_before_residual}};
      if (c.is_dflash())
        j["dflash"] = {{"target_layers", c.head_target_layers}, {"block_size", c.dflash_block_size},
                       {"mask_token_id", c.mask_token_id}, {"causal", c.dflash_causal},
                       {"draft_vocab", c.n_draft_vocab}};
      j["attention_temperature"] = {{"scale", c.attn_temp_scale}, {"floor", c.attn_temp_floor},
                                    {"offset", c.attn_temp_offset}, {"nope_layers_only", c.attn_temp_nope_only}};
      j["logit_scale"] = c.logit_scale;
      std::vector<int> no_rope;
      for (int l = 0; l < c.n_layer; ++l)
        if (c.rope_style != core::RopeStyle::None && !c.has_rope(l)) no_rope.push_back(l);
      j["no_rope_layers"] = no_rope;
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
        j["sliding_window_chunked"] = c.swa_chunked;  // llama4: chunks of sliding_window positions
        j["rope_freq_base_swa"] = c.rope_freq_base_swa;
      }
      exp::set_text(j, "tokenizer", tok_model);
      j["chat_template"] = chat_format.empty() ? nlohmann::json(nullptr) : nlohmann::json(chat_format);
      j["chat_template_renderable"] = !chat_format.empty() && core::is_renderable_chat_format(chat_format);
      // Per KV cache type (-ctk / -ctv); kv_bytes_per_token above is the F32 figure.
      for (DType t : kKvTypes) {
        const size_t kv = kv_bytes_per_token(c, t);
        j["kv_bytes_per_token_by_type"][core::kv_cache_type_name(t)] = kv ? nlohmann::json(kv) : nlohmann::json(nullptr);
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
    if (c.n_layer_phys > 0)
      std::printf("layers:        %d (%d blocks run %d times over%s), embedding %d, feed-forward %d\n", c.n_layer,
                  c.n_layer_phys, c.n_layer / c.n_layer_phys, c.loop_final_norm ? ", output_norm between passes" : "",
                  c.n_embd, c.n_ff);
    else
      std::printf("layers:        %d, embedding %d, feed-forward %d\n", c.n_layer, c.n_embd, c.n_ff);
    if (c.is_mla())
      std::printf("attention:     multi-head latent, %d heads of %d (%d + %d RoPE dims), values of %d, q LoRA rank "
                  "%d%s, kv LoRA rank %d, scale %g\n",
                  c.n_head, c.head_dim, c.mla_qk_nope(), c.rope_dims, c.mla_v_head_dim, c.q_lora_rank,
                  c.q_lora_rank == 0 ? " (full-rank attn_q)" : "", c.kv_lora_rank, c.attention_scale());
    else
      std::printf("attention:     %d heads, %d KV heads, head dim %d%s, scale %g%s%s\n", c.n_head, c.n_head_kv,
                  c.head_dim, c.head_dim * c.n_head != c.n_embd ? " (not n_embd / n_head)" : "", c.attention_scale(),
                  c.qk_norm        ? ", QK-norm per head"
                  : c.qk_norm_full ? ", QK-norm over the whole projections"
                  : c.qk_l2_norm   ? ", QK L2 norm per head after RoPE (layers with RoPE)"
                                   : "",
                  c.attn_logit_softcap > 0.0f ? fmt::format(", scores soft-capped at {:g}", c.attn_logit_softcap).c_str()
                                              : "");
    if (c.clamp_kqv > 0.0f) std::printf("attention:     q, k and v clamped to +-%g\n", c.clamp_kqv);
    if (const int conv = c.n_conv_layers(); conv > 0) {
      std::printf("short conv:    %d of %d layers (%s) are gated short convolutions of %d taps; the others attend\n",
                  conv, c.n_layer, layer_ranges(c.conv_layers).c_str(), c.shortconv_l_cache);
    }
    if (const int rec = c.n_recurrent_layers(); rec > 0 && c.recurrent_mixer == core::RecurrentMixer::Mamba2) {
      std::printf("mamba2:        %d of %d layers (%s): conv of %d taps, %d heads of %d, state %d, %d group%s of B "
                  "and C%s\n",
                  rec, c.n_layer, layer_ranges(c.recurrent_layers).c_str(), c.ssm_d_conv, c.ssm_dt_rank,
                  c.ssm_d_inner / c.ssm_dt_rank, c.ssm_d_state, c.ssm_n_group, c.ssm_n_group == 1 ? "" : "s",
                  rec < c.n_layer ? "; the others attend or are MLPs" : !c.any_ffn() ? "; no attention, no feed-forward" : "");
    } else if (rec > 0) {
      std::printf("deltanet:      %d of %d layers (%s): conv of %d taps, %d query/key heads and %d value heads of "
                  "%d; the others are gated attention\n",
                  rec, c.n_layer, layer_ranges(c.recurrent_layers).c_str(), c.ssm_d_conv, c.ssm_n_group,
                  c.ssm_dt_rank, c.ssm_d_state);
    }
    if (c.is_mla() || c.has_conv_layers() || c.n_recurrent_layers() > 0)
      std::printf("kv cache:      %s\n", kv_line(c).c_str());
    if (c.n_swa > 0) {
      int n_local = 0;
      for (int l = 0; l < c.n_layer; ++l) n_local += c.is_swa(l);
      const std::string pattern = c.swa_pattern > 0 ? fmt::format(", pattern {}", c.swa_pattern) : "";
      std::printf("local layers:  %d of %d (%s%s) attend to %s of %d positions; the others are global\n", n_local,
                  c.n_layer, layer_ranges(c.swa_layers).c_str(), pattern.c_str(),
                  c.swa_chunked ? "their chunk" : "a sliding window", c.n_swa);
    }
    std::printf("rope:          %s\n", rope_line(c).c_str());
    const bool norm_bias = file->find_tensor("blk.0.attn_norm.bias") != nullptr;  // cohere's and most mpt's have none
    const char* layer_norm = c.arch == core::Arch::Olmo ? "LayerNorm without parameters"
                             : norm_bias                ? "LayerNorm with bias"
                                                        : "LayerNorm";
    std::printf("norms:         %s, eps %g%s\n", !c.layer_norm ? (c.rms_norm_bias ? "RMSNorm with bias" : "RMSNorm") : layer_norm,
                c.norm_eps,
                !c.pre_norms ? " (post-norms only)" : c.post_norms ? " (pre- and post-norms)" : "");
    {
      std::vector<uint8_t> no_rope(static_cast<size_t>(c.n_layer), 0);
      bool any = false;
      for (int l = 0; l < c.n_layer; ++l) any |= (no_rope[l] = c.rope_style != core::RopeStyle::None && !c.has_rope(l));
      if (any) std::printf("no RoPE:       layers %s\n", layer_ranges(no_rope).c_str());
    }
    if (c.embd_scale != 1.0f) std::printf("embedding:     scaled by %g\n", c.embd_scale);
    if (c.attn_temp_scale != 0.0f) {
      const std::string p = c.attn_temp_offset != 0.0f ? fmt::format("(p + {:g})", c.attn_temp_offset) : "p";
      std::printf("attention:     %squeries of position %s >= %d times log(floor(%s / %d) + 1) * %g + 1\n",
                  c.attn_temp_nope_only ? "the NoPE layers' " : "", p.c_str(), c.attn_temp_floor, p.c_str(),
                  c.attn_temp_floor, c.attn_temp_scale);
    }
    if (c.parallel_residual)
      std::printf("residual:      parallel, attention and feed-forward both read the layer's input\n");
    if (c.residual_scale != 1.0f) std::printf("residual:      each sublayer's output scaled by %g\n", c.residual_scale);
    if (c.logit_scale != 1.0f) std::printf("logits:        divided by %g\n", c.logit_scale);
    if (c.ffn_act == core::FfnActivation::GeluTanh) std::printf("feed-forward:  GELU (tanh) gated\n");
    if (c.ffn_gate_up_fused) std::printf("feed-forward:  SwiGLU, gate and up fused in ffn_up\n");
    if (c.final_logit_softcap > 0.0f) std::printf("logits:        soft-capped at %g\n", c.final_logit_softcap);
    std::printf("output head:   %s\n", c.tied_output ? "tied to the token embedding" : "separate");
    if (c.n_nextn > 0)
      std::printf("mtp:           %d multi-token-prediction block%s after the layers (nextn_predict_layers)%s\n", c.n_nextn,
                  c.n_nextn > 1 ? "s" : "",
                  !c.has_mtp() ? ", which specmoe does not run for this architecture"
                  : c.mtp_only ? "; this file holds the block alone (llama.cpp's --mtp export): a draft for --drafter mtp -md"
                               : ": --drafter mtp drafts with the first");
    if (c.is_eagle3())
      std::printf("eagle3:        an EAGLE-3 draft head reading the input rows of target layers %s (width %d)%s%s; "
                  "a draft for --drafter eagle3 -md beside its target\n",
                  fmt::format("{}", fmt::join(c.head_target_layers, ", ")).c_str(), c.head_target_width,
                  c.n_draft_vocab != c.n_vocab ? fmt::format(", its own vocabulary of {} ids (d2t)", c.n_draft_vocab).c_str() : "",
                  c.eagle3_norm_before_fc ? ", features normed before fc" : "");
    if (c.is_dflash())
      std::printf("dflash:        a DFlash draft reading the input rows of target layers %s; blocks of %d (up to %d "
                  "drafts per forward), mask token %d, %s attention in the block%s; a draft for --drafter dflash -md "
                  "beside its target\n",
                  fmt::format("{}", fmt::join(c.head_target_layers, ", ")).c_str(), c.dflash_block_size,
                  c.dflash_block_size - 1, c.mask_token_id, c.dflash_causal ? "causal" : "bidirectional",
                  c.n_draft_vocab != c.n_vocab ? fmt::format(", its own vocabulary of {} ids (d2t)", c.n_draft_vocab).c_str() : "");
    if (c.is_moe()) {
      std::string dense;
      if (c.n_layer_dense_lead > 0) dense = fmt::format(", layers 0-{} dense (ff {})", c.n_layer_dense_lead - 1, c.n_ff);
      if (c.n_moe_layer_step > 1) dense += fmt::format(", experts every {} layers", c.n_moe_layer_step);
      std::printf("experts:       %d, %d active per token, expert ff %d, shared ff %d%s\n", c.n_expert,
                  c.n_expert_used, c.n_ff_expert, c.n_ff_shared_expert, dense.c_str());
      const moe::RouterSpec& r = router;
      std::printf("router:        %s, %s%s%s%s\n", moe::router_kind_name(r.kind),
                  c.expert_weights_norm ? "renormalised" : "not renormalised",
                  c.expert_weights_scale != 1.0f ? fmt::format(", scale {:g}", c.expert_weights_scale).c_str() : "",
                  c.n_expert_group > 1 ? fmt::format(", {} groups keep {}", c.n_expert_group, c.n_expert_group_used).c_str()
                                       : "",
                  c.router_reads_layer_input              ? "; reads the layer's input (before attention), experts ReLU-gated"
                  : c.arch == core::Arch::Llama4 ? "; the weights scale the experts' inputs, not their outputs"
                  : c.arch == core::Arch::NemotronH ? "; ungated squared-ReLU experts and shared expert"
                                                          : "");
    }
    std::printf("parameters:    %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
    std::printf("memory:        %.2f MiB of tensor data\n", bytes / (1024.0 * 1024.0));
    if (!c.is_mla()) {
      std::string types;
      for (DType t : kKvTypes) {
        const size_t kv = kv_bytes_per_token(c, t);
        types += fmt::format("{}{} {}", types.empty() ? "" : ", ", core::kv_cache_type_name(t),
                             kv ? fmt::format("{} B", kv) : std::string("n/a (head dim not a multiple of 32)"));
      }
      const int attn = c.n_attention_layers();
      const std::string others =
          c.n_conv_layers() > 0   ? fmt::format("; convolution states in F32, {} layers x {}", c.n_conv_layers(), c.n_embd)
          : c.n_recurrent_layers() > 0 ? fmt::format("; {} states in F32, {} layers x {} B each, for the last "
                                                     "tokens a rollback may return to",
                                                     c.recurrent_mixer == core::RecurrentMixer::Mamba2 ? "Mamba-2"
                                                                                                       : "DeltaNet",
                                                     c.n_recurrent_layers(), c.recurrent_state_floats() * 4)
                                       : std::string();
      std::printf("kv cache:      %s per token (keys + values, %d layers x %d%s)\n", types.c_str(), attn, c.kv_dim(),
                  others.c_str());
    }
    std::printf("tensor types:\n");
    for (const auto& [type, e] : by_type)
      std::printf("  %-6s %5d tensors, %lld elements\n", type.c_str(), e.first, static_cast<long long>(e.second));
  });
}

}  // namespace specmoe::cli
