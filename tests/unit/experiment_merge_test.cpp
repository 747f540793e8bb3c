// specmoe merge: what it refuses (a missing, duplicated or unfinished shard, shards of another
// config, split or build, the output folder as an input), each naming the shard, and what
// --allow-partial merges with the gaps listed in the report; the runner's --expect-* checks.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/git_commit.h"
#include "experiments/result_json.h"
#include "fake_executor.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;
using specmoe::testing::FakeExecutor;

constexpr int kShards = 3;  // of the fake experiment's 10 runs: 0,3,6,9 / 1,4,7 / 2,5,8

fs::path setup(const std::string& name) {
  fs::path dir = specmoe::testing::scratch_dir() / "experiment_merge" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "e.toml") << specmoe::testing::kFakeExperimentToml;
  std::ofstream(dir / "target.gguf") << "x";
  std::ofstream(dir / "draft.gguf") << "x";
  return dir;
}

std::string run_shard(const fs::path& dir, int i, int n, const std::string& folder) {
  RunOptions o;
  o.output_override = (dir / folder).string();
  o.progress = false;
  o.shard_i = i;
  o.shard_n = n;
  FakeExecutor fake;
  EXPECT_EQ(run_experiment((dir / "e.toml").string(), o, fake), kRunOk);
  return o.output_override;
}

std::vector<std::string> run_shards(const fs::path& dir, int n = kShards) {
  std::vector<std::string> dirs;
  for (int i = 0; i < n; ++i) dirs.push_back(run_shard(dir, i, n, fmt::format("s{}", i)));
  return dirs;
}

