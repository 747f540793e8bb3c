// Report aggregates built from hand-made records with known numbers: decode-phase speedup (paired
// with the baseline's (prompt, repeat) record, prefill excluded), the MoE expert-traffic figures
// (amplification, uniform-routing expectation, rejected-read share), the record JSON round trip
// with and without the newer fields, and which sections report.md / report.html / runs.csv show.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/report_builder.h"
#include "experiments/report_tables.h"
#include "experiments/report_writer.h"
#include "experiments/result_json.h"

namespace specmoe::exp {
namespace {

// t_{0.975, 1}: the 95% two-sided critical value with one degree of freedom (two samples).
constexpr double kT1 = 12.7062047362;

PromptRecord timed(int prompt, int n_generated, double wall, double prefill, int64_t n_decoded,
                   std::string category = "") {
  PromptRecord r;
  r.prompt_index = prompt;
  r.tokens.assign(n_generated, 7);
  r.n_generated = n_generated;
  r.wall_s = wall;  // tokens_per_second() = n_generated / wall
  r.prefill_s = prefill;
  r.n_decoded = n_decoded;
  r.category = std::move(category);
  return r;
}

nlohmann::json run_spec(const std::string& name, const std::string& kind, bool baseline) {
  nlohmann::json j = {{"name", name},
                      {"config_hash", "h-" + name},
                      {"strategy", {{"name", name}, {"kind", kind}, {"drafter", "layerskip"}, {"draft_max", 2}}},
                      {"sampling", {{"temperature", 0.0}}}};
  if (baseline) j["is_baseline"] = true;
  else j["baseline"] = "ar";
  return j;
}

TEST(ReportDecodeSpeedup, PairsEachRecordWithTheBaselinesSamePromptAndRepeat) {
  // Baseline (autoregressive: n_decoded = n_generated - 1): decode seconds per decoded token
  // (1.0 - 0.2) / 4 = 0.2 and (0.7 - 0.1) / 3 = 0.2.
  std::vector<PromptRecord> base = {timed(0, 5, 1.0, 0.2, 4, "a"), timed(1, 4, 0.7, 0.1, 3, "b")};
  // Speculative run, listed in the other order: prompt 1 (0.3 - 0.1) / 4 = 0.05 -> 4x; prompt 0
  // (0.5 - 0.1) / 5 = 0.08 -> 2.5x.
  std::vector<PromptRecord> run = {timed(1, 4, 0.3, 0.1, 4, "b"), timed(0, 5, 0.5, 0.1, 5, "a")};
  RunAggregate b = aggregate_run(run_spec("ar", "autoregressive", true), base, &base);
  EXPECT_DOUBLE_EQ(b.decode_speedup.mean, 1.0);
  EXPECT_EQ(b.decode_speedup.n, 2);
  EXPECT_NEAR(b.decode_tokens_per_second.mean, 5.0, 1e-12);  // 1 / 0.2 for both

  RunAggregate a = aggregate_run(run_spec("sd", "speculative", false), run, &base);
  // Tolerance 1e-12: a few rounded divisions of numbers near 1.
  EXPECT_NEAR(a.decode_speedup.mean, 3.25, 1e-12);
  EXPECT_EQ(a.decode_speedup.n, 2);
  // sd = |4 - 2.5| / sqrt(2); half-width t * sd / sqrt(2) = t * 0.75.
  EXPECT_NEAR(a.decode_speedup.ci95, kT1 * 0.75, 1e-8);
  EXPECT_NEAR(a.decode_tokens_per_second.mean, (20.0 + 12.5) / 2, 1e-9);
  // The whole-generation speedup keeps its definition (prefill included): (1.0/5)/(0.5/5) = 2
  // and (0.7/4)/(0.3/4) = 7/3.
  EXPECT_NEAR(a.speedup.mean, (2.0 + 7.0 / 3.0) / 2, 1e-12);
  ASSERT_EQ(a.categories.size(), 2u);
  EXPECT_EQ(a.categories[0].category, "a");
  EXPECT_NEAR(a.categories[0].decode_speedup.mean, 2.5, 1e-12);
  EXPECT_NEAR(a.categories[1].decode_speedup.mean, 4.0, 1e-12);

  // Unknown prefill (an older record) or nothing decoded: that pair is NaN and left out of the mean.
  run[1].prefill_s = kNaN;
  a = aggregate_run(run_spec("sd", "speculative", false), run, &base);
  EXPECT_EQ(a.decode_speedup.n, 1);
  EXPECT_NEAR(a.decode_speedup.mean, 4.0, 1e-12);
  EXPECT_TRUE(std::isnan(a.decode_speedup.ci95));
  base[1].n_decoded = 0;
  a = aggregate_run(run_spec("sd", "speculative", false), run, &base);
  EXPECT_EQ(a.decode_speedup.n, 0);
  EXPECT_TRUE(std::isnan(a.decode_speedup.mean));
  // No baseline: no decode speedup, but the run's own decode throughput stays.
  a = aggregate_run(run_spec("sd", "speculative", false), run, nullptr);
  EXPECT_TRUE(std::isnan(a.decode_speedup.mean));
  EXPECT_NEAR(a.decode_tokens_per_second.mean, 20.0, 1e-9);
}

// An MoE record for E = 8, k = 2, two MoE layers. by_T: {T: (sum of per-forward layer-mean U,
// forwards)}; sums over forwards x layers as verify::MoEMetrics keeps them.
MoeRecord moe_record(std::vector<std::pair<double, int64_t>> by_T, double sum_distinct, double sum_uniform,
                     double sum_rejected, int64_t n_forwards, double bytes) {
  MoeRecord m;
  m.expert_tokens = {std::vector<int64_t>(8, 1), std::vector<int64_t>(8, 1)};
  m.dropped_tokens = {0, 0};
  m.n_expert_used = 2;
  m.n_expert = 8;
  m.n_moe_layers = 2;
  m.n_forwards = n_forwards;
  for (const auto& [sum, count] : by_T) {
    m.distinct_experts_sum.push_back(sum);
    m.distinct_experts_count.push_back(count);
  }
  m.sum_distinct = sum_distinct;
  m.sum_uniform = sum_uniform;
  m.sum_rejected_reads = sum_rejected;
  m.expert_bytes_read = bytes;
  return m;
}

// Uniform routing, E = 8, k = 2: T = 1 gives 8 (1 - 6/8) = 2; T = 3 gives 8 (1 - (6/8)^3) = 4.625.
constexpr double kUniform1 = 2.0, kUniform3 = 4.625;

std::vector<PromptRecord> moe_records() {
  // Record 0: two T=3 forwards (layer-mean U 4 and 5) and one T=1 forward (U 2), two layers each:
  // sum U = 2 (9 + 2) = 22, uniform 2 (2 x 4.625 + 2) = 22.5, 3 rejected reads, 8 MB.
  PromptRecord r0 = timed(0, 4, 1.0, 0.1, 4);
  r0.moe = moe_record({{0, 0}, {2.0, 1}, {0, 0}, {9.0, 2}}, 22.0, 2 * (2 * kUniform3 + kUniform1), 3.0, 3, 8e6);
  // Record 1: one T=3 forward with layer-mean U 6: sum U 12, uniform 9.25, 5 rejected, 4 MB.
  PromptRecord r1 = timed(1, 4, 1.0, 0.1, 4);
  r1.moe = moe_record({{0, 0}, {0, 0}, {0, 0}, {6.0, 1}}, 12.0, 2 * kUniform3, 5.0, 1, 4e6);
  return {r0, r1};
}

TEST(ReportMoeTraffic, AmplificationUniformExpectationAndRejectedShare) {
  EXPECT_DOUBLE_EQ(8.0 * (1.0 - std::pow(6.0 / 8.0, 3)), kUniform3);
  std::vector<PromptRecord> recs = moe_records();
  RunAggregate a = aggregate_run(run_spec("moe-sd", "speculative", false), recs, nullptr);
  ASSERT_TRUE(a.moe.has_value());
  const MoeAggregate& m = *a.moe;
  EXPECT_EQ(m.n_expert, 8);
  EXPECT_EQ(m.n_expert_used, 2);
  ASSERT_EQ(m.distinct_experts.size(), 4u);
  EXPECT_DOUBLE_EQ(m.distinct_experts[1], 2.0);
  EXPECT_DOUBLE_EQ(m.distinct_experts[3], 5.0);  // (9 + 6) / 3 forwards
  EXPECT_TRUE(std::isnan(m.distinct_experts[2]));  // no forward of 2 tokens
  EXPECT_DOUBLE_EQ(m.uniform_expectation[3], kUniform3);
  EXPECT_DOUBLE_EQ(m.uniform_expectation[1], kUniform1);
  // Pooled over the 4 forwards: mean U = (2 + 9 + 6) / 4 = 4.25, U/k = 2.125.
  EXPECT_DOUBLE_EQ(m.mean_distinct, 4.25);
  EXPECT_DOUBLE_EQ(m.amplification_mean, 2.125);
  // Uniform: (22.5 + 9.25) / (4 forwards x 2 layers) / k = 1.984375.
  EXPECT_DOUBLE_EQ(m.uniform_amplification, 1.984375);
  // Rejected share pooled over records: (3 + 5) / (22 + 12), not the mean of 3/22 and 5/12.
  EXPECT_DOUBLE_EQ(m.rejected_read_share, 8.0 / 34.0);
  EXPECT_DOUBLE_EQ(m.expert_bytes_per_token, 12e6 / 8);

  nlohmann::json j = aggregate_to_json(a);
  EXPECT_DOUBLE_EQ(j["moe"]["rejected_read_share"].get<double>(), 8.0 / 34.0);
  EXPECT_DOUBLE_EQ(j["moe"]["amplification"].get<double>(), 2.125);
  EXPECT_DOUBLE_EQ(j["moe"]["uniform_amplification"].get<double>(), 1.984375);
  EXPECT_DOUBLE_EQ(j["moe"]["expert_mb_per_token"].get<double>(), 1.5);

  // A record from before the pooled sums: U(T) and U/k still come from the by-size counts, the
  // pooled uniform and rejected figures become unknown rather than wrong.
  recs[1].moe->sum_distinct = recs[1].moe->sum_uniform = recs[1].moe->sum_rejected_reads = kNaN;
  a = aggregate_run(run_spec("moe-sd", "speculative", false), recs, nullptr);
  EXPECT_DOUBLE_EQ(a.moe->amplification_mean, 2.125);
  EXPECT_TRUE(std::isnan(a.moe->rejected_read_share));
  EXPECT_TRUE(std::isnan(a.moe->uniform_amplification));
  EXPECT_TRUE(aggregate_to_json(a)["moe"]["rejected_read_share"].is_null());
}

TEST(ReportRecordJson, RoundTripsNewFieldsAndLoadsOlderRecords) {
  PromptRecord r = moe_records()[0];
  r.run = "moe-sd";
  r.prompt_id = "p0";
  nlohmann::json j = record_to_json(r);
  PromptRecord back = record_from_json(j, "test");
  EXPECT_DOUBLE_EQ(back.prefill_s, 0.1);
  EXPECT_EQ(back.n_decoded, 4);
  ASSERT_TRUE(back.moe.has_value());
  EXPECT_EQ(back.moe->n_expert, 8);
  EXPECT_EQ(back.moe->n_moe_layers, 2);
  EXPECT_EQ(back.moe->n_forwards, 3);
  EXPECT_DOUBLE_EQ(back.moe->sum_distinct, 22.0);
  EXPECT_DOUBLE_EQ(back.moe->sum_uniform, 22.5);
  EXPECT_DOUBLE_EQ(back.moe->sum_rejected_reads, 3.0);
  EXPECT_NEAR(back.decode_seconds_per_token(), 0.9 / 4, 1e-15);

  // A record written before these fields existed: unknown, not zero, and no error.
  nlohmann::json old = j;
  old.erase("prefill_s");
  old.erase("n_decoded");
  for (const char* k : {"n_expert", "n_moe_layers", "n_forwards", "sum_distinct", "sum_uniform", "sum_rejected_reads"})
    old["moe"].erase(k);
  PromptRecord o = record_from_json(old, "old");
  EXPECT_TRUE(std::isnan(o.prefill_s));
  EXPECT_EQ(o.n_decoded, -1);
  EXPECT_TRUE(std::isnan(o.decode_seconds_per_token()));
  ASSERT_TRUE(o.moe.has_value());
  EXPECT_EQ(o.moe->n_expert, 0);
  EXPECT_EQ(o.moe->n_forwards, 0);
  EXPECT_TRUE(std::isnan(o.moe->sum_rejected_reads));
  EXPECT_EQ(o.moe->distinct_experts_count, r.moe->distinct_experts_count);
  // Nulls (what NaN serialises to) read back as unknown too.
  nlohmann::json nulls = j;
  nulls["prefill_s"] = nullptr;
  nulls["n_decoded"] = nullptr;
  nulls["moe"]["sum_uniform"] = nullptr;
  PromptRecord n = record_from_json(nulls, "nulls");
  EXPECT_TRUE(std::isnan(n.prefill_s));
  EXPECT_EQ(n.n_decoded, -1);
  EXPECT_TRUE(std::isnan(n.moe->sum_uniform));
  // Wrong types are reported with the field's name.
  nlohmann::json bad = j;
  bad["n_decoded"] = "four";
  try {
    record_from_json(bad, "bad record");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("n_decoded"), std::string::npos) << e.what();
  }
}

RunFile run_file(const nlohmann::json& spec, std::vector<PromptRecord> records) {
  RunFile f;
  f.run = spec;
  f.name = spec["name"];
  f.config_hash = spec["config_hash"];
  f.experiment_hash = "e";
  f.environment = {{"specmoe_commit", "test"}};
  for (auto& r : records) r.run = f.name;
  f.records = std::move(records);
  return f;
}

Report report_of(const std::vector<nlohmann::json>& specs, const std::vector<RunFile>& files) {
  ExperimentFile e;
  e.config = {{"experiment", {{"name", "t"}, {"seed", 1}, {"repeats", 1}}}, {"runs", specs}};
  e.config_hash = "c";
  return build_report(e, files);
}

TEST(ReportSections, MoeTrafficOnlyForMoeTargets) {
  std::vector<PromptRecord> base = {timed(0, 4, 1.0, 0.2, 3), timed(1, 4, 1.0, 0.2, 3)};
  std::vector<PromptRecord> moe_base = base;
  for (auto& r : moe_base) r.moe = moe_record({{0, 0}, {4.0, 2}}, 8.0, 2 * 2 * kUniform1, 0.0, 2, 1e6);
  nlohmann::json ar = run_spec("ar", "autoregressive", true), sd = run_spec("sd", "speculative", false);

  // Dense: no MoE section in any format, decode speedup shown.
  std::vector<PromptRecord> dense_sd = moe_records();
  for (auto& r : dense_sd) r.moe.reset();
  Report dense = report_of({ar, sd}, {run_file(ar, base), run_file(sd, dense_sd)});
  ASSERT_EQ(dense.runs.size(), 2u);
  EXPECT_FALSE(dense.runs[1].moe.has_value());
  std::string md = make_markdown_report_writer()->render(dense);
  EXPECT_NE(md.find("| decode speedup |"), std::string::npos);
  EXPECT_EQ(md.find("MoE expert traffic"), std::string::npos);
  EXPECT_EQ(md.find("Expert load"), std::string::npos);
  EXPECT_EQ(make_html_report_writer()->render(dense).find("MoE expert traffic"), std::string::npos);
  EXPECT_TRUE(moe_traffic_table(dense).empty());
  EXPECT_TRUE(moe_distinct_table(dense).empty());
  std::string dense_csv = make_csv_report_writer()->render(dense);
  EXPECT_NE(dense_csv.find(",h-sd,"), std::string::npos);
  // MoE cells empty, and the target step's time and GB/s (these records timed no step).
  EXPECT_EQ(dense_csv.substr(dense_csv.size() - 7), ",,,,,,\n") << dense_csv;

  // MoE: an autoregressive baseline (U(1) = k = 2) and the speculative run above.
  Report moe = report_of({ar, sd}, {run_file(ar, moe_base), run_file(sd, moe_records())});
  md = make_markdown_report_writer()->render(moe);
  EXPECT_NE(md.find("## MoE expert traffic"), std::string::npos);
  // sd: k 2, E 8, mean U 4.25, U/k 2.125 -> "2.12" or "2.13" by rounding mode, so built the same way.
  std::string row = "| sd | layerskip g=2 | 2 | 8 | 4.25 | " + format_number(2.125, 2) + " | " +
                    format_number(1.984375, 2) + " | 1.50 | " + format_number(100.0 * 8 / 34, 1) + " |";
  EXPECT_NE(md.find(row), std::string::npos) << md;
  EXPECT_NE(md.find("| ar | autoregressive | 2 | 8 | 2.00 | 1.00 | 1.00 | 0.25 | 0.0 |"), std::string::npos) << md;
  // U(T) table: T = 1 and 3 are rows (no forward had 2 tokens), uniform expectation last.
  EXPECT_NE(md.find("| 1 | 2.00 | 2.00 | 2.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 | - | 5.00 | " + format_number(kUniform3, 2) + " |"), std::string::npos) << md;
  const size_t u_table = md.find("### Distinct experts per layer");
  ASSERT_NE(u_table, std::string::npos);
  EXPECT_EQ(md.substr(u_table, md.find("\n## ", u_table) - u_table).find("\n| 2 |"), std::string::npos) << md;
  std::string html = make_html_report_writer()->render(moe);
  EXPECT_NE(html.find("<h2>MoE expert traffic</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Expert load</h2>"), std::string::npos);  // the heat map stays

  // runs.csv: the new columns come after config_hash, so earlier columns keep their places.
  std::string csv = make_csv_report_writer()->render(moe);
  std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find("config_hash,decode_tokens_per_second,decode_tokens_per_second_ci95,decode_speedup,"
                        "decode_speedup_ci95,moe_amplification,moe_uniform_amplification,moe_rejected_read_share,"
                        "moe_expert_mb_per_token"),
            std::string::npos)
      << header;
  // sd row: decode tokens/s 4 / 0.9 each (no CI: equal values, sd 0), decode speedup
  // (0.8 / 3) / (0.9 / 4) = 32/27 on both prompts, then the MoE columns.
  std::string sd_row = csv.substr(csv.find("\nsd,") + 1);
  sd_row = sd_row.substr(sd_row.find(",h-sd,") + 6);
  std::vector<double> cols;
  for (size_t pos = 0; pos <= sd_row.size();) {
    size_t end = sd_row.find_first_of(",\n", pos);
    const std::string cell = sd_row.substr(pos, end - pos);
    cols.push_back(cell.empty() ? std::nan("") : std::stod(cell));
    if (end == std::string::npos || sd_row[end] == '\n') break;
    pos = end + 1;
  }
  ASSERT_EQ(cols.size(), 10u) << sd_row;
  EXPECT_TRUE(std::isnan(cols[8]) && std::isnan(cols[9])) << sd_row;  // no target step timed
  // Tolerance 1e-5 relative: runs.csv writes 6 significant digits.
  const double expected[] = {4.0 / 0.9, 0.0, 32.0 / 27.0, 0.0, 2.125, 1.984375, 8.0 / 34.0, 1.5};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(cols[i], expected[i], 1e-5 * std::max(1.0, expected[i])) << i;
}

