// Fuzz entry point of the MoE routers (target fuzz_router): every router family built from
// hostile specs (as a GGUF's expert keys or a config could give them) and run on hostile router
// logits, bias and hidden states. Shared by tests/fuzz/router_fuzz.cpp and the regression replay
// (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: byte 0 the family (bits 0-1; bit 5 set: softmax_group), normalize (bit 2), a bias (bit 3),
// capacity limit (bit 4);
// byte 1 n_expert - 1 (0..63); byte 2 k (mod n_expert + 2, so 0 and n_expert + 1 come up);
// byte 3 n_group - 1 (0..7) and topk_group (bits 3-5); byte 4 T (0..8); byte 5 the capacity
// factor and byte 6 the scale (indices into the tables below); byte 7 a set_k value (mod
// n_expert + 2); byte 8 n_embd - 1 (0..7, noisy top-k). The rest are little-endian floats: the
// logits [T, n_expert], then the bias [n_expert], the hidden state [T, n_embd] and the noise
// weights [n_expert, n_embd]; past the input's end the values are small and deterministic.
//
// Oracles for a router that was built (a spec it refuses must throw Error(InvalidArgument)):
//  - every slot holds a distinct expert in [0, n_expert), or kDropped under a capacity limit;
//  - no expert holds more assignments than the capacity; drop counts equal count_drops';
//  - with finite logits (and bias; noisy top-k: finite noisy logits): weights are finite; softmax weights
//    lie in [0, 1] and, renormalised, sum to 1 for a token that kept all its slots; the
//    selection is a top-k: no unselected expert scores strictly above a selected one
//    (softmax: the logits; group routers without groups: gate_scores + bias);
//  - routing is deterministic (the noise source is reseeded for the second run);
//  - set_k accepts exactly [1, max_k()].
#pragma once
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "fuzz_entry.h"
#include "moe/router_factory.h"

namespace specmoe::fuzz {

inline Outcome run_router(std::span<const uint8_t> bytes) {
  if (bytes.size() < 9) return Outcome::Rejected;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  static constexpr double kCapacity[] = {0.0, -1.0, 1e-9, 0.5, 1.0, 1.25, 2.0, 1e30, 1e300, kNaN, kInf, -kInf};
  static constexpr double kScale[] = {1.0, 2.5, 0.0, -1.0, 1e-30, 1e30, kNaN, kInf};

  const uint8_t flags = bytes[0];
  moe::RouterSpec spec;
  spec.kind = (flags & 0x20) ? moe::RouterKind::SoftmaxGroup : static_cast<moe::RouterKind>(flags & 3);
  spec.n_expert = 1 + bytes[1] % 64;
  const int E = spec.n_expert;
  spec.k = bytes[2] % (E + 2);
  spec.group.n_group = 1 + (bytes[3] & 7);
  spec.group.topk_group = (bytes[3] >> 3) & 7;
  spec.group.normalize = flags & 4;
  spec.group.scale = static_cast<float>(kScale[bytes[6] % std::size(kScale)]);
  spec.capacity_factor = (flags & 16) ? kCapacity[bytes[5] % std::size(kCapacity)] : 0.0;
  const int T = bytes[4] % 9;
  const int set_k_to = bytes[7] % (E + 2);
  const int n_embd = 1 + bytes[8] % 8;

  // The float stream: the input's bytes, then a deterministic tail.
  size_t at = 9;
  std::mt19937 tail(static_cast<unsigned>(bytes.size()));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  auto next_float = [&] {
    if (at + 4 <= bytes.size()) {
      float v;
      std::memcpy(&v, bytes.data() + at, 4);
      at += 4;
      return v;
    }
    return normal(tail);
  };
  std::vector<float> logits(static_cast<size_t>(T) * E);
  for (float& v : logits) v = next_float();
  if (flags & 8) {
    spec.group.bias.resize(static_cast<size_t>(E));
    for (float& v : spec.group.bias) v = next_float();
  }
  std::vector<float> hidden;
  if (spec.kind == moe::RouterKind::NoisyTopK) {
    spec.n_embd = n_embd;
    hidden.resize(static_cast<size_t>(T) * n_embd);
    for (float& v : hidden) v = next_float();
    spec.noise_weight.resize(static_cast<size_t>(E) * n_embd);
    for (float& v : spec.noise_weight) v = next_float();
  }
  auto all_finite = [](const std::vector<float>& v) {
    for (float x : v)
      if (!std::isfinite(x)) return false;
    return true;
  };
  const bool finite_inputs = all_finite(logits) && all_finite(spec.group.bias) && all_finite(hidden) &&
                      all_finite(spec.noise_weight);
  const moe::RouterKind kind = spec.kind;
  const moe::GroupRouterOptions group = spec.group;
  const double capacity_factor = spec.capacity_factor;

  auto build = [&](moe::RouterSpec s) {
    auto rng = std::make_shared<std::mt19937>(12345u);
    s.noise = [rng] { return std::normal_distribution<double>(0.0, 1.0)(*rng); };
    return moe::make_router(std::move(s));
  };
  std::unique_ptr<moe::Router> router, again;
  try {
    router = build(spec);
    again = build(spec);
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument,
                       std::string("a router spec was refused with the wrong kind: ") + e.what());
    return Outcome::Rejected;
  }
  const std::string what = fmt::format("{} router E={} k={} T={}", router->name(), E, router->k(), T);

