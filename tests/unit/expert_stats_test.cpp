// Expert statistics on a fixed routing whose values are computed by hand below.
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "moe/expert_stats.h"

namespace specmoe::moe {
namespace {

// Loads {4, 0, 2, 2} (E = 4, T = 4, k = 2):
//   mean 2; population variance ((4-2)^2 + (0-2)^2 + 0 + 0) / 4 = 2; CV = sqrt(2)/2 = 0.7071068
//   max/mean = 4/2 = 2
//   Jain = (8)^2 / (4 * (16 + 0 + 4 + 4)) = 64 / 96 = 0.6666667
//   entropy of {1/2, 0, 1/4, 1/4} = 1/2*1 + 2 * 1/4*2 = 1.5 bits
//   U(4) = 3 distinct experts, amplification 3/2; uniform expectation 4 * (1 - (1/2)^4) = 3.75
Routing fixed_routing() {
  Routing r;
  r.reset(4, 2, 4);
  const int32_t e[] = {0, 2, 0, 3, 0, 2, 0, 3};
  for (int i = 0; i < 8; ++i) {
    r.expert[i] = e[i];
    r.weight[i] = 0.5f;
  }
  return r;
}

// Closed forms evaluated in double: only rounding of the last bits differs.
constexpr double kTol = 1e-12;

TEST(ExpertStats, HandComputedBalanceMeasures) {
  ExpertStats s(4, 2, /*layer=*/7);
  s.record_forward(fixed_routing(), /*bytes_per_expert=*/1000);
  EXPECT_EQ(s.expert_tokens(), (std::vector<int64_t>{4, 0, 2, 2}));
  EXPECT_NEAR(s.load_cv(), std::sqrt(2.0) / 2.0, kTol);
  EXPECT_NEAR(s.max_over_mean(), 2.0, kTol);
  EXPECT_NEAR(s.jain_index(), 64.0 / 96.0, kTol);
  EXPECT_NEAR(s.routing_entropy_bits(), 1.5, kTol);
  EXPECT_EQ(s.n_forwards(), 1);
  EXPECT_EQ(s.n_tokens(), 4);
  EXPECT_NEAR(s.mean_distinct_experts(), 3.0, kTol);
  EXPECT_NEAR(s.mean_amplification(), 1.5, kTol);
  EXPECT_EQ(s.expert_bytes(), 3000u);
  EXPECT_NEAR(uniform_distinct_experts(4, 2, 4), 3.75, kTol);
  EXPECT_NEAR(uniform_distinct_experts(8, 2, 1), 2.0, kTol);
  EXPECT_NEAR(uniform_distinct_experts(8, 8, 3), 8.0, kTol);
}

TEST(ExpertStats, BalancedAndEmptyLoads) {
  const std::vector<int64_t> flat = {3, 3, 3, 3};
  EXPECT_NEAR(load_cv(flat), 0.0, kTol);
  EXPECT_NEAR(load_jain_index(flat), 1.0, kTol);
  EXPECT_NEAR(load_entropy_bits(flat), 2.0, kTol);
  EXPECT_NEAR(load_max_over_mean(flat), 1.0, kTol);
  const std::vector<int64_t> one = {0, 5, 0, 0};  // everything on one expert
  EXPECT_NEAR(load_jain_index(one), 0.25, kTol);
  EXPECT_NEAR(load_entropy_bits(one), 0.0, kTol);
  EXPECT_NEAR(load_cv(one), std::sqrt(3.0), kTol);  // mean 1.25, std 1.25*sqrt(3)
  const std::vector<int64_t> none = {0, 0, 0};
  EXPECT_EQ(load_cv(none), 0.0);
  EXPECT_EQ(load_jain_index(none), 0.0);
  ExpertStats empty(3, 1);
  EXPECT_EQ(empty.mean_distinct_experts(), 0.0);
  EXPECT_EQ(empty.routing_entropy_bits(), 0.0);
}

TEST(ExpertStats, AccumulatesDropsAndPerSizeRecords) {
  ExpertStats s(4, 2);
  s.record_forward(fixed_routing(), 10);
  Routing r = fixed_routing();
  apply_capacity(r, 0.5);  // capacity ceil(0.5*4*2/4) = 1: t0 keeps (0, 2), t1 keeps 3 only...
  // t0 (0,2) kept; t1 (0 drop, 3 kept); t2 (0 drop, 2 drop) -> token dropped; t3 (0 drop, 3 drop)
  EXPECT_EQ(r.n_dropped_assignments, 5);
  EXPECT_EQ(r.n_dropped_tokens, 2);
  s.record_forward(r, 10);
  EXPECT_EQ(s.expert_tokens(), (std::vector<int64_t>{5, 0, 3, 3}));
  EXPECT_EQ(s.dropped_assignments(), 5);
  EXPECT_EQ(s.dropped_tokens(), 2);
  EXPECT_EQ(s.n_forwards(), 2);
  EXPECT_EQ(s.expert_bytes(), 60u);  // 3 + 3 experts touched
  ASSERT_EQ(s.by_size().size(), 1u);
  const ForwardSizeStats& f = s.by_size().at({4, 2});
  EXPECT_EQ(f.n_forwards, 2);
  EXPECT_EQ(f.min_distinct, 3);
  EXPECT_EQ(f.max_distinct, 3);
  const std::vector<int64_t> single = {0, 1, 0, 1};
  s.record_forward(single, 1, 2, 0, 0, 10);
  EXPECT_EQ(s.by_size().size(), 2u);
  EXPECT_NEAR(s.mean_distinct_experts(), (3 + 3 + 2) / 3.0, kTol);
  EXPECT_THROW(s.record_forward(std::vector<int64_t>{1, 2}, 1, 2, 0, 0, 10), Error);
}

TEST(ExpertStats, JsonRoundTripAndMerge) {
  ExpertStats s(4, 2, 3);
  s.record_forward(fixed_routing(), 1000);
  s.record_forward(std::vector<int64_t>{1, 1, 0, 0}, 1, 2, 0, 0, 1000);
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j.at("routing_entropy_unit"), "bits");
  EXPECT_EQ(j.at("expert_tokens"), nlohmann::json({5, 1, 2, 2}));
  EXPECT_EQ(j.at("layer"), 3);
  ASSERT_EQ(j.at("per_forward_size").size(), 2u);
  const auto& p1 = j.at("per_forward_size")[0];  // key (1, 2) sorts first
  EXPECT_EQ(p1.at("n_tokens"), 1);
  EXPECT_NEAR(p1.at("uniform_expected_distinct").get<double>(), 2.0, kTol);
  const auto& p4 = j.at("per_forward_size")[1];
  EXPECT_NEAR(p4.at("uniform_expected_distinct").get<double>(), 3.75, kTol);
  EXPECT_NEAR(p4.at("amplification").get<double>(), 1.5, kTol);

  const ExpertStats back = ExpertStats::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);

  ExpertStats merged(4, 2, 3);
  merged.merge(s);
  merged.merge(back);
  EXPECT_EQ(merged.expert_tokens(), (std::vector<int64_t>{10, 2, 4, 4}));
  EXPECT_EQ(merged.n_forwards(), 4);
  EXPECT_EQ(merged.by_size().at({4, 2}).n_forwards, 2);
  EXPECT_THROW(merged.merge(ExpertStats(5, 2)), Error);
  EXPECT_THROW(ExpertStats::from_json(nlohmann::json::parse(R"({"n_expert": 4})")), Error);
}

}  // namespace
}  // namespace specmoe::moe
