// Resolved configuration JSON and FNV-1a hashes of its canonical dump (nlohmann::json objects
// keep keys sorted, so dump() is canonical).
#include "experiments/config_hash.h"

#include <filesystem>

#include <fmt/format.h>

#include "experiments/result_json.h"

namespace specmoe::exp {

std::string fnv1a64_hex(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

nlohmann::json field_value_to_json(const FieldValue& v) {
  switch (v.type) {
    case FieldValue::Type::Integer: return v.i;
    case FieldValue::Type::Float: return v.f;
    case FieldValue::Type::String: return v.s;
    case FieldValue::Type::Bool: return v.b;
  }
  return nullptr;
}

nlohmann::json sampling_to_json(const SamplingSpec& s) {
  return {{"temperature", s.temperature}, {"top_k", s.top_k},           {"top_p", s.top_p},
          {"min_p", s.min_p},             {"max_tokens", s.max_tokens}, {"repeat_penalty", s.repeat_penalty}};
}

nlohmann::json strategy_to_json(const StrategySpec& s) {
  nlohmann::json j = {{"name", s.name}, {"kind", strategy_kind_name(s.kind)}, {"target", s.target}};
  if (s.kind == StrategyKind::Speculative) {
    j["drafter"] = s.drafter;
    j["draft"] = s.draft;
    j["verifier"] = s.verifier;
    j["draft_max"] = s.draft_max;
    j["draft_min"] = s.draft_min;
    j["draft_p_min"] = s.draft_p_min;
    j["ngram_min"] = s.ngram_min;
    j["ngram_max"] = s.ngram_max;
    j["exit_layer"] = s.exit_layer;
    if (s.draft_vocab > 0) j["draft_vocab"] = s.draft_vocab;  // only when set: other hashes stay as they were
    if (s.has_tree())  // written only for trees, so that chains' hashes stay what they were
      j["tree"] = {{"widths", s.tree_widths}, {"nodes", s.tree_nodes}, {"depth", s.tree_depth},
                   {"top_k", s.tree_top_k}, {"sampling", s.tree_sampling}};
  }
  return j;
}

nlohmann::json model_to_json(const ModelSpec& m) {
  nlohmann::json j = {{"name", m.name}, {"path", m.path}};
  if (m.is_synth()) {
    j["synth"] = m.synth;
    j["seed"] = m.synth_seed;
    j["fingerprint"] = m.synth_fingerprint;
  } else {
    std::error_code ec;
    auto size = std::filesystem::file_size(m.path, ec);
    if (!ec) j["file_size"] = size;
  }
  return j;
}

nlohmann::json run_to_json(const RunSpec& run) {
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [k, v] : run.point) point[k] = field_value_to_json(v);
  return {{"name", run.name},
          {"index", run.index},
          {"strategy", strategy_to_json(run.strategy)},
          {"sampling", sampling_to_json(run.sampling)},
          {"point", point},
          {"baseline", run.baseline},
          {"is_baseline", run.is_baseline},
          {"config_hash", run.config_hash}};
}

namespace {
nlohmann::json prompts_to_json(const std::vector<Prompt>& prompts) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : prompts) {
    nlohmann::json j = {{"id", p.id}, {"category", p.category}, {"text", p.text}};
    if (!p.history.empty()) j["history"] = p.history;  // only when present: single-turn hashes stay as they were
    arr.push_back(std::move(j));
  }
  return arr;
}

// The model identity a run depends on: a synth preset and seed, or a file path and size (a
// synth cache file's path varies between machines while its content does not).
nlohmann::json model_identity(const ExperimentSpec& spec, const std::string& name) {
  const ModelSpec* m = spec.find_model(name);
  if (!m) return nullptr;
  nlohmann::json j = model_to_json(*m);
  if (m->is_synth()) j.erase("path");
  else j["path"] = std::filesystem::path(m->path).filename().string();
  return j;
}
}  // namespace

