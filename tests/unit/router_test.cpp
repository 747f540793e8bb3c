// Routers: selection, tie-breaking, weights, k override, capacity dropping, DeepSeek-V3 group
// selection and bias, noisy top-k, on hand-made logits whose answers are worked out below.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "core/rng.h"
#include "moe/router_factory.h"

namespace specmoe::moe {
namespace {

// Router weights are computed in double and rounded once to float: 1 float ulp-ish of slack.
constexpr float kWeightTol = 1e-6f;

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

std::vector<int32_t> experts_of(const Routing& r, int t) {
  return {r.expert.begin() + static_cast<size_t>(t) * r.k,
          r.expert.begin() + static_cast<size_t>(t + 1) * r.k};
}

TEST(TopK, TiesGoToLowestIndexAndOrderIsDescending) {
  const float s[] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, -1.0f};
  int32_t out[4];
  top_k_indices(s, 6, 4, out);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 3);
  EXPECT_EQ(out[2], 4);
  EXPECT_EQ(out[3], 2);
}

TEST(TopK, NaNRanksLastAndMaskExcludes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float s[] = {nan, 0.5f, nan, -2.0f};
  int32_t out[3];
  top_k_indices(s, 4, 3, out);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 3);
  EXPECT_EQ(out[2], 0);  // among NaNs the lowest index
  const uint8_t allowed[] = {1, 0, 1, 1};
  top_k_indices(s, 4, 2, out, allowed);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[1], 0);
  EXPECT_THROW(top_k_indices(s, 4, 4, out, allowed), Error);
}

TEST(SoftmaxRouter, RenormalisedWeightsAreSoftmaxOverSelected) {
  // Token 0: logits {0.5, 2, -1, 1}; top-2 = {1, 3}; weights e^2/(e^2+e^1), e^1/(e^2+e^1).
  // Token 1: all equal -> experts {0, 1}, weights 0.5 each.
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f, 7.0f, 7.0f, 7.0f, 7.0f};
  SoftmaxTopKRouter r(4, 2, /*renormalize=*/true);
  Routing out;
  r.route(logits, nullptr, 2, out);
  ASSERT_EQ(out.n_tokens, 2);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{1, 3}));
  const double w0 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.0));
  EXPECT_NEAR(out.weight_at(0, 0), w0, kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 1), 1.0 - w0, kWeightTol);
  EXPECT_EQ(experts_of(out, 1), (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(out.weight_at(1, 0), 0.5, kWeightTol);
  EXPECT_NEAR(out.weight_at(1, 1), 0.5, kWeightTol);
  EXPECT_EQ(out.n_dropped_assignments, 0);
}

TEST(SoftmaxRouter, RawWeightsAreFullSoftmaxProbabilities) {
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
  SoftmaxTopKRouter r(4, 2, /*renormalize=*/false);
  Routing out;
  r.route(logits, nullptr, 1, out);
  const double z = std::exp(0.5) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.0);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(out.weight_at(0, 0), std::exp(2.0) / z, kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 1), std::exp(1.0) / z, kWeightTol);
  EXPECT_LT(out.weight_at(0, 0) + out.weight_at(0, 1), 0.95f);
  EXPECT_EQ(r.name(), "softmax_topk_raw");
}

TEST(SoftmaxRouter, KOverrideAndLimits) {
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
  SoftmaxTopKRouter r(4, 2, true);
  r.set_k(4);  // k = E: every expert, weights = full softmax
  Routing out;
  r.route(logits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{1, 3, 0, 2}));
  const double z = std::exp(0.5) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.0);
  EXPECT_NEAR(out.weight_at(0, 3), std::exp(-1.0) / z, kWeightTol);
  r.set_k(1);
  r.route(logits, nullptr, 1, out);
  EXPECT_EQ(out.k, 1);
  EXPECT_EQ(out.expert_at(0, 0), 1);
  EXPECT_NEAR(out.weight_at(0, 0), 1.0, kWeightTol);
  EXPECT_THROW(r.set_k(0), Error);
  EXPECT_THROW(r.set_k(5), Error);
  EXPECT_THROW(SoftmaxTopKRouter(4, 5, true), Error);
}

