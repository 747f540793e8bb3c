// Per-run aggregation and report assembly.
#include "experiments/report_builder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "experiments/config_hash.h"
#include "experiments/environment.h"
#include "experiments/experiment_spec.h"
#include "experiments/metrics_json.h"
#include "experiments/statistics.h"
#include "moe/expert_stats.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

using Key = std::pair<int, int>;  // (prompt_index, repeat)

template <typename F>
Estimate estimate_of(const std::vector<const PromptRecord*>& recs, F f) {
  std::vector<double> v;
  v.reserve(recs.size());
  for (const auto* r : recs) v.push_back(f(*r));
  return estimate_mean(v);
}

std::string output_digest(const std::vector<PromptRecord>& records) {
  std::vector<const PromptRecord*> sorted;
  for (const auto& r : records) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](const PromptRecord* a, const PromptRecord* b) {
    return std::tie(a->prompt_index, a->repeat) < std::tie(b->prompt_index, b->repeat);
  });
  std::string bytes;
  for (const auto* r : sorted) {
    bytes += fmt::format("{}:{}:", r->prompt_index, r->repeat);
    for (int32_t t : r->tokens) bytes += fmt::format("{},", t);
    bytes += ';';
  }
  return fnv1a64_hex(bytes);
}

std::optional<MoeAggregate> aggregate_moe(const std::vector<PromptRecord>& records) {
  MoeAggregate m;
  bool any = false;
  std::vector<double> u_sum;
  std::vector<int64_t> u_count;
  double bytes = 0.0;
  int64_t generated = 0;
  // Pooled MoEMetrics sums over forwards x layers; `complete` turns false when a record predates them.
  double sum_distinct = 0, sum_uniform = 0, sum_rejected = 0, layer_forwards = 0;
  bool complete = true;
  for (const auto& r : records) {
    if (!r.moe) continue;
    any = true;
    const MoeRecord& mr = *r.moe;
    if (m.layers.size() < mr.expert_tokens.size()) m.layers.resize(mr.expert_tokens.size());
    for (size_t l = 0; l < mr.expert_tokens.size(); ++l) {
      auto& dst = m.layers[l].expert_tokens;
      if (dst.size() < mr.expert_tokens[l].size()) dst.resize(mr.expert_tokens[l].size(), 0);
      for (size_t e = 0; e < mr.expert_tokens[l].size(); ++e) dst[e] += mr.expert_tokens[l][e];
      m.n_expert = std::max(m.n_expert, static_cast<int>(mr.expert_tokens[l].size()));
    }
    m.n_expert = std::max(m.n_expert, mr.n_expert);
    for (size_t l = 0; l < mr.dropped_tokens.size() && l < m.layers.size(); ++l)
      m.layers[l].dropped_tokens += mr.dropped_tokens[l];
    m.n_expert_used = std::max(m.n_expert_used, mr.n_expert_used);
    size_t n = std::min(mr.distinct_experts_sum.size(), mr.distinct_experts_count.size());
    if (u_sum.size() < n) u_sum.resize(n, 0.0), u_count.resize(n, 0);
    for (size_t t = 0; t < n; ++t) u_sum[t] += mr.distinct_experts_sum[t], u_count[t] += mr.distinct_experts_count[t];
    bytes += mr.expert_bytes_read;
    generated += r.n_generated;
    if (std::isfinite(mr.kv_bytes_per_token)) m.kv_bytes_per_token = mr.kv_bytes_per_token;
    if (!std::isfinite(mr.sum_distinct) || !std::isfinite(mr.sum_uniform) || !std::isfinite(mr.sum_rejected_reads)) {
      complete = false;
      continue;
    }
    sum_distinct += mr.sum_distinct;
    sum_uniform += mr.sum_uniform;
    sum_rejected += mr.sum_rejected_reads;
    layer_forwards += static_cast<double>(mr.n_forwards) * mr.n_moe_layers;
  }
  if (!any) return std::nullopt;
  for (auto& layer : m.layers) {
    const auto& x = layer.expert_tokens;
    double E = static_cast<double>(x.size()), sum = 0, sum2 = 0, mx = 0;
    for (int64_t v : x) sum += v, sum2 += static_cast<double>(v) * v, mx = std::max(mx, static_cast<double>(v));
    if (E == 0 || sum == 0) continue;
    double mean = sum / E;
    double var = std::max(0.0, sum2 / E - mean * mean);  // population variance over experts
    layer.load_cv = std::sqrt(var) / mean;
    layer.max_over_mean = mx / mean;
    layer.jain_index = sum * sum / (E * sum2);
    layer.routing_entropy_bits = moe::load_entropy_bits(x);  // bits, as moe::ExpertStats reports it
  }
  double E = m.n_expert, k = m.n_expert_used;
  m.distinct_experts.assign(u_sum.size(), kNaN);
  m.amplification.assign(u_sum.size(), kNaN);
  m.uniform_expectation.assign(u_sum.size(), kNaN);
  double all_sum = 0;
  int64_t all_count = 0;
  for (size_t t = 1; t < u_sum.size(); ++t) {
    if (u_count[t] == 0) continue;
    all_sum += u_sum[t];
    all_count += u_count[t];
    m.distinct_experts[t] = u_sum[t] / u_count[t];
    if (k > 0) m.amplification[t] = m.distinct_experts[t] / k;
    if (E > 0 && k > 0) m.uniform_expectation[t] = E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(t)));
  }
  if (generated > 0) m.expert_bytes_per_token = bytes / generated;
  // Mean U over every recorded forward: the by-size sums are per-forward layer means, so this is
  // MoEMetrics::mean_distinct whenever every forward ran the same MoE layers (always, per model).
  if (all_count > 0) {
    m.mean_distinct = all_sum / all_count;
    if (k > 0) m.amplification_mean = m.mean_distinct / k;
  }
  if (complete && layer_forwards > 0 && k > 0) m.uniform_amplification = sum_uniform / layer_forwards / k;
  if (complete && sum_distinct > 0) m.rejected_read_share = sum_rejected / sum_distinct;
  return m;
}

}  // namespace

