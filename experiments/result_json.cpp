// PromptRecord / run file / experiment file <-> JSON.
#include "experiments/result_json.h"

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "experiments/atomic_file.h"

namespace specmoe::exp {

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json number_or_null(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

double number_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  return kNaN;
}

namespace {

// Field readers that name the record and the field in their errors.
struct Reader {
  const nlohmann::json& j;
  const std::string& where;

  const nlohmann::json& at(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) throw_error(ErrorKind::Format, "{}: missing field '{}'", where, key);
    return *it;
  }
  int64_t integer(const char* key) const {
    const auto& v = at(key);
    if (!v.is_number_integer()) throw_error(ErrorKind::Format, "{}: field '{}' must be an integer", where, key);
    return v.get<int64_t>();
  }
  int64_t optional_integer(const char* key, int64_t absent) const {  // absent or null -> `absent`
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absent;
    if (!it->is_number_integer()) throw_error(ErrorKind::Format, "{}: field '{}' must be an integer", where, key);
    return it->get<int64_t>();
  }
  double real(const char* key) const {  // absent or null -> NaN
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return kNaN;
    if (!it->is_number()) throw_error(ErrorKind::Format, "{}: field '{}' must be a number", where, key);
    return it->get<double>();
  }
  std::string string(const char* key) const {
    const auto& v = at(key);
    if (!v.is_string()) throw_error(ErrorKind::Format, "{}: field '{}' must be a string", where, key);
    return v.get<std::string>();
  }
  template <typename T>
  std::vector<T> array(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) return {};
    try {
      return it->get<std::vector<T>>();
    } catch (const nlohmann::json::exception&) {
      throw_error(ErrorKind::Format, "{}: field '{}' has the wrong element type", where, key);
    }
  }
};

nlohmann::json moe_to_json(const MoeRecord& m) {
  return {{"expert_tokens", m.expert_tokens},
          {"dropped_tokens", m.dropped_tokens},
          {"n_expert_used", m.n_expert_used},
          {"distinct_experts_sum", m.distinct_experts_sum},
          {"distinct_experts_count", m.distinct_experts_count},
          {"expert_bytes_read", m.expert_bytes_read},
          {"n_expert", m.n_expert},
          {"n_moe_layers", m.n_moe_layers},
          {"n_forwards", m.n_forwards},
          {"sum_distinct", number_or_null(m.sum_distinct)},
          {"sum_uniform", number_or_null(m.sum_uniform)},
          {"sum_rejected_reads", number_or_null(m.sum_rejected_reads)}};
}

MoeRecord moe_from_json(const nlohmann::json& j, const std::string& where) {
  Reader r{j, where};
  MoeRecord m;
  m.expert_tokens = r.array<std::vector<int64_t>>("expert_tokens");
  m.dropped_tokens = r.array<int64_t>("dropped_tokens");
  m.n_expert_used = static_cast<int>(r.integer("n_expert_used"));
  m.distinct_experts_sum = r.array<double>("distinct_experts_sum");
  m.distinct_experts_count = r.array<int64_t>("distinct_experts_count");
  m.expert_bytes_read = r.real("expert_bytes_read");
  // Absent in records written before the MoE-aware speculative metrics: unknown (0 / NaN).
  m.n_expert = static_cast<int>(r.optional_integer("n_expert", 0));
  m.n_moe_layers = static_cast<int>(r.optional_integer("n_moe_layers", 0));
  m.n_forwards = r.optional_integer("n_forwards", 0);
  m.sum_distinct = r.real("sum_distinct");
  m.sum_uniform = r.real("sum_uniform");
  m.sum_rejected_reads = r.real("sum_rejected_reads");
  return m;
}

}  // namespace

