// The op cases of the differential harness (tests/backend_ops.h) for sampling and the MoE block:
// distributions (against core::SamplerChain, the definition of the chain), sample and draw
// (against the CPU backend's rule with the same uniforms) and moe_ffn (against moe::MoELayer on
// the host, the MoE reference).
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend_ops.h"
#include "core/sampling.h"
#include "kernels/cpu/ops.h"
#include "moe/moe_layer.h"
#include "moe/router_factory.h"

namespace specmoe::testing::ops {

using core::SamplingParams;

inline std::string params_name(const SamplingParams& p) {
  std::string s = p.greedy() ? "greedy" : fmt::format("temp={} top_k={} top_p={} min_p={}", p.temperature, p.top_k,
                                                      p.top_p, p.min_p);
  if (p.repeat_penalty != 1.0f) s += fmt::format(" penalty={}/{}", p.repeat_penalty, p.repeat_last_n);
  if (p.no_repeat_ngram > 0) s += fmt::format(" no-repeat-{}", p.no_repeat_ngram);
  return s;
}

// The processed distributions of `rows` logits rows; row r's penalties see a history followed by
// the first r drafted tokens (a verification's rows). The kept set is compared exactly.
class DistributionsCase final : public OpCase {
 public:
  DistributionsCase(int64_t rows, int64_t n, SamplingParams params, Bound bound)
      : OpCase("distributions", std::move(bound)), rows_(rows), n_(n), params_(params) {}
  std::string shape() const override { return fmt::format("rows={} n={} {}", rows_, n_, params_name(params_)); }
  void run(Backend& b) override { b.distributions(logits_d_, rows_, n_, params_, history_, extra_, out_d_); }
  Outputs result(Backend&, Arena& a) override { return split(a.get(out_d_)); }
  double bytes() const override { return 8.0 * rows_ * n_; }

 protected:
  void make_inputs() override {
    logits_ = normal_floats(static_cast<size_t>(rows_ * n_), seed(), 3.0f);
    // Tokens from a small range, so that penalties and n-gram bans hit (repeated pairs).
    std::mt19937_64 rng(seed() + 1);
    const uint64_t range = static_cast<uint64_t>(std::min<int64_t>(n_, 24));
    history_.resize(48);
    for (int32_t& t : history_) t = static_cast<int32_t>(rng() % range);
    extra_.resize(static_cast<size_t>(rows_));
    for (int32_t& t : extra_) t = static_cast<int32_t>(rng() % range);
  }
  Outputs compute_reference() override {
    const core::SamplerChain chain(params_);
    std::vector<float> p(logits_.size());
    std::vector<int32_t> hist = history_;
    for (int64_t r = 0; r < rows_; ++r) {
      chain.distribution(std::span<const float>(&logits_[r * n_], static_cast<size_t>(n_)), hist,
                         std::span<float>(&p[r * n_], static_cast<size_t>(n_)));
      hist.push_back(extra_[r]);
    }
    return split(std::move(p));
  }
  void do_prepare(Backend&, Arena& a) override {
    logits_d_ = a.input(logits_, n_);
    out_d_ = a.output(logits_.size(), n_);
  }
  void free_inputs() override { logits_ = {}, history_ = {}, extra_ = {}; }

 private:
  static Outputs split(std::vector<float> p) {
    Output kept{"kept set"};
    kept.ids.reserve(p.size());
    for (float v : p) kept.ids.push_back(v > 0.0f);
    return {{"p", std::move(p)}, std::move(kept)};
  }
  int64_t rows_, n_;
  SamplingParams params_;
  std::vector<float> logits_;
  std::vector<int32_t> history_, extra_;
  float *logits_d_ = nullptr, *out_d_ = nullptr;
};

// Tokens drawn by Backend::sample from one processed distribution (SamplerChain's of random
// logits, or given) for a list of uniforms, against SamplerChain::sample_with with the same u.
class SampleCase final : public OpCase {
 public:
  SampleCase(int64_t n, SamplingParams params, int n_draws, Bound bound, std::vector<float> probs = {})
      : OpCase("sample", std::move(bound)), n_(probs.empty() ? n : static_cast<int64_t>(probs.size())),
        params_(params), n_draws_(n_draws), given_(std::move(probs)) {}
  std::string shape() const override {
    return fmt::format("n={} {}{} draws={}", n_, params_name(params_), given_.empty() ? "" : " given", n_draws_);
  }
  void run(Backend& b) override {
    for (size_t i = 0; i < u_.size(); ++i) tokens_[i] = b.sample(probs_d_, n_, params_, u_[i]);
  }
  Outputs result(Backend&, Arena&) override {
    Output o{"tokens"};
    o.ids = tokens_;
    return {o};
  }
  double bytes() const override { return 4.0 * n_ * std::max(6, n_draws_); }