RunAggregate aggregate_run(const nlohmann::json& run_spec, const std::vector<PromptRecord>& records,
                           const std::vector<PromptRecord>* baseline_records) {
  RunAggregate a;
  const auto& st = run_spec.at("strategy");
  a.name = run_spec.value("name", "");
  a.strategy = st.value("name", "");
  a.kind = st.value("kind", "");
  a.target = st.value("target", "");
  a.drafter = st.value("drafter", "");
  a.draft = st.value("draft", "");
  a.verifier = st.value("verifier", "");
  a.draft_max = st.value("draft_max", 0);
  if (const auto t = st.find("tree"); t != st.end() && t->is_object()) {
    StrategySpec tree_fields;
    tree_fields.tree_widths = t->value("widths", "");
    tree_fields.tree_nodes = t->value("nodes", 0);
    tree_fields.tree_depth = t->value("depth", 0);
    tree_fields.tree_top_k = t->value("top_k", 0);
    tree_fields.tree_sampling = t->value("sampling", "topk");
    try {
      a.tree = tree_spec_of(tree_fields).describe();
    } catch (const Error&) {
      a.tree = "tree";  // a report of another version's config: named, not parsed
    }
  }
  a.temperature = run_spec.at("sampling").value("temperature", 0.0);
  a.baseline = run_spec.value("baseline", "");
  a.is_baseline = run_spec.value("is_baseline", false);
  a.config_hash = run_spec.value("config_hash", "");
  a.n_records = static_cast<int>(records.size());

  std::vector<const PromptRecord*> all;
  double wall = 0.0;
  for (const auto& r : records) {
    all.push_back(&r);
    a.n_generated += r.n_generated;
    a.n_drafted += r.n_drafted;
    a.n_accepted += r.n_accepted;
    a.n_steps += r.n_steps;
    wall += r.wall_s;
    a.time_breakdown.draft_s += r.time_breakdown.draft_s;
    a.time_breakdown.verify_forward_s += r.time_breakdown.verify_forward_s;
    a.time_breakdown.sampling_s += r.time_breakdown.sampling_s;
    a.time_breakdown.other_s += r.time_breakdown.other_s;
    a.pooled.merge(record_metrics(r));
    size_t n = std::min(r.position_drafted.size(), r.position_accepted.size());
    if (a.position_drafted.size() < n) a.position_drafted.resize(n, 0), a.position_accepted.resize(n, 0);
    for (size_t i = 0; i < n; ++i) a.position_drafted[i] += r.position_drafted[i], a.position_accepted[i] += r.position_accepted[i];
  }
  if (!records.empty()) a.pooled.ttft_s /= static_cast<double>(records.size());  // merge sums it
  if (a.n_drafted > 0) a.acceptance_rate = static_cast<double>(a.n_accepted) / a.n_drafted;
  if (a.n_steps > 0) a.mean_accepted_length = static_cast<double>(a.n_accepted + a.n_steps) / a.n_steps;
  for (size_t i = 0; i < a.position_drafted.size(); ++i)
    a.per_position_acceptance.push_back(a.position_drafted[i] > 0
                                            ? static_cast<double>(a.position_accepted[i]) / a.position_drafted[i]
                                            : kNaN);

  a.tokens_per_second = estimate_of(all, [](const PromptRecord& r) { return r.tokens_per_second(); });
  a.ttft_ms = estimate_of(all, [](const PromptRecord& r) { return r.ttft_ms; });
  a.acceptance_rate_by_record = estimate_of(all, [](const PromptRecord& r) { return r.acceptance_rate(); });
  a.mean_accepted_length_by_record = estimate_of(all, [](const PromptRecord& r) { return r.mean_accepted_length(); });
  a.cost_ratio = estimate_of(all, [](const PromptRecord& r) { return r.cost_ratio(); });
  a.decode_tokens_per_second = estimate_of(all, [](const PromptRecord& r) { return r.decode_tokens_per_second(); });
  if (a.kind == "speculative") {
    a.alpha_fit = alpha_fit(a.mean_accepted_length, a.draft_max);
    a.predicted_speedup = predicted_speedup(a.alpha_fit, a.draft_max, a.cost_ratio.mean);
  }
  a.output_digest = output_digest(records);

  // Speedup and identical_to_baseline pair each record with the baseline's same (prompt, repeat).
  std::map<Key, const PromptRecord*> base;
  if (baseline_records)
    for (const auto& r : *baseline_records) base[{r.prompt_index, r.repeat}] = &r;
  std::map<std::string, std::vector<double>> speedup_by_category, decode_speedup_by_category;
  std::vector<double> speedups, decode_speedups;
  bool identical = true, all_paired = baseline_records != nullptr;
  double base_wall = 0.0;
  int64_t base_gen = 0;
  for (const auto& r : records) {
    auto it = base.find({r.prompt_index, r.repeat});
    if (it == base.end()) {
      all_paired = false;
      speedups.push_back(kNaN);
      decode_speedups.push_back(kNaN);
      continue;
    }
    const PromptRecord& b = *it->second;
    double s = b.seconds_per_token() / r.seconds_per_token();
    speedups.push_back(s);
    speedup_by_category[r.category].push_back(s);
    double ds = b.decode_seconds_per_token() / r.decode_seconds_per_token();  // NaN when either is unknown
    decode_speedups.push_back(ds);
    decode_speedup_by_category[r.category].push_back(ds);
    if (b.tokens != r.tokens) identical = false;
    base_wall += b.wall_s;
    base_gen += b.n_generated;
  }
  if (baseline_records) {
    a.speedup = estimate_mean(speedups);
    a.decode_speedup = estimate_mean(decode_speedups);
    if (base_gen > 0 && a.n_generated > 0 && wall > 0)
      a.speedup_pooled = (base_wall / base_gen) / (wall / a.n_generated);
    if (a.temperature == 0.0 && all_paired) a.identical_to_baseline = identical;
  }

  std::map<std::string, std::vector<const PromptRecord*>> by_category;
  for (const auto& r : records) by_category[r.category].push_back(&r);
  if (by_category.size() > 1 || (by_category.size() == 1 && !by_category.begin()->first.empty())) {
    for (const auto& [cat, recs] : by_category) {
      CategoryAggregate c;
      c.category = cat.empty() ? "(none)" : cat;
      c.n_records = static_cast<int>(recs.size());
      c.tokens_per_second = estimate_of(recs, [](const PromptRecord& r) { return r.tokens_per_second(); });
      c.acceptance_rate = estimate_of(recs, [](const PromptRecord& r) { return r.acceptance_rate(); });
      c.mean_accepted_length = estimate_of(recs, [](const PromptRecord& r) { return r.mean_accepted_length(); });
      if (baseline_records) {
        c.speedup = estimate_mean(speedup_by_category[cat]);
        c.decode_speedup = estimate_mean(decode_speedup_by_category[cat]);
      }
      a.categories.push_back(std::move(c));
    }
  }
  a.moe = aggregate_moe(records);
  return a;
}

