// Synthetic model writer. Weights are uniform with the variance a trained model's layer keeps
// activations at unit scale (std 1/sqrt(n_in)); each value is a hash of (seed, tensor name,
// index) (SplitMix64, Steele et al. 2014), so the draft's tensors equal the target's.
// The head favours printable ASCII byte tokens (larger output rows) so greedy text looks like
// text rather than control bytes and padding tokens.
#include "core/synth.h"

#include <cmath>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/tokenizer.h"

namespace specmoe::core {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// n values uniform in [-sqrt(3) std, sqrt(3) std) (variance std^2), a function of
// (seed, name, index) only.
std::vector<float> random_values(uint64_t seed, const std::string& name, size_t n, float std_dev) {
  std::vector<float> v(n);
  const uint64_t key = splitmix64(seed ^ name_hash(name));
  const float a = std::sqrt(3.0f) * std_dev;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(key + i);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    v[i] = (2.0f * u - 1.0f) * a;
  }
  return v;
}

int head_dim_of(const SynthSpec& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }

void check_spec(const SynthSpec& s) {
  const bool ok_arch = s.arch == "llama" || s.arch == "qwen2" || s.arch == "qwen2moe" || s.arch == "gpt2" ||
                       s.arch == "qwen3" || s.arch == "gemma3";
  if (!ok_arch)
    throw_error(ErrorKind::InvalidArgument,
                "synth: unknown architecture '{}' (llama, qwen2, qwen2moe, gpt2, qwen3, gemma3)", s.arch);
  if (s.arch == "gpt2" && (s.head_dim > 0 || !s.rope_scaling.empty() || s.llama3_orig_ctx > 0))
    throw_error(ErrorKind::InvalidArgument, "synth: gpt2 has neither a head_dim key nor RoPE scaling");
  if (s.llama3_orig_ctx > 0 && s.arch != "llama")
    throw_error(ErrorKind::InvalidArgument, "synth: rope_freqs.weight (llama3_orig_ctx) is llama's, not {}'s", s.arch);
  if ((s.n_swa > 0 || s.swa_pattern > 0 || s.rope_freq_base_swa > 0.0f || s.final_logit_softcap > 0.0f) &&
      s.arch != "gemma3")
    throw_error(ErrorKind::InvalidArgument, "synth: sliding windows and logit soft-capping are gemma3's, not {}'s",
                s.arch);
  const bool experts_ok = s.arch == "qwen2moe" ? s.n_expert > 0 && s.n_ff_shared > 0
                         : s.arch == "llama"    ? s.n_expert >= 0 && s.n_ff_shared == 0
                                                : s.n_expert == 0 && s.n_ff_shared == 0;
  if (!experts_ok)
    throw_error(ErrorKind::InvalidArgument,
                "synth: experts {} / shared width {}: qwen2moe needs both > 0, llama may have experts but no shared "
                "expert, qwen2 and gpt2 neither", s.n_expert, s.n_ff_shared);
  if (s.n_expert > 0 && (s.n_expert_used < 1 || s.n_expert_used > s.n_expert))
    throw_error(ErrorKind::InvalidArgument, "synth: expert_used {} must be in [1, n_expert {}]", s.n_expert_used,
                s.n_expert);
  const int n_head_kv = s.arch == "gpt2" ? s.n_head : s.n_head_kv;
  if (s.n_vocab < 259 || s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || n_head_kv <= 0 ||
      (s.head_dim <= 0 && s.n_embd % s.n_head != 0) || s.head_dim < 0 || s.n_head % n_head_kv != 0 ||
      head_dim_of(s) % 2 != 0 || s.n_ff <= 0 || s.n_ctx <= 0 || s.keep_layers > s.n_layer || s.keep_layers == 0)
    throw_error(ErrorKind::InvalidArgument,
                "synth: inconsistent sizes (vocab {} >= 259, embd {} divisible by heads {} into even head dims, "
                "heads divisible by kv heads {}, ff {}, ctx {}, keep_layers {} in 1..{})",
                s.n_vocab, s.n_embd, s.n_head, n_head_kv, s.n_ff, s.n_ctx, s.keep_layers, s.n_layer);
  // Every matrix row (n_in: the embedding width, attn_output's n_head * head_dim = n_embd, the
  // FFN and shared-expert widths) must be whole blocks of the weight type.
  const int64_t block = dtype_info(s.type).block_size;
  for (int width : {s.n_embd, s.n_ff, s.n_ff_shared, s.n_head * head_dim_of(s)})
    if (width % block != 0)
      throw_error(ErrorKind::InvalidArgument,
                  "synth: type {} stores rows in blocks of {}, but '{}' has rows of {} (embd {}, ff {}{}); "
                  "tiny-256 has rows of 256",
                  dtype_name(s.type), block, s.name, width, s.n_embd, s.n_ff,
                  s.n_ff_shared ? fmt::format(", shared ff {}", s.n_ff_shared) : std::string());
}

}  // namespace

