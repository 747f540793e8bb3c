// The architecture specifics ModelConfig::from_gguf reads beyond the common keys, with
// llama.cpp's defaults (src/models/<arch>.cpp load_arch_hparams, llama-model.cpp load_hparams):
// gemma2 and gemma3 (embedding scale, sliding windows, local RoPE base, soft-capping, attention
// scale), the MoE keys of every architecture, and deepseek2's multi-head latent attention.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/ranges.h>

#include "core/model_config_reader.h"

namespace specmoe::core::detail {

// gemma2 (src/models/gemma2.cpp) and gemma3 (gemma3.cpp): the embedding scale; sliding-window
// layers (attention.sliding_window: gemma2 default 4096, gemma3 none when absent or 0; the layer
// pattern attention.sliding_window_pattern, a period or one flag per layer, default 2 for gemma2
// and 6 for gemma3: layer l is local unless l % N == N - 1); the local layers' RoPE
// (rope.freq_base_swa: gemma2 defaults to the global base and scale, gemma3 to 10000, never
// scaled); soft-capping (gemma2: attention 50 and final 30 unless the keys say otherwise; gemma3:
// final only, when the key is there); and the 27B's query scale 1/sqrt(n_embd / n_head) (46
// layers for gemma2, 62 for gemma3; GGUF files do not carry query_pre_attn_scalar, llama.cpp
// decides by the layer count).
// The layer pattern of a model with windows (c.n_swa > 0): attention.sliding_window_pattern as
// one flag per layer, or a period N (`default_period` when absent) making layer l local unless
// l % N == N - 1, or with dense_first unless l % N == 0 (llama_hparams::set_swa_pattern; period 0
// makes every layer local).
void read_swa_layers(const Reader& r, ModelConfig& c, int default_period, bool dense_first = false) {
  const GGUFFile& f = r.f;
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
    c.swa_pattern = r.get("attention.sliding_window_pattern", default_period);
    for (int l = 0; l < c.n_layer; ++l)
      c.swa_layers[l] = c.swa_pattern == 0 || (dense_first ? l % c.swa_pattern != 0 : l % c.swa_pattern < c.swa_pattern - 1);
  }
}

void read_gemma(const Reader& r, ModelConfig& c) {
  const bool g2 = c.arch == Arch::Gemma2;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.n_swa = r.get("attention.sliding_window", g2 ? 4096 : 0);
  if (c.n_swa > 0) {
    read_swa_layers(r, c, g2 ? 2 : 6);
    c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", g2 ? c.rope_freq_base : 10000.0f);
    c.rope_freq_scale_swa = g2 ? c.rope_freq_scale : 1.0f;
  }
  c.final_logit_softcap = r.get_float("final_logit_softcapping", g2 ? 30.0f : 0.0f);
  if (g2) c.attn_logit_softcap = r.get_float("attn_logit_softcapping", 50.0f);
  if (c.n_layer == (g2 ? 46 : 62)) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
}

// OLMo 3 (olmo2 with attention.sliding_window > 0; src/models/olmo2.cpp): windows on every layer
// but each fourth by default (the converter writes one flag per layer); the local layers rotate
// with the global base, unscaled and without YaRN (llama.cpp passes freq_scale 1, ext_factor 0 and
// attn_factor 1 there and ignores rope.freq_base_swa), the global ones with the file's scaling.
// EXAONE 4.0 32B (exaone4 with 64 layers; exaone4.cpp): windows of attention.sliding_window
// (default 4096) on every layer but each fourth; the local layers rotate as the global layers of
// other models do (the global base, scaling and rope_freqs.weight), the global ones not at all.
void read_olmo3_exaone4_windows(const Reader& r, ModelConfig& c) {
  // mellum (Mellum 2, src/models/mellum.cpp): windows when the key says, every fourth layer global
  // by default; its graph rotates the local layers as OLMo 3's (the global base, unscaled, no YaRN),
  // reading rope.freq_base_swa but not using it.
  if (c.arch == Arch::Olmo2 || c.arch == Arch::Mellum) {
    c.n_swa = r.get("attention.sliding_window", 0);
    if (c.n_swa <= 0) {
      c.n_swa = 0;
      return;
    }
    c.swa_plain_rope = true;
  } else {
    if (c.n_layer != 64) return;  // llama.cpp gives only the 64-layer model windows
    c.n_swa = r.get("attention.sliding_window", 4096);
    if (c.n_swa <= 0)
      throw_error(ErrorKind::Format, "{}: {} is {}: EXAONE 4.0 32B's local layers need a window", r.f.path(),
                  r.key("attention.sliding_window"), c.n_swa);
    c.nope_global = true;
  }
  read_swa_layers(r, c, 4);
  c.rope_freq_base_swa = c.rope_freq_base;
  c.rope_freq_scale_swa = c.swa_plain_rope ? 1.0f : c.rope_freq_scale;
}

// command-r (Command R, src/models/command-r.cpp) and cohere2 (Command R7B, cohere2.cpp): LayerNorm
// without biases, one attn_norm feeding a parallel residual, the head always token_embd, logits
// times logit_scale (command-r: absent or 0 = none; cohere2: required). cohere2: windows of
// attention.sliding_window (required) on every layer but each fourth by default, the local layers
// rotating with the global base and scaling (llama.cpp's graph uses neither freq_base_swa nor a
// local scale), the global ones without RoPE. Command R+ (64 layers and more: a LayerNorm with its
// own weights per q and k head) is refused.
// gpt-oss (llama.cpp's openai-moe): windows of attention.sliding_window (required) on every
// second layer (layers 0, 2, ...; attention.sliding_window_pattern when present), rotated as the
// global ones (rope.freq_base_swa when present, the same scaling and YaRN).
void read_gpt_oss(const Reader& r, ModelConfig& c) {
  c.n_swa = r.get("attention.sliding_window", std::nullopt);
  if (c.n_swa <= 0)
    throw_error(ErrorKind::Format, "{}: {} is {}", r.f.path(), r.key("attention.sliding_window"), c.n_swa);
  read_swa_layers(r, c, 2);
  c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
  c.rope_freq_scale_swa = c.rope_freq_scale;
}

