#include "moe/softmax_router.h"

#include <cmath>

namespace specmoe::moe {

SoftmaxTopKRouter::SoftmaxTopKRouter(int n_expert, int k, bool renormalize)
    : Router(n_expert, k), renormalize_(renormalize) {}

std::string SoftmaxTopKRouter::name() const {
  return renormalize_ ? "softmax_topk" : "softmax_topk_raw";
}

void softmax_selected_weights(const float* logits, int n, const int32_t* selected, int k,
                              bool renormalize, float* weights) {
  // Max-subtracted exponentials in double: the weights then round once to float, so results do
  // not depend on the order experts were visited.
  double mx = logits[selected[0]];  // selected[0] is the largest logit
  double sum = 0.0;
  if (renormalize) {
    for (int j = 0; j < k; ++j) sum += std::exp(static_cast<double>(logits[selected[j]]) - mx);
  } else {
    for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  }
  for (int j = 0; j < k; ++j)
    weights[j] = static_cast<float>(std::exp(static_cast<double>(logits[selected[j]]) - mx) / sum);
}

void SoftmaxTopKRouter::select(const float* logits_row, const float* /*hidden*/, int /*t*/, int k,
                               int32_t* experts, float* weights) {
  // Softmax is monotone, so the top-k by probability are the top-k by logit; selecting on the
  // logits keeps exact ties exact (lowest index wins).
  top_k_indices(logits_row, n_expert(), k, experts);
  softmax_selected_weights(logits_row, n_expert(), experts, k, renormalize_, weights);
}

}  // namespace specmoe::moe
