// The double-precision reference forward (tests/reference_forward.h) with an MoE block written out
// from the definitions, recording each token's experts, and the check of a model against it: the
// MoE architectures' tests (model_moe_test.cpp, model_arch_moe_test.cpp) share it.
//
// The block reads its router from the GGUF keys itself, with llama.cpp's defaults
// (build_moe_ffn): scores = softmax over all experts (expert_gating_func 0/1; glm4moe's default is
// sigmoid) or sigmoid (2); deepseek, qwen3vlmoe and ernie4_5-moe are softmax whatever the key says;
// selection on scores + exp_probs_b (the bias, when present: deepseek2, dots1, glm4moe, ernie4_5-moe
// and bailingmoe2 for either gating, the others but deepseek and qwen3vlmoe with sigmoid gating);
// with expert_group_count G > 1 a group's score is the sum of its two best selection scores and
// only the expert_group_used_count best groups are eligible; top-k by selection score (ties: lower
// index); weights = the unbiased scores, divided by their sum when expert_weights_norm (default:
// yes for llama, qwen3moe; no for qwen2moe, olmoe, deepseek2, dots1, glm4moe, bailingmoe2; fixed
// no for deepseek, yes for qwen3vlmoe and ernie4_5-moe), times expert_weights_scale (0 or absent:
// 1; never for qwen3vlmoe and ernie4_5-moe). Shared experts: qwen2moe's gated by sigmoid(w . h),
// the others' ungated; leading_dense_block_count layers (and ernie4_5-moe's layers l with
// (l + 1) % interleave_moe_layer_step != 0) are dense SwiGLUs.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"
#include "reference_forward.h"