 protected:
  void make_inputs() override {
    probs_ = given_;
    if (probs_.empty()) {
      const std::vector<float> logits = normal_floats(static_cast<size_t>(n_), seed(), 2.0f);
      core::SamplerChain(params_).distribution(logits, {}, probs_);
    }
    std::mt19937_64 rng(seed() + 1);
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    u_ = {0.0, 0.2, 0.25, 0.3, 0.5, 0.9999};  // with the given {0, .25, 0, .75, 0}: boundaries
    while (static_cast<int>(u_.size()) < n_draws_) u_.push_back(ud(rng));
    tokens_.assign(u_.size(), -2);
  }
  Outputs compute_reference() override {
    const core::SamplerChain chain(params_);
    Output o{"tokens"};
    for (double u : u_) o.ids.push_back(chain.sample_with(probs_, u));
    return {o};
  }
  void do_prepare(Backend&, Arena& a) override {
    probs_d_ = a.input(probs_, n_);
    std::fill(tokens_.begin(), tokens_.end(), -2);
  }
  void free_inputs() override { probs_ = {}, u_ = {}, tokens_ = {}; }

 private:
  int64_t n_;
  SamplingParams params_;
  int n_draws_;
  std::vector<float> given_, probs_;
  std::vector<double> u_;
  std::vector<int32_t> tokens_;
  float* probs_d_ = nullptr;
};

// A drafter's draw (Backend::draw): a draft distribution over n ids moved into the target's n_out
// (masked and renormalised when n > n_out, zero-padded when n < n_out, in place when aliased),
// the confidence (greedy: from the draft logits), then the token for each uniform. The reference
// is the CPU backend's draw on host memory (the rule every backend follows). NoMass: all of the
// draft's mass is on ids >= n_out, so no token is drawn (-1).
class DrawCase final : public OpCase {
 public:
  enum class Variant { Plain, Aliased, NoMass };
  DrawCase(int64_t n, int64_t n_out, SamplingParams params, bool confidence, Variant variant, int n_draws,
           Bound bound)
      : OpCase("draw", std::move(bound)), n_(n), n_out_(n_out), params_(params), confidence_(confidence),
        variant_(variant), n_draws_(n_draws) {}
  std::string shape() const override {
    static const char* names[] = {"", " in-place", " no-mass"};
    return fmt::format("n={} n_out={} {}{}{} draws={}", n_, n_out_, params_name(params_),
                       confidence_ ? " confidence" : "", names[static_cast<int>(variant_)], n_draws_);
  }
  void run(Backend& b) override {
    for (size_t i = 0; i < u_.size(); ++i) {
      const core::Draw d = b.draw(probs_d_, n_, q_d_, n_out_, params_, u_[i], confidence_ ? logits_d_ : nullptr);
      tokens_[i] = d.token;
      conf_[i] = d.confidence;
    }
  }
  Outputs result(Backend&, Arena& a) override { return outputs(a.get(q_d_), tokens_, conf_); }
  double bytes() const override { return 4.0 * (n_ + n_out_) * n_draws_; }

 protected:
  void make_inputs() override {
    logits_ = normal_floats(static_cast<size_t>(n_), seed(), 2.0f);
    if (variant_ == Variant::NoMass) {
      probs_.assign(static_cast<size_t>(n_), 0.0f);
      probs_.back() = 1.0f;  // n > n_out: the one id with mass is not the target's
    } else {
      core::SamplerChain(params_).distribution(logits_, {}, probs_);
    }
    std::mt19937_64 rng(seed() + 1);
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    u_.clear();
    while (static_cast<int>(u_.size()) < n_draws_) u_.push_back(ud(rng));
    tokens_.assign(u_.size(), -2);
    conf_.assign(u_.size(), 0.0f);
  }
  Outputs compute_reference() override {
    core::Backend& host = reference_backend();
    std::vector<float> q(static_cast<size_t>(n_out_));
    std::vector<int32_t> tokens;
    std::vector<float> conf;
    for (double u : u_) {
      const core::Draw d =
          host.draw(probs_.data(), n_, q.data(), n_out_, params_, u, confidence_ ? logits_.data() : nullptr);
      tokens.push_back(d.token);
      conf.push_back(d.confidence);
    }
    return outputs(std::move(q), tokens, conf);
  }
  void do_prepare(Backend&, Arena& a) override {
    probs_d_ = variant_ == Variant::Aliased ? a.inout(probs_, n_) : a.input(probs_, n_);
    q_d_ = variant_ == Variant::Aliased ? probs_d_ : a.output(static_cast<size_t>(n_out_), n_out_);
    logits_d_ = a.input(logits_, n_);
    std::fill(tokens_.begin(), tokens_.end(), -2);
  }
  void free_inputs() override { logits_ = {}, probs_ = {}, u_ = {}, tokens_ = {}, conf_ = {}; }

