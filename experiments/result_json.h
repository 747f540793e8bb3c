// On-disk results: runs/<run-name>.json holds one finished run (its resolved spec, config hash,
// environment and every PromptRecord); experiment.json holds the resolved config the runs belong
// to. Both are what report building and merging read, so a report can always be rebuilt from disk.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/run_result.h"

namespace specmoe::exp {

inline constexpr const char* kRunFileFormat = "specmoe-run/1";
inline constexpr const char* kExperimentFileFormat = "specmoe-experiment/1";

// A finished run as stored in runs/<name>.json.
struct RunFile {
  nlohmann::json run;           // run_to_json(RunSpec): name, strategy, sampling, point, baseline
  std::string name;
  std::string config_hash;      // of the run (resume compares this)
  std::string experiment_hash;  // of the experiment it was produced for
  nlohmann::json environment;
  std::string started, finished;  // ISO 8601 UTC
  std::vector<PromptRecord> records;
};

// experiment.json: what the output folder is a report of.
struct ExperimentFile {
  nlohmann::json config;  // spec_to_json: resolved config including the run list
  std::string config_hash;
  std::string toml;       // the TOML as written
  std::string command;    // the command that reproduces the experiment
  int shard_i = 0;        // the shard of the runs this folder holds (0-based; 0 of 1 = all runs)
  int shard_n = 1;
  nlohmann::json merge;   // made by merge_reports: the shards merged and the gaps (null otherwise)
};

// Serializes with invalid UTF-8 replaced by U+FFFD instead of throwing. Text that may hold any
// bytes (generated text, prompts) is written with set_text (json_text.h) before that, which
// keeps the exact bytes in "<key>_bytes_b64"; this is the safety net for everything else.
std::string dump_json(const nlohmann::json& j, int indent = -1);

// JSON numbers for doubles: NaN and infinities become null (JSON has no NaN).
nlohmann::json number_or_null(double v);
double number_from_json(const nlohmann::json& j);  // null -> NaN

// A record's counts and timings as the decoding loop's Metrics (no MoE part: see MoeRecord), the
// input of metrics_to_json. Unknown values stay unknown (NaN prefill, n_decoded -1).
verify::Metrics record_metrics(const PromptRecord& r);

// The record's identity, tokens, text (set_text) and metrics_to_json(record_metrics(r)), flat,
// plus "moe".
nlohmann::json record_to_json(const PromptRecord& r);
// Throws Error(Format) "<where>: <problem>" on missing or mistyped fields.
PromptRecord record_from_json(const nlohmann::json& j, const std::string& where);

nlohmann::json run_file_to_json(const RunFile& f);
RunFile run_file_from_json(const nlohmann::json& j, const std::string& where);
RunFile load_run_file(const std::string& path);  // throws Error(Io / Format) naming the path
void save_run_file(const std::string& path, const RunFile& f);  // atomic

nlohmann::json experiment_file_to_json(const ExperimentFile& f);
ExperimentFile load_experiment_file(const std::string& path);
void save_experiment_file(const std::string& path, const ExperimentFile& f);  // atomic

// "runs/<name>.json" inside an output folder.
std::string run_file_path(const std::string& output_dir, const std::string& run_name);

}  // namespace specmoe::exp
