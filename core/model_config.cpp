// ModelConfig from GGUF metadata, using llama.cpp's key names (llama-arch.cpp LLM_KV_NAMES) and
// its per-architecture conventions (llama-model.cpp: llama_model_rope_type, build_moe_ffn's
// weight normalisation).
#include "core/model_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::core {
namespace {

// Limits well above any published model, so a corrupt header cannot make later code allocate
// absurd buffers (checked, never silent).
constexpr int kMaxLayers = 1024;
constexpr int kMaxEmbd = 65536;
constexpr int kMaxVocab = 1 << 22;
constexpr int kMaxHeads = 1024;
constexpr int kMaxHeadDim = 4096;
constexpr int kMaxFF = 1 << 20;
constexpr int kMaxCtx = 1 << 24;
constexpr int kMaxExperts = 1024;

struct Reader {
  const GGUFFile& f;
  std::string prefix;  // "<arch>."

  std::string key(std::string_view suffix) const { return prefix + std::string(suffix); }

  // An int-sized value. A per-layer array (some converters write head_count_kv per layer) is
  // accepted when all layers agree, since specmoe models a uniform stack.
  int get(std::string_view suffix, std::optional<int> def) const {
    const std::string k = key(suffix);
    const GGUFValue* v = f.find(k);
    if (!v) {
      if (!def) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", f.path(), k);
      return *def;
    }
    int64_t x = 0;
    if (v->type == GGUFType::ARRAY) {
      const auto xs = f.get_int_array(k);
      if (xs.empty()) throw_error(ErrorKind::Format, "{}: metadata key '{}' is an empty array", f.path(), k);
      for (int64_t y : xs)
        if (y != xs[0])
          throw_error(ErrorKind::Unsupported, "{}: metadata key '{}' varies per layer ({} vs {}); specmoe needs it uniform",
                      f.path(), k, xs[0], y);
      x = xs[0];
    } else {
      x = f.get_int(k);
    }
    if (x < 0 || x > INT_MAX)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' value {} is out of range", f.path(), k, x);
    return static_cast<int>(x);
  }

  float get_float(std::string_view suffix, float def) const {
    return static_cast<float>(f.get_float(key(suffix), static_cast<double>(def)));
  }
};

// RoPE scaling as llama.cpp reads it (llama-model.cpp load_hparams, llama-context.cpp): the type
// (default linear), the factor (rope.scaling.factor, else the older rope.scale_linear; 0 = none),
// the original context of YaRN and the attn_factor that multiplies cos/sin. llama3 is accepted
// for llama files that give Llama 3.1's factors by keys (llama.cpp's converter writes the tensor
// rope_freqs.weight instead, which bind_weights reads for every llama file that has it).
void read_rope_scaling(const GGUFFile& file, const Reader& r, ModelConfig& c) {
  const std::string type_key = r.key("rope.scaling.type");
  const std::string type = file.get_string(type_key, "linear");
  float factor = r.get_float("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = r.get_float("rope.scale_linear", 0.0f);  // older files
  if (!std::isfinite(factor) || factor < 0.0f)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be a positive number or 0)", file.path(),
                r.key("rope.scaling.factor"), factor);
  c.rope_scaling_factor = factor;
  c.rope_n_ctx_orig = r.get("rope.scaling.original_context_length", c.n_ctx_train);
  c.rope_attn_factor = r.get_float("rope.scaling.attn_factor", 1.0f);
  if (type == "none") {
    c.rope_scaling = RopeScaling::None;  // llama.cpp never scales then, whatever the factor says
  } else if (type == "linear" || type == "yarn") {
    c.rope_scaling = type == "yarn" ? RopeScaling::Yarn : (factor != 0.0f ? RopeScaling::Linear : RopeScaling::None);
    if (factor != 0.0f) c.rope_freq_scale = 1.0f / factor;  // llama.cpp treats factor 0 as none
  } else if (type == "llama3" && c.arch == Arch::Llama) {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_freq_factors = true;
    if (c.rope_scaling_factor == 0.0f) c.rope_scaling_factor = 8.0f;  // Meta's defaults (Llama 3.1)
    c.rope_n_ctx_orig = r.get("rope.scaling.original_context_length", 8192);
    c.llama3_low_freq_factor = r.get_float("rope.scaling.low_freq_factor", 1.0f);
    c.llama3_high_freq_factor = r.get_float("rope.scaling.high_freq_factor", 4.0f);
  } else {
    throw_error(ErrorKind::Unsupported, "{}: {} '{}' is unsupported (supported: none, linear, yarn{})", file.path(),
                type_key, type, c.arch == Arch::Llama ? ", llama3" : "");
  }
  // llama.cpp reads rope_freqs.weight for llama only; its converter writes it for Llama 3.1+.
  if (c.arch == Arch::Llama && file.find_tensor("rope_freqs.weight")) c.rope_freq_factors = true;

