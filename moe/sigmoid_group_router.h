// DeepSeek-V3 routing (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", sec. 2.1.2, and its
// inference/model.py Gate): s = sigmoid(logits); selection uses s + b (a per-expert bias that
// balances load, "auxiliary-loss-free"); experts form n_group equal groups, a group's score is
// the sum of its top-2 biased scores, only the best topk_group groups stay eligible; the top-k
// eligible experts by biased score are selected; their weights are the UNbiased s, renormalised
// to sum 1 (when normalize) and multiplied by routed_scaling_factor. Experts of dropped groups
// are excluded outright (the reference inference code masks them with -inf).
// With n_group = 1 this is plain sigmoid top-k.
#pragma once
#include <vector>

#include "moe/router.h"

namespace specmoe::moe {

struct SigmoidGroupOptions {
  int n_group = 1;            // experts are split into n_group contiguous groups of E/n_group
  int topk_group = 1;         // groups kept per token
  bool normalize = true;      // divide the k weights by their sum (DeepSeek-V3: norm_topk_prob)
  float scale = 1.0f;         // routed_scaling_factor (DeepSeek-V3: 2.5)
  std::vector<float> bias;    // [n_expert] selection-only bias (exp_probs_b); empty = zeros
};

class SigmoidGroupRouter : public Router {
 public:
  SigmoidGroupRouter(int n_expert, int k, SigmoidGroupOptions options);
  std::string name() const override { return "sigmoid_group"; }
  int max_k() const override;
  const SigmoidGroupOptions& options() const { return opt_; }

 protected:
  void select(const float* logits_row, const float* hidden, int t, int k, int32_t* experts,
              float* weights) override;

 private:
  SigmoidGroupOptions opt_;
  int group_size_;
  std::vector<float> score_, biased_, group_score_;
  std::vector<int32_t> group_pick_;
  std::vector<uint8_t> allowed_;
};

}  // namespace specmoe::moe