TEST(Capacity, SwitchFormula) {
  EXPECT_EQ(expert_capacity(1.0, 17, 2, 8), 5);   // ceil(34 / 8 = 4.25)
  EXPECT_EQ(expert_capacity(1.25, 3, 2, 4), 2);   // ceil(1.875)
  EXPECT_EQ(expert_capacity(0.75, 4, 2, 3), 2);   // exactly 2
  EXPECT_EQ(expert_capacity(2.0, 1, 1, 8), 1);    // ceil(0.25)
}

// Found by fuzz_router (tests/regression/router/capacity-factor-1e300.bin): a factor whose
// capacity overflows int64_t was converted unchecked (undefined behaviour; --moe-capacity 1e300
// reached it). Capacities are clamped to the batch's T * k assignments, and NaN is refused.
TEST(Capacity, HugeFactorsClampToTheBatchAndNaNIsRefused) {
  EXPECT_EQ(expert_capacity(1e300, 17, 2, 8), 34);
  EXPECT_EQ(expert_capacity(std::numeric_limits<double>::infinity(), 3, 2, 4), 6);
  EXPECT_EQ(expert_capacity(1e-300, 3, 2, 4), 1);  // ceil of a tiny positive share: one slot
  EXPECT_EQ(expert_capacity(-2.0, 3, 2, 4), 0);
  EXPECT_THROW(expert_capacity(std::numeric_limits<double>::quiet_NaN(), 3, 2, 4), Error);

  // A huge factor routes as dropless does.
  SoftmaxTopKRouter limited(4, 2, true), dropless(4, 2, true);
  limited.set_capacity_factor(1e300);
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 0.5f, 3.0f, 0.0f, 1.0f, -2.0f, 0.2f, 0.3f, 0.4f, 0.5f};
  Routing a, b;
  limited.route(logits.data(), nullptr, 3, a);
  dropless.route(logits.data(), nullptr, 3, b);
  EXPECT_EQ(a.expert, b.expert);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(a.n_dropped_assignments, 0);
}

TEST(Capacity, DropsExactlyTheAssignmentsBeyondCapacityInTokenOrder) {
  // E = 3, T = 4, k = 2, capacity_factor 0.75 -> capacity ceil(0.75 * 4 * 2 / 3) = 2.
  //   t0: (0, 1)  kept, kept          expert loads after: {1, 1, 0}
  //   t1: (0, 2)  kept, kept                               {2, 1, 1}
  //   t2: (0, 1)  DROP, kept                               {2, 2, 1}
  //   t3: (1, 0)  DROP, DROP  -> the whole token is dropped
  Routing r;
  r.reset(4, 2, 3);
  const int32_t e[] = {0, 1, 0, 2, 0, 1, 1, 0};
  for (int i = 0; i < 8; ++i) {
    r.expert[i] = e[i];
    r.weight[i] = 0.1f * (i + 1);
  }
  apply_capacity(r, 0.75);
  const int32_t want[] = {0, 1, 0, 2, Routing::kDropped, 1, Routing::kDropped, Routing::kDropped};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r.expert[i], want[i]) << "assignment " << i;
    if (want[i] == Routing::kDropped) {
      EXPECT_EQ(r.weight[i], 0.0f);
    } else {
      EXPECT_FLOAT_EQ(r.weight[i], 0.1f * (i + 1));  // kept weights are not renormalised
    }
  }
  EXPECT_EQ(r.n_dropped_assignments, 3);
  EXPECT_EQ(r.n_dropped_tokens, 1);
  EXPECT_EQ(r.tokens_per_expert(), (std::vector<int64_t>{2, 2, 1}));
}

