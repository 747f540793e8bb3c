// The experiment harness's entry points for the `specmoe` CLI: run an experiment TOML (with
// resume and sharding), merge shard outputs, compare two reports. Errors in the TOML or on disk
// are thrown as specmoe::Error with a one-line message ("FILE:LINE: key 'x.y': problem" for the
// TOML); the CLI prints it and exits non-zero.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "experiments/executor.h"

namespace specmoe::exp {

struct RunOptions {
  bool resume = false;          // skip runs whose runs/<name>.json matches the run's config hash
  int shard_i = 0;              // run only the runs with index % shard_n == shard_i (0-based)
  int shard_n = 1;
  int threads_override = -1;    // >= 0 replaces [experiment] threads (0 = all hardware threads)
  std::string output_override;  // non-empty: replaces [experiment] output
  bool progress = true;         // progress line on stderr
  std::string command_line;     // shown as "reproduce" in reports ("" = "specmoe run <path>")
  std::vector<std::string> report_formats;  // writer names (empty = all registered)
  std::string device;           // non-empty: where the models run ("cpu", "cuda", "cuda:N")
  // Non-empty: refuse to run unless the experiment's config hash / this build's commit (kGitCommit)
  // equal these (what `specmoe slurm` recorded when it wrote the batch scripts).
  std::string expect_config_hash;
  std::string expect_commit;
};

// Exit codes of run_experiment.
inline constexpr int kRunOk = 0;
inline constexpr int kRunInterrupted = 130;  // SIGINT: finished runs are saved, report rebuilt

// Validates everything first (schema, sweep, prompts, registries, model files and headers,
// vocabularies, output folder), then executes this shard's runs with the engine, writing
// runs/<run>.json as each finishes and rebuilding the report after each.
int run_experiment(const std::string& path, const RunOptions& options);
// The same with another executor (tests use a fake one).
int run_experiment(const std::string& path, const RunOptions& options, RunExecutor& executor);

// The resolved runs of an experiment without executing anything (for --dry-run / listing):
// "index name baseline config_hash" lines. Validates the TOML like run_experiment (but does not
// load models).
void describe_experiment(const std::string& path, const RunOptions& options, std::ostream& out);

// The resolved runs and hashes of an experiment as run_experiment would run it with `options`
// (threads and output overrides applied), validated like run_experiment except that no model is
// loaded: the TOML, the sweep, the prompts, the drafter and verifier names and the model files.
struct PlannedRun {
  std::string name;
  int index = 0;
  std::string config_hash;
};
struct ExperimentPlan {
  std::string name;
  std::string output;       // the output folder (override applied)
  int threads = 1;          // resolved (never 0)
  int threads_configured = 0;  // [experiment] threads or the override as given (0 = all hardware threads)
  std::string config_hash;  // the experiment hash shards and merges compare
  std::vector<PlannedRun> runs;
};
ExperimentPlan plan_experiment(const std::string& path, const RunOptions& options);
ExperimentPlan plan_experiment(const std::string& path, const RunOptions& options, const RunExecutor& executor);

struct MergeOptions {
  // Merge what is there when shards are missing (absent folders included) or incomplete, and list
  // the gaps in the report, instead of refusing.
  bool allow_partial = false;
  std::string expect_config_hash;  // non-empty: every shard must have this experiment hash
  std::string expect_commit;       // non-empty: every run must have been made by this build
};
struct MergeSummary {
  int runs = 0;                      // finished runs in the merged report
  int shards = 0;                    // the split the inputs are shards of (n of --shard i/n)
  std::vector<std::string> missing;  // runs of the experiment not in the merged report
  std::vector<std::string> gaps;     // one line per missing or incomplete shard (allow_partial)
};
// Combines the output folders of the n shards of one experiment into `out`: copies each shard's
// run files and builds the report. Refuses (Error(Config), naming the folder or shard) shards of
// another experiment (config hash) or build (specmoe commit), shards of different splits, a shard
// given twice, and -- unless allow_partial -- a missing shard or one with unfinished runs. With
// allow_partial the gaps are listed in the summary and in the report (experiment.json "merge").
MergeSummary merge_reports(const std::vector<std::string>& dirs, const std::string& out,
                           const MergeOptions& options = {});

// Prints the metrics of two reports side by side (a, b: report.json files or output folders)
// and flags runs whose outputs (token digest) or counts differ or that exist in one only.
// Returns 0 when nothing is flagged, 1 otherwise.
int compare_reports(const std::string& a, const std::string& b, std::ostream& out);

}  // namespace specmoe::exp