nlohmann::json record_to_json(const PromptRecord& r) {
  nlohmann::json j = {
      {"run", r.run},
      {"prompt_index", r.prompt_index},
      {"prompt_id", r.prompt_id},
      {"category", r.category},
      {"repeat", r.repeat},
      {"n_prompt_tokens", r.n_prompt_tokens},
      {"tokens", r.tokens},
      {"text", r.text},
      {"stopped_at_eog", r.stopped_at_eog},
      {"n_generated", r.n_generated},
      {"n_drafted", r.n_drafted},
      {"n_accepted", r.n_accepted},
      {"n_steps", r.n_steps},
      {"acceptance_rate", number_or_null(r.acceptance_rate())},
      {"mean_accepted_length", number_or_null(r.mean_accepted_length())},
      {"position_drafted", r.position_drafted},
      {"position_accepted", r.position_accepted},
      {"wall_s", r.wall_s},
      {"prefill_s", number_or_null(r.prefill_s)},
      {"n_decoded", r.n_decoded >= 0 ? nlohmann::json(r.n_decoded) : nlohmann::json()},
      {"ttft_ms", number_or_null(r.ttft_ms)},
      {"tokens_per_second", number_or_null(r.tokens_per_second)},
      {"cost_ratio", number_or_null(r.cost_ratio)},
      {"draft_step_ms", number_or_null(r.draft_step_ms)},
      {"target_step_ms", number_or_null(r.target_step_ms)},
      {"time_breakdown",
       {{"draft_s", r.time_breakdown.draft_s},
        {"verify_s", r.time_breakdown.verify_s},
        {"sample_s", r.time_breakdown.sample_s},
        {"other_s", r.time_breakdown.other_s}}},
  };
  if (r.moe) j["moe"] = moe_to_json(*r.moe);
  return j;
}

PromptRecord record_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw_error(ErrorKind::Format, "{}: record must be an object", where);
  Reader r{j, where};
  PromptRecord p;
  p.run = r.string("run");
  p.prompt_index = static_cast<int>(r.integer("prompt_index"));
  p.prompt_id = r.string("prompt_id");
  p.category = r.string("category");
  p.repeat = static_cast<int>(r.integer("repeat"));
  p.n_prompt_tokens = static_cast<int>(r.integer("n_prompt_tokens"));
  p.tokens = r.array<int32_t>("tokens");
  p.text = r.string("text");
  p.stopped_at_eog = j.value("stopped_at_eog", false);
  p.n_generated = r.integer("n_generated");
  p.n_drafted = r.integer("n_drafted");
  p.n_accepted = r.integer("n_accepted");
  p.n_steps = r.integer("n_steps");
  p.position_drafted = r.array<int64_t>("position_drafted");
  p.position_accepted = r.array<int64_t>("position_accepted");
  p.wall_s = r.real("wall_s");
  p.prefill_s = r.real("prefill_s");             // absent in older records: unknown
  p.n_decoded = r.optional_integer("n_decoded", -1);
  p.ttft_ms = r.real("ttft_ms");
  p.tokens_per_second = r.real("tokens_per_second");
  p.cost_ratio = r.real("cost_ratio");
  p.draft_step_ms = r.real("draft_step_ms");
  p.target_step_ms = r.real("target_step_ms");
  if (auto it = j.find("time_breakdown"); it != j.end() && it->is_object()) {
    Reader t{*it, where};
    p.time_breakdown = {t.real("draft_s"), t.real("verify_s"), t.real("sample_s"), t.real("other_s")};
  }
  if (auto it = j.find("moe"); it != j.end() && it->is_object()) p.moe = moe_from_json(*it, where + " moe");
  return p;
}

nlohmann::json run_file_to_json(const RunFile& f) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : f.records) records.push_back(record_to_json(r));
  return {{"format", kRunFileFormat},
          {"name", f.name},
          {"config_hash", f.config_hash},
          {"experiment_hash", f.experiment_hash},
          {"run", f.run},
          {"environment", f.environment},
          {"started", f.started},
          {"finished", f.finished},
          {"records", records}};
}