namespace {

// A preset by its exact name, or nullopt.
std::optional<SynthSpec> base_preset(const std::string& preset) {
  SynthSpec s;
  if (preset == "tiny" || preset == "tiny-draft") {
    // ~0.2M parameters, F32: unit tests. Layers 1..3 are scaled for ~70% greedy agreement
    // with tiny-draft (its first layer).
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 192;
    s.n_ctx = 512;
    s.n_full_layers = 1;
    s.deep_residual_scale = 0.3f;
    s.name = preset;
    if (preset == "tiny-draft") s.keep_layers = 1;
    return s;
  }
  if (preset == "tiny-256") {
    // tiny with rows of 256 (dim 256, ff 512), so the 256-element blocks (K-quants, IQ4_XS) fit:
    // unit tests of those types (e.g. tiny-256-q2_k).
    s.n_embd = 256;
    s.n_ff = 512;
    s.n_full_layers = 1;
    s.deep_residual_scale = 0.3f;
    s.name = preset;
    return s;
  }
  if (preset == "target" || preset == "draft") {
    // ~144M parameters, F16 (~288 MB): weights far exceed CPU caches, so decode is memory bound.
    s.type = DType::F16;
    s.n_vocab = 4096;
    s.n_embd = 1024;
    s.n_layer = 12;
    s.n_head = 16;
    s.n_head_kv = 4;
    s.n_ff = 2816;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    if (preset == "draft") s.keep_layers = 2;
    return s;
  }
  if (preset == "moe-tiny" || preset == "qwen2moe-tiny") {
    // ~0.3M parameters, F32: unit tests of MoE models. Widths are multiples of 32 so Q8_0 works.
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ctx = 512;
    s.name = preset;
    if (preset == "moe-tiny") {
      s.n_layer = 3;
      s.n_ff = 96;  // each expert
      s.n_expert = 4;
      s.n_expert_used = 2;
    } else {
      s.arch = "qwen2moe";
      s.n_layer = 2;
      s.n_ff = 64;  // each routed expert
      s.n_expert = 6;
      s.n_expert_used = 2;
      s.n_ff_shared = 128;
      s.rope_freq_base = 1000000.0f;
    }
    return s;
  }
  if (preset == "moe-target" || preset == "moe-draft") {
    // moe-target: Mixtral-style, 8 experts top-2, F16, ~305M parameters (~610 MB), of which ~98M
    // are active per token: each layer's k = 2 experts of width 1408 equal one dense `target`
    // layer's FFN (2816). moe-draft: dense, the first 2 layers' attention and the embedding and
    // head of moe-target (same names, same seed: bit-identical), with a dense SwiGLU of width
    // k * 1408 in place of the experts.
    s.type = DType::F16;
    s.n_vocab = 4096;
    s.n_embd = 1024;
    s.n_layer = 8;
    s.n_head = 16;
    s.n_head_kv = 4;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    if (preset == "moe-target") {
      s.n_ff = 1408;
      s.n_expert = 8;
      s.n_expert_used = 2;
    } else {
      s.n_ff = 2816;
      s.keep_layers = 2;
    }
    return s;
  }
  if (preset == "target-1b") {
    // ~1.1B parameters, F16 (~2.2 GB), TinyLlama-1.1B's shape: the GPU decode benchmark
    // (scripts/gpu-check.sh), large enough that a forward reads far more than any GPU cache.
    s.type = DType::F16;
    s.n_vocab = 32000;
    s.n_embd = 2048;
    s.n_layer = 22;
    s.n_head = 32;
    s.n_head_kv = 4;
    s.n_ff = 5632;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3-tiny" || preset == "qwen3-yarn-tiny") {
    // qwen3 in llama.cpp's layout, F32: QK-norm, no QKV biases, heads of 32 wider than
    // n_embd / n_head = 16 (attention.key_length). The yarn variant asks for YaRN (factor 4,
    // original context 64: most pairs interpolated, the fastest extrapolated, cos/sin scaled).
    s.arch = "qwen3";
    s.head_dim = 32;
    s.rope_freq_base = 1000000.0f;
    s.name = preset;
    if (preset == "qwen3-yarn-tiny") {
      s.rope_scaling = "yarn";
      s.rope_scaling_factor = 4.0f;
      s.rope_orig_ctx = 64;
    }
    return s;
  }
  if (preset == "gemma3-tiny") {
    // gemma3 in llama.cpp's layout, F32, 6 layers: embedding times sqrt(n_embd), QK-norm, post-
    // norms, GeGLU, heads of 32, tied output, a sliding window of 4 positions on layers 0-4 and a
    // global layer 5 (llama.cpp's default pattern 6, no pattern key), global RoPE base 1e6 and
    // the local layers' default 10000 (no freq_base_swa key), as the converter writes them.
    s.arch = "gemma3";
    s.n_layer = 6;
    s.n_head_kv = 1;
    s.head_dim = 32;
    s.n_ff = 128;
    s.tied_output = true;
    s.rope_freq_base = 1000000.0f;
    s.n_swa = 4;
    s.name = preset;
    return s;
  }
  if (preset == "llama3-tiny") {
    // llama with Llama 3.1's RoPE frequency factors in rope_freqs.weight (original context 32, so
    // the smoothed and divided pairs turn visibly within a short test sequence) and a tied head.
    s.llama3_orig_ctx = 32;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  return std::nullopt;
}

}  // namespace

SynthSpec synth_spec(const std::string& preset) {
  if (auto s = base_preset(preset)) return *s;
  // PRESET-TYPE: the preset with its matrices in TYPE (a dtype name, any case).
  if (const size_t dash = preset.rfind('-'); dash != std::string::npos) {
    const auto type = dtype_from_name(std::string_view(preset).substr(dash + 1));
    if (auto s = type ? base_preset(preset.substr(0, dash)) : std::nullopt) {
      s->type = *type;
      s->name = preset;
      return *s;
    }
  }
  std::string known;
  for (const auto& p : synth_presets()) known += (known.empty() ? "" : ", ") + p.substr(0, p.find(':'));
  throw_error(ErrorKind::InvalidArgument,
              "synth: unknown preset '{}' (known: {}; PRESET-TYPE, e.g. tiny-q8_0, writes a preset's matrices in TYPE)",
              preset, known);
}

std::vector<std::string> synth_presets() {
  return {
      "tiny: llama, F32, 4 layers, dim 64, vocab 320 (~0.2M params): unit tests, writes in milliseconds",
      "tiny-draft: the first layer of tiny with its embedding and head: a draft for tiny",
      "tiny-256: tiny with dim 256 and ff 512 (~2.5M params), so rows fit the 256-element blocks of the K-quants and "
      "IQ4_XS",
      "target: llama, F16, 12 layers, dim 1024, ff 2816, 16/4 heads, vocab 4096 (~144M params): benchmarks",
      "draft: the first 2 layers of target with its embedding and head (~31M params): a draft for target",
      "moe-tiny: llama (Mixtral layout), F32, 3 layers, dim 64, 4 experts top-2 of width 96: MoE unit tests",
      "qwen2moe-tiny: qwen2moe, F32, 2 layers, dim 64, 6 experts top-2 of width 64 + gated shared expert 128",
      "moe-target: llama (Mixtral layout), F16, 8 layers, dim 1024, 8 experts top-2 of width 1408 (~305M params, "
      "~98M active): MoE benchmarks",
      "moe-draft: dense, the first 2 layers' attention, embedding and head of moe-target, ff 2816 (~29M params)",
      "target-1b: llama, F16, 22 layers, dim 2048, ff 5632, 32/4 heads, vocab 32000 (~1.1B params, 2.2 GB): GPU "
      "benchmarks",
      "qwen3-tiny: qwen3, F32, 4 layers, dim 64, heads 4/2 of 32 (key_length), QK-norm, no QKV biases",
      "qwen3-yarn-tiny: qwen3-tiny with YaRN RoPE scaling (factor 4, original context 64)",
      "gemma3-tiny: gemma3, F32, 6 layers, dim 64, heads 4/1 of 32, QK-norm, post-norms, GeGLU, tied head, "
      "window 4 on layers 0-4 (default pattern 6), RoPE bases 1e6 global / 10000 local",
      "llama3-tiny: tiny with Llama 3.1's RoPE frequency factors (rope_freqs.weight, original context 32) and a "
      "tied head",
  };
}

void synth_write(const std::string& preset, const std::string& path, uint64_t seed) {
  synth_write(synth_spec(preset), path, seed);
}

void synth_write(const SynthSpec& s, const std::string& path, uint64_t seed) {
  check_spec(s);
  const std::string& a = s.arch;
  const bool gpt2 = a == "gpt2", qwen2 = a == "qwen2" || a == "qwen2moe";
  const bool qk_norm = a == "qwen3" || a == "gemma3", gemma3 = a == "gemma3";
  const int n_head_kv = gpt2 ? s.n_head : s.n_head_kv;
  const int head_dim = head_dim_of(s);
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * head_dim, kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  const int n_write = s.keep_layers > 0 ? s.keep_layers : s.n_layer;

  GGUFWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", s.name);
  w.set_u32(a + ".context_length", s.n_ctx);
  w.set_u32(a + ".embedding_length", s.n_embd);
  w.set_u32(a + ".block_count", n_write);
  const bool moe = s.n_expert > 0, qwen2moe = a == "qwen2moe";
  // llama (Mixtral): feed_forward_length is the expert width. qwen2moe: expert widths have their
  // own keys; feed_forward_length is the dense-equivalent k * expert width (llama.cpp's default
  // expert width is feed_forward_length / expert_used_count).
  w.set_u32(a + ".feed_forward_length", qwen2moe ? s.n_ff * s.n_expert_used : s.n_ff);
  if (moe) {
    w.set_u32(a + ".expert_count", s.n_expert);
    w.set_u32(a + ".expert_used_count", s.n_expert_used);
  }
  if (qwen2moe) {
    w.set_u32(a + ".expert_feed_forward_length", s.n_ff);
    w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared);
  }
  w.set_u32(a + ".attention.head_count", s.n_head);
  if (gpt2) {
    w.set_f32(a + ".attention.layer_norm_epsilon", 1e-5f);
  } else {
    w.set_u32(a + ".attention.head_count_kv", n_head_kv);
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32(a + ".rope.dimension_count", head_dim);
    w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
    if (s.head_dim > 0) {
      w.set_u32(a + ".attention.key_length", head_dim);
      w.set_u32(a + ".attention.value_length", head_dim);
    }
    if (!s.rope_scaling.empty()) w.set_string(a + ".rope.scaling.type", s.rope_scaling);
    if (s.rope_scaling_factor != 0.0f) w.set_f32(a + ".rope.scaling.factor", s.rope_scaling_factor);
    if (s.rope_orig_ctx > 0) w.set_u32(a + ".rope.scaling.original_context_length", s.rope_orig_ctx);
    if (s.n_swa > 0) w.set_u32(a + ".attention.sliding_window", s.n_swa);
    if (s.swa_pattern > 0) w.set_u32(a + ".attention.sliding_window_pattern", s.swa_pattern);
    if (s.rope_freq_base_swa > 0.0f) w.set_f32(a + ".rope.freq_base_swa", s.rope_freq_base_swa);
    if (s.final_logit_softcap > 0.0f) w.set_f32(a + ".final_logit_softcapping", s.final_logit_softcap);
  }
  w.set_u64("specmoe.synth.seed", seed);
  write_byte_vocab(w, s.n_vocab);  // core/tokenizer.h: <unk> <s> </s>, 256 byte tokens, padding

  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, float scale) {
    // (n_in -> n_out): std 1/sqrt(n_in) keeps the output at the input's scale.
    const auto v = random_values(seed, name, static_cast<size_t>(n_in * n_out), scale / std::sqrt(float(n_in)));
    w.add_tensor_f32(name, s.type, {n_in, n_out}, v);
  };
  auto vec = [&](const std::string& name, int64_t n, float base, float noise) {
    auto v = random_values(seed, name, static_cast<size_t>(n), noise);
    for (auto& x : v) x += base;
    w.add_tensor_f32(name, DType::F32, {n}, v);
  };

  // One MoE block (llama-model.cpp shapes). Router logits of a unit-RMS input have std 1, so
  // routing is spread over the experts but not uniform; each expert is a SwiGLU initialised like
  // a dense one. (n_in, n_out, n_expert) for the stacked expert tensors.
  auto write_experts = [&](const std::string& p, float rs) {
    const int64_t d = s.n_embd, ff = s.n_ff, E = s.n_expert;
    const auto stacked = [&](const std::string& name, int64_t n_in, int64_t n_out, float scale) {
      const auto v = random_values(seed, name, static_cast<size_t>(n_in * n_out * E), scale / std::sqrt(float(n_in)));
      w.add_tensor_f32(name, s.type, {n_in, n_out, E}, v);
    };
    w.add_tensor_f32(p + "ffn_gate_inp.weight", DType::F32, {d, E},
                     random_values(seed, p + "ffn_gate_inp.weight", static_cast<size_t>(d * E), 1.0f / std::sqrt(float(d))));
    stacked(p + "ffn_gate_exps.weight", d, ff, 1.0f);
    stacked(p + "ffn_up_exps.weight", d, ff, 1.0f);
    stacked(p + "ffn_down_exps.weight", ff, d, rs);
    if (qwen2moe) {
      matrix(p + "ffn_gate_shexp.weight", d, s.n_ff_shared, 1.0f);
      matrix(p + "ffn_up_shexp.weight", d, s.n_ff_shared, 1.0f);
      matrix(p + "ffn_down_shexp.weight", s.n_ff_shared, d, rs);
      w.add_tensor_f32(p + "ffn_gate_inp_shexp.weight", DType::F32, {d},
                       random_values(seed, p + "ffn_gate_inp_shexp.weight", static_cast<size_t>(d), 1.0f / std::sqrt(float(d))));
    }
  };

  // Token embedding: unit-variance rows. (n_embd, n_vocab)
  const auto embd = random_values(seed, "token_embd.weight", static_cast<size_t>(s.n_embd) * s.n_vocab, 1.0f);
  w.add_tensor_f32("token_embd.weight", s.type, {s.n_embd, s.n_vocab}, embd);
  if (gpt2) w.add_tensor_f32("position_embd.weight", s.type, {s.n_embd, s.n_ctx},
                             random_values(seed, "position_embd.weight", static_cast<size_t>(s.n_embd) * s.n_ctx, 0.3f));
  vec("output_norm.weight", s.n_embd, 1.0f, 0.0f);
  if (gpt2) vec("output_norm.bias", s.n_embd, 0.0f, 0.0f);
  if (s.llama3_orig_ctx > 0) {
    // Llama 3.1's frequency factors, computed as llama.cpp's converter does (LlamaModel
    // generate_extra_tensors) with factor 8 and low/high frequency factors 1 and 4.
    const double factor = 8.0, lo = 1.0, hi = 4.0, orig = s.llama3_orig_ctx;
    std::vector<float> ff(static_cast<size_t>(head_dim / 2));
    for (int i = 0; i < head_dim / 2; ++i) {
      const double wavelen = 2.0 * M_PI * std::pow(static_cast<double>(s.rope_freq_base), 2.0 * i / head_dim);
      if (wavelen < orig / hi) {
        ff[i] = 1.0f;
      } else if (wavelen > orig / lo) {
        ff[i] = static_cast<float>(factor);
      } else {
        const double smooth = (orig / wavelen - lo) / (hi - lo);
        ff[i] = static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth));
      }
    }
    w.add_tensor_f32("rope_freqs.weight", DType::F32, {head_dim / 2}, ff);
  }
  if (!s.tied_output) {
    // Head rows: std 4 for printable ASCII bytes (byte b is token 3 + b) and 3 for newline, 0.5
    // for the rest: logits of a unit-RMS hidden state then have those spreads, so printable
    // bytes win most argmaxes and the distribution is peaked but not one-hot. Each row also
    // gets minus its token's embedding (scaled like the row), which lowers the logit of the
    // token just read: random models otherwise fall into repeating one token ("NNNN...").
    // (n_embd, n_vocab)
    const float inv_sqrt_n = 1.0f / std::sqrt(float(s.n_embd));
    auto v = random_values(seed, "output.weight", static_cast<size_t>(s.n_embd) * s.n_vocab, inv_sqrt_n);
    for (int tok = 0; tok < s.n_vocab; ++tok) {
      const bool printable = tok >= 3 + 0x20 && tok <= 3 + 0x7E;
      const bool newline = tok == 3 + 0x0A;
      const float scale = printable ? 4.0f : newline ? 3.0f : 0.5f;
      for (int i = 0; i < s.n_embd; ++i) {
        const size_t k = static_cast<size_t>(tok) * s.n_embd + i;
        v[k] = v[k] * scale - s.repeat_penalty * inv_sqrt_n * embd[k];
      }
    }
    w.add_tensor_f32("output.weight", s.type, {s.n_embd, s.n_vocab}, v);
  }

  for (int l = 0; l < n_write; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    // Residual branches of the layers the draft does not have are scaled down.
    const float rs = (s.n_full_layers >= 0 && l >= s.n_full_layers) ? s.deep_residual_scale : 1.0f;
    vec(p + "attn_norm.weight", s.n_embd, 1.0f, 0.0f);
    vec(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.0f);
    if (gpt2) {
      vec(p + "attn_norm.bias", s.n_embd, 0.0f, 0.0f);
      vec(p + "ffn_norm.bias", s.n_embd, 0.0f, 0.0f);
      matrix(p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim, 1.0f);
      vec(p + "attn_qkv.bias", q_dim + 2 * kv_dim, 0.0f, 0.1f);
      vec(p + "attn_output.bias", s.n_embd, 0.0f, 0.1f * rs);
      matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
      vec(p + "ffn_up.bias", s.n_ff, 0.0f, 0.1f);
      vec(p + "ffn_down.bias", s.n_embd, 0.0f, 0.1f * rs);
    } else {
      matrix(p + "attn_q.weight", s.n_embd, q_dim, 1.0f);
      matrix(p + "attn_k.weight", s.n_embd, kv_dim, 1.0f);
      matrix(p + "attn_v.weight", s.n_embd, kv_dim, 1.0f);
      if (qwen2) {
        vec(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
        vec(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
        vec(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
      }
      if (qk_norm) {  // weights around 1 with a spread, so a norm that is skipped shows
        vec(p + "attn_q_norm.weight", head_dim, 1.0f, 0.5f);
        vec(p + "attn_k_norm.weight", head_dim, 1.0f, 0.5f);
      }
      if (gemma3) {  // the file holds 1 + w (llama.cpp's converter adds the 1)
        vec(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.5f);
        vec(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.5f);
      }
      if (moe) {
        write_experts(p, rs);
      } else {
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, 1.0f);
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
      }
    }
    matrix(p + "attn_output.weight", q_dim, s.n_embd, rs);
    if (!moe) matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, rs);
  }
  w.write(path);
}

double synth_greedy_agreement(Model& target, Model& draft, const std::vector<std::string>& prompts, int n_tokens) {
  int64_t matches = 0, total = 0;
  ForwardOptions last_only;
  last_only.logits_all = false;
  for (const std::string& prompt : prompts) {
    std::vector<int32_t> ids = target.tokenizer().encode(prompt, true);
    KVCache tkv = target.new_cache(static_cast<int>(ids.size()) + n_tokens);
    KVCache dkv = draft.new_cache(static_cast<int>(ids.size()) + n_tokens);
    int32_t t = target.forward(ids, tkv, last_only).logits.argmax()[0];
    int32_t d = draft.forward(ids, dkv, last_only).logits.argmax()[0];
    for (int step = 0; step < n_tokens; ++step) {
      matches += d == t;
      ++total;
      if (step + 1 == n_tokens) break;
      const int32_t one[1] = {t};
      t = target.forward(one, tkv, last_only).logits.argmax()[0];
      d = draft.forward(one, dkv, last_only).logits.argmax()[0];
    }
  }
  return total ? static_cast<double>(matches) / static_cast<double>(total) : 0.0;
}

}  // namespace specmoe::core
