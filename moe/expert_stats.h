// Expert load statistics of one MoE layer, accumulated over many forwards (DESIGN.md, Metrics):
// tokens per expert and the balance measures over them, dropped assignments/tokens, and per
// forward of T tokens the number of distinct experts touched U(T), the amplification U(T)/k, the
// uniform-routing expectation E * (1 - (1 - k/E)^T) and the expert bytes read.
//
// Balance measures over the accumulated loads x_e (e = 0..E-1), all defined for mean > 0:
//   load_cv         population std / mean (0 = perfectly balanced)
//   max_over_mean   max_e x_e / mean
//   jain_index      (sum x)^2 / (E * sum x^2), in [1/E, 1] (Jain, Chiu, Hawe 1984)
//   routing_entropy -sum p_e log2 p_e of p = x / sum x, in BITS, in [0, log2 E]
// With no tokens recorded they are 0 (entropy 0, jain 0) rather than NaN.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "moe/router.h"

namespace specmoe::moe {

// The per-forward quantities, aggregated per (T, k) (a run sees few distinct batch sizes).
struct ForwardSizeStats {
  int n_tokens = 0;                // T
  int k = 0;
  int64_t n_forwards = 0;
  int64_t sum_distinct = 0;        // sum of U(T)
  int min_distinct = 0, max_distinct = 0;
  uint64_t sum_expert_bytes = 0;   // routed-expert weight bytes read
  double mean_distinct() const { return n_forwards ? double(sum_distinct) / n_forwards : 0.0; }
  double mean_amplification() const { return k ? mean_distinct() / k : 0.0; }
};

class ExpertStats {
 public:
  ExpertStats() = default;
  ExpertStats(int n_expert, int k, int layer = -1);

  // One forward: counts the routing's kept assignments per expert; bytes_per_expert is what one
  // routed expert's weights occupy (every touched expert is read once per forward).
  void record_forward(const Routing& routing, uint64_t bytes_per_expert);
  // The same from raw counts (tokens_per_expert: [n_expert] kept assignments of this forward).
  void record_forward(std::span<const int64_t> tokens_per_expert, int T, int k,
                      int64_t dropped_assignments, int64_t dropped_tokens,
                      uint64_t bytes_per_expert);
  // Adds another layer's / shard's statistics for the same n_expert.
  void merge(const ExpertStats& other);
  void clear();

  int layer() const { return layer_; }
  int n_expert() const { return n_expert_; }
  int k() const { return k_; }  // the k of the most recent forward
  const std::vector<int64_t>& expert_tokens() const { return tokens_; }
  int64_t n_forwards() const { return n_forwards_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t dropped_assignments() const { return dropped_assignments_; }
  int64_t dropped_tokens() const { return dropped_tokens_; }
  uint64_t expert_bytes() const { return expert_bytes_; }
  const std::map<std::pair<int, int>, ForwardSizeStats>& by_size() const { return by_size_; }

  double load_cv() const;
  double max_over_mean() const;
  double jain_index() const;
  double routing_entropy_bits() const;
  // Over all forwards: mean U(T), mean U(T)/k.
  double mean_distinct_experts() const;
  double mean_amplification() const;

  nlohmann::json to_json() const;
  static ExpertStats from_json(const nlohmann::json& j);  // throws Error(Format)

 private:
  int layer_ = -1;
  int n_expert_ = 0;
  int k_ = 0;
  std::vector<int64_t> tokens_;
  int64_t n_forwards_ = 0, n_tokens_ = 0;
  int64_t dropped_assignments_ = 0, dropped_tokens_ = 0;
  uint64_t expert_bytes_ = 0;
  int64_t sum_distinct_ = 0;
  double sum_amplification_ = 0.0;
  std::map<std::pair<int, int>, ForwardSizeStats> by_size_;  // key (T, k)
};

// Balance measures of a load vector (the same definitions as ExpertStats).
double load_cv(std::span<const int64_t> x);
double load_max_over_mean(std::span<const int64_t> x);
double load_jain_index(std::span<const int64_t> x);
double load_entropy_bits(std::span<const int64_t> x);
// Expected distinct experts when each of T tokens picks k of E uniformly at random:
// E * (1 - (1 - k/E)^T) (each expert is missed by one token with probability 1 - k/E).
double uniform_distinct_experts(int E, int k, int T);

}  // namespace specmoe::moe
