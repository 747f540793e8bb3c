// Double-precision reference forward over a whole sequence (no cache), straight from the
// definitions: llama (Touvron et al. 2023), qwen2 (llama + QKV biases, NEOX RoPE), gpt2 (Radford
// et al. 2019). The model tests compare the transformer's logits with it; an MoE test supplies
// its own feed-forward block through run()'s hook and reuses the building blocks.
#pragma once
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
      : f_(core::GGUFFile::open(path)), c_(core::ModelConfig::from_gguf(*f_)) {}
  virtual ~ReferenceForward() = default;

  // The feed-forward block of layer l on token t, in place (x += FFN(norm(x))). Empty: the
  // architecture's dense FFN (SwiGLU, or GELU for gpt2).
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
          rope(q[t], c_.n_head, t);
          rope(k[t], c_.n_head_kv, t);
        }
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> att(qd, 0.0);
        for (int h = 0; h < c_.n_head; ++h) {
          const int kh = h / (c_.n_head / c_.n_head_kv);
          std::vector<double> s(t + 1);
          double mx = -1e300, sum = 0;
          for (int j = 0; j <= t; ++j) {
            double dot = 0;
            for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[j]);
          }
          for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int j = 0; j <= t; ++j)
            for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][kh * hd + i];
        }
        const auto o = linear(att, p + "attn_output", d);
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
    for (int t = 0; t < T; ++t) logits[t] = linear(norm(x[t], "output_norm"), head, c_.n_vocab);
    return logits;
  }

  const core::ModelConfig& config() const { return c_; }

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
    const auto w = tensor(name + ".weight");
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
  // RoPE in place on n_head heads of v at position pos (adjacent pairs or split halves).
  void rope(std::vector<double>& v, int n_head, int pos) const {
    const int hd = c_.head_dim, nd = c_.rope_dims;
    const bool neox = c_.rope_style == core::RopeStyle::SplitHalves;
    for (int h = 0; h < n_head; ++h)
      for (int i = 0; i < nd / 2; ++i) {
        const double th = pos * std::pow(static_cast<double>(c_.rope_freq_base), -2.0 * i / nd);
        double& a = v[h * hd + (neox ? i : 2 * i)];
        double& b = v[h * hd + (neox ? i + nd / 2 : 2 * i + 1)];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(th) - b0 * std::sin(th);
        b = a0 * std::sin(th) + b0 * std::cos(th);
      }
  }

 protected:
  // x += FFN(norm(x)) for layer prefix p: SwiGLU, or GELU (tanh form) for gpt2.
  void dense_ffn(std::vector<double>& x, const std::string& p) const {
    const int d = c_.n_embd;
    const auto h = norm(x, p + "ffn_norm");
    std::vector<double> f;
    if (c_.arch == core::Arch::Gpt2) {
      auto u = linear(h, p + "ffn_up", c_.n_ff);
      for (auto& e : u) e = 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
      f = linear(u, p + "ffn_down", d);
    } else {
      const auto g = linear(h, p + "ffn_gate", c_.n_ff);
      auto u = linear(h, p + "ffn_up", c_.n_ff);
      for (int i = 0; i < c_.n_ff; ++i) u[i] *= g[i] / (1 + std::exp(-g[i]));
      f = linear(u, p + "ffn_down", d);
    }
    for (int i = 0; i < d; ++i) x[i] += f[i];
  }

  std::shared_ptr<core::GGUFFile> f_;
  core::ModelConfig c_;
};

}  // namespace specmoe::testing