// The Error(Config) merge_reports throws; "" when it does not throw.
std::string merge_error(const std::vector<std::string>& dirs, const fs::path& out, const MergeOptions& o = {}) {
  try {
    merge_reports(dirs, out.string(), o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ExperimentMerge, ShardFoldersRecordTheirShard) {
  fs::path dir = setup("records");
  auto dirs = run_shards(dir);
  ExperimentFile ef = load_experiment_file((fs::path(dirs[1]) / "experiment.json").string());
  EXPECT_EQ(ef.shard_i, 1);
  EXPECT_EQ(ef.shard_n, 3);
  MergeSummary m = merge_reports(dirs, (dir / "all").string());
  EXPECT_EQ(m.runs, specmoe::testing::kFakeExperimentRuns);
  EXPECT_EQ(m.shards, 3);
  EXPECT_TRUE(m.gaps.empty());
  ExperimentFile merged = load_experiment_file((dir / "all" / "experiment.json").string());
  EXPECT_EQ(merged.shard_n, 1);
  EXPECT_EQ(merged.merge.value("partial", true), false);
}

TEST(ExperimentMerge, RefusesAMissingShard) {
  fs::path dir = setup("missing");
  auto dirs = run_shards(dir);
  std::string e = merge_error({dirs[0], dirs[1]}, dir / "all");
  EXPECT_TRUE(contains(e, "shard 3/3: missing, no input folder holds it (3 runs: ")) << e;
  EXPECT_TRUE(contains(e, "--allow-partial")) << e;
  EXPECT_FALSE(fs::exists(dir / "all" / "report.json"));  // refused before writing
  // A folder whose task never started (no experiment.json) is named.
  e = merge_error({dirs[0], dirs[1], (dir / "never").string()}, dir / "all");
  EXPECT_TRUE(contains(e, (dir / "never").string() + ": no output")) << e;
  EXPECT_TRUE(contains(e, "shard 3/3: missing")) << e;
}

TEST(ExperimentMerge, RefusesADuplicatedShard) {
  fs::path dir = setup("duplicate");
  auto dirs = run_shards(dir);
  std::string again = run_shard(dir, 1, 3, "s1-again");
  std::string e = merge_error({dirs[0], dirs[1], again, dirs[2]}, dir / "all");
  EXPECT_EQ(e, "shard 2/3 given twice: " + dirs[1] + " and " + again);
}

TEST(ExperimentMerge, RefusesAnIncompleteShard) {
  fs::path dir = setup("incomplete");
  auto dirs = run_shards(dir);
  fs::remove(run_file_path(dirs[1], "model-g4-t0"));  // shard 2 owns runs 1, 4, 7
  std::string e = merge_error(dirs, dir / "all");
  EXPECT_TRUE(e.starts_with(dirs[1] + " (shard 2/3): incomplete, 1 of 3 runs unfinished: ")) << e;
  EXPECT_TRUE(contains(e, "model-g4-t0")) << e;
  // A run file left by another config does not count as finished either.
  fs::copy_file(run_file_path(dirs[1], "ar-t0.7"), run_file_path(dirs[1], "model-g4-t0"));
  RunFile f = load_run_file(run_file_path(dirs[1], "model-g4-t0"));
  f.name = "model-g4-t0";
  save_run_file(run_file_path(dirs[1], "model-g4-t0"), f);
  e = merge_error(dirs, dir / "all");
  EXPECT_TRUE(contains(e, "incomplete, 1 of 3 runs unfinished: model-g4-t0")) << e;
}

TEST(ExperimentMerge, RefusesShardsOfAnotherBuild) {
  fs::path dir = setup("build");
  auto dirs = run_shards(dir);
  const std::string file = run_file_path(dirs[2], "model-g4-t0.7");
  RunFile f = load_run_file(file);
  f.environment["specmoe_commit"] = "0123456789ab";
  save_run_file(file, f);
  std::string e = merge_error(dirs, dir / "all");
  EXPECT_TRUE(e.starts_with(file + ": made by specmoe build 0123456789ab, ")) << e;
  EXPECT_TRUE(contains(e, std::string("by build ") + kGitCommit)) << e;
  EXPECT_TRUE(contains(e, "shards of different builds do not merge")) << e;
  // With the build the sweep expects, the first run of another build is named.
  MergeOptions o;
  o.expect_commit = "0123456789ab";
  e = merge_error(dirs, dir / "all", o);
  EXPECT_TRUE(e.starts_with(run_file_path(dirs[0], "ar-t0") + ": made by specmoe build " + kGitCommit +
                            ", the sweep expects build 0123456789ab"))
      << e;
}

TEST(ExperimentMerge, RefusesAnotherConfigOrSplit) {
  fs::path dir = setup("config");
  auto dirs = run_shards(dir);
  MergeOptions o;
  o.expect_config_hash = "ffffffffffffffff";
  std::string e = merge_error(dirs, dir / "all", o);
  EXPECT_TRUE(e.starts_with(dirs[0] + ": experiment config hash ")) << e;
  EXPECT_TRUE(contains(e, "differs from ffffffffffffffff (the sweep's)")) << e;
  // Shards of a 2-way split do not complete a 3-way one.
  std::string two = run_shard(dir, 1, 2, "two-way");
  e = merge_error({dirs[0], two, dirs[2]}, dir / "all");
  EXPECT_EQ(e, two + ": shard 2/2 belongs to a 2-way split, " + dirs[0] + " to a 3-way split");
}

TEST(ExperimentMerge, RefusesItsOutputAsAnInput) {
  fs::path dir = setup("output");
  auto dirs = run_shards(dir);
  try {
    merge_reports(dirs, dirs[1]);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_TRUE(std::string(e.what()).starts_with(dirs[1] + ": the merge output folder is also an input")) << e.what();
  }
}

TEST(ExperimentMerge, AllowPartialListsTheGapsInTheReport) {
  fs::path dir = setup("partial");
  auto dirs = run_shards(dir);
  fs::remove(run_file_path(dirs[0], "ngram-g4-t0.7"));  // run 9, shard 1's
  MergeOptions o;
  o.allow_partial = true;
  MergeSummary m = merge_reports({dirs[0], dirs[1], (dir / "never").string()}, (dir / "all").string(), o);
  EXPECT_EQ(m.runs, 3 + 3);  // shard 1 less one run, shard 2; shard 3 absent
  ASSERT_EQ(m.gaps.size(), 3u);
  EXPECT_EQ(m.gaps[0], (dir / "never").string() + ": no output (no experiment.json; its task never started?)");
  EXPECT_EQ(m.gaps[1], dirs[0] + " (shard 1/3): incomplete, 1 of 4 runs unfinished: ngram-g4-t0.7");
  EXPECT_TRUE(m.gaps[2].starts_with("shard 3/3: missing, no input folder holds it (3 runs: ")) << m.gaps[2];
  EXPECT_EQ(m.missing.size(), 4u);

  nlohmann::json rep = nlohmann::json::parse(read_file((dir / "all" / "report.json").string()));
  EXPECT_EQ(rep["merge"]["partial"], true);
  EXPECT_EQ(rep["merge"]["gaps"].size(), 3u);
  EXPECT_EQ(rep["missing_runs"].size(), 4u);
  const std::string md = read_file((dir / "all" / "report.md").string());
  EXPECT_TRUE(contains(md, "## Partial merge")) << md;
  EXPECT_TRUE(contains(md, "- " + m.gaps[1])) << md;
  EXPECT_TRUE(contains(read_file((dir / "all" / "report.html").string()), "<h2>Partial merge</h2>"));

  // Merging again once every shard is there replaces the partial report: no gaps remain.
  run_shard(dir, 0, 3, "s0");
  run_shard(dir, 2, 3, "never");
  m = merge_reports({dirs[0], dirs[1], (dir / "never").string()}, (dir / "all").string());
  EXPECT_TRUE(m.gaps.empty());
  EXPECT_TRUE(m.missing.empty());
  rep = nlohmann::json::parse(read_file((dir / "all" / "report.json").string()));
  EXPECT_EQ(rep["merge"]["partial"], false);
  EXPECT_FALSE(contains(read_file((dir / "all" / "report.md").string()), "Partial merge"));
}

TEST(ExperimentMerge, AShardTakesOnlyItsOwnRuns) {
  fs::path dir = setup("own");
  auto dirs = run_shards(dir);
  // An earlier unsharded run left every run file in shard 2's folder; only runs 1, 4, 7 count.
  RunOptions whole;
  whole.output_override = (dir / "whole").string();
  whole.progress = false;
  FakeExecutor fake;
  ASSERT_EQ(run_experiment((dir / "e.toml").string(), whole, fake), kRunOk);
  for (const auto& e : fs::directory_iterator(dir / "whole" / "runs"))
    if (!fs::exists(fs::path(dirs[1]) / "runs" / e.path().filename()))
      fs::copy_file(e.path(), fs::path(dirs[1]) / "runs" / e.path().filename());
  fs::remove(run_file_path(dirs[0], "ar-t0"));  // shard 1's run 0: shard 2's stray copy must not fill it
  std::string e = merge_error(dirs, dir / "all");
  EXPECT_TRUE(e.starts_with(dirs[0] + " (shard 1/3): incomplete, 1 of 4 runs unfinished: ar-t0")) << e;
}

TEST(ExperimentMerge, RunRefusesAnotherConfigHashOrBuild) {
  fs::path dir = setup("expect");
  RunOptions o;
  o.output_override = (dir / "out").string();
  o.progress = false;
  o.expect_config_hash = "0000000000000000";
  FakeExecutor fake;
  try {
    run_experiment((dir / "e.toml").string(), o, fake);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_TRUE(std::string(e.what()).starts_with((dir / "e.toml").string() + ": config hash ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "differs from 0000000000000000, the hash the sweep was written for")) << e.what();
  }
  o.expect_config_hash.clear();
  o.expect_config_hash = plan_experiment((dir / "e.toml").string(), o, fake).config_hash;
  o.expect_commit = "not-this-build";
  try {
    run_experiment((dir / "e.toml").string(), o, fake);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "the sweep was written for build not-this-build")) << e.what();
  }
  EXPECT_EQ(fake.total, 0);
  EXPECT_FALSE(fs::exists(dir / "out" / "experiment.json"));
  o.expect_commit = kGitCommit;
  EXPECT_EQ(run_experiment((dir / "e.toml").string(), o, fake), kRunOk);
}

}  // namespace
}  // namespace specmoe::exp
