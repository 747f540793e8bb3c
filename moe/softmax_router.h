// Softmax top-k routing. Renormalised (Mixtral, Jiang et al. 2024): the k weights are the
// softmax over the selected logits only, which equals softmax over all experts followed by
// division by the selected mass. Raw (Qwen1.5/2-MoE, OLMoE: norm_topk_prob = false): the
// weights are the full softmax probabilities of the selected experts and sum to less than 1.
#pragma once
#include "moe/router.h"

namespace specmoe::moe {

class SoftmaxTopKRouter : public Router {
 public:
  SoftmaxTopKRouter(int n_expert, int k, bool renormalize);
  std::string name() const override;
  bool renormalize() const { return renormalize_; }

 protected:
  void select(const float* logits_row, const float* hidden, int t, int k, int32_t* experts,
              float* weights) override;

 private:
  bool renormalize_;
};

// Weights of the selected logits (shared with the noisy router): softmax over the selected
// entries (renormalize) or softmax over all n entries evaluated at the selected ones.
void softmax_selected_weights(const float* logits, int n, const int32_t* selected, int k,
                              bool renormalize, float* weights);

}  // namespace specmoe::moe
