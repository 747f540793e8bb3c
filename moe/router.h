// Routers of a gated mixture-of-experts layer: per token, from the router logits (and for some
// routers the hidden state), choose k experts and their combine weights. Capacity limits with
// token dropping (Switch Transformer) are applied to a whole batch after selection.
//
// Families (one .h/.cpp each): softmax top-k with or without renormalisation (Mixtral, Qwen3-MoE;
// Qwen-MoE, OLMoE), noisy top-k (Shazeer et al. 2017), sigmoid or softmax scores + bias +
// group-limited selection + weight scale (DeepSeek-V3; DeepSeek-V2).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specmoe::moe {

// The routing of a batch of T tokens, k slots per token, slots in rank order (best first).
struct Routing {
  int n_tokens = 0;
  int k = 0;
  int n_expert = 0;
  std::vector<int32_t> expert;  // [T, k]; kDropped where capacity dropped the assignment
  std::vector<float> weight;    // [T, k]; combine weight (0 for dropped assignments)
  int64_t n_dropped_assignments = 0;  // (token, slot) pairs removed by the capacity limit
  int64_t n_dropped_tokens = 0;       // tokens whose every slot was dropped (MoE output = 0)

  static constexpr int32_t kDropped = -1;

  void reset(int T, int k_, int E);
  int32_t expert_at(int t, int j) const { return expert[static_cast<size_t>(t) * k + j]; }
  float weight_at(int t, int j) const { return weight[static_cast<size_t>(t) * k + j]; }
  // Non-dropped assignments per expert, [n_expert].
  std::vector<int64_t> tokens_per_expert() const;
};

// Switch Transformer capacity (Fedus et al. 2021, eq. 3): capacity = ceil(cf * T * k / E),
// clamped to [0, T * k] (the batch's assignments; any larger capacity drops nothing). Throws
// Error(InvalidArgument) for E <= 0 or a NaN factor.
int64_t expert_capacity(double capacity_factor, int T, int k, int E);

// Drops assignments beyond each expert's capacity. Assignments are taken in token order and,
// within a token, in slot (rank) order; the first `capacity` assignments to an expert are kept.
// Kept weights are not renormalised (a dropped slot's share passes through the residual, as in
// Switch / GShard). capacity_factor <= 0 means dropless (no-op).
void apply_capacity(Routing& routing, double capacity_factor);

// Sets n_dropped_assignments (kDropped slots) and n_dropped_tokens (tokens, k > 0, whose every
// slot is kDropped) from routing.expert: for a routing capacity-limited elsewhere (on a device)
// that carries only ids and weights. Equals apply_capacity's counts when no slot was kDropped
// before it ran (every router fills all k slots). Throws Error(InvalidArgument) when expert does
// not hold n_tokens * k ids.
void count_drops(Routing& routing);

// Indices of the k largest scores, in descending order; equal scores: lowest index first.
// NaN scores rank below every number. `allowed` (optional, [n]) excludes entries that are 0.
// Writes k indices to `out`; k must be <= the number of allowed entries.
void top_k_indices(const float* scores, int n, int k, int32_t* out,
                   const uint8_t* allowed = nullptr);

class Router {
 public:
  Router(int n_expert, int k);
  virtual ~Router() = default;

  virtual std::string name() const = 0;
  // Row length of the hidden state route() reads (noisy top-k: n_embd), 0 when it reads none.
  virtual int hidden_size() const { return 0; }

  int n_expert() const { return n_expert_; }
  int k() const { return k_; }
  // Runtime override of the number of active experts; throws Error(InvalidArgument) when k is
  // outside [1, max_k()].
  void set_k(int k);
  virtual int max_k() const { return n_expert_; }

  // <= 0: dropless (default). Otherwise Switch capacity with token dropping.
  void set_capacity_factor(double capacity_factor) { capacity_factor_ = capacity_factor; }
  double capacity_factor() const { return capacity_factor_; }

  // logits: [T, n_expert] row-major. hidden: [T, n_embd] (only read when hidden_size() > 0).
  // Fills `out` with k experts and weights per token, then applies the capacity limit.
  void route(const float* logits, const float* hidden, int T, Routing& out);

 protected:
  // Selects k experts for token t (logits_row = its logits; hidden = the whole [T, n_embd]
  // batch or null). experts/weights: k entries each, rank order.
  virtual void select(const float* logits_row, const float* hidden, int t, int k,
                      int32_t* experts, float* weights) = 0;
  // Called once per route() before the tokens are selected (noisy routing draws noise here).
  virtual void begin_batch(int /*T*/) {}

 private:
  int n_expert_;
  int k_;
  double capacity_factor_ = 0.0;
};

// Every router family by name, for configs: "softmax_topk" (renormalised, Mixtral),
// "softmax_topk_raw" (no renormalisation, Qwen-MoE / OLMoE), "noisy_topk", "sigmoid_group"
// (DeepSeek-V3), "softmax_group" (DeepSeek-V2: softmax scores, groups, scale).
enum class RouterKind { SoftmaxTopK, SoftmaxTopKRaw, NoisyTopK, SigmoidGroup, SoftmaxGroup };
const char* router_kind_name(RouterKind kind);
RouterKind router_kind_from_name(std::string_view name);  // throws Error(Config)

}  // namespace specmoe::moe
