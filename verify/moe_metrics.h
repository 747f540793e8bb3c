// MoE-aware speculative decoding metrics (DESIGN.md, Metrics: MoE). A verification forward of
// T = g+1 tokens through an MoE target reads, in each MoE layer, the U(T) distinct experts its
// tokens were routed to: between k (all tokens agree) and min(E, T*k). Compared with uniform
// routing, E * (1 - (1 - k/E)^T), that is the cost speculative decoding pays per step on an MoE
// model. Reads are attributed to rejected tokens when only rejected draft positions touched the
// expert: per layer, U(all T tokens) - U(the kept positions 0..n_accepted).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "moe/expert_stats.h"

namespace specmoe::core {
class Model;
struct ForwardStats;
}

namespace specmoe::verify {

struct MoEMetrics {
  int n_expert = 0;        // E (0: a dense target, nothing recorded)
  int k = 0;               // experts per token during the run
  int n_moe_layers = 0;
  int64_t n_forwards = 0;  // target decode forwards recorded (verifications and plain steps)
  int64_t n_tokens = 0;    // sum of T over those forwards
  double sum_distinct = 0;       // sum over forwards and MoE layers of U(T)
  double sum_uniform = 0;        // sum over forwards and MoE layers of E(1-(1-k/E)^T)
  double sum_rejected_reads = 0; // sum over forwards and layers of U(all) - U(kept)
  uint64_t expert_bytes = 0;     // routed-expert weight bytes read by those forwards
  std::vector<double> layer_sum_distinct;  // [n_layer] sum over forwards of that layer's U(T) (-: dense layer = 0)
  struct BySize {
    int64_t n_forwards = 0;
    double sum_distinct = 0;   // sum over forwards of the mean over MoE layers of U(T)
  };
  std::map<int, BySize> by_size;  // key T
  // [n_layer] expert load of every target forward of the generation (prefill and decode steps;
  // never the drafter's forwards, not even a layer-skip draft's on the same model). Dense
  // layers: n_expert() == 0.
  std::vector<moe::ExpertStats> layers;

  // Adds a target forward's routing to the per-layer load. No-op for a dense model.
  void record_load(const core::ForwardStats& stats, const core::Model& target);
  // After a decode forward of T tokens of which the first n_kept stay in the cache (a tree's: the
  // rows `kept`, when given): U(T), the uniform expectation, rejected reads and expert bytes from
  // its routing, and record_load.
  void record_forward(const core::ForwardStats& stats, const core::Model& target, int T, int n_kept,
                      std::span<const int> kept = {});
  void merge(const MoEMetrics& other);

  double mean_distinct() const;              // U(T) per layer per forward
  double amplification() const;              // mean U(T) / k
  double uniform_amplification() const;      // mean E(1-(1-k/E)^T) / k over the same forwards
  double rejected_read_share() const;        // sum_rejected_reads / sum_distinct
  double expert_bytes_per_token(int64_t n_generated) const;
  nlohmann::json to_json(int64_t n_generated) const;
};

}  // namespace specmoe::verify