  // YaRN (llama_context's defaults for every architecture that does not read its own keys, which
  // llama, qwen2, qwen3 and gemma3 do not): ext_factor 1, beta_fast 32, beta_slow 1, and an
  // attn_factor of get_mscale(factor) / (1 + 0.1 ln factor) (the rope op multiplies by
  // 1 + 0.1 ln(1/freq_scale) again, see rope_at) times rope.scaling.attn_factor.
  float attn = 1.0f;
  if (c.rope_scaling == RopeScaling::Yarn) {
    c.yarn_ext_factor = 1.0f;
    const float f = 1.0f / c.rope_freq_scale;
    attn = f <= 1.0f ? 1.0f : 0.1f * std::log(f) + 1.0f;
    attn *= 1.0f / (1.0f + 0.1f * std::log(f));
  }
  c.yarn_attn_factor = attn * c.rope_attn_factor;
}

// gemma3 (llama.cpp src/models/gemma3.cpp): the embedding scale, sliding-window layers (window
// from attention.sliding_window; none when it is absent or 0; layer pattern from
// attention.sliding_window_pattern, a period or one flag per layer, default period 6), the local
// layers' RoPE base (rope.freq_base_swa, default 10000, never scaled), the final logit
// soft-capping when the file has it, and the 27B's attention scale.
void read_gemma3(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.n_swa = r.get("attention.sliding_window", 0);
  if (c.n_swa > 0) {
    c.swa_layers.assign(static_cast<size_t>(c.n_layer), 0);
    const std::string pk = r.key("attention.sliding_window_pattern");
    const GGUFValue* v = f.find(pk);
    if (v && v->type == GGUFType::ARRAY) {
      if (v->items.size() != static_cast<size_t>(c.n_layer))
        throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries for {} layers", f.path(), pk,
                    v->items.size(), c.n_layer);
      for (int l = 0; l < c.n_layer; ++l) {
        const GGUFValue& e = v->items[l];
        if (!(e.is_integer() || e.type == GGUFType::BOOL))
          throw_error(ErrorKind::Format, "{}: metadata key '{}' holds {}, expected booleans or integers", f.path(), pk,
                      gguf_type_name(e.type));
        c.swa_layers[l] = e.i != 0;
      }
      c.swa_pattern = 0;
    } else {
      c.swa_pattern = r.get("attention.sliding_window_pattern", 6);
      // llama_hparams::set_swa_pattern: period 0 makes every layer local.
      for (int l = 0; l < c.n_layer; ++l)
        c.swa_layers[l] = c.swa_pattern == 0 || l % c.swa_pattern < c.swa_pattern - 1;
    }
    c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", 10000.0f);
    c.rope_freq_scale_swa = 1.0f;
  }
  c.final_logit_softcap = r.get_float("final_logit_softcapping", 0.0f);
  // gemma_pytorch's query_pre_attn_scalar: n_embd / n_head for the 27B (62 layers), head_dim
  // otherwise; GGUF files do not carry it, so llama.cpp decides by the layer count.
  if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
}

}  // namespace