TEST(Capacity, RouterAppliesItAndDroplessIsDefault) {
  // Four tokens all preferring expert 2 then 0 (E = 4, k = 1); capacity ceil(1.0*4*1/4) = 1.
  std::vector<float> logits;
  for (int t = 0; t < 4; ++t) logits.insert(logits.end(), {1.0f, 0.0f, 3.0f, -1.0f});
  SoftmaxTopKRouter r(4, 1, true);
  Routing out;
  r.route(logits.data(), nullptr, 4, out);
  EXPECT_EQ(out.n_dropped_assignments, 0);
  EXPECT_EQ(out.tokens_per_expert(), (std::vector<int64_t>{0, 0, 4, 0}));
  r.set_capacity_factor(1.0);
  r.route(logits.data(), nullptr, 4, out);
  EXPECT_EQ(out.expert_at(0, 0), 2);
  for (int t = 1; t < 4; ++t) EXPECT_EQ(out.expert_at(t, 0), Routing::kDropped);
  EXPECT_EQ(out.n_dropped_assignments, 3);
  EXPECT_EQ(out.n_dropped_tokens, 3);
}

TEST(Capacity, CountDropsRecountsWhatApplyCapacityCounted) {
  // T = 17 tokens, k = 3, E = 5 (awkward sizes), capacity factors that drop none, some and most:
  // a copy of the routing with its counters cleared (what a device sends back) recounts to the
  // same numbers.
  for (double cf : {0.0, 0.3, 0.5, 1.0}) {
    Routing r;
    r.reset(17, 3, 5);
    for (int t = 0; t < 17; ++t)
      for (int j = 0; j < 3; ++j) {
        r.expert[static_cast<size_t>(t) * 3 + j] = (t * 2 + j * (t % 3 + 1)) % 5 == 4 && j > 0 ? 3 : (t + 2 * j) % 5;
        r.weight[static_cast<size_t>(t) * 3 + j] = 0.25f;
      }
    apply_capacity(r, cf);
    Routing copy = r;
    copy.n_dropped_assignments = -7;
    copy.n_dropped_tokens = -7;
    count_drops(copy);
    EXPECT_EQ(copy.n_dropped_assignments, r.n_dropped_assignments) << "cf " << cf;
    EXPECT_EQ(copy.n_dropped_tokens, r.n_dropped_tokens) << "cf " << cf;
    if (cf == 0.3) {
      EXPECT_GT(r.n_dropped_tokens, 0);  // capacity 4 of 51 assignments: whole tokens drop
    }
  }
  // Hand-made: token 0 all dropped, token 1 one of two, token 2 none.
  Routing h;
  h.reset(3, 2, 4);
  h.expert = {Routing::kDropped, Routing::kDropped, 1, Routing::kDropped, 2, 3};
  count_drops(h);
  EXPECT_EQ(h.n_dropped_assignments, 3);
  EXPECT_EQ(h.n_dropped_tokens, 1);
  h.expert.pop_back();  // 5 ids for 3 x 2 slots
  EXPECT_THROW(count_drops(h), Error);
}

// DeepSeek-V3 example, E = 8 in 4 groups of 2, topk_group = 2, k = 2, scale 2.5.
//   logits  g0 {3, -3}   g1 {1, 0.9}   g2 {0.5, 1.2}   g3 {-1, -2}
//   sigmoid g0 {.953,.047} g1 {.731,.711} g2 {.622,.769} g3 {.269,.119}
//   group score (sum of top-2): g0 1.000, g1 1.442, g2 1.391, g3 0.388 -> keep g1, g2
//   eligible {2: .731, 3: .711, 4: .622, 5: .769} -> experts {5, 2}
// Expert 0 has the best single score but its group loses: group limiting must exclude it.
const float kDeepSeekLogits[] = {3.0f, -3.0f, 1.0f, 0.9f, 0.5f, 1.2f, -1.0f, -2.0f};