// lfm2 (Liquid AI's LFM2, src/models/lfm2.cpp): attention.head_count_kv per layer, 0 marking a
// gated short-convolution layer (llama.cpp's is_recr), the attention layers' common KV head count
// otherwise (a scalar: every layer attends); shortconv.l_cache (required, at least 2) taps per
// filter, the current token's included. A file of convolution layers only keeps n_head_kv =
// n_head for the (unused) attention sizes.
namespace {

// attention.head_count_kv per layer (one value, or an array of one per layer) as lfm2's and
// granitehybrid's converters write it: layers of 0 are not attention (their flags set to 1), the
// others must agree, and that count is n_head_kv (n_head when every layer is 0).
std::vector<uint8_t> zero_kv_head_layers(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  const std::string k = r.key("attention.head_count_kv");
  const GGUFValue* v = f.find(k);
  std::vector<int64_t> heads(static_cast<size_t>(c.n_layer), c.n_head);
  if (v && v->type == GGUFType::ARRAY) {
    heads = f.get_int_array(k);
    if (heads.size() != static_cast<size_t>(c.n_layer))
      throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries for {} layers", f.path(), k, heads.size(),
                  c.n_layer);
  } else if (v) {
    heads.assign(static_cast<size_t>(c.n_layer), r.get("attention.head_count_kv", c.n_head));
  }
  std::vector<uint8_t> flags(static_cast<size_t>(c.n_layer), 0);
  int64_t attn = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    const int64_t h = heads[l];
    if (h < 0 || h > 1024)  // model_config.cpp's head limit
      throw_error(ErrorKind::Format, "{}: metadata key '{}' value {} (layer {}) is out of range", f.path(), k, h, l);
    if (h == 0) {
      flags[l] = 1;
    } else if (attn != 0 && h != attn) {
      throw_error(ErrorKind::Unsupported,
                  "{}: metadata key '{}' varies between attention layers ({} vs {}); specmoe needs it uniform",
                  f.path(), k, attn, h);
    } else {
      attn = h;
    }
  }
  c.n_head_kv = attn != 0 ? static_cast<int>(attn) : c.n_head;
  return flags;
}

// The Mamba-2 / gated DeltaNet sizes (ssm.*), all required.
void read_ssm_sizes(const Reader& r, ModelConfig& c) {
  c.ssm_d_conv = r.get("ssm.conv_kernel", std::nullopt);
  c.ssm_d_inner = r.get("ssm.inner_size", std::nullopt);
  c.ssm_d_state = r.get("ssm.state_size", std::nullopt);
  c.ssm_dt_rank = r.get("ssm.time_step_rank", std::nullopt);
  c.ssm_n_group = r.get("ssm.group_count", std::nullopt);
}

}  // namespace

void read_lfm2_layers(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  c.conv_layers = zero_kv_head_layers(r, c);
  c.shortconv_l_cache = r.get("shortconv.l_cache", std::nullopt);
  if (c.shortconv_l_cache < 2 || c.shortconv_l_cache > kMaxShortConvTaps)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be 2 to {})", f.path(), r.key("shortconv.l_cache"),
                c.shortconv_l_cache, kMaxShortConvTaps);
}

// qwen35, qwen35moe (Qwen3.5; llama.cpp src/models/qwen35.cpp): the gated DeltaNet sizes, all
// required, and which layers are recurrent: attention.recurrent_layers (bools or ints per layer)
// when the file has it, else every layer but each full_attention_interval-th (default 4).
void read_qwen35(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  c.attn_output_gate = true;
  read_ssm_sizes(r, c);
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  const std::string k = r.key("attention.recurrent_layers");
  if (const GGUFValue* v = f.find(k)) {
    // The converter writes BOOLs (gguf-py's add_recurrent_layers); integers are read too.
    if (v->type != GGUFType::ARRAY || (v->elem_type != GGUFType::BOOL && f.get_int_array(k).empty()))
      throw_error(ErrorKind::Format, "{}: metadata key '{}' is not an array of BOOL or integers", f.path(), k);
    if (v->items.size() < static_cast<size_t>(c.n_layer))  // MTP layers may follow the model's own
      throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries for {} layers", f.path(), k, v->items.size(),
                  c.n_layer);
    for (int l = 0; l < c.n_layer; ++l) c.recurrent_layers[l] = v->items[l].i != 0;
  } else {
    const int interval = r.get("full_attention_interval", 4);
    if (interval < 1 || interval > 1024)
      throw_error(ErrorKind::Format, "{}: {} is {} (must be 1 to 1024)", f.path(), r.key("full_attention_interval"),
                  interval);
    for (int l = 0; l < c.n_layer; ++l) c.recurrent_layers[l] = (l + 1) % interval != 0;
  }
}

// eagle3 (llama.cpp src/models/eagle3.cpp load_arch_hparams): one decoder layer, the target's
// layers it reads (target_layers, exactly 3, as llama.cpp requires; each at most the target's layer
// count, checked against the target at Model::bind_target) and their width (target_hidden_size),
// the optional norm_before_residual and norm_before_fc, and the head's own draft vocabulary from
// d2t's length (an I64 tensor of target ids, one per draft id).
void read_eagle3(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  constexpr int kMaxLayers = 1024, kMaxEmbd = 65536, kMaxVocab = 1 << 22;  // ModelConfig's limits
  if (c.n_layer != 1)
    throw_error(ErrorKind::Format, "{}: an EAGLE-3 head has one decoder layer, {} says {}", f.path(), r.key("block_count"),
                c.n_layer);
  const std::string k = r.key("target_layers");
  if (!f.has(k)) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing (the target layers an EAGLE-3 head reads)", f.path(), k);
  const std::vector<int64_t> ids = f.get_int_array(k);
  if (ids.size() != 3)
    throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries; an EAGLE-3 head reads 3 target layers",
                f.path(), k, ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > kMaxLayers)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' holds layer {} (must be 0 to {})", f.path(), k, id, kMaxLayers);
    c.head_target_layers.push_back(static_cast<int>(id));
  }
  c.head_target_width = r.get("target_hidden_size", std::nullopt);
  if (c.head_target_width < 1 || c.head_target_width > kMaxEmbd)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be 1 to {})", f.path(), r.key("target_hidden_size"),
                c.head_target_width, kMaxEmbd);
  c.eagle3_norm_before_residual = f.get_bool(r.key("norm_before_residual"), false);
  c.eagle3_norm_before_fc = f.get_bool(r.key("norm_before_fc"), false);
  if (const GGUFTensorInfo* d2t = f.find_tensor("d2t")) {
    if (d2t->ne.size() != 1 || d2t->ne[0] < 1 || d2t->ne[0] > kMaxVocab)
      throw_error(ErrorKind::Format, "{}: tensor 'd2t' is not a vector of 1 to {} draft ids", f.path(), kMaxVocab);
    c.n_draft_vocab = static_cast<int>(d2t->ne[0]);
  }
}

