#include "moe/expert_stats.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace specmoe::moe {

namespace {

double sum_of(std::span<const int64_t> x) {
  double s = 0.0;
  for (int64_t v : x) s += static_cast<double>(v);
  return s;
}

}  // namespace

double load_cv(std::span<const int64_t> x) {
  if (x.empty()) return 0.0;
  const double mean = sum_of(x) / x.size();
  if (mean <= 0.0) return 0.0;
  double var = 0.0;
  for (int64_t v : x) var += (v - mean) * (v - mean);
  return std::sqrt(var / x.size()) / mean;  // population std: the loads are all experts, not a sample
}

double load_max_over_mean(std::span<const int64_t> x) {
  if (x.empty()) return 0.0;
  const double mean = sum_of(x) / x.size();
  if (mean <= 0.0) return 0.0;
  return static_cast<double>(*std::max_element(x.begin(), x.end())) / mean;
}

double load_jain_index(std::span<const int64_t> x) {
  double s = 0.0, s2 = 0.0;
  for (int64_t v : x) {
    s += static_cast<double>(v);
    s2 += static_cast<double>(v) * static_cast<double>(v);
  }
  if (s2 <= 0.0) return 0.0;
  return s * s / (static_cast<double>(x.size()) * s2);
}

double load_entropy_bits(std::span<const int64_t> x) {
  const double s = sum_of(x);
  if (s <= 0.0) return 0.0;
  double h = 0.0;
  for (int64_t v : x)
    if (v > 0) {
      const double p = v / s;
      h -= p * std::log2(p);
    }
  return h;
}

double uniform_distinct_experts(int E, int k, int T) {
  if (E <= 0) return 0.0;
  return E * (1.0 - std::pow(1.0 - static_cast<double>(k) / E, T));
}

ExpertStats::ExpertStats(int n_expert, int k, int layer)
    : layer_(layer), n_expert_(n_expert), k_(k), tokens_(std::max(n_expert, 0), 0) {
  if (n_expert < 1)
    throw_error(ErrorKind::InvalidArgument, "expert stats: n_expert = {} must be >= 1", n_expert);
}

void ExpertStats::record_forward(const Routing& r, uint64_t bytes_per_expert) {
  const auto counts = r.tokens_per_expert();
  record_forward(counts, r.n_tokens, r.k, r.n_dropped_assignments, r.n_dropped_tokens,
                 bytes_per_expert);
}

void ExpertStats::record_forward(std::span<const int64_t> counts, int T, int k,
                                 int64_t dropped_assignments, int64_t dropped_tokens,
                                 uint64_t bytes_per_expert) {
  if (counts.size() != static_cast<size_t>(n_expert_))
    throw_error(ErrorKind::InvalidArgument,
                "expert stats (layer {}): {} expert counts, expected n_expert = {}", layer_,
                counts.size(), n_expert_);
  int distinct = 0;
  for (int e = 0; e < n_expert_; ++e) {
    tokens_[e] += counts[e];
    distinct += counts[e] > 0;
  }
  k_ = k;
  ++n_forwards_;
  n_tokens_ += T;
  dropped_assignments_ += dropped_assignments;
  dropped_tokens_ += dropped_tokens;
  const uint64_t bytes = static_cast<uint64_t>(distinct) * bytes_per_expert;
  expert_bytes_ += bytes;
  sum_distinct_ += distinct;
  sum_amplification_ += k > 0 ? static_cast<double>(distinct) / k : 0.0;

  ForwardSizeStats& s = by_size_[{T, k}];
  if (s.n_forwards == 0) {
    s.n_tokens = T;
    s.k = k;
    s.min_distinct = s.max_distinct = distinct;
  }
  ++s.n_forwards;
  s.sum_distinct += distinct;
  s.min_distinct = std::min(s.min_distinct, distinct);
  s.max_distinct = std::max(s.max_distinct, distinct);
  s.sum_expert_bytes += bytes;
}

void ExpertStats::merge(const ExpertStats& o) {
  if (o.n_expert_ != n_expert_)
    throw_error(ErrorKind::InvalidArgument, "expert stats: cannot merge {} experts into {}",
                o.n_expert_, n_expert_);
  for (int e = 0; e < n_expert_; ++e) tokens_[e] += o.tokens_[e];
  if (o.n_forwards_ > 0) k_ = o.k_;
  n_forwards_ += o.n_forwards_;
  n_tokens_ += o.n_tokens_;
  dropped_assignments_ += o.dropped_assignments_;
  dropped_tokens_ += o.dropped_tokens_;
  expert_bytes_ += o.expert_bytes_;
  sum_distinct_ += o.sum_distinct_;
  sum_amplification_ += o.sum_amplification_;
  for (const auto& [key, s] : o.by_size_) {
    ForwardSizeStats& d = by_size_[key];
    if (d.n_forwards == 0) {
      d = s;
      continue;
    }
    d.n_forwards += s.n_forwards;
    d.sum_distinct += s.sum_distinct;
    d.min_distinct = std::min(d.min_distinct, s.min_distinct);
    d.max_distinct = std::max(d.max_distinct, s.max_distinct);
    d.sum_expert_bytes += s.sum_expert_bytes;
  }
}

