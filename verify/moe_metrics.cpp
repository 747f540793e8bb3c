// MoE-aware speculative metrics: see moe_metrics.h.
#include "verify/moe_metrics.h"

#include <algorithm>

#include "core/model.h"
#include "moe/router.h"

namespace specmoe::verify {
namespace {

// Distinct experts among the kept assignments of tokens [0, n), or of the given tokens.
int distinct(const moe::Routing& r, int n, std::vector<uint8_t>& seen, std::span<const int> tokens = {}) {
  seen.assign(r.n_expert, 0);
  int u = 0;
  for (int i = 0; i < (tokens.empty() ? n : static_cast<int>(tokens.size())); ++i) {
    const int t = tokens.empty() ? i : tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= r.n_tokens) continue;
    for (int j = 0; j < r.k; ++j) {
      const int32_t e = r.expert_at(t, j);
      if (e >= 0 && !seen[e]) seen[e] = 1, ++u;
    }
  }
  return u;
}

}  // namespace

void MoEMetrics::record_load(const core::ForwardStats& stats, const core::Model& target) {
  const core::ModelConfig& c = target.config();
  if (!c.is_moe()) return;
  n_expert = c.n_expert;
  k = target.moe_k();
  if (layers.size() != static_cast<size_t>(c.n_layer)) layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer && l < static_cast<int>(stats.moe.size()); ++l) {
    const moe::Routing& r = stats.moe[l];
    if (r.n_tokens == 0) continue;
    if (layers[l].n_expert() == 0) layers[l] = moe::ExpertStats(r.n_expert, r.k, l);
    layers[l].record_forward(r, target.moe_expert_bytes(l));
  }
}

void MoEMetrics::record_forward(const core::ForwardStats& stats, const core::Model& target, int T, int n_kept,
                                std::span<const int> kept) {
  const core::ModelConfig& c = target.config();
  if (!c.is_moe() || T <= 0) return;
  record_load(stats, target);
  layer_sum_distinct.resize(c.n_layer, 0.0);
  std::vector<uint8_t> seen;
  int n_run = 0;  // MoE layers this forward ran
  double fwd_distinct = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    const moe::Routing* r = l < static_cast<int>(stats.moe.size()) ? &stats.moe[l] : nullptr;
    if (!r || r->n_tokens != T) continue;  // dense layer, or not run by this forward
    const int u_all = distinct(*r, T, seen);
    const int u_kept = distinct(*r, std::clamp(n_kept, 0, T), seen, kept);
    ++n_run;
    fwd_distinct += u_all;
    layer_sum_distinct[l] += u_all;
    sum_rejected_reads += u_all - u_kept;
    sum_uniform += moe::uniform_distinct_experts(n_expert, r->k, T);
    expert_bytes += static_cast<uint64_t>(u_all) * target.moe_expert_bytes(l);
  }
  if (n_run == 0) return;
  n_moe_layers = std::max(n_moe_layers, n_run);
  ++n_forwards;
  n_tokens += T;
  sum_distinct += fwd_distinct;
  BySize& b = by_size[T];
  ++b.n_forwards;
  b.sum_distinct += fwd_distinct / n_run;
}

void MoEMetrics::merge(const MoEMetrics& o) {
  if (o.n_expert == 0) return;
  n_expert = o.n_expert;
  k = o.k;
  n_moe_layers = std::max(n_moe_layers, o.n_moe_layers);
  n_forwards += o.n_forwards;
  n_tokens += o.n_tokens;
  sum_distinct += o.sum_distinct;
  sum_uniform += o.sum_uniform;
  sum_rejected_reads += o.sum_rejected_reads;
  expert_bytes += o.expert_bytes;
  layer_sum_distinct.resize(std::max(layer_sum_distinct.size(), o.layer_sum_distinct.size()), 0.0);
  for (size_t l = 0; l < o.layer_sum_distinct.size(); ++l) layer_sum_distinct[l] += o.layer_sum_distinct[l];
  for (const auto& [T, b] : o.by_size) {
    by_size[T].n_forwards += b.n_forwards;
    by_size[T].sum_distinct += b.sum_distinct;
  }
  if (layers.size() < o.layers.size()) layers.resize(o.layers.size());
  for (size_t l = 0; l < o.layers.size(); ++l) {
    if (o.layers[l].n_expert() == 0) continue;
    if (layers[l].n_expert() == 0) layers[l] = moe::ExpertStats(o.layers[l].n_expert(), o.layers[l].k(), static_cast<int>(l));
    layers[l].merge(o.layers[l]);
  }
}

double MoEMetrics::mean_distinct() const {
  const double n = static_cast<double>(n_forwards) * n_moe_layers;
  return n > 0 ? sum_distinct / n : 0.0;
}

double MoEMetrics::amplification() const { return k ? mean_distinct() / k : 0.0; }

double MoEMetrics::uniform_amplification() const {
  const double n = static_cast<double>(n_forwards) * n_moe_layers;
  return n > 0 && k ? sum_uniform / n / k : 0.0;
}

double MoEMetrics::rejected_read_share() const { return sum_distinct > 0 ? sum_rejected_reads / sum_distinct : 0.0; }

double MoEMetrics::expert_bytes_per_token(int64_t n_generated) const {
  return n_generated > 0 ? static_cast<double>(expert_bytes) / static_cast<double>(n_generated) : 0.0;
}

nlohmann::json MoEMetrics::to_json(int64_t n_generated) const {
  nlohmann::json j;
  j["n_expert"] = n_expert;
  j["k"] = k;
  j["n_moe_layers"] = n_moe_layers;
  j["n_forwards"] = n_forwards;
  j["mean_distinct_experts"] = mean_distinct();
  j["amplification"] = amplification();
  j["uniform_amplification"] = uniform_amplification();
  j["rejected_read_share"] = rejected_read_share();
  j["expert_bytes"] = expert_bytes;
  j["expert_bytes_per_generated_token"] = expert_bytes_per_token(n_generated);
  std::vector<double> per_layer;
  for (double s : layer_sum_distinct) per_layer.push_back(n_forwards ? s / static_cast<double>(n_forwards) : 0.0);
  j["mean_distinct_experts_per_layer"] = per_layer;
  auto& sizes = j["per_forward_size"] = nlohmann::json::array();
  for (const auto& [T, b] : by_size)
    sizes.push_back({{"n_tokens", T},
                     {"n_forwards", b.n_forwards},
                     {"mean_distinct_experts", b.n_forwards ? b.sum_distinct / b.n_forwards : 0.0},
                     {"amplification", b.n_forwards && k ? b.sum_distinct / b.n_forwards / k : 0.0},
                     {"uniform_expected_distinct", moe::uniform_distinct_experts(n_expert, k, T)}});
  return j;
}

}  // namespace specmoe::verify