 private:
  static core::Backend& reference_backend() {
    static const std::shared_ptr<core::Backend> cpu = core::make_backend(Device{}, 1);
    return *cpu;
  }
  Outputs outputs(std::vector<float> q, const std::vector<int32_t>& tokens, const std::vector<float>& conf) const {
    Outputs out;
    if (variant_ != Variant::NoMass) out.push_back({"q", std::move(q)});  // no mass: q is all zeros
    Output t{"tokens"};
    t.ids = tokens;
    out.push_back(std::move(t));
    if (confidence_) out.push_back({"confidence", conf});
    return out;
  }
  int64_t n_, n_out_;
  SamplingParams params_;
  bool confidence_;
  Variant variant_;
  int n_draws_;
  std::vector<float> logits_, probs_, conf_;
  std::vector<double> u_;
  std::vector<int32_t> tokens_;
  float *probs_d_ = nullptr, *q_d_ = nullptr, *logits_d_ = nullptr;
};

// One MoE block: E experts of n_ff (SwiGLU), k per token, experts of `type` (the router matrix
// F32, as model files keep it), optionally a shared expert with its sigmoid gate, a router family
// (softmax top-k renormalised or raw; sigmoid + bias + groups) and a capacity factor. Outputs: the
// block's output, and the routing (experts exactly, weights by nMSE).
class MoECase final : public OpCase {
 public:
  struct Shape {
    DType type = DType::F32;
    int n_expert = 8, k = 2;
    int64_t n_embd = 64, n_ff = 96, n_ff_shared = 0, T = 1;
    moe::RouterKind router = moe::RouterKind::SoftmaxTopK;
    double capacity_factor = 0.0;
    bool oai = false;  // gpt-oss: router and expert biases, the clamped SwiGLU
    bool small = false;  // smallthinker: the router on an input of its own (the layer's), the ReLU GLU
    bool llama4 = false;  // sigmoid top-k, weights on the experts' inputs, an ungated shared expert
    bool relu_sqr = false;  // nemotron_h_moe: ungated squared-ReLU experts and shared expert (no gates)
    float clamp = 0.0f;     // maple: the routed experts' SwiGLU clamped at this limit (0 = none)
  };
  MoECase(Shape s, Bound bound) : OpCase("moe_ffn", std::move(bound)), s_(s) {}
  std::string shape() const override {
    return fmt::format("{} E={} k={} n_embd={} n_ff={}{} T={} {}{}{}", dtype_name(s_.type), s_.n_expert, s_.k, s_.n_embd,
                       s_.n_ff, s_.n_ff_shared ? fmt::format(" shared={}", s_.n_ff_shared) : "", s_.T,
                       moe::router_kind_name(s_.router),
                       s_.capacity_factor > 0 ? fmt::format(" capacity={}", s_.capacity_factor) : "",
                       s_.oai ? " biases swiglu_oai" : s_.small ? " router_x reglu" : s_.llama4 ? " weighted inputs"
                       : s_.relu_sqr ? " relu_sqr ungated" : s_.clamp > 0 ? fmt::format(" swiglu_clamp {}", s_.clamp) : "");
  }
  void run(Backend& b) override { b.moe_ffn(block_d_, s_.k, s_.capacity_factor, x_d_, router_x_d_, s_.T, out_d_, routing_); }
  Outputs result(Backend&, Arena& a) override { return outputs(a.get(out_d_), routing_); }
  double bytes() const override {
    const double experts = static_cast<double>(distinct_ > 0 ? distinct_ : std::min<int64_t>(s_.n_expert, s_.T * s_.k));
    const double expert = 3.0 * dtype_row_bytes(s_.type, s_.n_embd) * static_cast<double>(s_.n_ff);
    const double shared = s_.n_ff_shared ? 3.0 * dtype_row_bytes(s_.type, s_.n_embd) * s_.n_ff_shared : 0.0;
    return 4.0 * s_.n_embd * s_.n_expert + experts * expert + shared + 8.0 * s_.T * s_.n_embd;
  }
  double flops() const override {
    return 2.0 * s_.T * s_.n_embd * (s_.n_expert + 3.0 * (s_.k * s_.n_ff + s_.n_ff_shared));
  }