TEST(GroupRouter, GroupLimitedSelection) {
  GroupRouterOptions opt;
  opt.n_group = 4;
  opt.topk_group = 2;
  opt.scale = 2.5f;
  GroupRouter r(8, 2, opt);
  Routing out;
  r.route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{5, 2}));
  const double s5 = sigmoid(1.2), s2 = sigmoid(1.0);
  EXPECT_NEAR(out.weight_at(0, 0), 2.5 * s5 / (s5 + s2), 4 * kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 1), 2.5 * s2 / (s5 + s2), 4 * kWeightTol);
  EXPECT_EQ(r.max_k(), 4);
  EXPECT_THROW(r.set_k(5), Error);

  // Without group limiting the best two overall win: {0, 5}.
  GroupRouterOptions flat;
  flat.normalize = false;
  GroupRouter r1(8, 2, flat);
  r1.route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{0, 5}));
  EXPECT_NEAR(out.weight_at(0, 0), sigmoid(3.0), kWeightTol);  // raw sigmoid, no renorm
  EXPECT_NEAR(out.weight_at(0, 1), sigmoid(1.2), kWeightTol);
}

TEST(GroupRouter, BiasChangesSelectionButNotWeights) {
  // bias[4] = +0.5: expert 4's biased score 1.122 makes g2 the best group (1.891) and expert 4
  // the first pick; its weight still comes from the unbiased sigmoid(0.5) = 0.622.
  GroupRouterOptions opt;
  opt.n_group = 4;
  opt.topk_group = 2;
  opt.scale = 2.5f;
  opt.bias = {0, 0, 0, 0, 0.5f, 0, 0, 0};
  GroupRouter r(8, 2, opt);
  Routing out;
  r.route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{4, 5}));
  const double s4 = sigmoid(0.5), s5 = sigmoid(1.2);
  EXPECT_NEAR(out.weight_at(0, 0), 2.5 * s4 / (s4 + s5), 4 * kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 1), 2.5 * s5 / (s4 + s5), 4 * kWeightTol);

  // A bias that does not change the selection leaves the weights bit-identical.
  GroupRouterOptions base = opt, nudged = opt;
  base.bias.clear();
  nudged.bias = {0, 0, 0.01f, 0, 0, 0.02f, 0, 0};  // on the two selected experts {5, 2}
  GroupRouter rb(8, 2, base), rn(8, 2, nudged);
  Routing ob, on;
  rb.route(kDeepSeekLogits, nullptr, 1, ob);
  rn.route(kDeepSeekLogits, nullptr, 1, on);
  EXPECT_EQ(ob.expert, on.expert);
  EXPECT_EQ(ob.weight, on.weight);
}

TEST(GroupRouter, GroupTiesGoToLowestGroup) {
  // All logits equal: every group ties; groups {0, 1} are kept, experts {0, 1} chosen.
  const float logits[8] = {};
  GroupRouterOptions opt;
  opt.n_group = 4;
  opt.topk_group = 2;
  GroupRouter r(8, 3, opt);
  Routing out;
  r.route(logits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{0, 1, 2}));
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(out.weight_at(0, j), 1.0 / 3.0, kWeightTol);
  EXPECT_THROW(GroupRouter(8, 2, GroupRouterOptions{3, 1, true, 1.0f, {}}), Error);
  EXPECT_THROW(GroupRouter(8, 2, GroupRouterOptions{4, 5, true, 1.0f, {}}), Error);
  EXPECT_THROW(GroupRouter(8, 2, GroupRouterOptions{4, 2, true, 1.0f, {1.0f}}), Error);
}

