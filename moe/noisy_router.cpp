#include "moe/noisy_router.h"

#include <cmath>

#include "base/error.h"
#include "moe/softmax_router.h"

namespace specmoe::moe {

NoisyTopKRouter::NoisyTopKRouter(int n_expert, int k, int n_embd, std::vector<float> noise_weight,
                                 NormalSource noise)
    : Router(n_expert, k), n_embd_(n_embd), noise_weight_(std::move(noise_weight)),
      noise_(std::move(noise)) {
  if (n_embd < 1) throw_error(ErrorKind::InvalidArgument, "noisy_topk router: n_embd = {} < 1", n_embd);
  if (noise_weight_.size() != static_cast<size_t>(n_expert) * n_embd)
    throw_error(ErrorKind::InvalidArgument,
                "noisy_topk router: noise weight has {} values, expected n_expert * n_embd = {}",
                noise_weight_.size(), static_cast<size_t>(n_expert) * n_embd);
  if (!noise_) throw_error(ErrorKind::InvalidArgument, "noisy_topk router: no noise source");
}

void NoisyTopKRouter::begin_batch(int T) { noisy_.assign(static_cast<size_t>(T) * n_expert(), 0.0f); }

void NoisyTopKRouter::select(const float* logits_row, const float* hidden, int t, int k,
                             int32_t* experts, float* weights) {
  const int E = n_expert();
  const float* x = hidden + static_cast<size_t>(t) * n_embd_;
  float* h = noisy_.data() + static_cast<size_t>(t) * E;
  for (int e = 0; e < E; ++e) {
    const float* w = noise_weight_.data() + static_cast<size_t>(e) * n_embd_;
    double a = 0.0;
    for (int i = 0; i < n_embd_; ++i) a += static_cast<double>(x[i]) * w[i];
    // softplus(a) = log(1 + e^a), written to stay finite for large |a|.
    const double softplus = a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a));
    h[e] = static_cast<float>(logits_row[e] + noise_() * softplus);
  }
  // KeepTopK sets the others to -inf before the softmax: softmax over the selected only.
  top_k_indices(h, E, k, experts);
  softmax_selected_weights(h, E, experts, k, /*renormalize=*/true, weights);
}

}  // namespace specmoe::moe