 protected:
  void make_inputs() override {
    const uint64_t sd = seed();
    const int64_t E = s_.n_expert;
    // Router logits ~ N(0, 1): gate_inp rows of N(0, 1/n_embd) against x ~ N(0, 1) (the
    // quantizer's weights are N(0, 0.5^2), so the router matrix is made here).
    std::vector<float> gi = normal_floats(static_cast<size_t>(E * s_.n_embd), sd, 1.0f / std::sqrt(float(s_.n_embd)));
    gate_inp_.bytes.resize(gi.size() * 4);
    std::memcpy(gate_inp_.bytes.data(), gi.data(), gate_inp_.bytes.size());
    gate_inp_.view = MatrixView::make(DType::F32, gate_inp_.bytes.data(), s_.n_embd, E);
    gate_ = s_.relu_sqr ? HostMatrix{} : make_matrix(s_.type, s_.n_embd, E * s_.n_ff, sd + 1);
    up_ = make_matrix(s_.type, s_.n_embd, E * s_.n_ff, sd + 2);
    down_ = make_matrix(s_.type, s_.n_ff, E * s_.n_embd, sd + 3);
    if (s_.n_ff_shared) {
      if (!s_.relu_sqr) gate_sh_ = make_matrix(s_.type, s_.n_embd, s_.n_ff_shared, sd + 4);
      up_sh_ = make_matrix(s_.type, s_.n_embd, s_.n_ff_shared, sd + 5);
      down_sh_ = make_matrix(s_.type, s_.n_ff_shared, s_.n_embd, sd + 6);
      if (!s_.llama4 && !s_.relu_sqr) gate_inp_sh_ = make_matrix(DType::F32, s_.n_embd, 1, sd + 7);
    }
    x_ = normal_floats(static_cast<size_t>(s_.T * s_.n_embd), sd + 8);
    router_x_ = s_.small ? normal_floats(static_cast<size_t>(s_.T * s_.n_embd), sd + 14) : std::vector<float>();
    biases_ = {};
    if (s_.oai) {  // router logit biases of their own scale; expert biases that move the clamp's inputs
      biases_.push_back(normal_floats(static_cast<size_t>(E), sd + 10, 0.5f));
      biases_.push_back(normal_floats(static_cast<size_t>(E * s_.n_ff), sd + 11, 0.5f));
      biases_.push_back(normal_floats(static_cast<size_t>(E * s_.n_ff), sd + 12, 0.5f));
      biases_.push_back(normal_floats(static_cast<size_t>(E * s_.n_embd), sd + 13, 0.1f));
    }
    spec_ = {};
    spec_.kind = s_.router;
    spec_.n_expert = s_.n_expert;
    spec_.k = s_.k;
    spec_.capacity_factor = s_.capacity_factor;
    if (s_.llama4) {  // one group, no bias, raw sigmoid scores
      spec_.kind = moe::RouterKind::SigmoidGroup;
      spec_.group.normalize = false;
    } else if (s_.router == moe::RouterKind::SigmoidGroup) {  // DeepSeek-V3's shape: groups, bias, scale
      spec_.group.n_group = 4;
      spec_.group.topk_group = 2;
      spec_.group.normalize = true;
      spec_.group.scale = 2.5f;
      spec_.group.bias = normal_floats(static_cast<size_t>(E), sd + 9, 0.3f);
    }
    if (s_.router == moe::RouterKind::SoftmaxGroup) {  // DeepSeek-V2's: softmax over groups, scaled, raw
      spec_.group.n_group = 4;
      spec_.group.topk_group = 2;
      spec_.group.normalize = false;
      spec_.group.scale = 16.0f;
    }
  }
  Outputs compute_reference() override {
    moe::MoELayer layer(host_weights(), moe::make_router(spec_));
    layer.router().set_k(s_.k);
    layer.router().set_capacity_factor(s_.capacity_factor);
    kernels::cpu::ThreadPool pool(1);
    std::vector<float> out(x_.size());
    layer.forward(pool, x_.data(), static_cast<int>(s_.T), out.data(), nullptr,
                  s_.small ? router_x_.data() : nullptr);
    distinct_ = layer.last_distinct_experts();
    return outputs(std::move(out), layer.last_routing());
  }
  void do_prepare(Backend& b, Arena& a) override {
    const moe::MoEWeights h = host_weights();
    auto res = [&](const MatrixView& v) { return v.empty() ? v : b.resident(v); };
    block_d_ = {};
    block_d_.weights = {res(h.gate_inp), res(h.gate_exps), res(h.up_exps),    res(h.down_exps),
                        res(h.gate_shexp), res(h.up_shexp), res(h.down_shexp), res(h.gate_inp_shexp)};
    if (s_.oai) {
      const float** dst[] = {&block_d_.weights.gate_inp_b, &block_d_.weights.gate_exps_b, &block_d_.weights.up_exps_b,
                             &block_d_.weights.down_exps_b};
      for (size_t i = 0; i < 4; ++i)
        *dst[i] = b.resident(core::VectorView{biases_[i].data(), static_cast<int64_t>(biases_[i].size())}).data;
      block_d_.weights.act = moe::MoEActivation::SwiGLUOai;
    }
    if (s_.small) block_d_.weights.act = moe::MoEActivation::ReGLU;
    block_d_.weights.weight_inputs = s_.llama4;
    if (s_.relu_sqr) block_d_.weights.act = block_d_.weights.shared_act = moe::MoEActivation::ReluSqr;
    block_d_.weights.swiglu_limit = s_.clamp;
    block_d_.router = spec_;
    if (!spec_.group.bias.empty())
      block_d_.bias = b.resident(core::VectorView{spec_.group.bias.data(), static_cast<int64_t>(s_.n_expert)});
    x_d_ = a.input(x_, s_.n_embd);
    router_x_d_ = s_.small ? a.input(router_x_, s_.n_embd) : nullptr;
    out_d_ = a.output(x_.size(), s_.n_embd);
    routing_ = {};
  }
  void free_inputs() override {
    gate_inp_ = gate_ = up_ = down_ = gate_sh_ = up_sh_ = down_sh_ = gate_inp_sh_ = {};
    x_ = {};
    router_x_ = {};
    spec_ = {};
    biases_ = {};
  }

