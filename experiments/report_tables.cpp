// Report tables shared by the Markdown and HTML writers.

#include "experiments/report_tables.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace specmoe::exp {

std::string format_number(double v, int precision) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:.{}f}", v, precision);
}

std::string format_estimate(const Estimate& e, int precision) {
  if (!std::isfinite(e.mean)) return "-";
  if (!std::isfinite(e.ci95)) return format_number(e.mean, precision);
  return fmt::format("{} ± {}", format_number(e.mean, precision), format_number(e.ci95, precision));
}

// "model g=4" for a chain, "model tree widths 4,2,2,1, topk" for a tree.
std::string draft_kind(const RunAggregate& a) {
  return a.tree.empty() ? fmt::format("{} g={}", a.drafter, a.draft_max) : fmt::format("{} tree {}", a.drafter, a.tree);
}

TextTable summary_table(const Report& r) {
  TextTable t;
  t.title = "Summary";
  t.headers = {"run", "kind", "tokens/s", "speedup", "decode speedup", "predicted speedup", "acceptance rate",
               "mean accepted length", "cost ratio", "target step GB/s", "identical to baseline"};
  for (const auto& a : r.runs) {
    bool spec = a.kind == "speculative";
    std::string identical = a.identical_to_baseline ? (*a.identical_to_baseline ? "yes" : "NO") : "-";
    std::string kind = spec ? draft_kind(a) : (a.is_baseline ? "baseline" : "autoregressive");
    t.rows.push_back({a.name, kind, format_estimate(a.tokens_per_second, 1), format_estimate(a.speedup, 2),
                      format_estimate(a.decode_speedup, 2), format_number(a.predicted_speedup, 2), format_number(a.acceptance_rate, 3),
                      format_number(a.mean_accepted_length, 2), format_estimate(a.cost_ratio, 3),
                      format_number(a.pooled.target_weight_gbs() > 0 ? a.pooled.target_weight_gbs() : kNaN, 1),
                      identical});
  }
  return t;
}

TextTable position_table(const Report& r) {
  TextTable t;
  t.title = "Acceptance by draft position";
  size_t width = 0;
  for (const auto& a : r.runs) width = std::max(width, a.per_position_acceptance.size());
  t.headers = {"run"};
  for (size_t i = 0; i < width; ++i) t.headers.push_back(fmt::format("{}", i + 1));
  for (const auto& a : r.runs) {
    if (a.kind != "speculative") continue;
    std::vector<std::string> row = {a.name};
    for (size_t i = 0; i < width; ++i)
      row.push_back(i < a.per_position_acceptance.size() ? format_number(a.per_position_acceptance[i], 3) : "-");
    t.rows.push_back(std::move(row));
  }
  return t;
}

TextTable tree_table(const Report& r) {
  TextTable t;
  t.title = "Trees and chains: verified tokens, acceptance by depth, costs";
  t.headers = {"run",           "draft",          "tree size", "mean accepted length", "acceptance by depth",
               "r(N)",          "draft cost / step", "predicted (tree)", "bound (D+1)/(draft + r)", "decode speedup"};
  for (const auto& a : r.runs) {
    if (a.kind != "speculative") continue;
    const verify::Metrics& m = a.pooled;
    std::string depths;
    const std::vector<double> by_depth = m.acceptance_by_depth();
    for (size_t i = 0; i < by_depth.size(); ++i) {
      if (i > 0) depths += ' ';
      depths += m.depth_tried[i] > 0 ? format_number(by_depth[i], 2) : std::string("-");
    }
    const double r_n = m.verify_cost_ratio(), c = m.draft_cost_per_step();
    t.rows.push_back({a.name, draft_kind(a), format_number(m.tree_size(), 2), format_number(a.mean_accepted_length, 2),
                      depths.empty() ? "-" : depths, format_number(r_n > 0 ? r_n : kNaN, 2),
                      format_number(c > 0 ? c : kNaN, 2), format_number(r_n > 0 ? m.predicted_speedup_tree() : kNaN, 2),
                      format_number(r_n > 0 ? m.speedup_bound() : kNaN, 2), format_estimate(a.decode_speedup, 2)});
  }
  return t;
}

TextTable category_table(const Report& r) {
  TextTable t;
  t.title = "By category";
  t.headers = {"run",     "category",        "records",        "tokens/s",
               "speedup", "decode speedup", "acceptance rate", "mean accepted length"};
  for (const auto& a : r.runs)
    for (const auto& c : a.categories)
      t.rows.push_back({a.name, c.category, std::to_string(c.n_records), format_estimate(c.tokens_per_second, 1),
                        format_estimate(c.speedup, 2), format_estimate(c.decode_speedup, 2),
                        format_estimate(c.acceptance_rate, 3),
                        format_estimate(c.mean_accepted_length, 2)});
  return t;
}

TextTable time_table(const Report& r) {
  TextTable t;
  t.title = "Time breakdown (seconds, summed over records)";
  t.headers = {"run", "draft", "target verify", "sampling/verification", "other", "ttft (ms)", "tokens"};
  for (const auto& a : r.runs)
    t.rows.push_back({a.name, format_number(a.time_breakdown.draft_s, 3), format_number(a.time_breakdown.verify_forward_s, 3),
                      format_number(a.time_breakdown.sampling_s, 3), format_number(a.time_breakdown.other_s, 3),
                      format_estimate(a.ttft_ms, 2), std::to_string(a.n_generated)});
  return t;
}