void ExpertStats::clear() { *this = n_expert_ > 0 ? ExpertStats(n_expert_, k_, layer_) : ExpertStats(); }

double ExpertStats::load_cv() const { return moe::load_cv(tokens_); }
double ExpertStats::max_over_mean() const { return load_max_over_mean(tokens_); }
double ExpertStats::jain_index() const { return load_jain_index(tokens_); }
double ExpertStats::routing_entropy_bits() const { return load_entropy_bits(tokens_); }
double ExpertStats::mean_distinct_experts() const {
  return n_forwards_ ? static_cast<double>(sum_distinct_) / n_forwards_ : 0.0;
}
double ExpertStats::mean_amplification() const {
  return n_forwards_ ? sum_amplification_ / n_forwards_ : 0.0;
}

nlohmann::json ExpertStats::to_json() const {
  nlohmann::json j;
  j["layer"] = layer_;
  j["n_expert"] = n_expert_;
  j["k"] = k_;
  j["expert_tokens"] = tokens_;
  j["n_forwards"] = n_forwards_;
  j["n_tokens"] = n_tokens_;
  j["load_cv"] = load_cv();
  j["max_over_mean"] = max_over_mean();
  j["jain_index"] = jain_index();
  j["routing_entropy"] = routing_entropy_bits();
  j["routing_entropy_unit"] = "bits";
  j["dropped_assignments"] = dropped_assignments_;
  j["dropped_tokens"] = dropped_tokens_;
  j["expert_bytes"] = expert_bytes_;
  j["sum_distinct_experts"] = sum_distinct_;
  j["sum_amplification"] = sum_amplification_;
  j["mean_distinct_experts"] = mean_distinct_experts();
  j["mean_amplification"] = mean_amplification();
  auto& per = j["per_forward_size"] = nlohmann::json::array();
  for (const auto& [key, s] : by_size_) {
    per.push_back({{"n_tokens", s.n_tokens},
                   {"k", s.k},
                   {"n_forwards", s.n_forwards},
                   {"sum_distinct_experts", s.sum_distinct},
                   {"min_distinct_experts", s.min_distinct},
                   {"max_distinct_experts", s.max_distinct},
                   {"mean_distinct_experts", s.mean_distinct()},
                   {"amplification", s.mean_amplification()},
                   {"uniform_expected_distinct", uniform_distinct_experts(n_expert_, s.k, s.n_tokens)},
                   {"expert_bytes", s.sum_expert_bytes}});
  }
  return j;
}

ExpertStats ExpertStats::from_json(const nlohmann::json& j) {
  try {
    ExpertStats s(j.at("n_expert").get<int>(), j.at("k").get<int>(), j.at("layer").get<int>());
    auto tokens = j.at("expert_tokens").get<std::vector<int64_t>>();
    if (tokens.size() != static_cast<size_t>(s.n_expert_))
      throw_error(ErrorKind::Format, "expert stats JSON: expert_tokens has {} entries, expected {}",
                  tokens.size(), s.n_expert_);
    s.tokens_ = std::move(tokens);
    s.n_forwards_ = j.at("n_forwards").get<int64_t>();
    s.n_tokens_ = j.at("n_tokens").get<int64_t>();
    s.dropped_assignments_ = j.at("dropped_assignments").get<int64_t>();
    s.dropped_tokens_ = j.at("dropped_tokens").get<int64_t>();
    s.expert_bytes_ = j.at("expert_bytes").get<uint64_t>();
    s.sum_distinct_ = j.at("sum_distinct_experts").get<int64_t>();
    s.sum_amplification_ = j.at("sum_amplification").get<double>();
    for (const auto& p : j.at("per_forward_size")) {
      ForwardSizeStats f;
      f.n_tokens = p.at("n_tokens").get<int>();
      f.k = p.at("k").get<int>();
      f.n_forwards = p.at("n_forwards").get<int64_t>();
      f.sum_distinct = p.at("sum_distinct_experts").get<int64_t>();
      f.min_distinct = p.at("min_distinct_experts").get<int>();
      f.max_distinct = p.at("max_distinct_experts").get<int>();
      f.sum_expert_bytes = p.at("expert_bytes").get<uint64_t>();
      s.by_size_[{f.n_tokens, f.k}] = f;
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Format, "expert stats JSON: {}", e.what());
  }
}

}  // namespace specmoe::moe