namespace specmoe::testing {

class MoEReferenceForward : public ReferenceForward {
 public:
  // k: experts per token (the model's expert_used_count unless overridden).
  MoEReferenceForward(const std::string& path, int k) : ReferenceForward(path), k_(k) {
    const std::string a = arch_ + ".";
    const bool raw = arch_ == "qwen2moe" || arch_ == "olmoe" || arch_ == "deepseek2" || arch_ == "mistral4" || arch_ == "afmoe" || arch_ == "dots1" ||
                     arch_ == "glm4moe" || arch_ == "bailingmoe2" || arch_ == "exaone-moe" || arch_ == "bailingmoe";
    norm_w_ = f_->get_bool(a + "expert_weights_norm", !raw);
    // Graphs that fix the normalisation, gating and scale whatever the keys say.
    // gpt-oss: softmax of the k selected logits = renormalised; dbrx, phimoe: renormalised softmax.
    const bool fixed = arch_ == "deepseek" || arch_ == "qwen3vlmoe" || arch_ == "ernie4_5-moe" || arch_ == "hunyuan-moe" ||
                       arch_ == "gpt-oss" || arch_ == "dbrx" || arch_ == "phimoe" || arch_ == "qwen35moe" ||
                       arch_ == "qwen3next" || arch_ == "mellum" || arch_ == "maple" || arch_ == "granitehybrid";
    if (arch_ == "minimax-m2" || arch_ == "lfm2moe" || arch_ == "smallthinker") norm_w_ = true;  // their graphs renormalise whatever the key says
    if (fixed) norm_w_ = arch_ != "deepseek";
    const bool unscaled = arch_ == "qwen3vlmoe" || arch_ == "ernie4_5-moe" || arch_ == "hunyuan-moe" || arch_ == "gpt-oss" ||
                          arch_ == "minimax-m2" || arch_ == "dbrx" || arch_ == "phimoe" || arch_ == "lfm2moe" ||
                          arch_ == "smallthinker" || arch_ == "qwen35moe" || arch_ == "qwen3next" || arch_ == "mellum" ||
                          arch_ == "maple" || arch_ == "granitehybrid";
    scale_ = unscaled ? 0.0 : f_->get_float(a + "expert_weights_scale", 0.0);
    if (scale_ == 0.0) scale_ = 1.0;
    const int64_t gating = fixed ? 1 : f_->get_int(a + "expert_gating_func", arch_ == "glm4moe" || arch_ == "afmoe" ? 2 : 0);
    sigmoid_ = gating == 2;
    groups_ = std::max<int64_t>(1, f_->get_int(a + "expert_group_count", 1));
    groups_used_ = std::max<int64_t>(1, f_->get_int(a + "expert_group_used_count", groups_));
    const bool lead = arch_ == "deepseek2" || arch_ == "mistral4" || arch_ == "afmoe" || arch_ == "deepseek" || arch_ == "dots1" || arch_ == "glm4moe" ||
                      arch_ == "ernie4_5-moe" || arch_ == "bailingmoe2" || arch_ == "exaone-moe" || arch_ == "lfm2moe";
    dense_lead_ = lead ? static_cast<int>(f_->get_int(a + "leading_dense_block_count", 0)) : 0;
    step_ = arch_ == "ernie4_5-moe" || arch_ == "llama4" ? static_cast<int>(f_->get_int(a + "interleave_moe_layer_step", 1))
                                                        : 1;
    // llama4: top-k of the logits, their sigmoids neither renormalised nor scaled multiply the
    // experts' inputs (llama.cpp's weight_before_ffn); no selection bias.
    weight_inputs_ = arch_ == "llama4";
    if (weight_inputs_) sigmoid_ = true, norm_w_ = false, scale_ = 1.0;
    // nemotron_h_moe: sigmoid scores with the selection bias, the keys' renormalisation (default no)
    // and scale; ungated squared-ReLU experts and shared expert, all under attn_norm.
    relu_sqr_ = arch_ == "nemotron_h_moe";
    if (relu_sqr_) sigmoid_ = true, norm_w_ = f_->get_bool(a + "expert_weights_norm", false);
    // exp_probs_b: with any gating for these, with sigmoid gating for the others but these two.
    bias_any_ = arch_ == "deepseek2" || arch_ == "mistral4" || arch_ == "dots1" || arch_ == "glm4moe" || arch_ == "ernie4_5-moe" ||
                arch_ == "bailingmoe2" || arch_ == "minimax-m2" || arch_ == "exaone-moe" || arch_ == "lfm2moe";
    bias_never_ = arch_ == "llama4" || arch_ == "deepseek" || arch_ == "qwen3vlmoe" || arch_ == "hunyuan-moe" || arch_ == "smallthinker" ||
                  arch_ == "qwen35moe" || arch_ == "qwen3next";
    relu_glu_ = arch_ == "smallthinker";  // routed experts relu(gate h) * up h
    // maple: the routed experts' SwiGLU silu(min(g, L)) clamp(u, -L, L), L per layer (swiglu_clamp_exp:
    // a value or an array; at most 1e-6: none).
    if (arch_ == "maple") {
      const core::GGUFValue* v = f_->find(a + "swiglu_clamp_exp");
      if (v && v->type == core::GGUFType::ARRAY)
        clamps_ = f_->get_float_array(a + "swiglu_clamp_exp");
      else
        clamps_.assign(c_.n_layer, f_->get_float(a + "swiglu_clamp_exp"));
    }
    ffn_norm_ = arch_ == "glm4moe" || arch_ == "gpt-oss" || arch_ == "qwen35moe" || arch_ == "qwen3next" ? "post_attention_norm"
                : arch_ == "dbrx"                        ? "attn_output_norm"
                : relu_sqr_                              ? "attn_norm"
                                                         : "ffn_norm";
  }

  // Tests that show a part of llama4 matters: the same reference without it ("qk_l2_norm", "nope":
  // RoPE on every layer, "weight_inputs": the weights scale the experts' outputs instead).
  // maple without its SwiGLU clamps (a test that shows they matter).
  void ablate_clamps() { clamps_.clear(); }
  void ablate_llama4(const std::string& part) {
    if (part == "qk_l2_norm") llama4_kq_norm_ = false;
    if (part == "nope") no_rope_step_ = 0;
    if (part == "weight_inputs") weight_inputs_ = false;
  }

  // logits [T][n_vocab]; routing[l][t] = the k experts chosen for token t in layer l (empty for a
  // dense layer).
  std::vector<std::vector<double>> run(const std::vector<int32_t>& ids) {
    routing.assign(c_.n_layer, std::vector<std::vector<int>>(ids.size()));
    return ReferenceForward::run(ids, [this](std::vector<double>& x, int l, int t) {
      token_ = t;
      moe_block(x, l, routing[l][t]);
    });
  }

  // The multi-token-prediction block (ReferenceForward::run_mtp) with its experts; routing[n_layer].
  std::vector<std::vector<double>> run_mtp(const std::vector<int32_t>& ids, const std::vector<std::vector<double>>& h) {
    routing.assign(c_.n_layer + 1, std::vector<std::vector<int>>(ids.size()));
    return ReferenceForward::run_mtp(ids, h, [this](std::vector<double>& x, int l, int t) {
      token_ = t;
      moe_block(x, l, routing[l][t]);
    });
  }

