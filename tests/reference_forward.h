// Double-precision reference forward over a whole sequence (no cache), straight from the
// definitions: llama (Touvron et al. 2023), qwen2 (llama + QKV biases, NEOX RoPE), gpt2 (Radford
// et al. 2019), qwen3 (qwen2 without biases, RMSNorm of each q/k head), gemma3 (Gemma Team 2025:
// embedding times sqrt(n_embd), QK-norm, post-norms, GeGLU, sliding-window local layers with
// their own RoPE base), RoPE with Llama 3.1's frequency factors and YaRN (Peng et al. 2023). The
// model tests compare the transformer's logits with it; an MoE test supplies its own feed-forward
// block through run()'s hook and reuses the building blocks.
//
// Written apart from core/: it takes the sizes from ModelConfig but reads every architecture
// specific (windows, layer pattern, RoPE bases and scaling, soft-capping) from the GGUF keys
// itself, with llama.cpp's defaults, and computes the RoPE angles from the papers' formulas.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/model_config.h"
#include "kernels/cpu/quant.h"

namespace specmoe::testing {

class ReferenceForward {
 public:
  explicit ReferenceForward(const std::string& path)
      : f_(core::GGUFFile::open(path)), c_(core::ModelConfig::from_gguf(*f_)) {
    arch_ = f_->get_string("general.architecture");
    const std::string a = arch_ + ".";
    gemma3_ = arch_ == "gemma3";
    qk_norm_ = arch_ == "qwen3" || gemma3_;
    softcap_ = f_->get_float(a + "final_logit_softcapping", 0.0);
    // Sliding windows (gemma3): window w, layer l local when l % pattern < pattern - 1 (or a flag
    // per layer); query i sees key j when i - w < j <= i.
    window_ = gemma3_ ? static_cast<int>(f_->get_int(a + "attention.sliding_window", 0)) : 0;
    local_.assign(c_.n_layer, false);
    if (window_ > 0) {
      const core::GGUFValue* pat = f_->find(a + "attention.sliding_window_pattern");
      for (int l = 0; l < c_.n_layer; ++l) {
        if (pat && pat->type == core::GGUFType::ARRAY) {
          local_[l] = pat->items[l].i != 0;
        } else {
          const int n = pat ? static_cast<int>(pat->i) : 6;
          local_[l] = n == 0 || l % n < n - 1;
        }
      }
    }
    // RoPE: base per layer kind, the linear factor (also YaRN's), YaRN's original context.
    base_ = f_->get_float(a + "rope.freq_base", 10000.0);
    base_local_ = f_->get_float(a + "rope.freq_base_swa", 10000.0);
    const std::string type = f_->get_string(a + "rope.scaling.type", "linear");
    double factor = f_->get_float(a + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = f_->get_float(a + "rope.scale_linear", 0.0);
    factor_ = type == "none" || factor == 0.0 ? 1.0 : factor;
    yarn_ = type == "yarn";
    orig_ctx_ = static_cast<double>(f_->get_int(a + "rope.scaling.original_context_length", c_.n_ctx_train));
    attn_factor_ = f_->get_float(a + "rope.scaling.attn_factor", 1.0);
    if (arch_ == "llama" && f_->find_tensor("rope_freqs.weight")) freq_factors_ = tensor("rope_freqs.weight");
    // Gemma's query_pre_attn_scalar is n_embd / n_head for the 27B (62 layers), else head_dim.
    q_scale_ = gemma3_ && c_.n_layer == 62 ? 1.0 / std::sqrt(static_cast<double>(c_.n_embd / c_.n_head))
                                           : 1.0 / std::sqrt(static_cast<double>(c_.head_dim));
  }
  virtual ~ReferenceForward() = default;

  // The feed-forward block of layer l on token t, in place (x += FFN(norm(x))). Empty: the
  // architecture's dense FFN (SwiGLU, GeGLU for gemma3, GELU for gpt2).
  using FfnBlock = std::function<void(std::vector<double>& x, int layer, int token)>;

  // logits [T][n_vocab]
  std::vector<std::vector<double>> run(const std::vector<int32_t>& ids, const FfnBlock& ffn = {}) {
    const int T = static_cast<int>(ids.size()), d = c_.n_embd, hd = c_.head_dim;
    const bool gpt2 = c_.arch == core::Arch::Gpt2;
    const int qd = c_.n_head * hd, kvd = c_.kv_dim();
    std::vector<std::vector<double>> x(T);
    const auto emb = tensor("token_embd.weight");
    for (int t = 0; t < T; ++t) {
      x[t].assign(emb.begin() + static_cast<size_t>(ids[t]) * d, emb.begin() + static_cast<size_t>(ids[t] + 1) * d);
      if (gpt2) {
        const auto pe = tensor("position_embd.weight");
        for (int i = 0; i < d; ++i) x[t][i] += pe[static_cast<size_t>(t) * d + i];
      }
      if (gemma3_)
        for (double& e : x[t]) e *= std::sqrt(static_cast<double>(d));
    }
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int t = 0; t < T; ++t) {
        const auto h = norm(x[t], p + "attn_norm");
        if (gpt2) {
          const auto qkv = linear(h, p + "attn_qkv", qd + 2 * kvd);
          q[t].assign(qkv.begin(), qkv.begin() + qd);
          k[t].assign(qkv.begin() + qd, qkv.begin() + qd + kvd);
          v[t].assign(qkv.begin() + qd + kvd, qkv.end());
        } else {
          q[t] = linear(h, p + "attn_q", qd);
          k[t] = linear(h, p + "attn_k", kvd);
          v[t] = linear(h, p + "attn_v", kvd);
          if (qk_norm_) {
            head_norm(q[t], p + "attn_q_norm", c_.n_head);
            head_norm(k[t], p + "attn_k_norm", c_.n_head_kv);
          }
          rope(q[t], c_.n_head, t, l);
          rope(k[t], c_.n_head_kv, t, l);
        }
      }
      const int w = local_[l] ? window_ : 0;
      for (int t = 0; t < T; ++t) {
        const int j0 = w > 0 ? std::max(0, t - w + 1) : 0;  // the window: t - j < w
        std::vector<double> att(qd, 0.0);
        for (int h = 0; h < c_.n_head; ++h) {
          const int kh = h / (c_.n_head / c_.n_head_kv);
          std::vector<double> s(t + 1);
          double mx = -1e300, sum = 0;
          for (int j = j0; j <= t; ++j) {
            double dot = 0;
            for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
            s[j] = dot * q_scale_;
            mx = std::max(mx, s[j]);
          }
          for (int j = j0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int j = j0; j <= t; ++j)
            for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][kh * hd + i];
        }
        auto o = linear(att, p + "attn_output", d);
        if (gemma3_) o = norm(o, p + "post_attention_norm");
        for (int i = 0; i < d; ++i) x[t][i] += o[i];
      }
      for (int t = 0; t < T; ++t) {
        if (ffn)
          ffn(x[t], l, t);
        else
          dense_ffn(x[t], p);
      }
    }
    std::vector<std::vector<double>> logits(T);
    const std::string head = f_->find_tensor("output.weight") ? "output" : "token_embd";
    for (int t = 0; t < T; ++t) {
      logits[t] = linear(norm(x[t], "output_norm"), head, c_.n_vocab);
      if (softcap_ > 0)
        for (double& e : logits[t]) e = softcap_ * std::tanh(e / softcap_);
    }
    return logits;
  }

  const core::ModelConfig& config() const { return c_; }
  bool is_local(int layer) const { return local_[layer]; }

  // A tensor of the file, dequantized, as doubles.
  std::vector<double> tensor(const std::string& name) const {
    const core::GGUFTensorInfo& t = f_->tensor(name);
    std::vector<float> v(t.n_elements);
    kernels::cpu::dequantize_row(t.type, t.data, v.data(), t.n_elements);
    return std::vector<double>(v.begin(), v.end());
  }
  // y = W x (+ b): W has ne {n_in, n_out}.
  std::vector<double> linear(const std::vector<double>& in, const std::string& name, int n_out) const {
    const auto w = tensor(name + ".weight");
    const size_t n_in = in.size();
    std::vector<double> y(n_out, 0.0);
    for (int j = 0; j < n_out; ++j)
      for (size_t i = 0; i < n_in; ++i) y[j] += w[j * n_in + i] * in[i];
    if (f_->find_tensor(name + ".bias")) {
      const auto b = tensor(name + ".bias");
      for (int j = 0; j < n_out; ++j) y[j] += b[j];
    }
    return y;
  }
  // RMSNorm (LayerNorm with bias for gpt2) with the weight `name`.weight.
  std::vector<double> norm(const std::vector<double>& in, const std::string& name) const {
    return norm_with(in, tensor(name + ".weight"), name);
  }
  // RMSNorm of each of n_head heads of v (head_dim each) with the weight `name`.weight [head_dim].
  void head_norm(std::vector<double>& v, const std::string& name, int n_head) const {
    const auto w = tensor(name + ".weight");
    const int hd = c_.head_dim;
    for (int h = 0; h < n_head; ++h) {
      double ss = 0;
      for (int i = 0; i < hd; ++i) ss += v[h * hd + i] * v[h * hd + i] / hd;
      const double inv = 1.0 / std::sqrt(ss + c_.norm_eps);
      for (int i = 0; i < hd; ++i) v[h * hd + i] *= inv * w[i];
    }
  }
  // RoPE in place on n_head heads of v at position pos for layer `layer` (adjacent pairs or split
  // halves). Pair i's frequency is base^(-2i/d) / factor_i (llama3's rope_freqs); the angle is
  // pos times it divided by the linear factor s, except under YaRN, whose NTK-by-parts mix keeps
  // the fast pairs (wavelength below L / beta_fast, L the original context) unscaled, scales the
  // slow ones (above L / beta_slow) by 1/s and ramps linearly in between, and whose attention
  // temperature multiplies cos and sin by 0.1 ln s + 1. Local gemma3 layers use their own base,
  // unscaled.
  void rope(std::vector<double>& v, int n_head, int pos, int layer = 0) const {
    const int hd = c_.head_dim, nd = c_.rope_dims;
    const bool neox = c_.rope_style == core::RopeStyle::SplitHalves;
    const bool local = local_[layer];
    const double base = local ? base_local_ : base_;
    const double s = local ? 1.0 : factor_;
    double mscale = attn_factor_, low = 0, high = 0;
    if (yarn_) {
      if (s > 1) mscale *= 0.1 * std::log(s) + 1.0;
      auto dim_of = [&](double rotations) {  // the pair index that turns `rotations` times in L
        return nd * std::log(orig_ctx_ / (rotations * 2 * M_PI)) / (2 * std::log(base));
      };
      low = std::max(0.0, std::floor(dim_of(32.0)));  // beta_fast
      high = std::min(nd - 1.0, std::ceil(dim_of(1.0)));  // beta_slow
    }
    for (int h = 0; h < n_head; ++h)
      for (int i = 0; i < nd / 2; ++i) {
        double freq = std::pow(base, -2.0 * i / nd);
        if (!freq_factors_.empty()) freq /= freq_factors_[i];
        double th = pos * freq / s;
        if (yarn_) {
          const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
          const double keep = 1.0 - ramp;  // 1: extrapolate (unscaled), 0: interpolate
          th = pos * freq / s * (1.0 - keep) + pos * freq * keep;
        }
        double& a = v[h * hd + (neox ? i : 2 * i)];
        double& b = v[h * hd + (neox ? i + nd / 2 : 2 * i + 1)];
        const double a0 = a, b0 = b;
        a = mscale * (a0 * std::cos(th) - b0 * std::sin(th));
        b = mscale * (a0 * std::sin(th) + b0 * std::cos(th));
      }
  }

 protected:
  std::vector<double> norm_with(const std::vector<double>& in, const std::vector<double>& w,
                                const std::string& name) const {
    const double n = static_cast<double>(in.size());
    std::vector<double> out(in.size());
    if (c_.arch == core::Arch::Gpt2) {
      const auto b = tensor(name + ".bias");
      double mean = 0, var = 0;
      for (double e : in) mean += e / n;
      for (double e : in) var += (e - mean) * (e - mean) / n;
      for (size_t i = 0; i < in.size(); ++i) out[i] = (in[i] - mean) / std::sqrt(var + c_.norm_eps) * w[i] + b[i];
    } else {
      double ss = 0;
      for (double e : in) ss += e * e / n;
      for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] / std::sqrt(ss + c_.norm_eps) * w[i];
    }
    return out;
  }

  // x += FFN(norm(x)) for layer prefix p: SwiGLU, GeGLU (tanh GELU) followed by gemma3's
  // post-norm, or GELU (tanh form) for gpt2.
  void dense_ffn(std::vector<double>& x, const std::string& p) const {
    const int d = c_.n_embd;
    const auto h = norm(x, p + "ffn_norm");
    auto gelu = [](double e) { return 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e))); };
    std::vector<double> f;
    if (c_.arch == core::Arch::Gpt2) {
      auto u = linear(h, p + "ffn_up", c_.n_ff);
      for (auto& e : u) e = gelu(e);
      f = linear(u, p + "ffn_down", d);
    } else {
      const auto g = linear(h, p + "ffn_gate", c_.n_ff);
      auto u = linear(h, p + "ffn_up", c_.n_ff);
      for (int i = 0; i < c_.n_ff; ++i) u[i] *= gemma3_ ? gelu(g[i]) : g[i] / (1 + std::exp(-g[i]));
      f = linear(u, p + "ffn_down", d);
      if (gemma3_) f = norm(f, p + "post_ffw_norm");
    }
    for (int i = 0; i < d; ++i) x[i] += f[i];
  }

  std::shared_ptr<core::GGUFFile> f_;
  core::ModelConfig c_;
  std::string arch_;
  bool gemma3_ = false, qk_norm_ = false, yarn_ = false;
  double softcap_ = 0, base_ = 10000, base_local_ = 10000, factor_ = 1, orig_ctx_ = 0, attn_factor_ = 1;
  double q_scale_ = 1;
  int window_ = 0;
  std::vector<bool> local_;
  std::vector<double> freq_factors_;
};

}  // namespace specmoe::testing
