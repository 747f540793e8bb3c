// Group-limited routing with a selection bias, for the DeepSeek family (llama.cpp build_moe_ffn
// with expert groups). Scores s = sigmoid(logits) (DeepSeek-V3, DeepSeek-AI 2024, sec. 2.1.2 and
// its inference/model.py Gate) or s = softmax(logits) over all experts (DeepSeek-V2, DeepSeek-AI
// 2024, sec. 2.1.2: "device-limited routing"); selection uses s + b (a per-expert bias that
// balances load, "auxiliary-loss-free"; llama.cpp adds exp_probs_b for either score); experts form
// n_group equal groups, a group's score is the sum of its top-2 biased scores (llama.cpp's rule
// for every gating function), only the best topk_group groups stay eligible; the top-k eligible
// experts by biased score are selected; their weights are the UNbiased s, renormalised to sum 1
// (when normalize) and multiplied by routed_scaling_factor. Experts of dropped groups are excluded
// outright (the reference inference code masks them with -inf).
// With n_group = 1 and no bias this is plain sigmoid or softmax top-k with a weight scale.
#pragma once
#include <vector>

#include "moe/router.h"

namespace specmoe::moe {

// How router logits become the scores that select and weight the experts.
enum class GateScore { Sigmoid, Softmax };

struct GroupRouterOptions {
  int n_group = 1;            // experts are split into n_group contiguous groups of E/n_group
  int topk_group = 1;         // groups kept per token
  bool normalize = true;      // divide the k weights by their sum (DeepSeek: norm_topk_prob)
  float scale = 1.0f;         // routed_scaling_factor (DeepSeek-V3: 2.5; V2-Lite: 1)
  std::vector<float> bias;    // [n_expert] selection-only bias (exp_probs_b); empty = zeros
  GateScore score = GateScore::Sigmoid;
};

class GroupRouter : public Router {
 public:
  GroupRouter(int n_expert, int k, GroupRouterOptions options);
  std::string name() const override { return opt_.score == GateScore::Softmax ? "softmax_group" : "sigmoid_group"; }
  int max_k() const override;
  const GroupRouterOptions& options() const { return opt_; }

 protected:
  void select(const float* logits_row, const float* hidden, int t, int k, int32_t* experts,
              float* weights) override;

 private:
  GroupRouterOptions opt_;
  int group_size_;
  std::vector<float> score_, biased_, group_score_;
  std::vector<int32_t> group_pick_;
  std::vector<uint8_t> allowed_;
};

// The scores of one token's logits [n] (the first step of GroupRouter::select, shared with the
// CUDA kernel's definition): sigmoid s_e = float(1 / (1 + exp(-double(l_e)))); softmax s_e =
// float(exp(double(l_e) - m) / sum_i exp(double(l_i) - m)), m the largest non-NaN logit and the
// sum taken in index order in double.
void gate_scores(const float* logits, int n, GateScore score, float* out);

}  // namespace specmoe::moe
