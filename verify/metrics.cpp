// Speculative decoding metrics: see metrics.h.
#include "verify/metrics.h"

#include <algorithm>
#include <cmath>

namespace specmoe::verify {
namespace {

double geometric_sum(double a, int g) {  // sum_{k=0..g} a^k, stable at a = 1
  double s = 0.0, term = 1.0;
  for (int k = 0; k <= g; ++k) {
    s += term;
    term *= a;
  }
  return s;
}

}  // namespace

void Metrics::resize_positions(int g) {
  draft_max = std::max(draft_max, g);
  position_drafted.resize(draft_max, 0);
  position_accepted.resize(draft_max, 0);
  depth_tried.resize(draft_max, 0);
  accept_length_histogram.resize(draft_max + 1, 0);
}

void Metrics::record_step(int drafted, int accepted) { record_tree_step(drafted, drafted, accepted, accepted < drafted); }

void Metrics::record_tree_step(int nodes, int depth, int accepted, bool tried_deeper) {
  if (depth > draft_max || accept_length_histogram.size() < static_cast<size_t>(draft_max) + 1 ||
      depth_tried.size() < static_cast<size_t>(draft_max))
    resize_positions(std::max(depth, draft_max));
  ++n_steps;
  n_drafted += nodes;
  n_accepted += accepted;
  tree_size_max = std::max<int64_t>(tree_size_max, nodes);
  for (int i = 0; i < depth; ++i) ++position_drafted[i];
  for (int i = 0; i < accepted; ++i) ++position_accepted[i];
  for (int i = 0; i < accepted + (tried_deeper ? 1 : 0) && i < depth; ++i) ++depth_tried[i];
  ++accept_length_histogram[accepted];
}

void Metrics::finish(double total, int64_t generated, bool first_from_prefill) {
  total_s = total;
  n_generated = generated;
  n_decoded = first_from_prefill ? std::max<int64_t>(0, generated - 1) : generated;
  time.other_s = std::max(0.0, total_s - time.draft_s - time.verify_forward_s - time.sampling_s);
}

void Metrics::merge(const Metrics& o) {
  // Weighted per-token timings, before the counts change.
  const double steps_a = static_cast<double>(n_steps), steps_b = static_cast<double>(o.n_steps);
  const double drafted_a = static_cast<double>(n_drafted), drafted_b = static_cast<double>(o.n_drafted);
  if (steps_a + steps_b > 0 && (target_step_s > 0 || o.target_step_s > 0)) {
    const double wa = target_step_s > 0 ? std::max(steps_a, 1.0) : 0.0;
    const double wb = o.target_step_s > 0 ? std::max(steps_b, 1.0) : 0.0;
    target_step_s = (wa * target_step_s + wb * o.target_step_s) / (wa + wb);
  }
  if (drafted_a + drafted_b > 0) draft_token_s = (drafted_a * draft_token_s + drafted_b * o.draft_token_s) / (drafted_a + drafted_b);
  verify_draft_s += o.verify_draft_s;
  target_weight_bytes = std::max(target_weight_bytes, o.target_weight_bytes);  // one target model
  resize_positions(o.draft_max);
  for (size_t i = 0; i < o.depth_tried.size(); ++i) depth_tried[i] += o.depth_tried[i];
  tree_size_max = std::max(tree_size_max, o.tree_size_max);
  n_prompt += o.n_prompt;
  n_generated += o.n_generated;
  n_drafted += o.n_drafted;
  n_accepted += o.n_accepted;
  n_steps += o.n_steps;
  for (size_t i = 0; i < o.position_drafted.size(); ++i) position_drafted[i] += o.position_drafted[i];
  for (size_t i = 0; i < o.position_accepted.size(); ++i) position_accepted[i] += o.position_accepted[i];
  for (size_t i = 0; i < o.accept_length_histogram.size(); ++i) accept_length_histogram[i] += o.accept_length_histogram[i];
  total_s += o.total_s;
  prefill_s += o.prefill_s;
  n_decoded += o.n_decoded;
  moe.merge(o.moe);
  ttft_s += o.ttft_s;
  time.draft_s += o.time.draft_s;
  time.verify_forward_s += o.time.verify_forward_s;
  time.sampling_s += o.time.sampling_s;
  time.other_s += o.time.other_s;
}

double Metrics::acceptance_rate() const {
  return n_drafted > 0 ? static_cast<double>(n_accepted) / static_cast<double>(n_drafted) : 0.0;
}

double Metrics::mean_accepted_length() const {
  return n_steps > 0 ? static_cast<double>(n_accepted + n_steps) / static_cast<double>(n_steps) : 1.0;
}

std::vector<double> Metrics::per_position_acceptance() const {
  std::vector<double> out(position_drafted.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i)
    if (position_drafted[i] > 0)
      out[i] = static_cast<double>(position_accepted[i]) / static_cast<double>(position_drafted[i]);
  return out;
}

double Metrics::target_weight_gbs() const {
  return target_weight_bytes > 0.0 && target_step_s > 0.0 ? target_weight_bytes / target_step_s / 1e9 : 0.0;
}

double Metrics::cost_ratio() const { return target_step_s > 0.0 ? draft_token_s / target_step_s : 0.0; }

double Metrics::alpha_fit() const { return fit_alpha(mean_accepted_length(), draft_max); }

double Metrics::predicted_speedup() const { return speedup_model(alpha_fit(), draft_max, cost_ratio()); }

double Metrics::tokens_per_second() const {
  return total_s > 0.0 ? static_cast<double>(n_generated) / total_s : 0.0;
}

double Metrics::decode_s() const { return std::max(0.0, total_s - prefill_s); }

double Metrics::decode_tokens_per_second() const {
  const double d = decode_s();
  return d > 0.0 && n_decoded > 0 ? static_cast<double>(n_decoded) / d : 0.0;
}

double Metrics::tree_size() const {
  return n_steps > 0 ? static_cast<double>(n_drafted) / static_cast<double>(n_steps) : 0.0;
}

std::vector<double> Metrics::acceptance_by_depth() const {
  std::vector<double> out(depth_tried.size(), 0.0);
  for (size_t i = 0; i < out.size() && i < position_accepted.size(); ++i)
    if (depth_tried[i] > 0) out[i] = static_cast<double>(position_accepted[i]) / static_cast<double>(depth_tried[i]);
  return out;
}

double Metrics::verify_tokens() const {
  const int64_t v = n_verify_forwards();
  return v > 0 ? static_cast<double>(n_drafted + v) / static_cast<double>(v) : 0.0;
}

double Metrics::verify_cost_ratio() const {
  const int64_t v = n_verify_forwards();
  return v > 0 && target_step_s > 0.0 && verify_draft_s > 0.0 ? verify_draft_s / static_cast<double>(v) / target_step_s
                                                                : 0.0;
}

double Metrics::draft_cost_per_step() const {
  return n_steps > 0 && target_step_s > 0.0
             ? draft_token_s * static_cast<double>(n_drafted) / static_cast<double>(n_steps) / target_step_s
             : 0.0;
}

double Metrics::expected_accepted_length() const {
  double length = 1.0, reach = 1.0;
  for (double a : acceptance_by_depth()) {
    reach *= a;
    length += reach;
  }
  return length;
}

double Metrics::predicted_speedup_tree() const {
  const double r = verify_cost_ratio();
  return r > 0.0 ? expected_accepted_length() / (draft_cost_per_step() + r) : 0.0;
}

double Metrics::speedup_bound() const {
  const double r = verify_cost_ratio();
  return r > 0.0 ? (draft_max + 1.0) / (draft_cost_per_step() + r) : 0.0;
}

double Metrics::predicted_speedup_measured_cost() const {
  const double r = verify_cost_ratio();
  return r > 0.0 ? geometric_sum(std::clamp(alpha_fit(), 0.0, 1.0), draft_max) / (draft_max * cost_ratio() + r) : 0.0;
}

double fit_alpha(double tau, int g) {
  if (g <= 0 || !(tau > 1.0)) return 0.0;
  if (tau >= g + 1.0) return 1.0;
  double lo = 0.0, hi = 1.0;
  for (int it = 0; it < 100 && hi - lo > 1e-12; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (geometric_sum(mid, g) < tau) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

double speedup_model(double alpha, int g, double c) {
  g = std::max(g, 0);
  const double a = std::clamp(alpha, 0.0, 1.0);
  // (1 - a^(g+1)) / (1 - a) is the geometric sum, which also covers a = 1 without 0/0.
  return geometric_sum(a, g) / (g * c + 1.0);
}

double cost_aware_speedup_model(double alpha, int g, double c, double r) {
  g = std::max(g, 0);
  const double a = std::clamp(alpha, 0.0, 1.0);
  const double cost = g * c + r;
  return cost > 0.0 ? geometric_sum(a, g) / cost : 0.0;
}

}  // namespace specmoe::verify