// dflash (llama.cpp src/models/dflash.cpp load_arch_hparams, conversion/qwen.py DFlashModel): a
// Qwen3-style decoder; the target layers it reads (target_layers, the converter's extract ids: each
// HF target_layer_id + 1, so the input row of that layer), each n_embd wide (llama.cpp fuses
// target_layers x n_embd with fc), block_size (16 when absent) and attention.causal. The variants
// of the same architecture name that specmoe does not run are refused by name: DFlash2's selector
// and convolutions, DSpark's Markov head, the DeepSeek-V4 backbone, sliding windows and the
// optional scales and norms of other backbones.
void read_dflash(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  constexpr int kMaxLayers = 1024;
  const std::string k = r.key("target_layers");
  if (!f.has(k)) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing (the target layers a DFlash draft reads)", f.path(), k);
  const std::vector<int64_t> ids = f.get_int_array(k);
  if (ids.empty() || ids.size() > 64)
    throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries (must be 1 to 64)", f.path(), k, ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > kMaxLayers)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' holds layer {} (must be 0 to {})", f.path(), k, id, kMaxLayers);
    c.head_target_layers.push_back(static_cast<int>(id));
  }
  c.head_target_width = c.n_embd;
  c.dflash_block_size = r.get("block_size", 16);
  if (c.dflash_block_size < 2 || c.dflash_block_size > 1024)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be 2 to 1024: the last token and at least one to draft)", f.path(),
                r.key("block_size"), c.dflash_block_size);
  c.dflash_causal = f.get_bool(r.key("attention.causal"), false);
  if (f.has(r.key("hidden_activation"))) {
    const std::string act = f.get_string(r.key("hidden_activation"));
    if (act != "silu")
      throw_error(ErrorKind::Unsupported, "{}: {} '{}' is unsupported (a DFlash draft of specmoe uses silu)", f.path(),
                  r.key("hidden_activation"), act);
  }
  for (const char* key : {"hyper_connection.count", "attention.sliding_window", "embedding_scale", "attention.scale",
                          "attention.value_scale", "logit_scale", "final_logit_softcapping", "conv_kernel_size",
                          "selector_rank"})
    if (f.has(r.key(key)))
      throw_error(ErrorKind::Unsupported, "{}: metadata key '{}': this DFlash variant is unsupported (specmoe runs "
                  "DFlash's Qwen3-style drafts without scales, windows, sections or selectors)", f.path(), r.key(key));
  for (const char* name : {"markov_w1.weight", "selector_hidden.weight", "blk.0.attn_sinks.weight",
                           "blk.0.attn_post_norm.weight", "blk.0.ffn_post_norm.weight", "blk.0.layer_output_scale.weight",
                           "rope_freqs.weight"})
    if (f.find_tensor(name))
      throw_error(ErrorKind::Unsupported, "{}: tensor '{}': this DFlash variant is unsupported (specmoe runs DFlash's "
                  "Qwen3-style drafts: no DSpark Markov head, DFlash2 selector, sinks, post-norms or scales)", f.path(), name);
  // A draft for an M-RoPE target (Qwen3.5) carries sections [n_rot / 2, 0, 0, 0]: every pair turns by
  // the temporal position, which for text is the position, i.e. split-halves RoPE. Other sections
  // would need the target's multimodal positions.
  if (const std::string k = r.key("rope.dimension_sections"); f.has(k)) {
    const std::vector<int64_t> sections = f.get_int_array(k);
    for (size_t i = 1; i < sections.size(); ++i)
      if (sections[i] != 0)
        throw_error(ErrorKind::Unsupported, "{}: {} [{}]: a DFlash draft roping more than the temporal section is "
                    "unsupported", f.path(), k, fmt::join(sections, ", "));
  }
  if (!f.find_tensor("blk.0.attn_v.weight"))
    throw_error(ErrorKind::Unsupported, "{}: a DFlash draft without attn_v (keys shared as values) is unsupported", f.path());
  if (const GGUFTensorInfo* d2t = f.find_tensor("d2t")) {
    if (d2t->ne.size() != 1 || d2t->ne[0] < 1 || d2t->ne[0] > (1 << 22))
      throw_error(ErrorKind::Format, "{}: tensor 'd2t' is not a vector of 1 to {} draft ids", f.path(), 1 << 22);
    c.n_draft_vocab = static_cast<int>(d2t->ne[0]);
  }
}

// granitehybrid (Granite 4.0 H; llama.cpp src/models/granite-hybrid.cpp): a layer is a Mamba-2
// layer when its attention.head_count_kv is 0 (one value per layer, or one for all, which makes
// every layer attention or every one Mamba-2); the Mamba-2 sizes, all required.
void read_granite_hybrid(const Reader& r, ModelConfig& c) {
  c.recurrent_mixer = RecurrentMixer::Mamba2;
  c.recurrent_layers = zero_kv_head_layers(r, c);
  read_ssm_sizes(r, c);
}

// mamba2 (Mamba-2, Mamba-Codestral; llama.cpp src/models/mamba.cpp with build_mamba2_layer): every
// layer a Mamba-2 mixer under attn_norm, no feed-forward, no attention (head_count 0 in the file:
// one placeholder head, never used); the Mamba-2 sizes, all required.
void read_mamba2(const Reader& r, ModelConfig& c) {
  c.n_head = c.n_head_kv = 1;
  c.recurrent_mixer = RecurrentMixer::Mamba2;
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 1);
  c.ffn_free_layers.assign(static_cast<size_t>(c.n_layer), 1);
  read_ssm_sizes(r, c);
}

// nemotron_h (Nemotron-H, Nemotron Nano 2; llama.cpp src/models/nemotron-h.cpp): every layer one
// sublayer under its attn_norm, by attention.head_count_kv and feed_forward_length per layer: an
// MLP where feed_forward_length > 0 (squared ReLU, ungated), attention where head_count_kv > 0
// (no RoPE), else a Mamba-2 mixer. The RMS epsilon falls back to layer_norm_epsilon.
void read_nemotron_h(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  const std::vector<uint8_t> no_attention = zero_kv_head_layers(r, c);
  const std::string k = r.key("feed_forward_length");
  std::vector<int64_t> ff(static_cast<size_t>(c.n_layer), 0);
  if (const GGUFValue* v = f.find(k); v && v->type == GGUFType::ARRAY) {
    ff = f.get_int_array(k);
    if (ff.size() < static_cast<size_t>(c.n_layer))
      throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries for {} layers", f.path(), k, ff.size(),
                  c.n_layer);
  } else if (v) {
    ff.assign(static_cast<size_t>(c.n_layer), r.get("feed_forward_length", 0));
  }
  c.n_ff = 0;
  c.recurrent_mixer = RecurrentMixer::Mamba2;
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  c.ffn_free_layers.assign(static_cast<size_t>(c.n_layer), 1);
  c.mixer_free_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int l = 0; l < c.n_layer; ++l) {
    if (ff[l] < 0 || ff[l] > (1 << 20))
      throw_error(ErrorKind::Format, "{}: metadata key '{}' value {} (layer {}) is out of range", f.path(), k, ff[l], l);
    if (ff[l] > 0) {
      if (c.n_ff != 0 && ff[l] != c.n_ff)
        throw_error(ErrorKind::Unsupported, "{}: metadata key '{}' varies between MLP layers ({} vs {}); specmoe needs "
                    "it uniform", f.path(), k, c.n_ff, ff[l]);
      c.n_ff = static_cast<int>(ff[l]);
      c.ffn_free_layers[l] = 0;
      c.mixer_free_layers[l] = 1;
    } else if (no_attention[l]) {
      c.recurrent_layers[l] = 1;
    }
  }
  read_ssm_sizes(r, c);
}

