// Report statistics against hand-computed values; atomic writes; per-run aggregation.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/report_builder.h"
#include "experiments/statistics.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;

TEST(Statistics, StudentTQuantilesMatchTables) {
  // Two-sided 95% critical values t_{0.975, df} from standard tables (10 significant digits).
  // Tolerance 1e-8: the CDF is exact to ~1e-14 and bisection stops at 1e-12 relative.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047362, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.3026527297, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 3), 3.1824463053, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.2621571628, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 29), 2.0452296421, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764451052, 1e-8);
  EXPECT_NEAR(student_t_cdf(0.0, 5), 0.5, 1e-15);
  EXPECT_TRUE(std::isnan(student_t_quantile(0.975, 0)));
}

TEST(Statistics, MeanAndConfidenceInterval) {
  // {1,2,3,4}: mean 2.5, sd sqrt(5/3), half-width t_{.975,3} * sd / 2.
  std::vector<double> v = {1, 2, 3, 4};
  Estimate e = estimate_mean(v);
  EXPECT_EQ(e.n, 4);
  EXPECT_DOUBLE_EQ(e.mean, 2.5);
  EXPECT_NEAR(e.sd, 1.2909944487358056, 1e-12);
  EXPECT_NEAR(e.ci95, 2.0542602567710375, 1e-8);
  // {2,4,4,5,10}: mean 5, sd 3, half-width 2.7764451052 * 3 / sqrt(5).
  std::vector<double> w = {2, 4, 4, 5, 10};
  e = estimate_mean(w);
  EXPECT_DOUBLE_EQ(e.mean, 5.0);
  EXPECT_NEAR(e.sd, 3.0, 1e-12);
  EXPECT_NEAR(e.ci95, 3.7249919946142525, 1e-8);
  // NaNs are skipped; one value has no interval; none has no mean.
  std::vector<double> x = {NAN, 7.0, NAN};
  e = estimate_mean(x);
  EXPECT_EQ(e.n, 1);
  EXPECT_DOUBLE_EQ(e.mean, 7.0);
  EXPECT_TRUE(std::isnan(e.ci95));
  EXPECT_TRUE(std::isnan(estimate_mean(std::vector<double>{}).mean));
  // Identical values: zero-width interval.
  e = estimate_mean(std::vector<double>{3, 3, 3});
  EXPECT_DOUBLE_EQ(e.ci95, 0.0);
}