// DeepSeek-V2's routing on the same logits: softmax over all 8 experts, then the groups.
//   softmax g0 {.6520, .0016} g1 {.0882, .0799} g2 {.0535, .1078} g3 {.0119, .0044}
//   group score (sum of top-2): g0 .6536, g1 .1681, g2 .1613, g3 .0163 -> keep g0, g1
//   eligible {0, 1, 2, 3} -> experts {0, 2}; weights p_e (norm_topk_prob false) times 16.
// The sigmoid router above keeps g1, g2 on these logits: the score function changes the groups.
TEST(SoftmaxGroupRouter, GroupLimitedSelectionWithScale) {
  RouterSpec spec;
  spec.kind = RouterKind::SoftmaxGroup;
  spec.n_expert = 8;
  spec.k = 2;
  spec.group.n_group = 4;
  spec.group.topk_group = 2;
  spec.group.normalize = false;
  spec.group.scale = 16.0f;
  auto r = make_router(spec);
  EXPECT_EQ(r->name(), "softmax_group");
  Routing out;
  r->route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{0, 2}));
  double z = 0;
  for (float l : kDeepSeekLogits) z += std::exp(l - 3.0);
  EXPECT_NEAR(out.weight_at(0, 0), 16.0 * 1.0 / z, 16 * kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 1), 16.0 * std::exp(-2.0) / z, 16 * kWeightTol);
  EXPECT_EQ(r->max_k(), 4);

  // normalize: the two weights sum to the scale.
  spec.group.normalize = true;
  auto rn = make_router(spec);
  rn->route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_NEAR(out.weight_at(0, 0) + out.weight_at(0, 1), 16.0, 16 * kWeightTol);
  EXPECT_NEAR(out.weight_at(0, 0), 16.0 / (1.0 + std::exp(-2.0)), 16 * kWeightTol);

  // A selection bias is added to the softmax scores (llama.cpp's exp_probs_b for any gating):
  // +0.2 on expert 5 lifts g2 above g1 and expert 5 above expert 2; weights stay unbiased.
  spec.group.normalize = false;
  spec.group.bias = {0, 0, 0, 0, 0, 0.2f, 0, 0};
  auto rb = make_router(spec);
  rb->route(kDeepSeekLogits, nullptr, 1, out);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{0, 5}));
  EXPECT_NEAR(out.weight_at(0, 1), 16.0 * std::exp(1.2 - 3.0) / z, 16 * kWeightTol);
}

// Without groups, bias or scale the softmax group router is Mixtral's (renormalised) or
// Qwen-MoE's (raw) softmax top-k, to float rounding.
TEST(SoftmaxGroupRouter, WithoutGroupsEqualsSoftmaxTopK) {
  const float logits[] = {0.3f, -1.2f, 2.5f, 0.31f, -0.7f, 1.9f, 0.0f, 2.4f, -3.0f, 1.0f, 0.8f, -0.1f};
  for (bool norm : {true, false}) {
    RouterSpec g;
    g.kind = RouterKind::SoftmaxGroup;
    g.n_expert = 12;
    g.k = 3;
    g.group.normalize = norm;
    RouterSpec s = g;
    s.kind = norm ? RouterKind::SoftmaxTopK : RouterKind::SoftmaxTopKRaw;
    Routing a, b;
    make_router(g)->route(logits, nullptr, 1, a);
    make_router(s)->route(logits, nullptr, 1, b);
    EXPECT_EQ(a.expert, b.expert);
    EXPECT_EQ(a.expert, (std::vector<int32_t>{2, 7, 5}));
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(a.weight[j], b.weight[j], kWeightTol) << "norm " << norm;
  }
  EXPECT_EQ(router_kind_from_name("softmax_group"), RouterKind::SoftmaxGroup);
}

TEST(NoisyRouter, NoiseIsScaledBySoftplusOfNoiseLogits) {
  // E = 3, n_embd = 2. x = {1, -1}. W_noise rows {1, 0}, {0, 0}, {2, 1}:
  //   noise logits {1, 0, 1}; softplus {1.3133, 0.6931, 1.3133}. Draws {0.5, -1, 2}.
  //   H = {0 + 0.5*1.3133, 1 - 0.6931, -1 + 2*1.3133} = {0.6566, 0.3069, 1.6265}
  //   top-2 = {2, 0}, weights softmax over those two.
  std::vector<float> wn = {1, 0, 0, 0, 2, 1};
  std::vector<double> draws = {0.5, -1.0, 2.0};
  size_t next = 0;
  NoisyTopKRouter r(3, 2, 2, wn, [&] { return draws[next++ % draws.size()]; });
  const float logits[] = {0.0f, 1.0f, -1.0f};
  const float x[] = {1.0f, -1.0f};
  Routing out;
  r.route(logits, x, 1, out);
  const double sp1 = std::log1p(std::exp(1.0)), sp0 = std::log(2.0);
  const double h0 = 0.5 * sp1, h1 = 1.0 - sp0, h2 = -1.0 + 2.0 * sp1;
  EXPECT_NEAR(r.last_noisy_logits()[0], h0, 1e-6);
  EXPECT_NEAR(r.last_noisy_logits()[1], h1, 1e-6);
  EXPECT_NEAR(r.last_noisy_logits()[2], h2, 1e-6);
  EXPECT_EQ(experts_of(out, 0), (std::vector<int32_t>{2, 0}));
  const double w = 1.0 / (1.0 + std::exp(h0 - h2));
  EXPECT_NEAR(out.weight_at(0, 0), w, kWeightTol);
  EXPECT_EQ(next, 3u);  // one draw per (token, expert)
  EXPECT_THROW(r.route(logits, nullptr, 1, out), Error);  // needs the hidden state
}