// lfm2 with attention.sliding_window > 0: every attention layer attends through the window (the
// convolution layers have none), rotated as without one (llama.cpp's lfm2 graph passes the global
// base and scale to every layer).
void read_lfm2_windows(const Reader& r, ModelConfig& c) {
  c.n_swa = r.get("attention.sliding_window", 0);
  if (c.n_swa <= 0) {
    c.n_swa = 0;
    return;
  }
  c.swa_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int l = 0; l < c.n_layer; ++l) c.swa_layers[l] = !c.is_conv_layer(l);
  c.rope_freq_base_swa = c.rope_freq_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
}

// afmoe (Arcee's Trinity; src/models/afmoe.cpp): the embedding times sqrt(n_embd), pre- and
// post-norms around both sublayers, QK-norm per head, an attention output gate of its own
// (attn_gate: sigmoid(attn_gate x) times the attention's output, before attn_output), split-halves
// RoPE but on every fourth layer (llama.cpp's default n_no_rope_layer_step of 4, which afmoe keeps);
// windows of attention.sliding_window (0 or absent: none) on the layers
// attention.sliding_window_pattern marks (default 3 of every 4), rotated with rope.freq_base_swa
// (default the global base) and the global scale.
void read_afmoe(const Reader& r, ModelConfig& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.no_rope_step = 4;
  c.n_swa = r.get("attention.sliding_window", 0);
  if (c.n_swa > 0) {
    read_swa_layers(r, c, 4);
    c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
    c.rope_freq_scale_swa = c.rope_freq_scale;
  } else {
    c.n_swa = 0;
  }
}

// The windows of maple and spark2_5: attention.sliding_window (required) on the layers
// attention.sliding_window_pattern flags (required, an array: llama.cpp's get_arr), rotating with
// rope.freq_base_swa (default the global base), the global scale and rope.dimension_count_swa dims
// (default rope.dimension_count: llama.cpp's n_rot(il)).
void read_flagged_windows(const Reader& r, ModelConfig& c) {
  c.n_swa = r.get("attention.sliding_window", std::nullopt);
  const std::string pk = r.key("attention.sliding_window_pattern");
  const GGUFValue* v = r.f.find(pk);
  if (v == nullptr || v->type != GGUFType::ARRAY)
    throw_error(ErrorKind::Format, "{}: metadata key '{}' {}", r.f.path(), pk,
                v == nullptr ? "is missing" : "must be an array of one flag per layer");
  read_swa_layers(r, c, 0);
  c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
  c.rope_freq_scale_swa = c.rope_freq_scale;
  c.rope_dims_swa = r.get("rope.dimension_count_swa", 0);
}

// maple (src/models/maple.cpp): qwen3's attention (per-head QK-norm, split-halves RoPE) on windows of
// attention.sliding_window (required) on the layers attention.sliding_window_pattern marks (an
// array, required), and RoPE on those layers only (rope.freq_base_swa, default the global base, and
// the global scale); the global layers have none. Experts in every layer, softmax, renormalised,
// unscaled, whose SwiGLU is clamped at swiglu_clamp_exp (required: a value or one per layer).
void read_maple(const Reader& r, ModelConfig& c) {
  read_flagged_windows(r, c);
  c.nope_global = true;
  const std::vector<double> limits = read_per_layer_floats(r, r.key("swiglu_clamp_exp"), c.n_layer);
  c.swiglu_clamp.assign(limits.begin(), limits.end());
  for (size_t l = 0; l < limits.size(); ++l)
    if (limits[l] < 0.0)
      throw_error(ErrorKind::Format, "{}: {}: layer {}'s limit {} is negative", r.f.path(), r.key("swiglu_clamp_exp"),
                  l, limits[l]);
}

// spark2_5 (Spark-X 2.5; src/models/spark2-5.cpp): llama's block with split-halves RoPE on every
// layer, windows of attention.sliding_window (required) on the layers
// attention.sliding_window_pattern flags (required, an array) rotating with rope.freq_base_swa
// (default the global base), the global scale and rope.dimension_count_swa dims (default
// rope.dimension_count); a sigmoid gate per head from attn_gate (n_embd -> n_head) on the
// attention's output before attn_output; a GELU-gated MLP.
void read_spark25(const Reader& r, ModelConfig& c) {
  read_flagged_windows(r, c);
  c.attn_gate_per_head = true;
}

std::vector<double> read_per_layer_floats(const Reader& r, const std::string& key, int n_layer) {
  std::vector<double> v;
  const GGUFValue* value = r.f.find(key);
  if (value != nullptr && value->type == GGUFType::ARRAY)
    v = r.f.get_float_array(key);
  else
    v.assign(static_cast<size_t>(std::max(n_layer, 0)), r.f.get_float(key));  // a scalar, or missing: its error
  if (v.size() != static_cast<size_t>(n_layer))
    throw_error(ErrorKind::Format, "{}: {}: {} values for {} layers", r.f.path(), key, v.size(), n_layer);
  for (double x : v)
    if (!std::isfinite(x) || std::fabs(x) > 1e6)
      throw_error(ErrorKind::Format, "{}: {}: value {} out of range", r.f.path(), key, x);
  return v;
}

// llama4 (Llama 4 Scout and Maverick; src/models/llama4.cpp), without attention.sliding_window or
// with a nonzero one (whose value llama.cpp ignores): chunked attention of 8192 positions on the
// layers attention.sliding_window_pattern marks local (default: 3 of every 4, the fourth global),
// rotated with rope.freq_base_swa when the file has it (else the global base) and the global
// scale; no RoPE on every fourth layer ((l + 1) % 4 == 0), whose queries take the attention
// temperature log(floor((p + 1) / 8192) + 1) * 0.1 + 1. These constants are llama.cpp's, not the
// file's. A file with attention.sliding_window 0 is refused: llama.cpp then runs its last layer
// without RoPE and with a temperature of scale 0, which its graph input aborts on.
void read_llama4(const Reader& r, ModelConfig& c) {
  if (r.f.has(r.key("attention.sliding_window")) && r.get("attention.sliding_window", std::nullopt) == 0)
    throw_error(ErrorKind::Unsupported,
                "{}: {} is 0: llama4 without chunked attention is not supported (llama.cpp 2026-10 aborts on it too)",
                r.f.path(), r.key("attention.sliding_window"));
  c.n_swa = 8192;
  c.swa_chunked = true;
  read_swa_layers(r, c, 4);
  c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
  c.rope_freq_scale_swa = c.rope_freq_scale;
  c.no_rope_step = 4;
  c.attn_temp_scale = 0.1f;
  c.attn_temp_floor = 8192;
  c.attn_temp_offset = 1.0f;
  c.attn_temp_nope_only = true;
}