// The single-token target step's achieved weight bandwidth: bytes over the step time, pooled
// over records weighted by their steps, in the Summary table and runs.csv.
TEST(ReportSections, TargetStepWeightBandwidth) {
  std::vector<PromptRecord> recs = {timed(0, 4, 1.0, 0.2, 3), timed(1, 4, 1.0, 0.2, 3)};
  recs[0].n_steps = 3, recs[0].target_step_ms = 10.0, recs[0].target_weight_bytes = 3e8;
  recs[1].n_steps = 1, recs[1].target_step_ms = 30.0, recs[1].target_weight_bytes = 3e8;
  nlohmann::json ar = run_spec("ar", "autoregressive", true);
  Report r = report_of({ar}, {run_file(ar, recs)});
  ASSERT_EQ(r.runs.size(), 1u);
  // Mean step (3 x 10 + 1 x 30) / 4 = 15 ms: 3e8 bytes / 15 ms = 20 GB/s.
  EXPECT_DOUBLE_EQ(r.runs[0].pooled.target_weight_gbs(), 20.0);
  const TextTable t = summary_table(r);
  const auto col = std::find(t.headers.begin(), t.headers.end(), "target step GB/s") - t.headers.begin();
  ASSERT_LT(col, static_cast<long>(t.headers.size()));
  EXPECT_EQ(t.rows.at(0).at(col), format_number(20.0, 1));
  const std::string csv = make_csv_report_writer()->render(r);
  EXPECT_NE(csv.find(",target_step_ms,target_weight_gbs\n"), std::string::npos);
  EXPECT_NE(csv.find(",15,20\n"), std::string::npos) << csv;
  const nlohmann::json j = nlohmann::json::parse(make_json_report_writer()->render(r));
  EXPECT_DOUBLE_EQ(j.at("runs").at(0).at("metrics").at("target_weight_gbs").get<double>(), 20.0);

  // Records from before the field: unknown, shown as "-" (not 0 GB/s).
  for (auto& x : recs) x.target_weight_bytes = std::nan("");
  const Report old = report_of({ar}, {run_file(ar, recs)});
  EXPECT_EQ(summary_table(old).rows.at(0).at(col), "-");
}

}  // namespace
}  // namespace specmoe::exp