  // The feed-forward of layer l on one token, in place: x += MoE(norm(x)) (or the dense FFN).
  void moe_block(std::vector<double>& x, int l, std::vector<int>& chosen) {
    const std::string p = "blk." + std::to_string(l) + ".";
    chosen.clear();
    if (l < dense_lead_ || (l + 1) % step_ != 0) return dense_ffn(x, p);
    const int d = c_.n_embd, E = c_.n_expert;
    const auto h = norm(x, p + ffn_norm_);
    // smallthinker's router reads the layer's input (before attn_norm), the experts h.
    const auto logits = linear(arch_ == "smallthinker" ? layer_in_[token_] : h, p + "ffn_gate_inp", E);  // + ffn_gate_inp.bias (gpt-oss)
    std::vector<double> score(E), sel(E);
    if (sigmoid_) {
      for (int e = 0; e < E; ++e) score[e] = 1 / (1 + std::exp(-logits[e]));
    } else {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double z = 0;
      for (int e = 0; e < E; ++e) z += (score[e] = std::exp(logits[e] - mx));
      for (auto& s : score) s /= z;
    }
    sel = score;
    if ((bias_any_ || (sigmoid_ && !bias_never_)) && f_->find_tensor(p + "exp_probs_b.bias")) {
      const auto b = tensor(p + "exp_probs_b.bias");
      for (int e = 0; e < E; ++e) sel[e] += b[e];
    }
    std::vector<bool> allowed(E, true);
    if (groups_ > 1) {
      const int gs = E / static_cast<int>(groups_);
      std::vector<double> gscore(groups_);
      for (int g = 0; g < groups_; ++g) {
        std::vector<double> v(sel.begin() + g * gs, sel.begin() + (g + 1) * gs);
        std::sort(v.rbegin(), v.rend());
        gscore[g] = v[0] + (gs > 1 ? v[1] : 0.0);
      }
      std::vector<int> order(groups_);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gscore[a] > gscore[b]; });
      std::fill(allowed.begin(), allowed.end(), false);
      for (int j = 0; j < groups_used_; ++j)
        for (int e = order[j] * gs; e < (order[j] + 1) * gs; ++e) allowed[e] = true;
    }
    std::vector<int> order;
    for (int e = 0; e < E; ++e)
      if (allowed[e]) order.push_back(e);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sel[a] > sel[b]; });
    chosen.assign(order.begin(), order.begin() + k_);
    double sum = 0;
    for (int e : chosen) sum += score[e];
    const int ff = c_.n_ff_expert;
    const auto gate = relu_sqr_ ? std::vector<double>() : tensor(p + "ffn_gate_exps.weight");
    const auto up = tensor(p + "ffn_up_exps.weight"), down = tensor(p + "ffn_down_exps.weight");
    std::vector<double> y(d, 0.0);
    // gpt-oss: biases of every expert's gate, up and down rows ({rows, n_expert}) and the clamped
    // SwiGLU min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1).
    const bool oai = arch_ == "gpt-oss";
    std::vector<double> gb, ub, db;
    if (oai) gb = tensor(p + "ffn_gate_exps.bias"), ub = tensor(p + "ffn_up_exps.bias"), db = tensor(p + "ffn_down_exps.bias");
    clamp_ = l < static_cast<int>(clamps_.size()) && clamps_[l] > 1e-6 ? clamps_[l] : 0.0;  // routed experts only
    for (int e : chosen) {
      double w = (norm_w_ ? score[e] / sum : score[e]) * scale_;
      std::vector<double> he = h;
      if (weight_inputs_) {  // the expert reads w * h, its output is added as it is
        for (double& v : he) v *= w;
        w = 1.0;
      }
      const auto out = relu_sqr_ ? relu_sqr_ffn(he, up.data() + static_cast<size_t>(e) * ff * d,
                                                down.data() + static_cast<size_t>(e) * d * ff, ff)
                       : oai ? swiglu_oai(he, gate.data() + static_cast<size_t>(e) * ff * d,
                                        up.data() + static_cast<size_t>(e) * ff * d,
                                        down.data() + static_cast<size_t>(e) * d * ff, ff, gb.data() + e * ff,
                                        ub.data() + e * ff, db.data() + e * d)
                           : swiglu(he, gate.data() + static_cast<size_t>(e) * ff * d,
                                    up.data() + static_cast<size_t>(e) * ff * d,
                                    down.data() + static_cast<size_t>(e) * d * ff, ff);
      for (int i = 0; i < d; ++i) y[i] += w * out[i];
    }
    clamp_ = 0.0;
    if (relu_sqr_) {  // the ungated shared expert
      const int sh = static_cast<int>(f_->tensor(p + "ffn_up_shexp.weight").ne[1]);
      const auto out = relu_sqr_ffn(h, tensor(p + "ffn_up_shexp.weight").data(), tensor(p + "ffn_down_shexp.weight").data(), sh);
      for (int i = 0; i < d; ++i) y[i] += out[i];
    } else if (f_->find_tensor(p + "ffn_gate_shexp.weight")) {
      const int sh = static_cast<int>(f_->tensor(p + "ffn_gate_shexp.weight").ne[1]);
      const auto gs = tensor(p + "ffn_gate_shexp.weight"), us = tensor(p + "ffn_up_shexp.weight"),
                 ds = tensor(p + "ffn_down_shexp.weight");
      double g = 1;  // deepseek2: ungated; qwen2moe: sigmoid(w_sh . h)
      if (f_->find_tensor(p + "ffn_gate_inp_shexp.weight")) {
        const auto wg = tensor(p + "ffn_gate_inp_shexp.weight");
        double zg = 0;
        for (int i = 0; i < d; ++i) zg += wg[i] * h[i];
        g = 1 / (1 + std::exp(-zg));
      }
      const auto out = swiglu(h, gs.data(), us.data(), ds.data(), sh);
      for (int i = 0; i < d; ++i) y[i] += g * out[i];
    }
    if (arch_ == "afmoe") y = norm(y, p + "post_ffw_norm");  // its post-norm of the FFN's output
    for (int i = 0; i < d; ++i) x[i] += residual_mul_ * y[i];  // granite's residual multiplier (else 1)
  }

  std::vector<std::vector<std::vector<int>>> routing;  // [layer][token] chosen experts

 private:
  std::vector<double> swiglu(const std::vector<double>& h, const double* wg, const double* wu, const double* wd, int ff) {
    const int d = static_cast<int>(h.size());
    std::vector<double> a(ff), out(d, 0.0);
    for (int r = 0; r < ff; ++r) {
      double g = 0, u = 0;
      for (int i = 0; i < d; ++i) {
        g += wg[static_cast<size_t>(r) * d + i] * h[i];
        u += wu[static_cast<size_t>(r) * d + i] * h[i];
      }
      if (clamp_ > 0) g = std::min(g, clamp_), u = std::clamp(u, -clamp_, clamp_);  // maple
      a[r] = relu_glu_ ? std::max(g, 0.0) * u : g / (1 + std::exp(-g)) * u;  // smallthinker: ReLU GLU
    }
    for (int o = 0; o < d; ++o)
      for (int r = 0; r < ff; ++r) out[o] += wd[static_cast<size_t>(o) * ff + r] * a[r];
    return out;
  }
  std::vector<double> swiglu_oai(const std::vector<double>& h, const double* wg, const double* wu, const double* wd,
                                 int ff, const double* bg, const double* bu, const double* bd) {
    const int d = static_cast<int>(h.size());
    std::vector<double> a(ff), out(d, 0.0);
    for (int r = 0; r < ff; ++r) {
      double g = bg[r], u = bu[r];
      for (int i = 0; i < d; ++i) {
        g += wg[static_cast<size_t>(r) * d + i] * h[i];
        u += wu[static_cast<size_t>(r) * d + i] * h[i];
      }
      g = std::min(g, 7.0);
      u = std::clamp(u, -7.0, 7.0);
      a[r] = g / (1 + std::exp(-1.702 * g)) * (u + 1);
    }
    for (int o = 0; o < d; ++o) {
      out[o] = bd[o];
      for (int r = 0; r < ff; ++r) out[o] += wd[static_cast<size_t>(o) * ff + r] * a[r];
    }
    return out;
  }
  int k_;
  bool norm_w_ = true, sigmoid_ = false;
  double scale_ = 1;
  int64_t groups_ = 1, groups_used_ = 1;
  int dense_lead_ = 0, step_ = 1;
  bool bias_any_ = false, bias_never_ = false;
  bool relu_glu_ = false;  // smallthinker: the routed experts' ReLU-gated GLU
  std::vector<double> clamps_;  // maple: [n_layer] the routed SwiGLU's clamp (swiglu_clamp_exp)
  double clamp_ = 0.0;          // the clamp of the block being computed (0: none)
  bool weight_inputs_ = false;  // llama4: the routing weight scales the expert's input
  bool relu_sqr_ = false;       // nemotron_h_moe: ungated squared-ReLU experts and shared expert
  // down(relu(up h)^2) over one expert's rows (up [ff, d], down [d, ff]).
  std::vector<double> relu_sqr_ffn(const std::vector<double>& h, const double* up, const double* down, int ff) const {
    const int d = static_cast<int>(h.size());
    std::vector<double> a(ff), y(d, 0.0);
    for (int r = 0; r < ff; ++r) {
      double u = 0;
      for (int i = 0; i < d; ++i) u += up[static_cast<size_t>(r) * d + i] * h[i];
      a[r] = u > 0 ? u * u : 0.0;
    }
    for (int o = 0; o < d; ++o)
      for (int r = 0; r < ff; ++r) y[o] += down[static_cast<size_t>(o) * ff + r] * a[r];
    return y;
  }
  int token_ = 0;          // the token run() is on, for smallthinker's router input
  std::string ffn_norm_;
};

