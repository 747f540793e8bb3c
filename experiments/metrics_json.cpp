// verify::Metrics -> JSON with DESIGN.md's names: see metrics_json.h.
#include "experiments/metrics_json.h"

#include <cmath>
#include <limits>

namespace specmoe::exp {
namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
nlohmann::json positive(double v) { return std::isfinite(v) && v > 0 ? nlohmann::json(v) : nlohmann::json(); }

double read_seconds(const nlohmann::json& j, const char* key, const char* old_key) {
  auto it = j.find(key);
  if (it == j.end() && old_key) it = j.find(old_key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

nlohmann::json time_breakdown_to_json(const verify::TimeBreakdown& t) {
  return {{"draft_s", t.draft_s}, {"verify_forward_s", t.verify_forward_s}, {"sampling_s", t.sampling_s},
          {"other_s", t.other_s}};
}

verify::TimeBreakdown time_breakdown_from_json(const nlohmann::json& j) {
  verify::TimeBreakdown t;
  if (!j.is_object()) return t;
  t.draft_s = read_seconds(j, "draft_s", nullptr);
  t.verify_forward_s = read_seconds(j, "verify_forward_s", "verify_s");
  t.sampling_s = read_seconds(j, "sampling_s", "sample_s");
  t.other_s = read_seconds(j, "other_s", nullptr);
  return t;
}

nlohmann::json metrics_to_json(const verify::Metrics& m) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const double cost = m.target_step_s > 0 && m.draft_token_s > 0 ? m.cost_ratio() : kNaN;
  const bool tau_defined = m.n_steps > 0;
  const double alpha = tau_defined && m.draft_max > 0 ? m.alpha_fit() : kNaN;
  const double predicted = std::isfinite(alpha) && std::isfinite(cost) ? m.predicted_speedup() : kNaN;
  const double decode_s = std::isfinite(m.prefill_s) ? m.total_s - m.prefill_s : kNaN;

  nlohmann::json per_position = nlohmann::json::array();
  for (size_t i = 0; i < m.position_drafted.size(); ++i) {
    const int64_t drafted = m.position_drafted[i];
    const int64_t accepted = i < m.position_accepted.size() ? m.position_accepted[i] : 0;
    per_position.push_back(drafted > 0 ? nlohmann::json(static_cast<double>(accepted) / static_cast<double>(drafted))
                                       : nlohmann::json());
  }

  nlohmann::json j = {
      {"n_prompt", m.n_prompt},
      {"n_generated", m.n_generated},
      {"n_decoded", m.n_decoded >= 0 ? nlohmann::json(m.n_decoded) : nlohmann::json()},
      {"n_drafted", m.n_drafted},
      {"n_accepted", m.n_accepted},
      {"n_steps", m.n_steps},
      {"draft_max", m.draft_max},
      {"acceptance_rate", m.n_drafted > 0 ? nlohmann::json(m.acceptance_rate()) : nlohmann::json()},
      {"mean_accepted_length", tau_defined ? nlohmann::json(m.mean_accepted_length()) : nlohmann::json()},
      {"per_position_acceptance", per_position},
      {"position_drafted", m.position_drafted},
      {"position_accepted", m.position_accepted},
      {"accepted_length_histogram", m.accept_length_histogram},
      {"cost_ratio", num(cost)},
      {"alpha_fit", num(alpha)},
      {"predicted_speedup", num(predicted)},
      {"tokens_per_second", m.total_s > 0 ? num(static_cast<double>(m.n_generated) / m.total_s) : nlohmann::json()},
      {"decode_tokens_per_second",
       m.n_decoded > 0 && decode_s > 0 ? num(static_cast<double>(m.n_decoded) / decode_s) : nlohmann::json()},
      {"ttft_ms", m.n_generated > 0 ? num(m.ttft_s * 1000.0) : nlohmann::json()},
      {"total_s", num(m.total_s)},
      {"prefill_s", num(m.prefill_s)},
      {"draft_step_ms", positive(m.draft_token_s * 1000.0)},
      {"target_step_ms", positive(m.target_step_s * 1000.0)},
      {"target_weight_bytes", positive(m.target_weight_bytes)},
      {"target_weight_gbs", positive(m.target_weight_gbs())},
      {"time_breakdown", time_breakdown_to_json(m.time)},
  };
  // Trees (chains are one-child trees): nodes per step, acceptance by depth, the verify forward's
  // cost r(N) and what the measured acceptance and costs predict.
  nlohmann::json by_depth = nlohmann::json::array();
  const std::vector<double> a_depth = m.acceptance_by_depth();
  for (size_t i = 0; i < a_depth.size(); ++i)
    by_depth.push_back(m.depth_tried[i] > 0 ? nlohmann::json(a_depth[i]) : nlohmann::json());
  const int64_t n_verify = m.n_verify_forwards();
  const double verify_ms = n_verify > 0 && m.verify_draft_s > 0 ? m.verify_draft_s / n_verify * 1000.0 : kNaN;
  const double r = std::isfinite(verify_ms) && m.target_step_s > 0 ? m.verify_cost_ratio() : kNaN;
  const bool costs = std::isfinite(r) && std::isfinite(cost);
  j["tree_size"] = tau_defined ? nlohmann::json(m.tree_size()) : nlohmann::json();
  j["tree_size_max"] = m.tree_size_max;
  j["depth_tried"] = m.depth_tried;
  j["acceptance_by_depth"] = by_depth;
  j["verify_tokens"] = n_verify > 0 ? nlohmann::json(m.verify_tokens()) : nlohmann::json();
  j["verify_step_ms"] = num(verify_ms);
  j["verify_cost_ratio"] = num(r);
  j["predicted_speedup_measured_cost"] = costs && std::isfinite(alpha) ? num(m.predicted_speedup_measured_cost()) : nlohmann::json();
  j["predicted_speedup_tree"] = costs && n_verify > 0 ? num(m.predicted_speedup_tree()) : nlohmann::json();
  j["speedup_bound"] = costs && m.draft_max > 0 ? num(m.speedup_bound()) : nlohmann::json();
  if (m.moe.n_expert > 0) j["moe"] = m.moe.to_json(m.n_generated);
  return j;
}

}  // namespace specmoe::exp