Report build_report(const ExperimentFile& experiment, const std::vector<RunFile>& runs) {
  Report rep;
  rep.experiment = experiment;
  rep.created = utc_now_iso8601();
  std::map<std::string, const RunFile*> by_name;
  for (const auto& f : runs) by_name[f.name] = &f;

  // The runs that are finished and current, in experiment order.
  std::vector<const nlohmann::json*> specs;
  std::vector<const RunFile*> files;
  for (const auto& spec : experiment.config.at("runs")) {
    std::string name = spec.value("name", "");
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second->config_hash != spec.value("config_hash", "")) {
      rep.missing_runs.push_back(name);
      continue;
    }
    specs.push_back(&spec);
    files.push_back(it->second);
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < files.size(); ++i) index[files[i]->name] = i;
  for (size_t i = 0; i < files.size(); ++i) {
    const nlohmann::json& spec = *specs[i];
    const std::vector<PromptRecord>* base = nullptr;
    if (spec.value("is_baseline", false)) base = &files[i]->records;
    else if (auto it = index.find(spec.value("baseline", "")); it != index.end()) base = &files[it->second]->records;
    rep.runs.push_back(aggregate_run(spec, files[i]->records, base));
    rep.run_specs.push_back(spec);
    rep.run_environments.push_back(files[i]->environment);
    rep.records.push_back(files[i]->records);
  }
  rep.environment = files.empty() ? capture_environment(0) : files.front()->environment;
  auto strip_date = [](nlohmann::json e) {
    if (e.is_object()) e.erase("date");
    return e;
  };
  for (const auto* f : files)
    if (strip_date(f->environment) != strip_date(rep.environment)) rep.mixed_environments = true;
  return rep;
}

