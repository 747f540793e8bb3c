// MoELayer against a straightforward reference: per token, per selected expert, dense SwiGLU in
// double over the same dequantized weights, with routing re-derived independently (sorting in
// double). Every router family, F32/F16/Q8_0 experts, awkward sizes, shared experts, capacity
// dropping, thread-count determinism and the layer's statistics.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/cpu/quant.h"
#include "moe/moe_layer.h"
#include "moe/router_factory.h"

namespace specmoe::moe {
namespace {

namespace cpu = kernels::cpu;

// One tensor: float master values, their bytes in `type`, and the dequantized values the
// reference uses (so quantization error is common to both sides and the comparison isolates
// the MoE logic).
struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, 3> ne = {0, 1, 1};
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // [rows, ne[0]]

  // The tensor as the layer takes it: a stacked {n_in, n_out, n_expert} tensor is one matrix of
  // n_out * n_expert rows.
  MatrixView view() const { return MatrixView::make(type, bytes.data(), ne[0], ne[1] * ne[2]); }
  const float* row(int64_t r) const { return deq.data() + r * ne[0]; }
};

Tensor make_tensor(DType type, std::array<int64_t, 3> ne, float scale, std::mt19937& rng) {
  Tensor t;
  t.type = type;
  t.ne = ne;
  const int64_t rows = ne[1] * ne[2];
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> master(ne[0]);
  const size_t rb = dtype_row_bytes(type, ne[0]);
  t.bytes.resize(rb * rows);
  t.deq.resize(static_cast<size_t>(rows) * ne[0]);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : master) v = u(rng);
    cpu::quantize_row(type, master.data(), t.bytes.data() + r * rb, ne[0]);
    cpu::dequantize_row(type, t.bytes.data() + r * rb, t.deq.data() + r * ne[0], ne[0]);
  }
  return t;
}