 private:
  moe::MoEWeights host_weights() const {
    moe::MoEWeights w{gate_inp_.view, gate_.view, up_.view, down_.view, gate_sh_.view, up_sh_.view, down_sh_.view,
                      gate_inp_sh_.view};
    if (s_.oai) {
      w.gate_inp_b = biases_[0].data(), w.gate_exps_b = biases_[1].data(), w.up_exps_b = biases_[2].data();
      w.down_exps_b = biases_[3].data();
      w.act = moe::MoEActivation::SwiGLUOai;
    }
    if (s_.small) w.act = moe::MoEActivation::ReGLU;
    w.weight_inputs = s_.llama4;
    if (s_.relu_sqr) w.act = w.shared_act = moe::MoEActivation::ReluSqr;
    w.swiglu_limit = s_.clamp;
    return w;
  }
  static Outputs outputs(std::vector<float> out, const moe::Routing& r) {
    Output experts{"experts"};
    experts.ids = r.expert;
    return {{"out", std::move(out)}, std::move(experts), {"routing weights", r.weight}};
  }
  Shape s_;
  HostMatrix gate_inp_, gate_, up_, down_, gate_sh_, up_sh_, down_sh_, gate_inp_sh_;
  std::vector<float> x_, router_x_;  // router_x_: smallthinker's router input
  std::vector<std::vector<float>> biases_;  // oai: router [E], gate and up [E * n_ff], down [E * n_embd]
  moe::RouterSpec spec_;
  core::MoEBlock block_d_;
  float *x_d_ = nullptr, *out_d_ = nullptr, *router_x_d_ = nullptr;
  moe::Routing routing_;
  int distinct_ = 0;  // U(T) of the reference forward (for bytes())
};

}  // namespace specmoe::testing::ops