const RunFile& RunFileCache::load(const std::string& path) {
  auto mtime = fs::last_write_time(path);
  auto size = fs::file_size(path);
  auto it = entries_.find(path);
  if (it != entries_.end() && it->second.mtime == mtime && it->second.size == size) return it->second.file;
  Entry e{mtime, size, load_run_file(path)};
  return entries_.insert_or_assign(path, std::move(e)).first->second.file;
}

Report load_report_inputs(const std::string& dir, RunFileCache* cache) {
  ExperimentFile exp = load_experiment_file((fs::path(dir) / "experiment.json").string());
  std::vector<RunFile> runs;
  fs::path run_dir = fs::path(dir) / "runs";
  std::error_code ec;
  if (fs::is_directory(run_dir, ec)) {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(run_dir)) {
      const auto name = entry.path().filename().string();
      if (entry.is_regular_file() && entry.path().extension() == ".json" && name[0] != '.') paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) runs.push_back(cache ? cache->load(p.string()) : load_run_file(p.string()));
  }
  return build_report(exp, runs);
}

nlohmann::json estimate_to_json(const Estimate& e) {
  return {{"mean", number_or_null(e.mean)}, {"ci95", number_or_null(e.ci95)}, {"sd", number_or_null(e.sd)}, {"n", e.n}};
}

