// Report building: from experiment.json and the finished run files to per-run aggregates
// (DESIGN.md "Metrics"), speedups against each run's baseline and identical_to_baseline. A report
// is always rebuilt from what is on disk, so an interrupted run, a resumed run and a merge of
// shards all produce their report the same way.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/result_json.h"
#include "experiments/run_result.h"

namespace specmoe::exp {

struct Report {
  ExperimentFile experiment;        // resolved config, its hash, the TOML, the command
  nlohmann::json environment;       // of the first finished run (captured now when there is none)
  bool mixed_environments = false;  // runs came from differing machines or builds
  std::vector<RunAggregate> runs;   // finished runs, in experiment order
  std::vector<nlohmann::json> run_specs;  // run_to_json of each, same order
  std::vector<nlohmann::json> run_environments;  // each run's own environment, same order
  std::vector<std::vector<PromptRecord>> records;  // each run's records, same order
  std::vector<std::string> missing_runs;  // in the experiment but not finished (or stale)
  std::string created;
};

// Aggregates one run. baseline_records: the baseline run's records (nullptr when absent; pass
// the run's own records for a baseline). run_spec: run_to_json of the run.
RunAggregate aggregate_run(const nlohmann::json& run_spec, const std::vector<PromptRecord>& records,
                           const std::vector<PromptRecord>* baseline_records);

// Runs not in the experiment's run list, or whose config hash differs from it, are left out
// (listed as missing when the run is in the list).
Report build_report(const ExperimentFile& experiment, const std::vector<RunFile>& runs);

// Reads <dir>/experiment.json and <dir>/runs/*.json. Throws Error(Io / Format) naming the file.
Report load_report_inputs(const std::string& dir);

nlohmann::json estimate_to_json(const Estimate& e);
nlohmann::json aggregate_to_json(const RunAggregate& a);
nlohmann::json report_to_json(const Report& r);  // the content of report.json

}  // namespace specmoe::exp