RunFile run_file_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("format", "") != kRunFileFormat)
    throw_error(ErrorKind::Format, "{}: not a specmoe run file (format '{}' expected)", where, kRunFileFormat);
  Reader r{j, where};
  RunFile f;
  f.name = r.string("name");
  f.config_hash = r.string("config_hash");
  f.experiment_hash = r.string("experiment_hash");
  f.run = r.at("run");
  f.environment = j.value("environment", nlohmann::json::object());
  f.started = j.value("started", "");
  f.finished = j.value("finished", "");
  const auto& recs = r.at("records");
  if (!recs.is_array()) throw_error(ErrorKind::Format, "{}: 'records' must be an array", where);
  for (size_t i = 0; i < recs.size(); ++i)
    f.records.push_back(record_from_json(recs[i], fmt::format("{}: record {}", where, i)));
  return f;
}

namespace {
nlohmann::json parse_json_file(const std::string& path) {
  std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_error(ErrorKind::Format, "{}: invalid JSON: {}", path, e.what());
  }
}
}  // namespace

RunFile load_run_file(const std::string& path) { return run_file_from_json(parse_json_file(path), path); }

void save_run_file(const std::string& path, const RunFile& f) {
  write_file_atomic(path, dump_json(run_file_to_json(f), 1) + "\n");
}

nlohmann::json experiment_file_to_json(const ExperimentFile& f) {
  nlohmann::json j = {{"format", kExperimentFileFormat},
                      {"config_hash", f.config_hash},
                      {"command", f.command},
                      {"shard", {{"index", f.shard_i + 1}, {"count", f.shard_n}}},
                      {"toml", f.toml},
                      {"config", f.config}};
  if (!f.merge.is_null()) j["merge"] = f.merge;
  return j;
}

ExperimentFile load_experiment_file(const std::string& path) {
  nlohmann::json j = parse_json_file(path);
  if (!j.is_object() || j.value("format", "") != kExperimentFileFormat)
    throw_error(ErrorKind::Format, "{}: not a specmoe experiment file (format '{}' expected)", path,
                kExperimentFileFormat);
  Reader r{j, path};
  ExperimentFile f;
  f.config_hash = r.string("config_hash");
  f.command = j.value("command", "");
  f.toml = j.value("toml", "");
  f.config = r.at("config");
  // "shard": {"index": i (1-based), "count": n}; folders written before shards were recorded hold
  // every run they have, as shard 1 of 1.
  if (auto it = j.find("shard"); it != j.end()) {
    const nlohmann::json& sh = *it;
    auto int_at = [&](const char* key) {
      auto k = sh.is_object() ? sh.find(key) : sh.end();
      if (k == sh.end() || !k->is_number_integer())
        throw_error(ErrorKind::Format, "{}: 'shard.{}' missing or not an integer", path, key);
      return k->get<int64_t>();
    };
    const int64_t index = int_at("index"), count = int_at("count");
    if (count < 1 || index < 1 || index > count || count > (int64_t{1} << 30))
      throw_error(ErrorKind::Format, "{}: 'shard' {}/{} out of range", path, index, count);
    f.shard_i = static_cast<int>(index - 1);
    f.shard_n = static_cast<int>(count);
  }
  if (auto it = j.find("merge"); it != j.end()) f.merge = *it;
  if (!f.config.is_object() || !f.config.contains("runs") || !f.config["runs"].is_array())
    throw_error(ErrorKind::Format, "{}: 'config.runs' missing", path);
  return f;
}

void save_experiment_file(const std::string& path, const ExperimentFile& f) {
  write_file_atomic(path, dump_json(experiment_file_to_json(f), 1) + "\n");
}

std::string run_file_path(const std::string& output_dir, const std::string& run_name) {
  return (std::filesystem::path(output_dir) / "runs" / (run_name + ".json")).string();
}

}  // namespace specmoe::exp
