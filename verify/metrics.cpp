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
  accept_length_histogram.resize(draft_max + 1, 0);
  verify_forward_s_by_draft.resize(draft_max + 1, 0.0);
  verify_steps_by_draft.resize(draft_max + 1, 0);
}

void Metrics::record_step(int drafted, int accepted, double forward_s) {
  if (drafted > draft_max || accept_length_histogram.size() < static_cast<size_t>(draft_max) + 1 ||
      verify_steps_by_draft.size() < static_cast<size_t>(draft_max) + 1)
    resize_positions(std::max(drafted, draft_max));
  ++n_steps;
  n_drafted += drafted;
  n_accepted += accepted;
  for (int i = 0; i < drafted; ++i) ++position_drafted[i];
  for (int i = 0; i < accepted; ++i) ++position_accepted[i];
  ++accept_length_histogram[accepted];
  if (forward_s >= 0.0) {
    verify_forward_s_by_draft[drafted] += forward_s;
    ++verify_steps_by_draft[drafted];
  }
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
  resize_positions(o.draft_max);
  n_prompt += o.n_prompt;
  n_generated += o.n_generated;
  n_drafted += o.n_drafted;
  n_accepted += o.n_accepted;
  n_steps += o.n_steps;
  for (size_t i = 0; i < o.position_drafted.size(); ++i) position_drafted[i] += o.position_drafted[i];
  for (size_t i = 0; i < o.position_accepted.size(); ++i) position_accepted[i] += o.position_accepted[i];
  for (size_t i = 0; i < o.accept_length_histogram.size(); ++i) accept_length_histogram[i] += o.accept_length_histogram[i];
  for (size_t i = 0; i < o.verify_steps_by_draft.size() && i < verify_steps_by_draft.size(); ++i) {
    verify_steps_by_draft[i] += o.verify_steps_by_draft[i];
    if (i < o.verify_forward_s_by_draft.size()) verify_forward_s_by_draft[i] += o.verify_forward_s_by_draft[i];
  }
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

double Metrics::cost_ratio() const { return target_step_s > 0.0 ? draft_token_s / target_step_s : 0.0; }

double Metrics::alpha_fit() const { return fit_alpha(mean_accepted_length(), draft_max); }

double Metrics::predicted_speedup() const { return speedup_model(alpha_fit(), draft_max, cost_ratio()); }

double Metrics::verify_cost_ratio(int n_tokens) const {
  const size_t g = static_cast<size_t>(n_tokens - 1);
  if (n_tokens < 1 || g >= verify_steps_by_draft.size() || verify_steps_by_draft[g] == 0 || !(target_step_s > 0.0))
    return 0.0;
  return verify_forward_s_by_draft[g] / static_cast<double>(verify_steps_by_draft[g]) / target_step_s;
}

double Metrics::verify_cost_ratio_at_draft_max() const {
  if (const double r = verify_cost_ratio(draft_max + 1); r > 0.0) return r;
  if (!(target_step_s > 0.0)) return 0.0;
  double s = 0.0;
  int64_t n = 0;
  for (size_t g = 1; g < verify_steps_by_draft.size(); ++g) {
    s += verify_forward_s_by_draft[g];
    n += verify_steps_by_draft[g];
  }
  return n > 0 ? s / static_cast<double>(n) / target_step_s : 0.0;
}

double Metrics::predicted_speedup_measured_cost() const {
  return cost_aware_speedup_model(alpha_fit(), draft_max, cost_ratio(), verify_cost_ratio_at_draft_max());
}

double Metrics::tokens_per_second() const {
  return total_s > 0.0 ? static_cast<double>(n_generated) / total_s : 0.0;
}

double Metrics::decode_s() const { return std::max(0.0, total_s - prefill_s); }

double Metrics::decode_tokens_per_second() const {
  const double d = decode_s();
  return d > 0.0 && n_decoded > 0 ? static_cast<double>(n_decoded) / d : 0.0;
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
