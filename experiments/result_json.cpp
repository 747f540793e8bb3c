// PromptRecord / run file / experiment file <-> JSON.
#include "experiments/result_json.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/json_text.h"
#include "experiments/metrics_json.h"

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

template <typename T>
struct is_vector : std::false_type {};
template <typename U>
struct is_vector<std::vector<U>> : std::true_type {};

// Whether v holds a value of T exactly: an integer in T's range, any number for a floating type,
// an array of such for a vector.
template <typename T>
bool fits(const nlohmann::json& v) {
  if constexpr (is_vector<T>::value) {
    return v.is_array() && std::all_of(v.begin(), v.end(), fits<typename T::value_type>);
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (!v.is_number_integer()) return false;
    const int64_t x = v.get<int64_t>();
    if (x < 0) return x >= static_cast<int64_t>(std::numeric_limits<T>::min());
    return static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number();
  } else {
    return true;
  }
}

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
      // nlohmann converts a float to an integer type with a plain cast (undefined for 2e23 into
      // int64) and an integer to a narrower one by wrapping, so every element is checked first.
      if (!it->is_array() || !std::all_of(it->begin(), it->end(), fits<T>))
        throw_error(ErrorKind::Format, "{}: field '{}' has the wrong element type", where, key);
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
          {"sum_rejected_reads", number_or_null(m.sum_rejected_reads)},
          {"kv_bytes_per_token", number_or_null(m.kv_bytes_per_token)}};
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
  if (j.contains("kv_bytes_per_token")) m.kv_bytes_per_token = r.real("kv_bytes_per_token");
  return m;
}

}  // namespace

verify::Metrics record_metrics(const PromptRecord& r) {
  verify::Metrics m;
  m.n_prompt = r.n_prompt_tokens;
  m.n_generated = r.n_generated;
  m.n_drafted = r.n_drafted;
  m.n_accepted = r.n_accepted;
  m.n_steps = r.n_steps;
  m.draft_max = static_cast<int>(r.position_drafted.size());
  m.position_drafted = r.position_drafted;
  m.position_accepted = r.position_accepted;
  m.accept_length_histogram = r.accept_length_histogram;
  m.depth_tried = r.depth_tried;
  m.depth_tried.resize(r.position_drafted.size(), 0);
  m.tree_size_max = r.tree_size_max;
  if (std::isfinite(r.verify_step_ms) && !r.position_drafted.empty())
    m.verify_draft_s = r.verify_step_ms / 1000.0 * static_cast<double>(r.position_drafted[0]);
  m.total_s = r.wall_s;
  m.ttft_s = r.ttft_ms / 1000.0;
  m.prefill_s = r.prefill_s;
  m.n_decoded = r.n_decoded;
  m.target_step_s = std::isfinite(r.target_step_ms) ? r.target_step_ms / 1000.0 : 0.0;
  m.target_weight_bytes = std::isfinite(r.target_weight_bytes) ? r.target_weight_bytes : 0.0;
  m.draft_token_s = std::isfinite(r.draft_step_ms) ? r.draft_step_ms / 1000.0 : 0.0;
  m.time = r.time_breakdown;
  return m;
}

nlohmann::json record_to_json(const PromptRecord& r) {
  nlohmann::json j = {
      {"run", r.run},
      {"prompt_index", r.prompt_index},
      {"prompt_id", r.prompt_id},
      {"category", r.category},
      {"repeat", r.repeat},
      {"tokens", r.tokens},
      {"stopped_at_eog", r.stopped_at_eog},
  };
  set_text(j, "text", r.text);
  j.update(metrics_to_json(record_metrics(r)));
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
  // Records written before the metrics schema was unified (exp::metrics_to_json) named these
  // n_prompt_tokens and wall_s.
  p.n_prompt_tokens = static_cast<int>(j.contains("n_prompt") ? r.integer("n_prompt") : r.integer("n_prompt_tokens"));
  p.tokens = r.array<int32_t>("tokens");
  r.string("text");
  std::optional<std::string> text = get_text(j, "text");
  if (!text) throw_error(ErrorKind::Format, "{}: field 'text_bytes_b64' is not valid base64", where);
  p.text = std::move(*text);
  p.stopped_at_eog = j.value("stopped_at_eog", false);
  p.n_generated = r.integer("n_generated");
  p.n_drafted = r.integer("n_drafted");
  p.n_accepted = r.integer("n_accepted");
  p.n_steps = r.integer("n_steps");
  p.position_drafted = r.array<int64_t>("position_drafted");
  p.position_accepted = r.array<int64_t>("position_accepted");
  // accepted_length_histogram (DESIGN.md's name) was written accept_length_histogram before trees.
  p.accept_length_histogram = r.array<int64_t>(j.contains("accepted_length_histogram") ? "accepted_length_histogram"
                                                                                      : "accept_length_histogram");
  if (j.contains("depth_tried")) p.depth_tried = r.array<int64_t>("depth_tried");
  p.tree_size_max = r.optional_integer("tree_size_max", 0);
  p.verify_step_ms = r.real("verify_step_ms");
  p.wall_s = j.contains("total_s") ? r.real("total_s") : r.real("wall_s");
  p.prefill_s = r.real("prefill_s");             // absent in older records: unknown
  p.n_decoded = r.optional_integer("n_decoded", -1);
  p.ttft_ms = r.real("ttft_ms");
  p.draft_step_ms = r.real("draft_step_ms");
  p.target_step_ms = r.real("target_step_ms");
  p.target_weight_bytes = r.real("target_weight_bytes");  // absent in older records: unknown
  if (auto it = j.find("time_breakdown"); it != j.end() && it->is_object())
    p.time_breakdown = time_breakdown_from_json(*it);
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

namespace {
RunFile run_file_fields(const nlohmann::json& j, const std::string& where) {
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
}  // namespace

RunFile run_file_from_json(const nlohmann::json& j, const std::string& where) {
  // A field of the wrong type that json::value or get meets throws nlohmann's type_error, which
  // must reach the user as one specmoe::Error naming the file.
  try {
    return run_file_fields(j, where);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Format, "{}: {}", where, e.what());
  }
}

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
  // An optional string field: "" when absent, an error when present with another type
  // (json::value would throw nlohmann's type_error, which is no specmoe::Error).
  auto optional_string = [&](const char* key) -> std::string {
    const auto it = j.find(key);
    if (it == j.end()) return "";
    if (!it->is_string()) throw_error(ErrorKind::Format, "{}: '{}' is not a string", path, key);
    return it->get<std::string>();
  };
  if (!j.is_object() || optional_string("format") != kExperimentFileFormat)
    throw_error(ErrorKind::Format, "{}: not a specmoe experiment file (format '{}' expected)", path,
                kExperimentFileFormat);
  Reader r{j, path};
  ExperimentFile f;
  f.config_hash = r.string("config_hash");
  f.command = optional_string("command");
  f.toml = optional_string("toml");
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