LayerRope ModelConfig::rope_at(int layer) const {
  LayerRope r;
  const bool local = is_swa(layer);
  r.freq_base = local ? rope_freq_base_swa : rope_freq_base;
  r.freq_scale = local ? rope_freq_scale_swa : rope_freq_scale;
  r.ext_factor = yarn_ext_factor;
  r.attn_factor = yarn_attn_factor;
  if (r.ext_factor != 0.0f) {
    // ggml's rope_yarn multiplies the magnitude by 1 + 0.1 ln(1/freq_scale) whenever ext_factor is
    // set; the correction range is ggml_rope_yarn_corr_dims (pair indices whose wavelength turns
    // beta_fast and beta_slow times over the original context).
    r.attn_factor *= 1.0f + 0.1f * std::log(1.0f / r.freq_scale);
    const int n_dims = rope_dims;
    auto corr_dim = [&](float n_rot) {
      return static_cast<float>(n_dims) *
             std::log(static_cast<float>(rope_n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
             (2.0f * std::log(r.freq_base));
    };
    r.corr_low = std::max(0.0f, std::floor(corr_dim(yarn_beta_fast)));
    r.corr_high = std::min(static_cast<float>(n_dims - 1), std::ceil(corr_dim(yarn_beta_slow)));
  }
  return r;
}

std::vector<float> ModelConfig::llama3_rope_factors() const {
  // Meta's Llama 3.1 scaling: wavelengths shorter than orig / high_freq_factor keep their
  // frequency, longer than orig / low_freq_factor are divided by the factor, and those between
  // are interpolated smoothly.
  const int half = rope_dims / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const double orig = rope_n_ctx_orig, factor = rope_scaling_factor;
  const double lo = llama3_low_freq_factor, hi = llama3_high_freq_factor;
  const double low_wavelen = orig / lo, high_wavelen = orig / hi;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(static_cast<double>(rope_freq_base), -2.0 * i / rope_dims);
    const double wavelen = 2.0 * M_PI / freq;
    double ff;
    if (wavelen < high_wavelen) {
      ff = 1.0;
    } else if (wavelen > low_wavelen) {
      ff = factor;
    } else {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      ff = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(ff);
  }
  return out;
}

ModelConfig ModelConfig::from_gguf(const GGUFFile& file) {
  ModelConfig c;
  c.arch_name = file.get_string("general.architecture");
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
    c.rope_style = RopeStyle::Adjacent;  // LLAMA_ROPE_TYPE_NORM
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
    c.rope_style = RopeStyle::SplitHalves;  // LLAMA_ROPE_TYPE_NEOX
  } else if (c.arch_name == "qwen2moe") {
    c.arch = Arch::Qwen2Moe;
    c.rope_style = RopeStyle::SplitHalves;
  } else if (c.arch_name == "gpt2") {
    c.arch = Arch::Gpt2;
    c.rope_style = RopeStyle::None;  // learned absolute position embeddings
  } else if (c.arch_name == "qwen3") {
    c.arch = Arch::Qwen3;
    c.rope_style = RopeStyle::SplitHalves;
    c.qk_norm = true;
  } else if (c.arch_name == "gemma3") {
    c.arch = Arch::Gemma3;
    c.rope_style = RopeStyle::SplitHalves;
    c.qk_norm = true;
    c.post_norms = true;
    c.ffn_act = FfnActivation::GeluTanh;
  } else {
    throw_error(ErrorKind::Unsupported,
                "{}: unsupported architecture '{}' (supported: llama, qwen2, qwen2moe, gpt2, qwen3, gemma3)",
                file.path(), c.arch_name);
  }
  c.name = file.get_string("general.name", "");
  const Reader r{file, c.arch_name + "."};

  c.n_ctx_train = r.get("context_length", std::nullopt);
  c.n_embd = r.get("embedding_length", std::nullopt);
  c.n_layer = r.get("block_count", std::nullopt);
  c.n_ff = r.get("feed_forward_length", 0);
  c.n_head = r.get("attention.head_count", std::nullopt);
  c.n_head_kv = r.get("attention.head_count_kv", c.n_head);
  if (c.n_head <= 0) throw_error(ErrorKind::Format, "{}: {} is {}", file.path(), r.key("attention.head_count"), c.n_head);
  if (file.has(r.key("attention.key_length"))) {
    c.head_dim = r.get("attention.key_length", std::nullopt);
    const int v_len = r.get("attention.value_length", c.head_dim);
    if (v_len != c.head_dim)
      throw_error(ErrorKind::Unsupported, "{}: {} {} differs from {} {}; specmoe needs equal key and value heads",
                  file.path(), r.key("attention.value_length"), v_len, r.key("attention.key_length"), c.head_dim);
  } else {
    if (c.n_embd % c.n_head != 0)
      throw_error(ErrorKind::Format, "{}: embedding_length {} is not a multiple of head_count {}", file.path(), c.n_embd,
                  c.n_head);
    c.head_dim = c.n_embd / c.n_head;
  }

  if (c.arch == Arch::Gpt2) {
    c.norm_eps = r.get_float("attention.layer_norm_epsilon", 1e-5f);
    c.rope_dims = 0;
  } else {
    c.norm_eps = r.get_float("attention.layer_norm_rms_epsilon", 1e-5f);
    c.rope_dims = r.get("rope.dimension_count", c.head_dim);
    c.rope_freq_base = r.get_float("rope.freq_base", 10000.0f);
    read_rope_scaling(file, r, c);
  }
  if (c.arch == Arch::Gemma3) read_gemma3(r, c);

  // Vocabulary: the tokenizer's token list, else <arch>.vocab_size, else the embedding's rows.
  if (file.has("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(std::min<size_t>(file.get_string_array("tokenizer.ggml.tokens").size(), INT_MAX));
  } else if (file.has(r.key("vocab_size"))) {
    c.n_vocab = r.get("vocab_size", std::nullopt);
  } else if (const GGUFTensorInfo* emb = file.find_tensor("token_embd.weight"); emb && emb->ne.size() >= 2) {
    c.n_vocab = static_cast<int>(std::min<int64_t>(emb->ne[1], INT_MAX));
  } else {
    throw_error(ErrorKind::Format, "{}: cannot tell the vocabulary size (no tokenizer.ggml.tokens, {} or token_embd.weight)",
                file.path(), r.key("vocab_size"));
  }
  c.tied_output = file.find_tensor("output.weight") == nullptr;

  c.n_expert = r.get("expert_count", 0);
  c.n_expert_used = r.get("expert_used_count", 0);
  if (c.arch == Arch::Qwen2Moe) {
    // llama.cpp (llama-model.cpp, LLM_ARCH_QWEN2MOE): n_ff_exp = expert_feed_forward_length or
    // n_ff / n_expert_used; n_ff_shexp = expert_shared_feed_forward_length or n_ff.
    c.n_ff_expert = r.get("expert_feed_forward_length", c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0);
    c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", c.n_ff);
  } else {
    // llama (Mixtral): the expert tensors are {n_embd, n_ff, n_expert} with n_ff =
    // feed_forward_length; llama.cpp does not read expert_feed_forward_length for llama.
    c.n_ff_expert = c.n_ff;
    c.n_ff_shared_expert = 0;
  }
  // llama.cpp renormalises the top-k weights for llama-architecture MoE (Mixtral) and not for
  // qwen2moe; a file may say otherwise explicitly.
  c.expert_weights_norm = file.get_bool(r.key("expert_weights_norm"), c.arch != Arch::Qwen2Moe);
  const int gating = r.get("expert_gating_func", 0);  // 0 = LLAMA_EXPERT_GATING_FUNC_TYPE_NONE
  if (gating == 0 || gating == 1) {
    c.expert_gating = ExpertGating::Softmax;  // llama and qwen2moe build their MoE with softmax
  } else if (gating == 2) {
    c.expert_gating = ExpertGating::Sigmoid;
  } else {
    throw_error(ErrorKind::Unsupported, "{}: {} = {} is unsupported (1 softmax, 2 sigmoid)", file.path(),
                r.key("expert_gating_func"), gating);
  }
  c.expert_weights_scale = r.get_float("expert_weights_scale", 0.0f);
  if (c.expert_weights_scale == 0.0f) c.expert_weights_scale = 1.0f;  // llama.cpp: 0 = no scaling
  c.n_expert_group = std::max(1, r.get("expert_group_count", 1));
  c.n_expert_group_used = std::max(1, r.get("expert_group_used_count", c.n_expert_group));
  if (c.arch == Arch::Qwen2Moe && c.n_expert == 0)
    throw_error(ErrorKind::Format, "{}: qwen2moe model without {}", file.path(), r.key("expert_count"));
  if (c.arch != Arch::Llama && c.arch != Arch::Qwen2Moe && c.n_expert > 0)
    throw_error(ErrorKind::Unsupported, "{}: {} models with experts are not supported", file.path(), c.arch_name);

  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", file.path(), e.what()));
  }
  return c;
}

void ModelConfig::validate() const {
  auto check_range = [](const char* what, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) throw_error(ErrorKind::Format, "model config: {} is {} (must be {} to {})", what, v, lo, hi);
  };
  check_range("n_vocab", n_vocab, 1, kMaxVocab);
  check_range("n_ctx_train", n_ctx_train, 1, kMaxCtx);
  check_range("n_embd", n_embd, 1, kMaxEmbd);
  check_range("n_layer", n_layer, 1, kMaxLayers);
  check_range("n_head", n_head, 1, kMaxHeads);
  check_range("n_head_kv", n_head_kv, 1, kMaxHeads);
  check_range("head_dim", head_dim, 1, kMaxHeadDim);
  if (n_head % n_head_kv != 0)
    throw_error(ErrorKind::Format, "model config: n_head {} is not a multiple of n_head_kv {}", n_head, n_head_kv);
  check_range("n_expert", n_expert, 0, kMaxExperts);
  if (n_expert > 0) {
    check_range("n_expert_used", n_expert_used, 1, n_expert);
    check_range("n_ff_expert", n_ff_expert, 1, kMaxFF);
    check_range("n_ff_shared_expert", n_ff_shared_expert, 0, kMaxFF);
    check_range("n_ff", n_ff, 0, kMaxFF);  // MoE layers may have no dense FFN
    if (expert_gating != ExpertGating::Softmax && expert_gating != ExpertGating::Sigmoid)
      throw_error(ErrorKind::Format, "model config: expert_gating {} is not softmax (1) or sigmoid (2)",
                  static_cast<int>(expert_gating));
    if (!(expert_weights_scale > 0.0f) || !std::isfinite(expert_weights_scale))
      throw_error(ErrorKind::Format, "model config: expert_weights_scale {} is not a positive number",
                  expert_weights_scale);
    check_range("n_expert_group", n_expert_group, 1, n_expert);
    if (n_expert % n_expert_group != 0)
      throw_error(ErrorKind::Format, "model config: n_expert_group {} does not divide n_expert {}", n_expert_group,
                  n_expert);
    check_range("n_expert_group_used", n_expert_group_used, 1, n_expert_group);
    // Group-limited routing keeps n_expert_group_used groups: k must fit in them.
    check_range("n_expert_used", n_expert_used, 1, n_expert_group_used * (n_expert / n_expert_group));
    if (expert_gating == ExpertGating::Softmax && (n_expert_group > 1 || expert_weights_scale != 1.0f))
      throw_error(ErrorKind::Unsupported,
                  "model config: softmax expert gating with {} expert groups and weights scale {} is unsupported "
                  "(group-limited routing and scaling are implemented for sigmoid gating)",
                  n_expert_group, expert_weights_scale);
  } else {
    if (n_expert_used != 0)
      throw_error(ErrorKind::Format, "model config: n_expert_used is {} but the model has no experts", n_expert_used);
    check_range("n_ff", n_ff, 1, kMaxFF);
  }
  if (rope_style != RopeStyle::None) {
    check_range("rope_dims", rope_dims, 2, head_dim);
    if (rope_dims % 2 != 0) throw_error(ErrorKind::Format, "model config: rope_dims {} is odd", rope_dims);
    if (!(rope_freq_base > 0.0f) || !std::isfinite(rope_freq_base))
      throw_error(ErrorKind::Format, "model config: rope_freq_base {} is not a positive number", rope_freq_base);
    if (!(rope_freq_scale > 0.0f) || !std::isfinite(rope_freq_scale))
      throw_error(ErrorKind::Format, "model config: rope_freq_scale {} is not a positive number", rope_freq_scale);
  }
  if (!(norm_eps > 0.0f) || !(norm_eps < 1.0f))
    throw_error(ErrorKind::Format, "model config: norm_eps {} is not in (0, 1)", norm_eps);
  auto check_positive = [](const char* what, float v) {
    if (!(v > 0.0f) || !std::isfinite(v))
      throw_error(ErrorKind::Format, "model config: {} {} is not a positive number", what, v);
  };
  if (!(attn_scale >= 0.0f) || !std::isfinite(attn_scale))
    throw_error(ErrorKind::Format, "model config: attn_scale {} is not 0 (default) or a positive number", attn_scale);
  check_positive("embd_scale", embd_scale);
  if (!(final_logit_softcap >= 0.0f) || !std::isfinite(final_logit_softcap))
    throw_error(ErrorKind::Format, "model config: final_logit_softcap {} is not 0 or a positive number",
                final_logit_softcap);
  check_range("n_swa", n_swa, 0, kMaxCtx);
  if (n_swa > 0) {
    if (swa_layers.size() != static_cast<size_t>(n_layer))
      throw_error(ErrorKind::Format, "model config: {} sliding-window layer flags for {} layers", swa_layers.size(),
                  n_layer);
    check_positive("rope_freq_base_swa", rope_freq_base_swa);
    check_positive("rope_freq_scale_swa", rope_freq_scale_swa);
  }
  if (rope_style != RopeStyle::None) {
    check_positive("rope attn_factor", yarn_attn_factor);
    if (!std::isfinite(yarn_ext_factor))
      throw_error(ErrorKind::Format, "model config: yarn ext_factor {} is not finite", yarn_ext_factor);
    if (yarn_ext_factor != 0.0f) {
      check_range("rope_n_ctx_orig", rope_n_ctx_orig, 1, kMaxCtx);
      check_positive("yarn_beta_fast", yarn_beta_fast);
      check_positive("yarn_beta_slow", yarn_beta_slow);
    }
    if (rope_scaling == RopeScaling::Llama3) {
      check_range("rope_n_ctx_orig", rope_n_ctx_orig, 1, kMaxCtx);
      check_positive("rope scaling factor", rope_scaling_factor);
      check_positive("llama3 low_freq_factor", llama3_low_freq_factor);
      check_positive("llama3 high_freq_factor", llama3_high_freq_factor);
      if (!(llama3_high_freq_factor > llama3_low_freq_factor))
        throw_error(ErrorKind::Format, "model config: llama3 high_freq_factor {} is not above low_freq_factor {}",
                    llama3_high_freq_factor, llama3_low_freq_factor);
    }
  }
}

}  // namespace specmoe::core