TextTable moe_table(const Report& r) {
  TextTable t;
  t.title = "Expert load (target MoE layers)";
  t.headers = {"run", "layer", "load_cv", "max_over_mean", "jain_index", "routing_entropy (bits)", "dropped_tokens"};
  for (const auto& a : r.runs) {
    if (!a.moe) continue;
    for (size_t l = 0; l < a.moe->layers.size(); ++l) {
      const auto& L = a.moe->layers[l];
      t.rows.push_back({a.name, std::to_string(l), format_number(L.load_cv, 3), format_number(L.max_over_mean, 3),
                        format_number(L.jain_index, 3), format_number(L.routing_entropy_bits, 3),
                        std::to_string(L.dropped_tokens)});
    }
  }
  return t;
}

TextTable moe_traffic_table(const Report& r) {
  TextTable t;
  t.title = "MoE expert traffic (target decode forwards)";
  t.headers = {"run",         "kind", "k", "E", "mean U(T)", "U/k", "uniform U/k", "expert MB / token",
               "% reads on rejected tokens", "KV KiB / token"};
  for (const auto& a : r.runs) {
    if (!a.moe) continue;
    const MoeAggregate& m = *a.moe;
    std::string kind = a.kind == "speculative" ? draft_kind(a) : "autoregressive";
    t.rows.push_back({a.name, kind, std::to_string(m.n_expert_used), std::to_string(m.n_expert),
                      format_number(m.mean_distinct, 2), format_number(m.amplification_mean, 2),
                      format_number(m.uniform_amplification, 2), format_number(m.expert_bytes_per_token / 1e6, 2),
                      format_number(100.0 * m.rejected_read_share, 1), format_number(m.kv_bytes_per_token / 1024.0, 1)});
  }
  return t;
}

TextTable moe_distinct_table(const Report& r) {
  TextTable t;
  t.title = "Distinct experts per layer per target forward, U(T), by forward size T";
  std::vector<const RunAggregate*> runs;
  std::vector<std::pair<int, int>> ek;  // distinct (E, k) for the uniform columns, in run order
  size_t width = 0;
  for (const auto& a : r.runs) {
    if (!a.moe) continue;
    runs.push_back(&a);
    width = std::max(width, a.moe->distinct_experts.size());
    std::pair<int, int> p{a.moe->n_expert, a.moe->n_expert_used};
    if (std::find(ek.begin(), ek.end(), p) == ek.end()) ek.push_back(p);
  }
  if (runs.empty()) return t;
  t.headers = {"T"};
  for (const auto* a : runs) t.headers.push_back(a->name);
  for (const auto& [E, k] : ek)
    t.headers.push_back(ek.size() == 1 ? "uniform E(1-(1-k/E)^T)" : fmt::format("uniform E={} k={}", E, k));
  for (size_t T = 1; T < width; ++T) {
    std::vector<std::string> row = {std::to_string(T)};
    bool seen = false;
    for (const auto* a : runs) {
      const auto& u = a->moe->distinct_experts;
      double v = T < u.size() ? u[T] : kNaN;
      seen |= std::isfinite(v);
      row.push_back(format_number(v, 2));
    }
    if (!seen) continue;  // no run had a forward of this size
    for (const auto& [E, k] : ek)
      row.push_back(E > 0 && k > 0 ? format_number(E * (1.0 - std::pow(1.0 - static_cast<double>(k) / E, T)), 2)
                                   : "-");
    t.rows.push_back(std::move(row));
  }
  return t;
}

TextTable environment_table(const Report& r) {
  TextTable t;
  t.title = "Environment";
  t.headers = {"key", "value"};
  if (r.environment.is_object())
    for (const auto& [k, v] : r.environment.items())
      t.rows.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
  t.rows.push_back({"config_hash", r.experiment.config_hash});
  if (r.mixed_environments) t.rows.push_back({"note", "runs came from different machines or builds; see report.json"});
  return t;
}

TextTable seeds_table(const Report& r) {
  TextTable t;
  t.title = "Seeds";
  t.headers = {"what", "value"};
  const auto& exp = r.experiment.config.at("experiment");
  t.rows.push_back({"experiment seed", exp.at("seed").dump()});
  t.rows.push_back({"repeats", exp.at("repeats").dump()});
  t.rows.push_back({"rng", "Philox4x32-10, one stream per (prompt index, repeat)"});
  if (r.experiment.config.contains("models"))
    for (const auto& m : r.experiment.config.at("models"))
      if (m.contains("synth"))
        t.rows.push_back({"synth model " + m.value("name", ""),
                          fmt::format("preset {} seed {}", m.value("synth", ""), m.at("seed").dump())});
  return t;
}

std::string reproduce_command(const Report& r) {
  if (!r.experiment.command.empty()) return r.experiment.command;
  return "specmoe run " + r.experiment.config.at("experiment").value("file", std::string("EXPERIMENT.toml"));
}

}  // namespace specmoe::exp