struct Case {
  std::string name;
  RouterKind router = RouterKind::SoftmaxTopK;
  DType type = DType::F32;
  int n_embd = 24, n_ff = 40, n_expert = 4, k = 2, T = 3;
  int n_ff_sh = 0;             // > 0: shared expert
  bool shexp_gate = false;     // Qwen-MoE sigmoid gate on the shared expert
  int n_group = 1, topk_group = 1;
  bool bias = false;           // sigmoid_group: random selection bias
  double capacity_factor = 0;  // > 0: Switch dropping
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

struct Fixture {
  Tensor gate_inp, gate, up, down, gate_sh, up_sh, down_sh, gate_inp_sh;
  std::vector<float> x;            // [T, n_embd]
  std::vector<float> noise_weight; // [E, n_embd] (noisy router)
  std::vector<double> noise;       // [T, E] draws, token-major (noisy router)
  std::vector<float> bias;         // [E] (sigmoid_group)
  float scale = 1.0f;
};

Fixture make_fixture(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Fixture f;
  const float wscale = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
  f.gate_inp = make_tensor(DType::F32, {c.n_embd, c.n_expert, 1}, 1.0f, rng);
  f.gate = make_tensor(c.type, {c.n_embd, c.n_ff, c.n_expert}, 2 * wscale, rng);
  f.up = make_tensor(c.type, {c.n_embd, c.n_ff, c.n_expert}, 2 * wscale, rng);
  f.down = make_tensor(c.type, {c.n_ff, c.n_embd, c.n_expert}, 1.0f / std::sqrt(float(c.n_ff)), rng);
  if (c.n_ff_sh > 0) {
    f.gate_sh = make_tensor(c.type, {c.n_embd, c.n_ff_sh, 1}, 2 * wscale, rng);
    f.up_sh = make_tensor(c.type, {c.n_embd, c.n_ff_sh, 1}, 2 * wscale, rng);
    f.down_sh = make_tensor(c.type, {c.n_ff_sh, c.n_embd, 1}, 1.0f / std::sqrt(float(c.n_ff_sh)), rng);
    if (c.shexp_gate) f.gate_inp_sh = make_tensor(DType::F32, {c.n_embd, 1, 1}, wscale, rng);
  }
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  f.x.resize(static_cast<size_t>(c.T) * c.n_embd);
  for (auto& v : f.x) v = u(rng);
  f.noise_weight.resize(static_cast<size_t>(c.n_expert) * c.n_embd);
  for (auto& v : f.noise_weight) v = 0.3f * u(rng);
  std::normal_distribution<double> n01;
  f.noise.resize(static_cast<size_t>(c.T) * c.n_expert);
  for (auto& v : f.noise) v = n01(rng);
  if (c.bias) {
    f.bias.resize(c.n_expert);
    for (auto& v : f.bias) v = 0.3f * u(rng);
  }
  if (c.router == RouterKind::SigmoidGroup) f.scale = 2.5f;
  return f;
}

MoELayer make_layer(const Case& c, const Fixture& f, std::shared_ptr<cpu::ThreadPool> pool = nullptr) {
  MoEWeights w;
  w.gate_inp = f.gate_inp.view();
  w.gate_exps = f.gate.view();
  w.up_exps = f.up.view();
  w.down_exps = f.down.view();
  if (c.n_ff_sh > 0) {
    w.gate_shexp = f.gate_sh.view();
    w.up_shexp = f.up_sh.view();
    w.down_shexp = f.down_sh.view();
    if (c.shexp_gate) w.gate_inp_shexp = f.gate_inp_sh.view();
  }
  RouterSpec spec;
  spec.kind = c.router;
  spec.n_expert = c.n_expert;
  spec.k = c.k;
  spec.capacity_factor = c.capacity_factor;
  spec.group.n_group = c.n_group;
  spec.group.topk_group = c.topk_group;
  spec.group.scale = f.scale;
  spec.group.bias = f.bias;
  spec.n_embd = c.n_embd;
  spec.noise_weight = f.noise_weight;
  auto next = std::make_shared<size_t>(0);
  spec.noise = [&f, next] { return f.noise[(*next)++ % f.noise.size()]; };
  return MoELayer(w, make_router(std::move(spec)), std::move(pool));
}

// ---- the reference ----------------------------------------------------------------------------

double dotd(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Indices sorted by descending score; stable, so equal scores keep ascending index order.
std::vector<int> ranked(const std::vector<double>& s, const std::vector<bool>& allowed = {}) {
  std::vector<int> idx;
  for (int i = 0; i < static_cast<int>(s.size()); ++i)
    if (allowed.empty() || allowed[i]) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  return idx;
}

struct RefRouting {
  std::vector<int> expert;  // [T, k], -1 dropped
  std::vector<double> weight;
};

RefRouting reference_routing(const Case& c, const Fixture& f) {
  const int E = c.n_expert, k = c.k;
  RefRouting r;
  r.expert.assign(static_cast<size_t>(c.T) * k, -1);
  r.weight.assign(static_cast<size_t>(c.T) * k, 0.0);
  for (int t = 0; t < c.T; ++t) {
    const float* x = f.x.data() + static_cast<size_t>(t) * c.n_embd;
    std::vector<double> l(E);
    for (int e = 0; e < E; ++e) l[e] = dotd(x, f.gate_inp.row(e), c.n_embd);
    std::vector<int> sel;
    std::vector<double> w(k);
    if (c.router == RouterKind::SigmoidGroup) {
      std::vector<double> s(E), b(E);
      for (int e = 0; e < E; ++e) {
        s[e] = 1.0 / (1.0 + std::exp(-l[e]));
        b[e] = s[e] + (f.bias.empty() ? 0.0 : f.bias[e]);
      }
      const int gs = E / c.n_group;
      std::vector<double> gscore(c.n_group);
      for (int g = 0; g < c.n_group; ++g) {
        std::vector<double> m(b.begin() + g * gs, b.begin() + (g + 1) * gs);
        std::sort(m.rbegin(), m.rend());
        gscore[g] = m[0] + (gs > 1 ? m[1] : 0.0);
      }
      std::vector<bool> allowed(E, false);
      const auto groups = ranked(gscore);
      for (int i = 0; i < c.topk_group; ++i)
        for (int e = groups[i] * gs; e < (groups[i] + 1) * gs; ++e) allowed[e] = true;
      sel = ranked(b, allowed);
      double sum = 0.0;
      for (int j = 0; j < k; ++j) sum += s[sel[j]];
      for (int j = 0; j < k; ++j) w[j] = s[sel[j]] / sum * f.scale;
    } else {
      if (c.router == RouterKind::NoisyTopK) {
        for (int e = 0; e < E; ++e) {
          const double a = dotd(x, f.noise_weight.data() + static_cast<size_t>(e) * c.n_embd, c.n_embd);
          l[e] += f.noise[static_cast<size_t>(t) * E + e] * std::log1p(std::exp(a));
        }
      }
      sel = ranked(l);
      const bool renorm = c.router != RouterKind::SoftmaxTopKRaw;
      double z = 0.0;
      for (int e = 0; e < (renorm ? k : E); ++e) z += std::exp(l[renorm ? sel[e] : e] - l[sel[0]]);
      for (int j = 0; j < k; ++j) w[j] = std::exp(l[sel[j]] - l[sel[0]]) / z;
    }
    for (int j = 0; j < k; ++j) {
      r.expert[static_cast<size_t>(t) * k + j] = sel[j];
      r.weight[static_cast<size_t>(t) * k + j] = w[j];
    }
  }
  if (c.capacity_factor > 0) {  // Switch rule, spelled out: first `cap` assignments per expert
    const int64_t cap = static_cast<int64_t>(std::ceil(c.capacity_factor * c.T * k / E));
    std::vector<int64_t> used(E, 0);
    for (size_t i = 0; i < r.expert.size(); ++i)
      if (used[r.expert[i]]++ >= cap) {
        r.expert[i] = -1;
        r.weight[i] = 0.0;
      }
  }
  return r;
}

// SwiGLU in double: rows [ff, n_embd] of gate/up starting at row0g, rows [n_embd, ff] of down.
std::vector<double> reference_ffn(const Tensor& gate, const Tensor& up, const Tensor& down,
                                  int64_t row0g, int64_t row0d, int ff, int n_embd, const float* x) {
  std::vector<float> h(ff);
  std::vector<double> y(n_embd);
  for (int r = 0; r < ff; ++r) {
    const double g = dotd(x, gate.row(row0g + r), n_embd);
    const double u = dotd(x, up.row(row0g + r), n_embd);
    h[r] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
  }
  for (int o = 0; o < n_embd; ++o) {
    const float* d = down.row(row0d + o);
    double s = 0.0;
    for (int r = 0; r < ff; ++r) s += static_cast<double>(h[r]) * d[r];
    y[o] = s;
  }
  return y;
}

std::vector<double> reference_forward(const Case& c, const Fixture& f, const RefRouting& r) {
  std::vector<double> out(static_cast<size_t>(c.T) * c.n_embd, 0.0);
  for (int t = 0; t < c.T; ++t) {
    const float* x = f.x.data() + static_cast<size_t>(t) * c.n_embd;
    double* o = out.data() + static_cast<size_t>(t) * c.n_embd;
    for (int j = 0; j < c.k; ++j) {
      const int e = r.expert[static_cast<size_t>(t) * c.k + j];
      if (e < 0) continue;
      const auto y = reference_ffn(f.gate, f.up, f.down, int64_t(e) * c.n_ff,
                                   int64_t(e) * c.n_embd, c.n_ff, c.n_embd, x);
      for (int i = 0; i < c.n_embd; ++i) o[i] += r.weight[static_cast<size_t>(t) * c.k + j] * y[i];
    }
    if (c.n_ff_sh > 0) {
      const auto y = reference_ffn(f.gate_sh, f.up_sh, f.down_sh, 0, 0, c.n_ff_sh, c.n_embd, x);
      const double g = c.shexp_gate ? 1.0 / (1.0 + std::exp(-dotd(x, f.gate_inp_sh.row(0), c.n_embd)))
                                    : 1.0;
      for (int i = 0; i < c.n_embd; ++i) o[i] += g * y[i];
    }
  }
  return out;
}

// ---- the comparison ---------------------------------------------------------------------------

// Tolerance: both sides use the same dequantized weights, so the difference is float vs double
// arithmetic only: float dot products of <= 128 terms with random signs (error ~ sqrt(n) * 2^-24
// * |terms| ~ 1e-7 for O(1) outputs), float silu/exp, router weights rounded to float (~6e-8).
// The largest error observed over all cases is 2.5e-7 on outputs of magnitude ~1; atol 2e-6 +
// rtol 2e-6 leaves ~8x headroom and is ~5 orders below the effect of one wrong expert (O(0.1)).
constexpr double kAtol = 2e-6, kRtol = 2e-6;

double output_scale(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

class MoELayerVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(MoELayerVsReference, MatchesReference) {
  const Case& c = GetParam();
  const Fixture f = make_fixture(c, 1234u + c.T * 7u + c.n_expert);
  MoELayer layer = make_layer(c, f);
  ASSERT_EQ(layer.n_embd(), c.n_embd);
  ASSERT_EQ(layer.n_ff(), c.n_ff);
  ASSERT_EQ(layer.n_expert(), c.n_expert);
  std::vector<float> out(static_cast<size_t>(c.T) * c.n_embd, -999.0f);
  ExpertStats stats(c.n_expert, c.k);
  layer.forward(f.x.data(), c.T, out.data(), &stats);

  const RefRouting ref = reference_routing(c, f);
  const Routing& got = layer.last_routing();
  ASSERT_EQ(got.expert.size(), ref.expert.size());
  for (size_t i = 0; i < ref.expert.size(); ++i) {
    ASSERT_EQ(got.expert[i], ref.expert[i]) << "token " << i / c.k << " slot " << i % c.k;
    EXPECT_NEAR(got.weight[i], ref.weight[i], 1e-6 * std::max(1.0, std::abs(ref.weight[i])));
  }
  const std::vector<double> want = reference_forward(c, f, ref);
  // Q8_0 experts run through the integer AVX2 kernels, which quantize the activations to 8 bits
  // per block of 32 (scale = max/127): a relative error up to ~1/254 per activation, i.e. up to
  // ~0.4% of sum |w*x| per dot product, through two matmuls. 1e-2 of the output scale covers it,
  // while a wrong expert or weight changes outputs by O(1).
  const bool q8 = c.type == DType::Q8_0;
  const double tol_abs = q8 ? 1e-2 * output_scale(want) : kAtol, tol_rel = q8 ? 2e-2 : kRtol;
  double max_abs = 0.0, max_err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(want[i]));
    max_err = std::max(max_err, std::abs(out[i] - want[i]));
    ASSERT_LE(std::abs(out[i] - want[i]), tol_abs + tol_rel * std::abs(want[i]))
        << "element " << i << " (token " << i / c.n_embd << "): got " << out[i] << " want " << want[i];
  }
  EXPECT_GT(max_abs, 0.05) << "outputs are (nearly) all zero: the test could not fail";
  RecordProperty("max_abs_error", std::to_string(max_err));

  // Statistics of this forward.
  std::vector<int64_t> counts(c.n_expert, 0);
  int64_t dropped = 0;
  for (int e : ref.expert) e >= 0 ? ++counts[e] : ++dropped;
  const int64_t distinct = std::count_if(counts.begin(), counts.end(), [](int64_t v) { return v > 0; });
  EXPECT_EQ(stats.expert_tokens(), counts);
  EXPECT_EQ(stats.dropped_assignments(), dropped);
  if (c.capacity_factor > 0) {
    EXPECT_GT(dropped, 0) << "capacity case drops nothing: tests nothing";
  }
  EXPECT_EQ(stats.expert_bytes(), static_cast<uint64_t>(distinct) * layer.expert_bytes());
  EXPECT_EQ(layer.expert_bytes(),
            (f.gate.bytes.size() + f.up.bytes.size() + f.down.bytes.size()) / c.n_expert);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const RouterKind kinds[] = {RouterKind::SoftmaxTopK, RouterKind::SoftmaxTopKRaw,
                              RouterKind::NoisyTopK, RouterKind::SigmoidGroup};
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const bool q = type == DType::Q8_0;  // Q8_0 rows must be multiples of 32
    const int n_embd = q ? 64 : 24, n_ff = q ? 96 : 40;
    const std::string tn = dtype_name(type);
    for (RouterKind kind : kinds)
      for (int T : {1, 3, 17}) {
        Case c;
        c.name = tn + "_" + router_kind_name(kind) + "_T" + std::to_string(T);
        c.router = kind;
        c.type = type;
        c.n_embd = n_embd;
        c.n_ff = n_ff;
        c.T = T;
        if (kind == RouterKind::SigmoidGroup) {  // 8 experts in 4 groups, 2 groups kept, biased
          c.n_expert = 8;
          c.k = 3;
          c.n_group = 4;
          c.topk_group = 2;
          c.bias = true;
        }
        cases.push_back(c);
      }
    Case more{tn + "_more_experts_than_tokens", RouterKind::SoftmaxTopK, type, n_embd, n_ff, 16, 2, 3};
    Case kE{tn + "_k_equals_E", RouterKind::SoftmaxTopKRaw, type, n_embd, n_ff, 4, 4, 3};
    Case qwen{tn + "_qwen_shared_gated", RouterKind::SoftmaxTopKRaw, type, n_embd, n_ff, 8, 4, 17,
              q ? 128 : 56, true};
    Case dsv3{tn + "_deepseek_shared", RouterKind::SigmoidGroup, type, n_embd, n_ff, 8, 2, 3,
              q ? 64 : 40, false, 4, 2, true};
    Case cap{tn + "_capacity_1_0", RouterKind::SoftmaxTopK, type, n_embd, n_ff, 4, 2, 17};
    cap.capacity_factor = 1.0;
    Case k1{tn + "_top1", RouterKind::SoftmaxTopK, type, n_embd, n_ff, 3, 1, 17};
    cases.insert(cases.end(), {more, kE, qwen, dsv3, cap, k1});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllRoutersAndTypes, MoELayerVsReference, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(MoELayer, BitwiseIdenticalForAnyThreadCount) {
  Case c{"threads", RouterKind::SoftmaxTopK, DType::F16, 24, 40, 8, 2, 17, 56, true};
  const Fixture f = make_fixture(c, 99u);
  std::vector<float> a(static_cast<size_t>(c.T) * c.n_embd), b(a.size()), d(a.size());
  make_layer(c, f).forward(f.x.data(), c.T, a.data());
  make_layer(c, f, std::make_shared<cpu::ThreadPool>(3)).forward(f.x.data(), c.T, b.data());
  make_layer(c, f, std::make_shared<cpu::ThreadPool>(7)).forward(f.x.data(), c.T, d.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.data(), d.data(), a.size() * sizeof(float)), 0);
  EXPECT_GT(std::abs(a[0]) + std::abs(a[a.size() - 1]), 0.0f);
}

TEST(MoELayer, FullyDroppedTokenContributesZeroAndSharedExpertStillRuns) {
  // Capacity ceil(0.25 * 17 * 2 / 4) = 3 per expert: at most 12 of 34 assignments survive, so
  // some tokens lose every slot; their MoE output must be exactly 0.
  Case c{"drop", RouterKind::SoftmaxTopK, DType::F32, 24, 40, 4, 2, 17};
  c.capacity_factor = 0.25;
  const Fixture f = make_fixture(c, 5u);
  MoELayer layer = make_layer(c, f);
  std::vector<float> out(static_cast<size_t>(c.T) * c.n_embd);
  layer.forward(f.x.data(), c.T, out.data());
  const Routing& r = layer.last_routing();
  EXPECT_GE(r.n_dropped_assignments, 34 - 12);
  ASSERT_GT(r.n_dropped_tokens, 0);
  for (int t = 0; t < c.T; ++t) {
    bool all_dropped = true;
    for (int j = 0; j < c.k; ++j) all_dropped &= r.expert_at(t, j) == Routing::kDropped;
    float mx = 0.0f;
    for (int i = 0; i < c.n_embd; ++i) mx = std::max(mx, std::abs(out[t * c.n_embd + i]));
    if (all_dropped) {
      EXPECT_EQ(mx, 0.0f) << "token " << t;
    } else {
      EXPECT_GT(mx, 0.0f) << "token " << t;
    }
  }
}

TEST(MoELayer, EqualRouterRowsSendEveryTokenToTheLowestExperts) {
  // A zero router matrix gives equal logits: ties -> experts {0, 1} for every token, so only
  // two experts are touched whatever T is.
  Case c{"ties", RouterKind::SoftmaxTopK, DType::F32, 24, 40, 6, 2, 17};
  Fixture f = make_fixture(c, 11u);
  std::fill(f.gate_inp.deq.begin(), f.gate_inp.deq.end(), 0.0f);
  std::fill(f.gate_inp.bytes.begin(), f.gate_inp.bytes.end(), 0);
  MoELayer layer = make_layer(c, f);
  std::vector<float> out(static_cast<size_t>(c.T) * c.n_embd);
  ExpertStats stats(c.n_expert, c.k);
  layer.forward(f.x.data(), c.T, out.data(), &stats);
  for (int t = 0; t < c.T; ++t) {
    EXPECT_EQ(layer.last_routing().expert_at(t, 0), 0);
    EXPECT_EQ(layer.last_routing().expert_at(t, 1), 1);
    EXPECT_FLOAT_EQ(layer.last_routing().weight_at(t, 0), 0.5f);
  }
  EXPECT_EQ(stats.expert_tokens(), (std::vector<int64_t>{17, 17, 0, 0, 0, 0}));
  EXPECT_EQ(stats.expert_bytes(), 2 * layer.expert_bytes());
}

TEST(MoELayer, RuntimeKOverride) {
  Case c{"k", RouterKind::SoftmaxTopK, DType::F32, 24, 40, 8, 2, 3};
  const Fixture f = make_fixture(c, 3u);
  MoELayer layer = make_layer(c, f);
  std::vector<float> out(static_cast<size_t>(c.T) * c.n_embd);
  layer.router().set_k(5);
  layer.forward(f.x.data(), c.T, out.data());
  EXPECT_EQ(layer.last_routing().k, 5);
  Case c5 = c;
  c5.k = 5;
  const auto want = reference_forward(c5, f, reference_routing(c5, f));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(out[i] - want[i]), kAtol + kRtol * std::abs(want[i])) << i;
}