nlohmann::json aggregate_to_json(const RunAggregate& a) {
  nlohmann::json per_pos = nlohmann::json::array();
  for (double v : a.per_position_acceptance) per_pos.push_back(number_or_null(v));
  nlohmann::json j = {
      {"name", a.name},
      {"strategy", a.strategy},
      {"kind", a.kind},
      {"target", a.target},
      {"drafter", a.drafter},
      {"draft", a.draft},
      {"verifier", a.verifier},
      {"draft_max", a.draft_max},
      {"tree", a.tree.empty() ? nlohmann::json() : nlohmann::json(a.tree)},
      {"temperature", a.temperature},
      {"baseline", a.baseline},
      {"is_baseline", a.is_baseline},
      {"config_hash", a.config_hash},
      {"n_records", a.n_records},
      {"n_generated", a.n_generated},
      {"n_drafted", a.n_drafted},
      {"n_accepted", a.n_accepted},
      {"n_steps", a.n_steps},
      {"acceptance_rate", number_or_null(a.acceptance_rate)},
      {"mean_accepted_length", number_or_null(a.mean_accepted_length)},
      {"per_position_acceptance", per_pos},
      {"position_drafted", a.position_drafted},
      {"position_accepted", a.position_accepted},
      {"tokens_per_second", estimate_to_json(a.tokens_per_second)},
      {"ttft_ms", estimate_to_json(a.ttft_ms)},
      {"acceptance_rate_by_record", estimate_to_json(a.acceptance_rate_by_record)},
      {"mean_accepted_length_by_record", estimate_to_json(a.mean_accepted_length_by_record)},
      {"cost_ratio", estimate_to_json(a.cost_ratio)},
      {"decode_tokens_per_second", estimate_to_json(a.decode_tokens_per_second)},
      {"speedup", estimate_to_json(a.speedup)},
      {"decode_speedup", estimate_to_json(a.decode_speedup)},
      {"speedup_pooled", number_or_null(a.speedup_pooled)},
      {"alpha_fit", number_or_null(a.alpha_fit)},
      {"predicted_speedup", number_or_null(a.predicted_speedup)},
      {"time_breakdown", time_breakdown_to_json(a.time_breakdown)},
      {"identical_to_baseline", a.identical_to_baseline ? nlohmann::json(*a.identical_to_baseline) : nlohmann::json()},
      {"output_digest", a.output_digest},
  };
  nlohmann::json cats = nlohmann::json::array();
  for (const auto& c : a.categories)
    cats.push_back({{"category", c.category},
                    {"n_records", c.n_records},
                    {"tokens_per_second", estimate_to_json(c.tokens_per_second)},
                    {"acceptance_rate", estimate_to_json(c.acceptance_rate)},
                    {"mean_accepted_length", estimate_to_json(c.mean_accepted_length)},
                    {"speedup", estimate_to_json(c.speedup)},
                    {"decode_speedup", estimate_to_json(c.decode_speedup)}});
  j["categories"] = cats;
  // The same object `speculate --json` prints as "metrics", over the run's records pooled.
  j["metrics"] = metrics_to_json(a.pooled);
  if (a.moe) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : a.moe->layers)
      layers.push_back({{"expert_tokens", l.expert_tokens},
                        {"load_cv", number_or_null(l.load_cv)},
                        {"max_over_mean", number_or_null(l.max_over_mean)},
                        {"jain_index", number_or_null(l.jain_index)},
                        {"routing_entropy", number_or_null(l.routing_entropy_bits)},
                        {"routing_entropy_unit", "bits"},
                        {"dropped_tokens", l.dropped_tokens}});
    auto vec = [](const std::vector<double>& v) {
      nlohmann::json out = nlohmann::json::array();
      for (double x : v) out.push_back(number_or_null(x));
      return out;
    };
    j["moe"] = {{"n_expert", a.moe->n_expert},
                {"n_expert_used", a.moe->n_expert_used},
                {"layers", layers},
                {"distinct_experts_by_forward_tokens", vec(a.moe->distinct_experts)},
                {"amplification_by_forward_tokens", vec(a.moe->amplification)},
                {"uniform_expectation_by_forward_tokens", vec(a.moe->uniform_expectation)},
                {"expert_bytes_per_token", number_or_null(a.moe->expert_bytes_per_token)},
                {"expert_mb_per_token", number_or_null(a.moe->expert_bytes_per_token / 1e6)},
                {"mean_distinct_experts", number_or_null(a.moe->mean_distinct)},
                {"amplification", number_or_null(a.moe->amplification_mean)},
                {"uniform_amplification", number_or_null(a.moe->uniform_amplification)},
                {"rejected_read_share", number_or_null(a.moe->rejected_read_share)},
                {"kv_bytes_per_token", number_or_null(a.moe->kv_bytes_per_token)}};
  }
  return j;
}

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < r.runs.size(); ++i) {
    nlohmann::json j = aggregate_to_json(r.runs[i]);
    j["run"] = r.run_specs[i];
    if (r.mixed_environments) j["environment"] = r.run_environments[i];
    runs.push_back(std::move(j));
  }
  const auto& exp = r.experiment.config.at("experiment");
  nlohmann::json j = {{"format", "specmoe-report/1"},
          {"experiment", exp.value("name", "")},
          {"description", exp.value("description", "")},
          {"created", r.created},
          {"config_hash", r.experiment.config_hash},
          {"command", r.experiment.command},
          {"seeds",
           {{"experiment_seed", exp.value("seed", uint64_t{0})},
            {"rng", "Philox4x32-10 keyed by the experiment seed; one stream per (prompt index, repeat)"}}},
          {"environment", r.environment},
          {"mixed_environments", r.mixed_environments},
          {"runs", runs},
          {"missing_runs", r.missing_runs},
          {"config", r.experiment.config},
          {"toml", r.experiment.toml}};
  if (!r.experiment.merge.is_null()) j["merge"] = r.experiment.merge;  // shards merged, gaps
  return j;
}

}  // namespace specmoe::exp
