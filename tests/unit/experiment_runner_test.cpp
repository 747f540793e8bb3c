// The experiment runner with a fake executor: reports, resume, shards + merge, SIGINT,
// validation before running, compare_reports.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/report_writer.h"
#include "experiments/result_json.h"
#include "fake_executor.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;

using specmoe::testing::FakeExecutor;
const std::string& kToml = specmoe::testing::kFakeExperimentToml;
constexpr int kRuns = specmoe::testing::kFakeExperimentRuns;
constexpr int kRecordsPerRun = specmoe::testing::kFakeExperimentRecordsPerRun;

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

// A fresh folder with the TOML and (empty) model files the TOML names.
fs::path setup(const std::string& name, const std::string& toml = kToml) {
  fs::path dir = specmoe::testing::scratch_dir() / "experiment_runner" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "e.toml") << toml;
  std::ofstream(dir / "target.gguf") << "x";
  std::ofstream(dir / "draft.gguf") << "x";
  return dir;
}

RunOptions options_for(const fs::path& out) {
  RunOptions o;
  o.output_override = out.string();
  o.progress = false;
  return o;
}

nlohmann::json load_json(const fs::path& p) { return nlohmann::json::parse(read_file(p.string())); }

int count_lines(const fs::path& p) {
  std::string s = read_file(p.string());
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

const nlohmann::json& run_named(const nlohmann::json& report, const std::string& name) {
  for (const auto& r : report["runs"])
    if (r["name"] == name) return r;
  static nlohmann::json none;
  ADD_FAILURE() << "no run " << name;
  return none;
}

TEST(ExperimentRunner, FullRunWritesEveryReport) {
  fs::path dir = setup("full");
  FakeExecutor fake;
  ASSERT_EQ(run_experiment((dir / "e.toml").string(), options_for(dir / "out"), fake), kRunOk);
  EXPECT_EQ(fake.prepared, 1);
  EXPECT_EQ(fake.warmups, kRuns);  // one warmup per run, not recorded
  ASSERT_EQ(fake.executions.size(), static_cast<size_t>(kRuns));
  for (const auto& [name, n] : fake.executions) EXPECT_EQ(n, kRecordsPerRun) << name;

  for (const char* f : {"experiment.json", "report.json", "runs.csv", "records.jsonl", "report.md", "report.html"})
    EXPECT_TRUE(fs::exists(dir / "out" / f)) << f;
  EXPECT_TRUE(fs::exists(dir / "out" / "runs" / "model-g4-t0.7.json"));
  EXPECT_EQ(count_lines(dir / "out" / "records.jsonl"), kRuns * kRecordsPerRun);
  EXPECT_EQ(count_lines(dir / "out" / "runs.csv"), kRuns + 1);

  nlohmann::json rep = load_json(dir / "out" / "report.json");
  ASSERT_EQ(rep["runs"].size(), static_cast<size_t>(kRuns));
  EXPECT_TRUE(rep["missing_runs"].empty());
  EXPECT_EQ(rep["seeds"]["experiment_seed"], 11);
  EXPECT_EQ(rep["config"]["experiment"]["name"], "fake");
  EXPECT_FALSE(rep["environment"]["cpu_model"].get<std::string>().empty());
  const auto& m = run_named(rep, "model-g2-t0");
  EXPECT_EQ(m["baseline"], "ar-t0");
  EXPECT_NEAR(m["speedup"]["mean"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(m["speedup"]["ci95"].get<double>(), 0.0, 1e-9);
  EXPECT_EQ(m["identical_to_baseline"], true);
  EXPECT_EQ(m["n_records"], kRecordsPerRun);
  EXPECT_EQ(m["n_generated"], 8 * kRecordsPerRun);
  EXPECT_EQ(m["n_accepted"], 4 * kRecordsPerRun);
  EXPECT_EQ(m["n_drafted"], 8 * kRecordsPerRun);
  EXPECT_DOUBLE_EQ(m["acceptance_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m["mean_accepted_length"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(m["per_position_acceptance"][0].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(m["per_position_acceptance"][1].get<double>(), 0.0);
  // tau 2 with g 2: a = 0.618..., predicted = tau / (g c + 1) = 2 / 1.2.
  EXPECT_NEAR(m["predicted_speedup"].get<double>(), 2.0 / 1.2, 1e-9);
  EXPECT_TRUE(run_named(rep, "model-g2-t0.7")["identical_to_baseline"].is_null());
  EXPECT_EQ(run_named(rep, "ar-t0")["is_baseline"], true);

  std::string md = read_file((dir / "out" / "report.md").string());
  EXPECT_NE(md.find("| model-g2-t0 | model g=2 |"), std::string::npos);
  EXPECT_NE(md.find("## Acceptance by draft position"), std::string::npos);
  EXPECT_NE(md.find("specmoe run " + (dir / "e.toml").string()), std::string::npos);
  std::string html = read_file((dir / "out" / "report.html").string());
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Speedup vs baseline"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("Expert load"), std::string::npos);  // no MoE statistics in this run
}

TEST(ExperimentRunner, ResumeSkipsFinishedRunsAndRerunsChangedOnes) {
  fs::path dir = setup("resume");
  std::string toml = (dir / "e.toml").string();
  {
    FakeExecutor fake;
    ASSERT_EQ(run_experiment(toml, options_for(dir / "out"), fake), kRunOk);
  }
  RunOptions resume = options_for(dir / "out");
  resume.resume = true;
  {
    FakeExecutor fake;
    ASSERT_EQ(run_experiment(toml, resume, fake), kRunOk);
    EXPECT_TRUE(fake.executions.empty());
    EXPECT_EQ(fake.warmups, 0);
  }
  // Changing the n-gram strategy changes only the n-gram runs' config hashes.
  std::ofstream(toml) << replace(kToml, "drafter = \"ngram\"\n", "drafter = \"ngram\"\nngram_max = 4\n");
  {
    FakeExecutor fake;
    ASSERT_EQ(run_experiment(toml, resume, fake), kRunOk);
    ASSERT_EQ(fake.executions.size(), 4u);
    for (const auto& [name, n] : fake.executions) {
      EXPECT_TRUE(name.starts_with("ngram-")) << name;
      EXPECT_EQ(n, kRecordsPerRun);
    }
  }
  nlohmann::json rep = load_json(dir / "out" / "report.json");
  EXPECT_EQ(rep["runs"].size(), static_cast<size_t>(kRuns));
  EXPECT_EQ(run_named(rep, "ngram-g2-t0")["run"]["strategy"]["ngram_max"], 4);
  // Without --resume everything runs again.
  FakeExecutor fake;
  ASSERT_EQ(run_experiment(toml, options_for(dir / "out"), fake), kRunOk);
  EXPECT_EQ(fake.executions.size(), static_cast<size_t>(kRuns));
}

TEST(ExperimentRunner, ShardsMergeIntoTheUnshardedReport) {
  fs::path dir = setup("shards");
  std::string toml = (dir / "e.toml").string();
  FakeExecutor whole;
  ASSERT_EQ(run_experiment(toml, options_for(dir / "whole"), whole), kRunOk);
  std::vector<std::string> shard_dirs;
  for (int i = 0; i < 3; ++i) {
    RunOptions o = options_for(dir / ("s" + std::to_string(i)));
    o.shard_i = i;
    o.shard_n = 3;
    FakeExecutor fake;
    ASSERT_EQ(run_experiment(toml, o, fake), kRunOk);
    EXPECT_EQ(fake.executions.size(), i == 0 ? 4u : 3u);  // runs 0,3,6,9 / 1,4,7 / 2,5,8
    shard_dirs.push_back(o.output_override);
  }
  nlohmann::json shard0 = load_json(dir / "s0" / "report.json");
  EXPECT_EQ(shard0["runs"].size(), 4u);
  EXPECT_EQ(shard0["missing_runs"].size(), 6u);

  // Two of three shards merge only as a partial merge (tests/unit/experiment_merge_test.cpp has the refusals).
  MergeOptions partial_ok;
  partial_ok.allow_partial = true;
  MergeSummary partial = merge_reports({shard_dirs[0], shard_dirs[1]}, (dir / "partial").string(), partial_ok);
  EXPECT_EQ(partial.runs, 7);
  EXPECT_EQ(partial.gaps.size(), 1u);
  ASSERT_EQ(partial.missing.size(), 3u);
  EXPECT_EQ(partial.missing[0], "model-g2-t0");  // shard 2 had runs 2, 5, 8

  MergeSummary merged = merge_reports(shard_dirs, (dir / "merged").string());
  EXPECT_EQ(merged.runs, kRuns);
  EXPECT_TRUE(merged.missing.empty());
  nlohmann::json a = load_json(dir / "whole" / "report.json"), b = load_json(dir / "merged" / "report.json");
  // The fake's timings are deterministic, so every aggregate matches, not only tokens and counts.
  EXPECT_EQ(a["runs"], b["runs"]);
  EXPECT_EQ(a["config_hash"], b["config_hash"]);
  EXPECT_EQ(read_file((dir / "whole" / "records.jsonl").string()), read_file((dir / "merged" / "records.jsonl").string()));
  std::ostringstream out;
  EXPECT_EQ(compare_reports((dir / "whole").string(), (dir / "merged" / "report.json").string(), out), 0) << out.str();
  EXPECT_NE(out.str().find("0 flagged difference(s)"), std::string::npos);
}

TEST(ExperimentRunner, MergeRefusesShardsOfDifferentExperiments) {
  fs::path dir = setup("merge_mismatch");
  FakeExecutor f1, f2;
  ASSERT_EQ(run_experiment((dir / "e.toml").string(), options_for(dir / "a"), f1), kRunOk);
  std::ofstream(dir / "e2.toml") << replace(kToml, "seed = 11", "seed = 12");
  ASSERT_EQ(run_experiment((dir / "e2.toml").string(), options_for(dir / "b"), f2), kRunOk);
  try {
    merge_reports({(dir / "a").string(), (dir / "b").string()}, (dir / "m").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_TRUE(std::string(e.what()).starts_with((dir / "b").string() + ": experiment config hash")) << e.what();
  }
}

TEST(ExperimentRunner, SigintKeepsFinishedRunsAndResumeCompletes) {
  fs::path dir = setup("sigint");
  std::string toml = (dir / "e.toml").string();
  FakeExecutor fake;
  fake.raise_sigint_at = 2 * kRecordsPerRun + 3;  // in the third run
  ASSERT_EQ(run_experiment(toml, options_for(dir / "out"), fake), kRunInterrupted);
  EXPECT_EQ(fake.total, 2 * kRecordsPerRun + 3);  // stopped right after the interrupted generation
  EXPECT_TRUE(fs::exists(dir / "out" / "runs" / "ar-t0.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "runs" / "ar-t0.7.json"));
  EXPECT_FALSE(fs::exists(dir / "out" / "runs" / "model-g2-t0.json"));
  nlohmann::json rep = load_json(dir / "out" / "report.json");
  EXPECT_EQ(rep["runs"].size(), 2u);
  EXPECT_EQ(rep["missing_runs"].size(), static_cast<size_t>(kRuns - 2));

  RunOptions resume = options_for(dir / "out");
  resume.resume = true;
  FakeExecutor rest;
  ASSERT_EQ(run_experiment(toml, resume, rest), kRunOk);
  EXPECT_EQ(rest.executions.size(), static_cast<size_t>(kRuns - 2));
  EXPECT_EQ(rest.executions.count("ar-t0"), 0u);
  EXPECT_EQ(load_json(dir / "out" / "report.json")["runs"].size(), static_cast<size_t>(kRuns));
}

std::string run_error(const fs::path& dir, const std::string& toml, FakeExecutor& fake) {
  std::ofstream(dir / "e.toml") << toml;
  try {
    run_experiment((dir / "e.toml").string(), options_for(dir / "out"), fake);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

int line_of(const std::string& text, const std::string& needle) {
  size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

TEST(ExperimentRunner, EverythingIsValidatedBeforeRunning) {
  fs::path dir = setup("validate");
  std::string file = (dir / "e.toml").string();
  FakeExecutor fake;
  std::string t1 = replace(kToml, "drafter = \"ngram\"", "drafter = \"eagle\"");
  EXPECT_EQ(run_error(dir, t1, fake), fmt::format("{}:{}: key 'strategy[2].drafter': unknown drafter 'eagle' (known: layerskip, model, ngram)",
                                                  file, line_of(t1, "eagle")));
  std::string t2 = kToml + "verifier = [\"greedy\", \"typical\"]\n";
  EXPECT_EQ(run_error(dir, t2, fake), fmt::format("{}:{}: key 'sweep.verifier': unknown verifier 'typical' (known: greedy, speculative)",
                                                  file, line_of(t2, "typical")));
  std::string t3 = replace(kToml, "path = \"draft.gguf\"", "path = \"missing.gguf\"");
  EXPECT_EQ(run_error(dir, t3, fake), fmt::format("{}:{}: key 'models.draft.path': file not found: {}", file,
                                                  line_of(t3, "missing.gguf"), (dir / "missing.gguf").string()));
  EXPECT_EQ(fake.prepared, 0);
  EXPECT_EQ(fake.total, 0);

  // An output folder below a regular file.
  std::ofstream(dir / "e.toml") << kToml;
  RunOptions o = options_for(dir / "target.gguf" / "out");
  try {
    run_experiment(file, o, fake);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_TRUE(std::string(e.what()).starts_with("--output: ")) << e.what();
  }
  std::string t4 =
      replace(kToml, "name = \"fake\"", "name = \"fake\"\noutput = \"" + (dir / "target.gguf" / "out").string() + "\"");
  std::ofstream(dir / "e.toml") << t4;
  try {
    RunOptions plain;
    plain.progress = false;
    run_experiment(file, plain, fake);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(fmt::format("{}:{}: key 'experiment.output': ", file, line_of(t4, "output"))))
        << e.what();
  }
  EXPECT_EQ(fake.total, 0);
  RunOptions bad_shard = options_for(dir / "out");
  bad_shard.shard_i = 3;
  bad_shard.shard_n = 3;
  std::ofstream(dir / "e.toml") << kToml;
  EXPECT_THROW(run_experiment(file, bad_shard, fake), Error);
}

TEST(ExperimentRunner, InterleavedScheduleRunsEveryRunPerPromptAndResumes) {
  const std::string interleaved = replace(kToml, "warmup = 1", "warmup = 1\nschedule = \"interleaved\"");
  fs::path dir = setup("interleaved", interleaved);
  const std::string toml = (dir / "e.toml").string();
  FakeExecutor fake;
  ASSERT_EQ(run_experiment(toml, options_for(dir / "out"), fake), kRunOk);
  ASSERT_EQ(fake.order.size(), static_cast<size_t>(kRuns * kRecordsPerRun));
  EXPECT_EQ(fake.warmups, kRuns);
  // Prompt-major: generation i is run i % kRuns on (prompt, repeat) number i / kRuns.
  std::vector<std::string> run_order;
  for (int k = 0; k < kRuns; ++k) run_order.push_back(std::get<0>(fake.order[k]));
  for (size_t i = 0; i < fake.order.size(); ++i) {
    const auto& [name, p, r] = fake.order[i];
    const int unit = static_cast<int>(i) / kRuns;
    EXPECT_EQ(name, run_order[i % kRuns]) << i;
    EXPECT_EQ(p, unit / 2) << i;  // 2 repeats
    EXPECT_EQ(r, unit % 2) << i;
  }
  // The same records as the default schedule (only the order of the generations differs).
  fs::path plain = setup("interleaved_plain");
  FakeExecutor by_run;
  ASSERT_EQ(run_experiment((plain / "e.toml").string(), options_for(plain / "out"), by_run), kRunOk);
  EXPECT_EQ(std::get<0>(by_run.order[0]), std::get<0>(by_run.order[kRecordsPerRun - 1]));  // run-major
  EXPECT_EQ(read_file((dir / "out" / "records.jsonl").string()), read_file((plain / "out" / "records.jsonl").string()));
  for (const std::string& name : run_order)
    EXPECT_EQ(load_json(dir / "out" / "runs" / (name + ".json"))["config_hash"],
              load_json(plain / "out" / "runs" / (name + ".json"))["config_hash"])
        << name;
  EXPECT_NE(load_json(dir / "out" / "report.json")["config_hash"],
            load_json(plain / "out" / "report.json")["config_hash"]);

  // Interrupted in the second round of prompts: no run is complete, every journal keeps its
  // records, and --resume makes only the rest.
  fs::path cut = setup("interleaved_sigint", interleaved);
  FakeExecutor first;
  first.raise_sigint_at = kRuns + 2;
  ASSERT_EQ(run_experiment((cut / "e.toml").string(), options_for(cut / "out"), first), kRunInterrupted);
  EXPECT_EQ(first.total, kRuns + 2);
  EXPECT_FALSE(fs::exists(cut / "out" / "runs" / (run_order[0] + ".json")));
  RunOptions resume = options_for(cut / "out");
  resume.resume = true;
  FakeExecutor rest;
  ASSERT_EQ(run_experiment((cut / "e.toml").string(), resume, rest), kRunOk);
  EXPECT_EQ(rest.total, kRuns * kRecordsPerRun - (kRuns + 2));
  EXPECT_EQ(read_file((cut / "out" / "records.jsonl").string()), read_file((dir / "out" / "records.jsonl").string()));

  // Any other schedule is refused with the key's line.
  const std::string bad = replace(kToml, "warmup = 1", "warmup = 1\nschedule = \"random\"");
  FakeExecutor none;
  EXPECT_EQ(run_error(dir, bad, none),
            fmt::format("{}:{}: key 'experiment.schedule': 'random' is not a schedule: use \"runs\" or \"interleaved\"",
                        toml, line_of(bad, "random")));
  EXPECT_EQ(none.total, 0);
}

TEST(ExperimentRunner, SameConfigSameRecordsAndCompareFlagsChanges) {
  fs::path dir = setup("compare");
  std::string toml = (dir / "e.toml").string();
  FakeExecutor f1, f2;
  ASSERT_EQ(run_experiment(toml, options_for(dir / "a"), f1), kRunOk);
  ASSERT_EQ(run_experiment(toml, options_for(dir / "b"), f2), kRunOk);
  EXPECT_EQ(read_file((dir / "a" / "records.jsonl").string()), read_file((dir / "b" / "records.jsonl").string()));

  // Change one token of one record in b and rebuild its report.
  std::string run_path = run_file_path((dir / "b").string(), "model-g4-t0");
  RunFile f = load_run_file(run_path);
  f.records[2].tokens[1] += 1;
  save_run_file(run_path, f);
  rebuild_report((dir / "b").string());
  std::ostringstream out;
  EXPECT_EQ(compare_reports((dir / "a").string(), (dir / "b").string(), out), 1);
  EXPECT_NE(out.str().find("run model-g4-t0"), std::string::npos);
  EXPECT_NE(out.str().find("[FLAG]"), std::string::npos) << out.str();
  EXPECT_EQ(run_named(load_json(dir / "b" / "report.json"), "model-g4-t0")["identical_to_baseline"], false);
}

TEST(ExperimentRunner, DescribeListsRunsAndShards) {
  fs::path dir = setup("describe");
  RunOptions o = options_for(dir / "out");
  o.shard_i = 1;
  o.shard_n = 2;
  std::ostringstream out;
  describe_experiment((dir / "e.toml").string(), o, out);
  std::string s = out.str();
  EXPECT_NE(s.find("experiment fake (10 runs x 3 prompts x 2 repeats)"), std::string::npos) << s;
  EXPECT_NE(s.find("model-g2-t0.7"), std::string::npos);
  EXPECT_NE(s.find("[other shard]"), std::string::npos);
}

}  // namespace
}  // namespace specmoe::exp