TEST(MoELayer, RejectsInconsistentWeights) {
  Case c{"bad", RouterKind::SoftmaxTopK, DType::F32, 24, 40, 4, 2, 3};
  const Fixture f = make_fixture(c, 1u);
  MoEWeights w;
  w.gate_inp = f.gate_inp.view();
  w.gate_exps = f.gate.view();
  w.up_exps = f.up.view();
  w.down_exps = f.down.view();
  auto router = [] { return std::make_unique<SoftmaxTopKRouter>(4, 2, true); };
  EXPECT_NO_THROW(MoELayer(w, router()));
  MoEWeights bad = w;
  bad.down_exps = MatrixView::make(DType::F32, f.down.bytes.data(), 24, 40 * 4);  // transposed
  EXPECT_THROW(MoELayer(bad, router()), Error);
  bad = w;
  bad.up_exps.data = nullptr;
  EXPECT_THROW(MoELayer(bad, router()), Error);
  EXPECT_THROW(MoELayer(w, std::make_unique<SoftmaxTopKRouter>(5, 2, true)), Error);
  bad = w;
  bad.gate_exps.type = DType::Q8_0;  // 24 is not a multiple of Q8_0's 32-element block
  EXPECT_THROW(MoELayer(bad, router()), Error);
  bad = w;
  bad.gate_exps.row_bytes += 4;  // rows that do not match the type's row size
  EXPECT_THROW(MoELayer(bad, router()), Error);
  bad = w;
  bad.gate_shexp = f.gate.view();  // shared expert without up/down
  EXPECT_THROW(MoELayer(bad, router()), Error);
  try {
    bad = w;
    bad.up_exps.n_out = 41 * 4;
    MoELayer layer(bad, router());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ffn_up_exps"), std::string::npos) << e.what();
  }
}

TEST(MoELayer, EmptyBatchIsANoOp) {
  Case c{"empty", RouterKind::SoftmaxTopK, DType::F32, 24, 40, 4, 2, 1};
  const Fixture f = make_fixture(c, 2u);
  MoELayer layer = make_layer(c, f);
  ExpertStats stats(4, 2);
  layer.forward(nullptr, 0, nullptr, &stats);
  EXPECT_EQ(stats.n_forwards(), 1);
  EXPECT_EQ(stats.expert_bytes(), 0u);
}

}  // namespace
}  // namespace specmoe::moe
