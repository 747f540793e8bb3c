// One metrics schema (issue 12, item 8): the same writer (exp::metrics_to_json) and so the same
// names in `generate --json`, `speculate --json`, every record of records.jsonl and every run of
// report.json; one TimeBreakdown (verify::TimeBreakdown); undefined figures are null, not 0;
// records written before the schema was unified still load.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/synth.h"
#include "experiments/metrics_json.h"
#include "experiments/result_json.h"
#include "verify/metrics.h"

namespace fs = std::filesystem;
using nlohmann::json;
using specmoe::testing::CliRun;
using specmoe::testing::run_cli;

namespace specmoe::exp {
namespace {

const std::set<std::string> kMetricKeys = {
    "n_prompt", "n_generated", "n_decoded", "n_drafted", "n_accepted", "n_steps", "draft_max", "acceptance_rate",
    "mean_accepted_length", "per_position_acceptance", "position_drafted", "position_accepted",
    "accepted_length_histogram", "cost_ratio", "alpha_fit", "predicted_speedup", "tokens_per_second",
    "decode_tokens_per_second", "ttft_ms", "total_s", "prefill_s", "draft_step_ms", "target_step_ms", "target_weight_bytes",
    "target_weight_gbs", "time_breakdown", "tree_size", "tree_size_max", "depth_tried", "acceptance_by_depth", "verify_tokens", "verify_step_ms",
    "verify_cost_ratio", "predicted_speedup_measured_cost", "predicted_speedup_tree", "speedup_bound"};
const std::set<std::string> kTimeKeys = {"draft_s", "verify_forward_s", "sampling_s", "other_s"};

std::set<std::string> keys(const json& j) {
  std::set<std::string> k;
  for (const auto& [key, v] : j.items()) k.insert(key);
  return k;
}

TEST(MetricsJson, NamesValuesAndNulls) {
  verify::Metrics m;
  m.n_prompt = 5;
  m.resize_positions(2);
  m.record_step(2, 2);
  m.record_step(2, 0);
  m.record_step(1, 1);
  m.n_generated = 7;  // 3 accepted + 3 steps + ... as the loop counts them
  m.n_decoded = 7;
  m.total_s = 0.5;
  m.prefill_s = 0.1;
  m.ttft_s = 0.12;
  m.target_step_s = 0.010;
  m.target_weight_bytes = 2.5e8;  // 250 MB in 10 ms: 25 GB/s
  m.draft_token_s = 0.002;
  m.time = {0.05, 0.3, 0.1, 0.05};
  m.verify_draft_s = 0.045;  // 3 verification forwards of 15 ms
  const json j = metrics_to_json(m);
  EXPECT_EQ(keys(j), kMetricKeys);
  EXPECT_EQ(keys(j.at("time_breakdown")), kTimeKeys);
  EXPECT_EQ(j.at("n_drafted"), 5);
  EXPECT_EQ(j.at("n_accepted"), 3);
  EXPECT_DOUBLE_EQ(j.at("acceptance_rate").get<double>(), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(j.at("mean_accepted_length").get<double>(), (3.0 + 3.0) / 3.0);
  EXPECT_EQ(j.at("per_position_acceptance"), json::parse("[0.6666666666666666, 0.5]"));
  EXPECT_EQ(j.at("accepted_length_histogram"), json::parse("[1, 1, 1]"));
  // Chains as one-child trees: depth 1 was tried by all 3 steps (2 accepted), depth 2 by the one
  // that accepted depth 1 and drafted a second token (accepted).
  EXPECT_EQ(j.at("depth_tried"), json::parse("[3, 1]"));
  EXPECT_EQ(j.at("acceptance_by_depth"), json::parse("[0.6666666666666666, 1.0]"));
  EXPECT_DOUBLE_EQ(j.at("tree_size").get<double>(), 5.0 / 3.0);
  EXPECT_EQ(j.at("tree_size_max"), 2);
  EXPECT_DOUBLE_EQ(j.at("verify_tokens").get<double>(), 8.0 / 3.0);
  EXPECT_DOUBLE_EQ(j.at("verify_step_ms").get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(j.at("verify_cost_ratio").get<double>(), 1.5);
  // draft cost per step: 2 ms x 5 drafted / 3 steps / 10 ms; expected length 1 + 2/3 + 2/3.
  const double c_step = 0.002 * 5.0 / 3.0 / 0.010, length = 1.0 + 2.0 / 3.0 + 2.0 / 3.0;
  EXPECT_NEAR(j.at("predicted_speedup_tree").get<double>(), length / (c_step + 1.5), 1e-12);
  EXPECT_NEAR(j.at("speedup_bound").get<double>(), 3.0 / (c_step + 1.5), 1e-12);
  const double alpha = verify::fit_alpha(2.0, 2);
  EXPECT_NEAR(j.at("predicted_speedup_measured_cost").get<double>(), (1.0 + alpha + alpha * alpha) / (2 * 0.2 + 1.5),
              1e-9);
  EXPECT_DOUBLE_EQ(j.at("cost_ratio").get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j.at("alpha_fit").get<double>(), verify::fit_alpha(2.0, 2));
  EXPECT_DOUBLE_EQ(j.at("predicted_speedup").get<double>(), verify::speedup_model(verify::fit_alpha(2.0, 2), 2, 0.2));
  EXPECT_DOUBLE_EQ(j.at("tokens_per_second").get<double>(), 14.0);
  EXPECT_DOUBLE_EQ(j.at("decode_tokens_per_second").get<double>(), 7 / 0.4);
  EXPECT_DOUBLE_EQ(j.at("ttft_ms").get<double>(), 120.0);
  EXPECT_DOUBLE_EQ(j.at("draft_step_ms").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j.at("target_step_ms").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j.at("target_weight_bytes").get<double>(), 2.5e8);
  EXPECT_DOUBLE_EQ(j.at("target_weight_gbs").get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(j.at("time_breakdown").at("verify_forward_s").get<double>(), 0.3);

  // Plain decoding: nothing drafted, no draft timing: the speculative figures are null, not 0.
  verify::Metrics ar;
  ar.n_generated = 3;
  ar.record_step(0, 0);
  ar.record_step(0, 0);
  ar.total_s = 0.1;
  ar.prefill_s = std::nan("");  // unknown
  ar.n_decoded = -1;            // unknown
  const json a = metrics_to_json(ar);
  EXPECT_EQ(keys(a), kMetricKeys);
  for (const char* k : {"acceptance_rate", "cost_ratio", "alpha_fit", "predicted_speedup", "prefill_s", "n_decoded",
                        "decode_tokens_per_second", "draft_step_ms", "target_step_ms", "target_weight_bytes",
                        "target_weight_gbs", "verify_tokens",
                        "verify_step_ms", "verify_cost_ratio", "predicted_speedup_measured_cost",
                        "predicted_speedup_tree", "speedup_bound"})
    EXPECT_TRUE(a.at(k).is_null()) << k << " = " << a.at(k);
  EXPECT_DOUBLE_EQ(a.at("mean_accepted_length").get<double>(), 1.0);
}

TEST(MetricsJson, RecordsRoundTripAndOldRecordsLoad) {
  PromptRecord r;
  r.run = "x";
  r.prompt_id = "p0";
  r.tokens = {1, 2, 3};
  r.text = "ab\xE4\xBD";  // a cut character: kept exactly through text_bytes_b64
  r.n_prompt_tokens = 4;
  r.n_generated = 3;
  r.n_drafted = 4;
  r.n_accepted = 2;
  r.n_steps = 2;
  r.position_drafted = {2, 2};
  r.position_accepted = {1, 1};
  r.accept_length_histogram = {1, 0, 1};
  r.depth_tried = {2, 1};
  r.tree_size_max = 2;
  r.verify_step_ms = 7.5;
  r.wall_s = 0.25;
  r.prefill_s = 0.05;
  r.n_decoded = 3;
  r.ttft_ms = 60;
  r.draft_step_ms = 1.5;
  r.target_step_ms = 6.0;
  r.target_weight_bytes = 1.2e8;
  r.time_breakdown = {0.01, 0.2, 0.03, 0.01};
  const json j = json::parse(dump_json(record_to_json(r)));
  for (const auto& k : kMetricKeys) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_DOUBLE_EQ(j.at("cost_ratio").get<double>(), 0.25);
  const PromptRecord back = record_from_json(j, "test");
  EXPECT_EQ(back.text, r.text);
  EXPECT_EQ(back.tokens, r.tokens);
  EXPECT_EQ(back.accept_length_histogram, r.accept_length_histogram);
  EXPECT_EQ(back.depth_tried, r.depth_tried);
  EXPECT_EQ(back.tree_size_max, 2);
  EXPECT_DOUBLE_EQ(back.verify_step_ms, 7.5);
  EXPECT_DOUBLE_EQ(back.target_weight_bytes, 1.2e8);
  EXPECT_DOUBLE_EQ(j.at("target_weight_gbs").get<double>(), 1.2e8 / 0.006 / 1e9);
  EXPECT_DOUBLE_EQ(j.at("verify_cost_ratio").get<double>(), 7.5 / 6.0);
  EXPECT_EQ(back.n_prompt_tokens, 4);
  EXPECT_DOUBLE_EQ(back.wall_s, 0.25);
  EXPECT_DOUBLE_EQ(back.cost_ratio(), 0.25);
  EXPECT_DOUBLE_EQ(back.time_breakdown.sampling_s, 0.03);
  EXPECT_EQ(dump_json(record_to_json(back)), dump_json(record_to_json(r)));

  // A record as written before the schema was unified (n_prompt_tokens, wall_s, verify_s, sample_s).
  const json old = json::parse(R"({"run": "x", "prompt_index": 0, "prompt_id": "p0", "category": "", "repeat": 0,
      "n_prompt_tokens": 9, "tokens": [5], "text": "t", "n_generated": 1, "n_drafted": 0, "n_accepted": 0,
      "n_steps": 0, "wall_s": 0.5, "cost_ratio": null, "tokens_per_second": 2.0,
      "time_breakdown": {"draft_s": 0.0, "verify_s": 0.4, "sample_s": 0.05, "other_s": 0.05}})");
  const PromptRecord o = record_from_json(old, "old");
  EXPECT_EQ(o.n_prompt_tokens, 9);
  EXPECT_DOUBLE_EQ(o.wall_s, 0.5);
  EXPECT_DOUBLE_EQ(o.tokens_per_second(), 2.0);
  EXPECT_DOUBLE_EQ(o.time_breakdown.verify_forward_s, 0.4);
  EXPECT_DOUBLE_EQ(o.time_breakdown.sampling_s, 0.05);
  EXPECT_TRUE(std::isnan(o.prefill_s));
  EXPECT_TRUE(std::isnan(o.verify_step_ms));
  EXPECT_TRUE(o.depth_tried.empty());
  // The histogram's name before trees: accept_length_histogram.
  json older = j;
  older.erase("accepted_length_histogram");
  older["accept_length_histogram"] = {1, 0, 1};
  EXPECT_EQ(record_from_json(older, "older").accept_length_histogram, r.accept_length_histogram);
}

TEST(MetricsSchema, SameObjectInGenerateSpeculateRecordsAndReport) {
  SPECMOE_REQUIRE_CLI();
  const fs::path dir = specmoe::testing::scratch_dir() / fmt::format("metrics_schema_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  core::synth_write("tiny", model, 2);

  const CliRun gen = run_cli({"generate", "-m", model, "-p", "abcabc", "-n", "6", "--temp", "0", "--json"});
  ASSERT_EQ(gen.exit_code, 0) << gen.describe();
  const CliRun spec = run_cli({"speculate", "-m", model, "-p", "abcabc", "-n", "6", "--temp", "0", "--drafter",
                               "layerskip", "--exit-layer", "2", "--compare", "--json"});
  ASSERT_EQ(spec.exit_code, 0) << spec.describe();
  const json g = json::parse(gen.out), s = json::parse(spec.out);
  EXPECT_EQ(keys(g.at("metrics")), kMetricKeys);
  EXPECT_EQ(keys(s.at("metrics")), kMetricKeys);
  EXPECT_EQ(keys(s.at("baseline").at("metrics")), kMetricKeys);
  EXPECT_EQ(s.at("draft").at("exit_layer"), 2);
  // Same greedy tokens from generate and from speculate's baseline and speculative runs.
  EXPECT_EQ(g.at("tokens"), s.at("tokens"));
  EXPECT_EQ(g.at("tokens"), s.at("baseline").at("tokens"));
  EXPECT_EQ(g.at("metrics").at("n_generated"), 6);
  EXPECT_EQ(g.at("metrics").at("n_decoded"), 5);  // the first token comes from the prefill
  EXPECT_EQ(g.at("metrics").at("n_steps"), 5);
  EXPECT_TRUE(g.at("metrics").at("acceptance_rate").is_null());
  EXPECT_TRUE(s.at("metrics").at("acceptance_rate").is_number());
  EXPECT_GT(s.at("metrics").at("n_drafted").get<int>(), 0);

  const std::string toml = (dir / "schema.toml").string();
  std::ofstream(toml) << fmt::format(R"([experiment]
output = "{}"
warmup = 0
threads = 1
[models.m]
path = "{}"
[prompts]
list = ["abcabc", "hello"]
[sampling]
max_tokens = 6
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
[[strategy]]
name = "skip"
kind = "speculative"
target = "m"
drafter = "layerskip"
exit_layer = 2
)",
                                     (dir / "out").string(), model);
  const CliRun run = run_cli({"run", toml, "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  std::ifstream rin(dir / "out" / "records.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(rin, line)) {
    const json rec = json::parse(line);
    for (const auto& k : kMetricKeys) EXPECT_TRUE(rec.contains(k)) << k;
    EXPECT_EQ(keys(rec.at("time_breakdown")), kTimeKeys);
    ++n;
  }
  EXPECT_EQ(n, 4);
  std::ifstream jin(dir / "out" / "report.json");
  const json report = json::parse(jin);
  for (const auto& r : report.at("runs")) {
    SCOPED_TRACE(r.at("name").get<std::string>());
    const json& m = r.at("metrics");
    EXPECT_EQ(keys(m), kMetricKeys);
    EXPECT_EQ(keys(r.at("time_breakdown")), kTimeKeys);
    // The pooled object agrees with the report's own pooled figures.
    EXPECT_EQ(m.at("n_generated"), r.at("n_generated"));
    EXPECT_EQ(m.at("n_drafted"), r.at("n_drafted"));
    EXPECT_EQ(m.at("acceptance_rate"), r.at("acceptance_rate"));
    EXPECT_EQ(m.at("position_drafted"), r.at("position_drafted"));
    EXPECT_DOUBLE_EQ(m.at("time_breakdown").at("verify_forward_s").get<double>(),
                     r.at("time_breakdown").at("verify_forward_s").get<double>());
    EXPECT_NEAR(m.at("ttft_ms").get<double>(), r.at("ttft_ms").at("mean").get<double>(), 1e-9);  // the mean
  }
  EXPECT_EQ(report.at("config").at("strategies")[1].at("exit_layer"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace specmoe::exp