// smallthinker (PowerInfer's SmallThinker, src/models/smallthinker.cpp): with
// attention.sliding_window > 0, windows of 4096 positions (llama.cpp's loader sets that whatever
// the key says) on every layer but each fourth from layer 0 (attention.sliding_window_pattern, a
// period or one flag per layer, dense first), the local layers rotating with rope.freq_base_swa
// (default the global base), and no RoPE on layers 0, 4, 8, ... (its n_no_rope_layer_step 4; a
// model of exactly 4 layers rotates them all, as llama.cpp's test `step == n_layer || il % step`
// has it); without a window every layer rotates. The router reads the layer's input.
void read_smallthinker(const Reader& r, ModelConfig& c) {
  c.router_reads_layer_input = true;
  c.n_swa = r.get("attention.sliding_window", 0);
  if (c.n_swa <= 0) {
    c.n_swa = 0;
    return;
  }
  c.n_swa = 4096;
  read_swa_layers(r, c, 4, true);
  c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
  c.rope_freq_scale_swa = c.rope_freq_scale;
  c.no_rope_step_first = c.n_layer == 4 ? 0 : 4;
}

// exaone-moe (K-EXAONE, src/models/exaone-moe.cpp): EXAONE 4.0 32B's attention under pre-norms:
// windows of attention.sliding_window (required) on every layer but each fourth by default (the
// pattern as per-layer flags or a period), the local layers rotating with rope.freq_base_swa
// (default: the global base) and the global scaling, the global ones without RoPE.
void read_exaone_moe(const Reader& r, ModelConfig& c) {
  c.n_swa = r.get("attention.sliding_window", std::nullopt);
  if (c.n_swa <= 0)
    throw_error(ErrorKind::Format, "{}: {} is {}", r.f.path(), r.key("attention.sliding_window"), c.n_swa);
  read_swa_layers(r, c, 4);
  c.nope_global = true;
  c.rope_freq_base_swa = r.get_float("rope.freq_base_swa", c.rope_freq_base);
  c.rope_freq_scale_swa = c.rope_freq_scale;
}

void read_cohere(const Reader& r, ModelConfig& c) {
  const float mult = c.arch == Arch::Cohere2 ? r.get_float("logit_scale", std::nullopt) : r.get_float("logit_scale", 0.0f);
  c.logit_mult = mult == 0.0f ? 1.0f : mult;
  if (c.arch == Arch::CommandR && c.n_layer >= 64)
    throw_error(ErrorKind::Unsupported,
                "{}: command-r with {} layers (Command R+: per-head q/k LayerNorms with their own weights) is not "
                "supported",
                r.f.path(), c.n_layer);
  if (c.arch != Arch::Cohere2) return;
  c.n_swa = r.get("attention.sliding_window", std::nullopt);
  if (c.n_swa <= 0)
    throw_error(ErrorKind::Format, "{}: {} is {}: cohere2's local layers need a window", r.f.path(),
                r.key("attention.sliding_window"), c.n_swa);
  read_swa_layers(r, c, 4);
  c.nope_global = true;
  c.rope_freq_base_swa = c.rope_freq_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
}

// M-RoPE (rope.dimension_sections: the pairs of the temporal, height, width and fourth sections).
// A text token has one position in the first three sections and 0 in the fourth, so on text the
// pairs of the first three rotate as split-halves RoPE does and those of the fourth keep their
// values. Which pair is in which section: pair i is at s = i mod (the sections' sum); in order
// (qwen2vl, glm4) the sections follow one another, interleaved (qwen3vl, llama.cpp's imrope) t
// takes s = 0 mod 3 below 3 s0, h 1 mod 3 below 3 s1, w 2 mod 3 below 3 s2, the rest the fourth.
//   qwen2vl: required; a fourth section with pairs is refused.
//   qwen3vl, qwen3vlmoe: required; the pairs left to the fourth keep their values (rope_still_pairs).
//   glm4, glm4moe: optional; with pairs in the first two (llama.cpp's use_mrope: GLM-4.1V, GLM-4.5V)
//     split halves, a fourth section with pairs refused; else the architecture's own pairs (glm4
//     adjacent, glm4moe split halves), the key unused.
//   hunyuan-dense: sections with pairs in the first two (Hunyuan-VL's) are refused.
void read_mrope(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  const std::string k = r.key("rope.dimension_sections");
  const bool interleaved =
      c.arch == Arch::Qwen3Vl || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe;
  const bool required = c.arch == Arch::Qwen2Vl || interleaved;
  if (!f.has(k)) {
    if (required) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", f.path(), k);
    return;
  }
  std::vector<int64_t> s = f.get_int_array(k);
  if (s.empty() || s.size() > 4)
    throw_error(ErrorKind::Format, "{}: metadata key '{}' has {} entries, expected 4", f.path(), k, s.size());
  s.resize(4, 0);  // llama.cpp reads up to 4 and leaves the rest 0
  int64_t sum = 0;
  for (int64_t v : s) {
    if (v < 0 || v > 4096) throw_error(ErrorKind::Format, "{}: metadata key '{}' holds {}", f.path(), k, v);
    sum += v;
  }
  const bool mrope = s[0] > 0 && s[1] > 0;
  if (c.arch == Arch::HunyuanDense) {
    if (mrope)
      throw_error(ErrorKind::Unsupported, "{}: {}: hunyuan-dense with M-RoPE sections is not supported", f.path(), k);
    return;
  }
  if ((c.arch == Arch::Glm4 || c.arch == Arch::Glm4Moe) && !mrope) return;
  if (!interleaved) {
    if (s[3] != 0)
      throw_error(ErrorKind::Unsupported,
                  "{}: {} gives the fourth M-RoPE section {} pairs (text positions there are 0); only 0 is supported",
                  f.path(), k, s[3]);
    c.rope_style = RopeStyle::SplitHalves;
    return;
  }
  // The per-pair table below is sized by the rotated dims: checked here, before
  // ModelConfig::validate, so that a huge rope.dimension_count is an error and not a long loop.
  constexpr int kMaxHeadDim = 4096;  // ModelConfig's limit
  if (c.rope_dims < 2 || c.rope_dims > kMaxHeadDim)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be 2 to {})", f.path(), r.key("rope.dimension_count"),
                c.rope_dims, kMaxHeadDim);
  if (sum <= 0 || sum > c.rope_dims)  // ggml's bound: at most the rotated dims
    throw_error(ErrorKind::Format, "{}: {} sums to {} for {} RoPE dims", f.path(), k, sum, c.rope_dims);
  const int pairs = c.rope_dims / 2;
  std::vector<uint8_t> still(static_cast<size_t>(pairs), 0);
  bool any = false;
  for (int i = 0; i < pairs; ++i) {
    const int64_t sec = i % sum;
    const bool t = sec % 3 == 0 && sec < 3 * s[0], h = sec % 3 == 1 && sec < 3 * s[1],
               w = sec % 3 == 2 && sec < 3 * s[2];
    still[i] = !(t || h || w);
    any = any || still[i];
  }
  if (any) c.rope_still_pairs = std::move(still);
}