  moe::Routing r, r2;
  try {
    router->route(logits.data(), hidden.empty() ? nullptr : hidden.data(), T, r);
  } catch (const Error& e) {
    // Only the capacity limit may refuse a batch, and only for a NaN factor.
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument && std::isnan(capacity_factor),
                       what + ": route threw " + e.what());
    return Outcome::Rejected;
  }
  again->route(logits.data(), hidden.empty() ? nullptr : hidden.data(), T, r2);
  SPECMOE_FUZZ_CHECK(r.expert == r2.expert, what + ": routing is not deterministic");
  SPECMOE_FUZZ_CHECK(r.weight.size() == r2.weight.size() &&
                         (r.weight.empty() ||
                          std::memcmp(r.weight.data(), r2.weight.data(), r.weight.size() * sizeof(float)) == 0),
                     what + ": routing weights are not deterministic");

  // Noisy top-k: softplus of a huge x W_noise overflows the float noisy logits to infinity (and
  // their softmax to NaN) from finite inputs; the weight oracles need finite noisy logits.
  bool finite = finite_inputs;
  if (const auto* noisy = dynamic_cast<const moe::NoisyTopKRouter*>(router.get()))
    finite = finite && all_finite(noisy->last_noisy_logits());

  const int k = router->k();
  SPECMOE_FUZZ_CHECK(r.n_tokens == T && r.k == k && r.n_expert == E, what + ": routing has the wrong shape");
  SPECMOE_FUZZ_CHECK(r.expert.size() == static_cast<size_t>(T) * k && r.weight.size() == r.expert.size(),
                     what + ": routing has the wrong size");
  const bool limited = capacity_factor > 0.0;
  const bool grouped = kind == moe::RouterKind::SigmoidGroup || kind == moe::RouterKind::SoftmaxGroup;
  std::vector<float> scores(static_cast<size_t>(E));
  for (int t = 0; t < T; ++t) {
    std::vector<uint8_t> seen(static_cast<size_t>(E), 0);
    bool kept_all = true;
    double sum = 0.0;
    for (int j = 0; j < k; ++j) {
      const int32_t e = r.expert_at(t, j);
      const float w = r.weight_at(t, j);
      if (e == moe::Routing::kDropped) {
        SPECMOE_FUZZ_CHECK(limited, what + ": a slot was dropped without a capacity limit");
        SPECMOE_FUZZ_CHECK(w == 0.0f, what + ": a dropped slot has a weight");
        kept_all = false;
        continue;
      }
      SPECMOE_FUZZ_CHECK(e >= 0 && e < E, fmt::format("{}: token {} slot {} routes to expert {}", what, t, j, e));
      SPECMOE_FUZZ_CHECK(!seen[e], fmt::format("{}: token {} routes to expert {} twice", what, t, e));
      seen[e] = 1;
      sum += w;
      if (!finite) continue;
      const bool softmax = !grouped;
      if (softmax || std::isfinite(group.scale))
        SPECMOE_FUZZ_CHECK(std::isfinite(w), fmt::format("{}: token {} has weight {} from finite inputs", what, t, w));
      if (softmax)
        SPECMOE_FUZZ_CHECK(w >= 0.0f && w <= 1.0f, fmt::format("{}: softmax weight {} outside [0, 1]", what, w));
    }
    if (!finite) continue;
    if (kept_all && k > 0 && (kind == moe::RouterKind::SoftmaxTopK || kind == moe::RouterKind::NoisyTopK))
      SPECMOE_FUZZ_CHECK(std::fabs(sum - 1.0) <= 1e-5 * k,
                         fmt::format("{}: token {}'s renormalised weights sum to {}", what, t, sum));
    // Top-k by the selection score, where it can be recomputed here exactly.
    const float* row = logits.data() + static_cast<size_t>(t) * E;
    if (grouped)
      moe::gate_scores(row, E, kind == moe::RouterKind::SoftmaxGroup ? moe::GateScore::Softmax : moe::GateScore::Sigmoid,
                       scores.data());
    auto score = [&](int e) -> double {
        if (grouped) return static_cast<double>(scores[static_cast<size_t>(e)] + (group.bias.empty() ? 0.0f : group.bias[e]));
      return row[e];
    };
    const bool exact = kind == moe::RouterKind::SoftmaxTopK || kind == moe::RouterKind::SoftmaxTopKRaw ||
                       (grouped && group.n_group == 1);
    if (exact && kept_all) {
      double lowest_selected = std::numeric_limits<double>::infinity();
      for (int j = 0; j < k; ++j) lowest_selected = std::min(lowest_selected, score(r.expert_at(t, j)));
      for (int e = 0; e < E; ++e)
        if (!seen[e])
          SPECMOE_FUZZ_CHECK(score(e) <= lowest_selected,
                             fmt::format("{}: token {} skipped expert {} (score {}) for one scoring {}", what, t, e,
                                         score(e), lowest_selected));
    }
  }

  // The capacity limit.
  if (limited && T > 0) {
    const int64_t cap = moe::expert_capacity(capacity_factor, T, k, E);
    for (int64_t n : r.tokens_per_expert())
      SPECMOE_FUZZ_CHECK(n <= cap, fmt::format("{}: an expert holds {} assignments over capacity {}", what, n, cap));
  }
  moe::Routing counted = r;
  moe::count_drops(counted);
  SPECMOE_FUZZ_CHECK(counted.n_dropped_assignments == r.n_dropped_assignments &&
                         counted.n_dropped_tokens == r.n_dropped_tokens,
                     what + ": count_drops disagrees with the capacity limit's counts");

  // set_k: exactly [1, max_k()].
  const int max_k = router->max_k();
  try {
    router->set_k(set_k_to);
    SPECMOE_FUZZ_CHECK(set_k_to >= 1 && set_k_to <= max_k, fmt::format("{}: set_k accepted {}", what, set_k_to));
    router->route(logits.data(), hidden.empty() ? nullptr : hidden.data(), T, r);
    SPECMOE_FUZZ_CHECK(r.k == set_k_to, what + ": set_k did not change k");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument && (set_k_to < 1 || set_k_to > max_k),
                       std::string("set_k refused a valid k: ") + e.what());
  }
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
