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

struct MergeSummary {
  int runs = 0;                      // finished runs in the merged report
  std::vector<std::string> missing;  // runs no input folder had
};
// Combines the output folders of shards of one experiment (same config hash, else
// Error(Config) naming the folder) into `out`: copies their run files and builds the report.
MergeSummary merge_reports(const std::vector<std::string>& dirs, const std::string& out);

// Prints the metrics of two reports side by side (a, b: report.json files or output folders)
// and flags runs whose outputs (token digest) or counts differ or that exist in one only.
// Returns 0 when nothing is flagged, 1 otherwise.
int compare_reports(const std::string& a, const std::string& b, std::ostream& out);

}  // namespace specmoe::exp
