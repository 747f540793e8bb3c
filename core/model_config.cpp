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

}  // namespace

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
  } else {
    throw_error(ErrorKind::Unsupported, "{}: unsupported architecture '{}' (supported: llama, qwen2, qwen2moe, gpt2)",
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
    // RoPE scaling: only linear position interpolation (freq_scale = 1 / factor) is implemented.
    const std::string type = file.get_string(r.key("rope.scaling.type"), "");
    float factor = r.get_float("rope.scaling.factor", 0.0f);
    if (factor == 0.0f) factor = r.get_float("rope.scale_linear", 0.0f);  // older files
    if (type.empty() || type == "linear") {
      if (factor != 0.0f) c.rope_freq_scale = 1.0f / factor;  // llama.cpp treats factor 0 as none
    } else if (type != "none") {
      throw_error(ErrorKind::Unsupported, "{}: {} '{}' is unsupported (supported: none, linear)", file.path(),
                  r.key("rope.scaling.type"), type);
    }
  }

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
}

}  // namespace specmoe::core