// The model's forward of `ids` against the reference with k experts per token (0 = the file's),
// on a cache of n_ctx positions (the context phi3's and the reference's RoPE factors follow):
// every MoE layer routes every token to the reference's experts (as sets: the model may order
// equal-scored slots differently), and the logits agree within rel_tol of the largest reference
// logit. Returns the largest relative error seen.
inline double check_moe_against_reference(const std::string& path, const std::vector<int32_t>& ids, int k = 0,
                                          double rel_tol = 1e-5, int n_ctx = 32) {
  core::LoadOptions o;
  o.n_threads = 2;
  o.moe_k_override = k;
  o.cache_types = {DType::F32, DType::F32};  // the reference keeps unrounded keys and values
  auto m = core::Model::load(path, o);
  const int kk = m->moe_k();
  EXPECT_EQ(kk, k ? k : m->config().n_expert_used);
  core::KVCache kv = m->new_cache(n_ctx);
  std::vector<float> logits;
  const core::ForwardResult f = m->forward(ids, kv);
  f.logits.to_host(logits);
  MoEReferenceForward ref(path, kk);
  ref.set_context(n_ctx);
  const auto want = ref.run(ids);
  const int V = m->config().n_vocab, T = static_cast<int>(ids.size());
  EXPECT_EQ(f.stats.moe.size(), static_cast<size_t>(m->config().n_layer));
  int moe_layers = 0;
  for (int l = 0; l < m->config().n_layer && l < static_cast<int>(f.stats.moe.size()); ++l) {
    const moe::Routing& r = f.stats.moe[l];
    if (!m->config().is_moe_layer(l)) {
      EXPECT_EQ(r.n_tokens, 0) << "dense layer " << l;
      EXPECT_TRUE(ref.routing[l][0].empty());
      continue;
    }
    ++moe_layers;
    EXPECT_EQ(r.n_tokens, T);
    EXPECT_EQ(r.k, kk);
    for (int t = 0; t < T && r.n_tokens == T; ++t) {
      std::set<int> got, exp(ref.routing[l][t].begin(), ref.routing[l][t].end());
      for (int j = 0; j < kk; ++j) got.insert(r.expert_at(t, j));
      EXPECT_EQ(got, exp) << path << " layer " << l << " token " << t;
    }
  }
  EXPECT_GT(moe_layers, 0);
  double max_ref = 0, max_diff = 0;
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < V; ++j) {
      EXPECT_TRUE(std::isfinite(logits[t * V + j]));
      max_ref = std::max(max_ref, std::fabs(want[t][j]));
      max_diff = std::max(max_diff, std::fabs(want[t][j] - logits[t * V + j]));
    }
  EXPECT_GT(max_ref, 1.0);  // logits are not trivially small
  EXPECT_LE(max_diff, rel_tol * max_ref) << path << " k " << kk << ": max |logit| " << max_ref;
  if (std::getenv("SPECMOE_PRINT_REL")) std::fprintf(stderr, "REL %s k=%d %.3g\n", path.c_str(), kk, max_diff / max_ref);
  return max_ref > 0 ? max_diff / max_ref : 0.0;
}

}  // namespace specmoe::testing