TEST(NoisyRouter, ZeroNoiseEqualsSoftmaxTopK) {
  std::vector<float> logits = {0.3f, -0.2f, 1.5f, 0.9f, 2.0f, 2.0f, -3.0f, 0.0f};
  std::vector<float> x(2 * 5, 0.25f);
  NoisyTopKRouter noisy(4, 2, 5, std::vector<float>(4 * 5, 0.1f), [] { return 0.0; });
  SoftmaxTopKRouter plain(4, 2, true);
  Routing a, b;
  noisy.route(logits.data(), x.data(), 2, a);
  plain.route(logits.data(), nullptr, 2, b);
  EXPECT_EQ(a.expert, b.expert);
  for (size_t i = 0; i < a.weight.size(); ++i) EXPECT_NEAR(a.weight[i], b.weight[i], kWeightTol);
}

TEST(NoisyRouter, SeededRngGivesReproducibleRouting) {
  // Same seed -> identical routing; another seed -> different noisy logits.
  const int T = 17, E = 8, D = 6;
  std::vector<float> logits(T * E), x(T * D), wn(E * D);
  for (int i = 0; i < T * E; ++i) logits[i] = 0.1f * static_cast<float>((i * 7) % 11) - 0.5f;
  for (int i = 0; i < T * D; ++i) x[i] = 0.05f * static_cast<float>((i * 5) % 13) - 0.3f;
  for (int i = 0; i < E * D; ++i) wn[i] = 0.2f * static_cast<float>((i * 3) % 7) - 0.6f;
  auto run = [&](uint64_t seed, Routing& out) {
    NoisyTopKRouter r(E, 2, D, wn, core::rng_normal_source(std::make_shared<core::Rng>(seed, 0)));
    r.route(logits.data(), x.data(), T, out);
    return r.last_noisy_logits();
  };
  Routing a, b, c;
  const auto ha = run(42, a), hb = run(42, b), hc = run(43, c);
  EXPECT_EQ(a.expert, b.expert);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(ha, hb);
  EXPECT_NE(ha, hc);
  SoftmaxTopKRouter plain(E, 2, true);
  Routing p;
  plain.route(logits.data(), nullptr, T, p);
  EXPECT_NE(a.expert, p.expert);  // the noise (std ~ softplus ~ 0.7) reorders some tokens
}

TEST(RouterFactory, NamesAndKinds) {
  for (auto kind : {RouterKind::SoftmaxTopK, RouterKind::SoftmaxTopKRaw, RouterKind::NoisyTopK,
                    RouterKind::SigmoidGroup})
    EXPECT_EQ(router_kind_from_name(router_kind_name(kind)), kind);
  EXPECT_THROW(router_kind_from_name("top1"), Error);
  RouterSpec spec;
  spec.kind = RouterKind::SigmoidGroup;
  spec.n_expert = 8;
  spec.k = 2;
  spec.capacity_factor = 1.5;
  spec.group.n_group = 4;
  spec.group.topk_group = 2;
  auto r = make_router(spec);
  EXPECT_EQ(r->name(), "sigmoid_group");
  EXPECT_EQ(r->capacity_factor(), 1.5);
  spec.kind = RouterKind::NoisyTopK;  // no noise weight / source: rejected
  EXPECT_THROW(make_router(spec), Error);
}

}  // namespace
}  // namespace specmoe::moe