TEST(Statistics, AlphaFitAndPredictedSpeedup) {
  // a = 0.6, g = 4: tau = (1 - 0.6^5) / 0.4 = 2.3056; with c = 0.1 the speedup is 2.3056 / 1.4.
  EXPECT_NEAR(alpha_fit(2.3056, 4), 0.6, 1e-12);
  EXPECT_NEAR(predicted_speedup(0.6, 4, 0.1), 1.646857142857143, 1e-12);
  EXPECT_EQ(alpha_fit(1.0, 4), 0.0);
  EXPECT_EQ(alpha_fit(5.0, 4), 1.0);
  EXPECT_NEAR(predicted_speedup(1.0, 4, 0.25), 2.5, 1e-12);  // (g+1)/(gc+1)
  EXPECT_NEAR(alpha_fit(1.5, 1), 0.5, 1e-12);                // g=1: tau = 1 + a
  EXPECT_TRUE(std::isnan(alpha_fit(NAN, 4)));
  EXPECT_TRUE(std::isnan(predicted_speedup(0.5, 4, NAN)));
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({NAN, 5.0, 1.0}), 3.0);  // NaNs are skipped
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(AtomicFile, WritesCreatesFoldersAndLeavesNoTemporaries) {
  fs::path dir = specmoe::testing::scratch_dir() / "experiment_atomic" / "a" / "b";
  fs::remove_all(dir.parent_path().parent_path());
  std::string path = (dir / "f.txt").string();
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, std::string(100000, 'x'));
  EXPECT_EQ(read_file(path).size(), 100000u);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "f.txt");
  }
  EXPECT_EQ(entries, 1);
  // A path below a regular file cannot be written.
  try {
    write_file_atomic(path + "/below.txt", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(path + "/below.txt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_folder_writable(path + "/sub"), Error);
  EXPECT_NO_THROW(check_folder_writable(dir.string()));
  EXPECT_THROW(read_file((dir / "missing").string()), Error);
}

PromptRecord record(int prompt, int repeat, std::vector<int32_t> tokens, double wall, int64_t drafted, int64_t accepted,
                    int64_t steps, std::string category = "") {
  PromptRecord r;
  r.prompt_index = prompt;
  r.repeat = repeat;
  r.tokens = std::move(tokens);
  r.n_generated = static_cast<int64_t>(r.tokens.size());
  r.wall_s = wall;  // tokens_per_second() = n_generated / wall
  r.n_drafted = drafted;
  r.n_accepted = accepted;
  r.n_steps = steps;
  r.category = std::move(category);
  return r;
}

TEST(Aggregate, SpeedupAcceptanceAndIdentity) {
  nlohmann::json base_spec = {{"name", "ar"}, {"strategy", {{"name", "ar"}, {"kind", "autoregressive"}}},
                              {"sampling", {{"temperature", 0.0}}}, {"is_baseline", true}};
  nlohmann::json spec = {{"name", "sd"},
                         {"strategy", {{"name", "sd"}, {"kind", "speculative"}, {"draft_max", 4}}},
                         {"sampling", {{"temperature", 0.0}}},
                         {"baseline", "ar"}};
  std::vector<PromptRecord> base = {record(0, 0, {1, 2, 3, 4}, 0.4, 0, 0, 3, "a"),
                                    record(1, 0, {5, 6}, 0.2, 0, 0, 1, "b")};
  std::vector<PromptRecord> run = {record(0, 0, {1, 2, 3, 4}, 0.2, 8, 6, 2, "a"),   // 2x faster
                                   record(1, 0, {5, 6}, 0.05, 4, 1, 1, "b")};        // 4x faster
  run[0].position_drafted = {2, 2, 2, 2};
  run[0].position_accepted = {2, 2, 1, 1};
  run[1].position_drafted = {1, 1, 1, 1};
  run[1].position_accepted = {1, 0, 0, 0};
  run[0].draft_step_ms = 0.1, run[0].target_step_ms = 1.0;  // cost_ratio() 0.1
  run[1].draft_step_ms = 0.3, run[1].target_step_ms = 1.0;  // 0.3

  RunAggregate b = aggregate_run(base_spec, base, &base);
  EXPECT_DOUBLE_EQ(b.speedup.mean, 1.0);
  EXPECT_TRUE(b.identical_to_baseline.value_or(false));
  EXPECT_TRUE(std::isnan(b.alpha_fit));

  RunAggregate a = aggregate_run(spec, run, &base);
  EXPECT_EQ(a.n_generated, 6);
  EXPECT_EQ(a.n_drafted, 12);
  EXPECT_EQ(a.n_accepted, 7);
  EXPECT_EQ(a.n_steps, 3);
  EXPECT_DOUBLE_EQ(a.acceptance_rate, 7.0 / 12.0);
  EXPECT_DOUBLE_EQ(a.mean_accepted_length, 10.0 / 3.0);
  ASSERT_EQ(a.per_position_acceptance.size(), 4u);
  EXPECT_DOUBLE_EQ(a.per_position_acceptance[0], 1.0);
  EXPECT_DOUBLE_EQ(a.per_position_acceptance[1], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(a.per_position_acceptance[3], 1.0 / 3.0);
  // Paired speedups 2 and 4: mean 3, sd sqrt(2), half-width 12.7062047362 * 1.
  EXPECT_DOUBLE_EQ(a.speedup.mean, 3.0);
  EXPECT_NEAR(a.speedup.ci95, 12.7062047362, 1e-8);
  // Pooled: (0.6 s / 6 tok) / (0.25 s / 6 tok) = 2.4.
  EXPECT_NEAR(a.speedup_pooled, 2.4, 1e-12);
  EXPECT_TRUE(a.identical_to_baseline.value_or(false));
  EXPECT_DOUBLE_EQ(a.cost_ratio.mean, 0.2);
  EXPECT_NEAR(a.alpha_fit, alpha_fit(10.0 / 3.0, 4), 1e-15);
  EXPECT_NEAR(a.predicted_speedup, predicted_speedup(a.alpha_fit, 4, 0.2), 1e-12);
  ASSERT_EQ(a.categories.size(), 2u);
  EXPECT_EQ(a.categories[1].category, "b");
  EXPECT_DOUBLE_EQ(a.categories[1].speedup.mean, 4.0);

  // One token differs: not identical. At temperature > 0 the question does not apply.
  run[1].tokens = {5, 7};
  EXPECT_FALSE(aggregate_run(spec, run, &base).identical_to_baseline.value_or(true));
  spec["sampling"]["temperature"] = 0.7;
  EXPECT_FALSE(aggregate_run(spec, run, &base).identical_to_baseline.has_value());
  // No baseline: no speedup.
  EXPECT_TRUE(std::isnan(aggregate_run(spec, run, nullptr).speedup.mean));
}

TEST(Aggregate, MoeLoadStatistics) {
  nlohmann::json spec = {{"name", "ar"}, {"strategy", {{"kind", "autoregressive"}}}, {"sampling", {{"temperature", 0.0}}}};
  PromptRecord r = record(0, 0, {1, 2}, 1.0, 0, 0, 1);
  MoeRecord m;
  m.expert_tokens = {{3, 1, 0, 0}, {1, 1, 1, 1}};
  m.dropped_tokens = {2, 0};
  m.n_expert_used = 2;
  m.distinct_experts_sum = {0, 4.0, 6.0};
  m.distinct_experts_count = {0, 2, 2};
  m.expert_bytes_read = 1000;
  r.moe = m;
  RunAggregate a = aggregate_run(spec, {r}, nullptr);
  ASSERT_TRUE(a.moe.has_value());
  ASSERT_EQ(a.moe->layers.size(), 2u);
  const auto& l0 = a.moe->layers[0];
  // Counts {3,1,0,0}: mean 1, population sd sqrt(1.5), max/mean 3, Jain 16/(4*10).
  EXPECT_NEAR(l0.load_cv, std::sqrt(1.5), 1e-12);
  EXPECT_DOUBLE_EQ(l0.max_over_mean, 3.0);
  EXPECT_DOUBLE_EQ(l0.jain_index, 0.4);
  // Entropy in bits, as moe::ExpertStats reports it: -(3/4 log2 3/4 + 1/4 log2 1/4) = 0.8113 bits.
  EXPECT_NEAR(l0.routing_entropy_bits, -(0.75 * std::log2(0.75) + 0.25 * std::log2(0.25)), 1e-12);
  EXPECT_NEAR(l0.routing_entropy_bits, 0.811278124459133, 1e-12);
  EXPECT_EQ(l0.dropped_tokens, 2);
  EXPECT_DOUBLE_EQ(a.moe->layers[1].jain_index, 1.0);
  EXPECT_NEAR(a.moe->layers[1].routing_entropy_bits, 2.0, 1e-12);  // uniform over 4 experts: log2 4
  EXPECT_DOUBLE_EQ(a.moe->distinct_experts[1], 2.0);
  EXPECT_DOUBLE_EQ(a.moe->amplification[2], 1.5);
  EXPECT_DOUBLE_EQ(a.moe->uniform_expectation[2], 4.0 * (1.0 - 0.25));  // E(1-(1-k/E)^T)
  EXPECT_DOUBLE_EQ(a.moe->expert_bytes_per_token, 500.0);
}

}  // namespace
}  // namespace specmoe::exp