// granite and granitemoe (src/models/granite.cpp, granite-moe.cpp): logit_scale (required: the
// logits are divided by it), residual_scale (each sublayer's output times it), embedding_scale
// (the token embedding times it) and attention.scale (the q.k scale); absent or 0 = none, as
// llama.cpp's zero defaults mean.
// minicpm (llama.cpp runs it with granite's graph, minicpm.cpp): the same three multipliers with
// MiniCPM's defaults for files without the keys (embedding 12, residual 1.4 / sqrt(n_layer),
// logit_scale 256 / n_embd, the logits then times 1 / it as granite's), no attention.scale.
void read_granite(const Reader& r, ModelConfig& c) {
  const bool minicpm = c.arch == Arch::MiniCpm, hybrid = c.arch == Arch::GraniteHybrid;
  c.logit_scale = minicpm  ? r.get_float("logit_scale", 256.0f / static_cast<float>(c.n_embd))
                  : hybrid ? r.get_float("logit_scale", 0.0f)  // optional there (0: logits unscaled)
                           : r.get_float("logit_scale", std::nullopt);
  if (hybrid && c.logit_scale == 0.0f) c.logit_scale = 1.0f;
  const float residual =
      r.get_float("residual_scale", minicpm ? 1.4f / std::sqrt(static_cast<float>(c.n_layer)) : 0.0f);
  const float embedding = r.get_float("embedding_scale", minicpm ? 12.0f : 0.0f);
  c.residual_scale = residual == 0.0f ? 1.0f : residual;
  c.embd_scale = embedding == 0.0f ? 1.0f : embedding;
  if (!minicpm) c.attn_scale = r.get_float("attention.scale", 0.0f);
  // granite (dense) reads rope.scaling.finetuned as a switch for RoPE (default on): false = no
  // layer rotates (llama.cpp's rope_pattern all 0; granitemoe and minicpm always rotate).
  if ((c.arch == Arch::Granite || hybrid) && !r.f.get_bool(r.key("rope.scaling.finetuned"), true)) c.no_rope_step = 1;
}

