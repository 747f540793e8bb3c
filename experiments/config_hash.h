// The resolved configuration as JSON and its hashes. A run's hash covers everything that decides
// its records (seed, repeats, threads, KV cache types, prompts, sampling, strategy, the models'
// identity), so --resume can tell a finished run from a changed one; the experiment hash covers
// the whole resolved config except the output folder, so shards written to different folders
// merge.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "experiments/experiment_spec.h"

namespace specmoe::exp {

// FNV-1a, 64 bit, as 16 lowercase hex digits. Not cryptographic: it detects edits, not attacks.
std::string fnv1a64_hex(std::string_view bytes);

nlohmann::json field_value_to_json(const FieldValue& v);
nlohmann::json sampling_to_json(const SamplingSpec& s);
nlohmann::json strategy_to_json(const StrategySpec& s);
nlohmann::json model_to_json(const ModelSpec& m);  // name, path, synth, seed, file size if present
nlohmann::json run_to_json(const RunSpec& run);    // name, strategy, sampling, point, baseline, hash
// The resolved configuration: experiment fields, models, prompts, sampling, strategies, sweep, runs.
nlohmann::json spec_to_json(const ExperimentSpec& spec, const std::vector<RunSpec>& runs);

std::string run_config_hash(const ExperimentSpec& spec, const RunSpec& run);
std::string experiment_config_hash(const ExperimentSpec& spec, const std::vector<RunSpec>& runs);

}  // namespace specmoe::exp