nlohmann::json spec_to_json(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) {
  nlohmann::json models = nlohmann::json::array();
  for (const auto& m : spec.models) models.push_back(model_to_json(m));
  nlohmann::json strategies = nlohmann::json::array();
  for (const auto& s : spec.strategies) strategies.push_back(strategy_to_json(s));
  nlohmann::json sweep = nlohmann::json::object();
  for (const auto& a : spec.sweep.axes) {
    nlohmann::json vals = nlohmann::json::array();
    for (const auto& v : a.values) vals.push_back(field_value_to_json(v));
    sweep[a.key] = vals;
  }
  if (!spec.sweep.only.empty()) sweep["only"] = spec.sweep.only;
  nlohmann::json run_list = nlohmann::json::array();
  for (const auto& r : runs) run_list.push_back(run_to_json(r));
  const PromptSource& ps = spec.prompt_source;
  nlohmann::json j = {{"experiment",
           {{"name", spec.name},
            {"description", spec.description},
            {"seed", spec.seed},
            {"repeats", spec.repeats},
            {"warmup", spec.warmup},
            {"threads", spec.threads},
            {"cache_type_k", spec.cache_type_k},
            {"cache_type_v", spec.cache_type_v},
            {"output", spec.output},
            {"file", spec.path}}},
          {"models", models},
          {"prompt_source",
           {{"file", ps.file}, {"jsonl", ps.jsonl}, {"inline", ps.list.size()}, {"categories", ps.categories},
            {"limit", ps.limit}, {"turn", ps.turn}, {"chat_template", ps.chat_template}, {"system", ps.system},
            {"history_max_tokens", ps.history_max_tokens},
            {"history", ps.turn > 0 ? "earlier turns answered by the target itself, greedily, fed back as the conversation"
                                    : ""}}},
          {"prompts", prompts_to_json(spec.prompts)},
          {"sampling", sampling_to_json(spec.sampling)},
          {"strategies", strategies},
          {"sweep", sweep},
          {"runs", run_list}};
  // Written where it is not the default, so the hashes of experiments without it still hold.
  if (spec.schedule == Schedule::Interleaved) j["experiment"]["schedule"] = "interleaved";
  return j;
}

std::string run_config_hash(const ExperimentSpec& spec, const RunSpec& run) {
  nlohmann::json j = {{"seed", spec.seed},
                      {"repeats", spec.repeats},
                      {"threads", spec.threads},
                      {"cache_type_k", spec.cache_type_k},
                      {"cache_type_v", spec.cache_type_v},
                      {"prompts", prompts_to_json(spec.prompts)},
                      {"name", run.name},
                      {"strategy", strategy_to_json(run.strategy)},
                      {"sampling", sampling_to_json(run.sampling)},
                      {"target", model_identity(spec, run.strategy.target)}};
  if (!run.strategy.draft.empty()) j["draft"] = model_identity(spec, run.strategy.draft);
  // How prompts are templated, where it differs from the defaults (so earlier hashes still hold).
  const PromptSource& ps = spec.prompt_source;
  if (ps.chat_template != "auto") j["chat_template"] = ps.chat_template;
  if (!ps.system.empty()) j["system"] = ps.system;
  if (ps.turn > 0) j["history_max_tokens"] = ps.history_max_tokens;
  return fnv1a64_hex(dump_json(j));
}

std::string experiment_config_hash(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) {
  nlohmann::json j = spec_to_json(spec, runs);
  j["experiment"].erase("output");
  j["experiment"].erase("file");
  // Shards on other machines see the same models at other absolute paths.
  for (auto& m : j["models"]) {
    if (m.contains("synth")) m.erase("path");
    else m["path"] = std::filesystem::path(m["path"].get<std::string>()).filename().string();
  }
  j["prompt_source"].erase("file");
  j["prompt_source"].erase("jsonl");
  return fnv1a64_hex(dump_json(j));
}

}  // namespace specmoe::exp