// The experts: counts, widths, the router's gating, normalisation, scale and groups, the leading
// dense layers and shared experts, as each architecture's llama.cpp loader and graph have them.
//   expert width: qwen2moe, qwen3moe, qwen3vlmoe: expert_feed_forward_length, else
//     feed_forward_length / expert_used_count; deepseek, deepseek2, dots1, glm4moe, ernie4_5-moe,
//     bailingmoe2: expert_feed_forward_length (required); llama (Mixtral), olmoe: feed_forward_length
//     (llama.cpp binds the expert tensors with n_ff there)
//   minimax-m2: experts of feed_forward_length (expert_feed_forward_length required, unused),
//     expert_gating_func required, exp_probs_b required, renormalised, unscaled
//   hunyuan-moe: experts of feed_forward_length (expert_feed_forward_length required, unused), one
//     ungated shared expert of expert_shared_feed_forward_length (else n_ff); softmax, renormalised,
//     unscaled whatever the keys say
//   shared expert: qwen2moe expert_shared_feed_forward_length (else n_ff), gated by
//     ffn_gate_inp_shexp; the others ungated: deepseek, deepseek2, dots1, glm4moe expert_shared_count
//     experts of the expert width; bailingmoe2 expert_shared_count of expert_shared_feed_forward_length
//     (else the expert width); ernie4_5-moe and granitemoe one of expert_shared_feed_forward_length
//     (absent: none)
//   leading dense layers (leading_dense_block_count) for the DeepSeek-style ones; ernie4_5-moe also
//     interleave_moe_layer_step (required)
//   renormalisation (expert_weights_norm): llama.cpp's defaults, Mixtral and Qwen3-MoE yes, Qwen-MoE,
//     OLMoE, DeepSeek-V2, dots1, GLM-4.5 and Ling 2.0 no; a file's key is honoured except where
//     llama.cpp's graph fixes it (deepseek no; qwen3vlmoe and ernie4_5-moe yes)
//   gating (expert_gating_func): 0 or absent = softmax, glm4moe sigmoid; dots1 and bailingmoe2
//     require the key; deepseek, qwen3vlmoe and ernie4_5-moe are softmax whatever it says
//   expert_weights_scale: 0 or absent = 1 (qwen3vlmoe and ernie4_5-moe never scale); groups:
//     expert_group_count / _used_count (any architecture, any gating)
void read_experts(const Reader& r, ModelConfig& c) {
  const GGUFFile& file = r.f;
  c.n_expert = r.get("expert_count", 0);
  c.n_expert_used = r.get("expert_used_count", 0);
  if (c.arch == Arch::HunyuanDense && c.n_expert <= 1) c.n_expert = c.n_expert_used = 0;  // llama.cpp: dense
  const int per_token = c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0;
  // n_expert_shared experts of `width` as one SwiGLU: a product the file's counts must not overflow.
  const auto shared_experts = [&](int width) {
    c.n_expert_shared = r.get("expert_shared_count", std::nullopt);
    const int64_t shared = int64_t{c.n_expert_shared} * width;
    if (c.n_expert_shared < 0 || shared > std::numeric_limits<int>::max())
      throw_error(ErrorKind::Format, "{}: {} = {} shared experts of {} rows is out of range", file.path(),
                  r.key("expert_shared_count"), c.n_expert_shared, width);
    c.n_ff_shared_expert = static_cast<int>(shared);
  };
  switch (c.arch) {
    case Arch::Qwen2Moe:
      c.n_ff_expert = r.get("expert_feed_forward_length", per_token);
      c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", c.n_ff);
      break;
    case Arch::Qwen3Moe:
    case Arch::Qwen3VlMoe:
      c.n_ff_expert = r.get("expert_feed_forward_length", per_token);
      break;
    case Arch::BailingMoe:
      // Ling (v1): experts in every layer (llama.cpp reads leading_dense_block_count and its graph
      // ignores it) and expert_shared_count ungated shared experts of the expert width; softmax,
      // expert_weights_norm (default no) and expert_weights_scale as the keys say.
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      shared_experts(c.n_ff_expert);
      break;
    case Arch::Mellum:  // required, as llama.cpp's loader reads it; softmax, renormalised, unscaled
    case Arch::Maple:   // the same (maple's graph passes a softmax, renormalised, scale 1)
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      break;
    case Arch::Qwen35Moe:
    case Arch::Qwen3Next:
      // Qwen3.5-MoE and Qwen3-Next: experts in every layer and qwen2moe's shared expert under its sigmoid gate
      // (required, as llama.cpp binds them); softmax, renormalised, unscaled (fixed by its graph).
      c.n_ff_expert = r.get("expert_feed_forward_length", per_token);
      c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", c.n_ff);
      break;
    case Arch::GptOss:
      // Experts with biases and the clamped SwiGLU; top-k by the biased logits, weights the softmax
      // of the k selected (llama.cpp's SOFTMAX_WEIGHT, which is the renormalised softmax top-k).
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      break;
    case Arch::GraniteMoe:
    case Arch::GraniteHybrid:
      // Experts of feed_forward_length; Granite MoE Shared's one ungated shared expert.
      c.n_ff_expert = c.n_ff;
      c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", 0);
      break;
    case Arch::Deepseek2:
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      if (c.n_expert > 0) {
        c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
        shared_experts(c.n_ff_expert);
      }
      break;
    case Arch::Deepseek:
    case Arch::Dots1:
    case Arch::Glm4Moe:
    case Arch::BailingMoe2:
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      shared_experts(c.arch == Arch::BailingMoe2 ? r.get("expert_shared_feed_forward_length", c.n_ff_expert)
                                                 : c.n_ff_expert);
      break;
    case Arch::MinimaxM2:
    case Arch::HunyuanMoe:
      // MiniMax-M2, Hunyuan-A13B: llama.cpp requires expert_feed_forward_length but binds the
      // experts with feed_forward_length; Hunyuan's one ungated shared expert of
      // expert_shared_feed_forward_length (else feed_forward_length) in every layer.
      (void)r.get("expert_feed_forward_length", std::nullopt);
      c.n_ff_expert = c.n_ff;
      if (c.arch == Arch::HunyuanMoe) c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", c.n_ff);
      break;
    case Arch::ExaoneMoe:
      // K-EXAONE: leading dense layers, experts of expert_feed_forward_length (required), one
      // ungated shared expert of expert_shared_feed_forward_length (default: the expert width) in
      // every MoE layer.
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", c.n_ff_expert);
      break;
    case Arch::SmallThinker:
      // SmallThinker: experts of expert_feed_forward_length (required here: llama.cpp would build
      // empty experts without it) in every layer, no shared expert, no selection bias; the gating
      // key required (llama.cpp aborts without one); renormalised and unscaled.
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      break;
    case Arch::Lfm2Moe:
      // LFM2-MoE: leading dense layers, experts of expert_feed_forward_length (required), no
      // shared expert; the gating key required, the top-k weights always renormalised, never scaled.
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      break;
    case Arch::NemotronH:
      // nemotron_h_moe (Nemotron 3 Nano): experts in the MLP layers, ungated squared ReLUs of
      // expert_feed_forward_length (default: the layer's feed_forward_length / expert_used_count),
      // and one ungated squared-ReLU shared expert of expert_shared_feed_forward_length (required:
      // llama.cpp sizes the tensors by it); sigmoid scores with the exp_probs_b selection bias
      // (required), expert_weights_norm (default no) and expert_weights_scale as the keys say.
      // Nemotron 3 Super's latent experts (moe_latent_size, ffn_latent_down / _up) are refused.
      if (c.n_expert > 0) {
        if (r.get("moe_latent_size", 0) > 0 || file.find_tensor("blk.0.ffn_latent_down.weight") ||
            file.find_tensor("blk.1.ffn_latent_down.weight"))
          throw_error(ErrorKind::Unsupported, "{}: {}: latent experts (Nemotron 3 Super's ffn_latent_down / "
                      "ffn_latent_up) are not supported", file.path(), r.key("moe_latent_size"));
        c.n_ff_expert = r.get("expert_feed_forward_length", per_token);
        c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", std::nullopt);
      }
      break;
    case Arch::Afmoe:
      // afmoe: leading dense layers, expert_feed_forward_length experts, expert_shared_count
      // (required) ungated shared experts of the expert width; sigmoid unless expert_gating_func
      // says otherwise, with the required exp_probs_b; expert_weights_norm (default no) and
      // expert_weights_scale as the keys say.
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      shared_experts(c.n_ff_expert);
      break;
    case Arch::Llama4:
      // Llama 4: experts in every interleave_moe_layer_step-th layer (required; Scout 1, Maverick
      // 2), dense SwiGLUs of feed_forward_length between, one ungated shared expert of the expert
      // width beside the routed ones; top-k of the logits, whose sigmoids (neither renormalised nor
      // scaled) multiply each chosen expert's input (MoEWeights::weight_inputs). QK L2 norm unless
      // the model has 128 experts (llama.cpp's use_kq_norm is off for Maverick).
      c.n_moe_layer_step = r.get("interleave_moe_layer_step", std::nullopt);
      if (c.n_moe_layer_step < 1 || c.n_moe_layer_step > c.n_layer)
        throw_error(ErrorKind::Format, "{}: {} is {} for {} layers", file.path(), r.key("interleave_moe_layer_step"),
                    c.n_moe_layer_step, c.n_layer);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      c.n_ff_shared_expert = c.n_ff_expert;
      c.qk_l2_norm = c.n_expert != 128;
      break;
    case Arch::Ernie45Moe:
      c.n_layer_dense_lead = r.get("leading_dense_block_count", 0);
      c.n_moe_layer_step = r.get("interleave_moe_layer_step", std::nullopt);
      if (c.n_moe_layer_step < 1 || c.n_moe_layer_step > c.n_layer)
        throw_error(ErrorKind::Format, "{}: {} is {} for {} layers", file.path(), r.key("interleave_moe_layer_step"),
                    c.n_moe_layer_step, c.n_layer);
      c.n_ff_expert = r.get("expert_feed_forward_length", std::nullopt);
      c.n_ff_shared_expert = r.get("expert_shared_feed_forward_length", 0);
      break;
    default:
      c.n_ff_expert = c.n_ff;
  }
  // Fixed by llama.cpp's graph for these, whatever the file's keys say.
  // dbrx and phimoe: softmax, renormalised, unscaled (their loaders read none of the router keys).
  const bool fixed_softmax = c.arch == Arch::Deepseek || c.arch == Arch::BailingMoe || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::Ernie45Moe ||
                             c.arch == Arch::HunyuanMoe || c.arch == Arch::GptOss || c.arch == Arch::Dbrx ||
                             c.arch == Arch::PhiMoe || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next || c.arch == Arch::Mellum || c.arch == Arch::Maple || c.arch == Arch::GraniteHybrid;
  const bool raw = c.arch == Arch::Llama4 || c.arch == Arch::NemotronH || c.arch == Arch::Afmoe || c.arch == Arch::Qwen2Moe || c.arch == Arch::Olmoe || c.arch == Arch::Deepseek2 ||
                   c.arch == Arch::Dots1 || c.arch == Arch::Glm4Moe || c.arch == Arch::BailingMoe2 ||
                   c.arch == Arch::ExaoneMoe || c.arch == Arch::BailingMoe;
  c.expert_weights_norm = file.get_bool(r.key("expert_weights_norm"), !raw);
  if (c.arch == Arch::Deepseek || c.arch == Arch::Llama4) c.expert_weights_norm = false;
  if (c.arch == Arch::Qwen3VlMoe || c.arch == Arch::Ernie45Moe || c.arch == Arch::HunyuanMoe || c.arch == Arch::GptOss ||
      c.arch == Arch::MinimaxM2 || c.arch == Arch::Dbrx || c.arch == Arch::PhiMoe || c.arch == Arch::Lfm2Moe ||
      c.arch == Arch::SmallThinker || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next || c.arch == Arch::Mellum || c.arch == Arch::Maple || c.arch == Arch::GraniteHybrid)
    c.expert_weights_norm = true;
  const bool gating_required =
      c.arch == Arch::Dots1 || c.arch == Arch::BailingMoe2 || c.arch == Arch::MinimaxM2 || c.arch == Arch::ExaoneMoe ||
      c.arch == Arch::Lfm2Moe || c.arch == Arch::SmallThinker;
  if (gating_required && c.n_expert > 0 && !file.has(r.key("expert_gating_func")))
    throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", file.path(), r.key("expert_gating_func"));
  int gating = fixed_softmax ? 1 : r.get("expert_gating_func", 0);  // 0 = LLAMA_EXPERT_GATING_FUNC_TYPE_NONE
  if (gating == 0 && c.arch == Arch::Glm4Moe) gating = 2;  // GLM-4.5's sigmoid, llama.cpp's default for it
  if (c.arch == Arch::Llama4 || c.arch == Arch::NemotronH) gating = 2;  // fixed by their graphs
  if (c.arch == Arch::Afmoe && gating == 0) gating = 2;                  // afmoe's default
  // GLM-4.7-Flash in deepseek2's layout, from before its converter wrote the key: llama.cpp's
  // compatibility rule (47 or 48 layers and a vocabulary of 154880) makes it sigmoid.
  if (gating == 0 && c.arch == Arch::Deepseek2 && (c.n_layer == 47 || c.n_layer == 48) && c.n_vocab == 154880)
    gating = 2;
  if (gating == 0 || gating == 1) {
    c.expert_gating = ExpertGating::Softmax;
  } else if (gating == 2) {
    c.expert_gating = ExpertGating::Sigmoid;
  } else {
    throw_error(ErrorKind::Unsupported, "{}: {} = {} is unsupported (1 softmax, 2 sigmoid)", file.path(),
                r.key("expert_gating_func"), gating);
  }
  const bool never_scaled = c.arch == Arch::Llama4 || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::Ernie45Moe || c.arch == Arch::HunyuanMoe ||
                            c.arch == Arch::GptOss || c.arch == Arch::MinimaxM2 || c.arch == Arch::Dbrx ||
                            c.arch == Arch::PhiMoe || c.arch == Arch::Lfm2Moe || c.arch == Arch::SmallThinker ||
                            c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next || c.arch == Arch::Mellum || c.arch == Arch::Maple || c.arch == Arch::GraniteHybrid;
  c.expert_weights_scale = never_scaled ? 0.0f : r.get_float("expert_weights_scale", 0.0f);
  if (c.expert_weights_scale == 0.0f) c.expert_weights_scale = 1.0f;  // llama.cpp: 0 = no scaling
  c.n_expert_group = std::max(1, r.get("expert_group_count", 1));
  c.n_expert_group_used = std::max(1, r.get("expert_group_used_count", c.n_expert_group));

  const bool lead_only = c.n_layer_dense_lead >= c.n_layer;  // every layer dense: no experts needed
  const bool deepseek_style = c.arch == Arch::Deepseek2 || c.arch == Arch::Deepseek || c.arch == Arch::Dots1 ||
                              c.arch == Arch::Glm4Moe || c.arch == Arch::BailingMoe2 || c.arch == Arch::Ernie45Moe ||
                              c.arch == Arch::ExaoneMoe || c.arch == Arch::Lfm2Moe;
  const bool needs_experts = c.arch == Arch::Llama4 || c.arch == Arch::Afmoe || c.arch == Arch::Qwen2Moe || c.arch == Arch::Qwen3Moe || c.arch == Arch::Olmoe ||
                             c.arch == Arch::GraniteMoe || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::HunyuanMoe ||
                             c.arch == Arch::GptOss || c.arch == Arch::MinimaxM2 || c.arch == Arch::Dbrx ||
                             c.arch == Arch::PhiMoe || c.arch == Arch::SmallThinker || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next || c.arch == Arch::Mellum || c.arch == Arch::Maple ||
                             c.arch == Arch::BailingMoe || (deepseek_style && !lead_only);
  const bool may_have_experts = needs_experts || c.arch == Arch::Llama || c.arch == Arch::NemotronH || c.arch == Arch::GraniteHybrid || deepseek_style;
  if (needs_experts && c.n_expert == 0)
    throw_error(ErrorKind::Format, "{}: {} model without {}", file.path(), c.arch_name, r.key("expert_count"));
  if (!may_have_experts && c.n_expert > 0)
    throw_error(ErrorKind::Unsupported, "{}: {} models with experts are not supported", file.path(), c.arch_name);
}

// deepseek2's multi-head latent attention in llama.cpp's current layout (conversion/deepseek.py:
// "MLA converts into MQA with larger heads"): attention.kv_lora_rank, attention.q_lora_rank (0 or
// absent: attn_q), attention.key_length_mla / value_length_mla (the decompressed query-key and
// value heads), attention.key_length = kv_lora_rank + rope dims and value_length = kv_lora_rank
// (the latent as one MQA head), head_count_kv 1. Files of the older layout (one attn_kv_b, no
// key_length_mla) are refused with a note to re-convert.
void read_mla(const Reader& r, ModelConfig& c) {
  const GGUFFile& f = r.f;
  c.q_lora_rank = r.get("attention.q_lora_rank", 0);
  c.kv_lora_rank = r.get("attention.kv_lora_rank", std::nullopt);
  if (!f.has(r.key("attention.key_length_mla")))
    throw_error(ErrorKind::Unsupported,
                "{}: {} is missing: a deepseek2 file of the layout before MLA (one attn_kv_b per layer); specmoe reads "
                "the split attn_k_b / attn_v_b layout (re-convert with a current llama.cpp)",
                f.path(), r.key("attention.key_length_mla"));
  c.head_dim = r.get("attention.key_length_mla", std::nullopt);
  c.mla_v_head_dim = r.get("attention.value_length_mla", std::nullopt);
  const int rope = r.get("rope.dimension_count", std::nullopt);
  // Summed in 64 bits: each is range-checked to an int alone, not together.
  const int64_t latent_k = int64_t{c.kv_lora_rank} + rope;
  if (latent_k > INT_MAX)
    throw_error(ErrorKind::Format, "{}: {} {} + {} {} is out of range", f.path(), r.key("attention.kv_lora_rank"),
                c.kv_lora_rank, r.key("rope.dimension_count"), rope);
  const int k_len = r.get("attention.key_length", static_cast<int>(latent_k));
  const int v_len = r.get("attention.value_length", c.kv_lora_rank);
  if (k_len != c.kv_lora_rank + rope || v_len != c.kv_lora_rank)
    throw_error(ErrorKind::Format, "{}: {} {} and {} {} are not kv_lora_rank {} + rope dims {} and kv_lora_rank",
                f.path(), r.key("attention.key_length"), k_len, r.key("attention.value_length"), v_len,
                c.kv_lora_rank, rope);
}

}  // namespace specmoe::core::detail
