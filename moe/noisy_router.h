// Noisy top-k gating (Shazeer et al. 2017, "Outrageously Large Neural Networks", eq. 3-5):
//   H(x)_i = (x W_g)_i + N(0,1) * softplus((x W_noise)_i)
//   G(x)   = softmax(KeepTopK(H(x), k))
// The router logits x W_g come in from the layer; W_noise ([n_expert, n_embd], row e is expert
// e's noise direction) belongs to the router. Used for routing ablations; no released GGUF
// checkpoint carries W_noise.
//
// Noise comes from an injectable source of standard normal draws, taken in token order and,
// within a token, in expert order (T * n_expert draws per route()), so a seeded source gives the
// same routing on every run. With core::Rng: rng_normal_source(std::make_shared<core::Rng>(seed)).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "moe/router.h"

namespace specmoe::moe {

using NormalSource = std::function<double()>;

// A NormalSource drawing from a seeded counter-based generator (core::Rng::normal).
inline NormalSource rng_normal_source(std::shared_ptr<core::Rng> rng) {
  return [rng = std::move(rng)]() { return rng->normal(); };
}

class NoisyTopKRouter : public Router {
 public:
  // noise_weight: [n_expert, n_embd] row-major (F32). noise: standard normal draws.
  NoisyTopKRouter(int n_expert, int k, int n_embd, std::vector<float> noise_weight,
                  NormalSource noise);
  std::string name() const override { return "noisy_topk"; }
  int hidden_size() const override { return n_embd_; }
  int n_embd() const { return n_embd_; }

  // The noisy logits H(x) of the last route(), [T, n_expert] (for tests and analysis).
  const std::vector<float>& last_noisy_logits() const { return noisy_; }

 protected:
  void begin_batch(int T) override;
  void select(const float* logits_row, const float* hidden, int t, int k, int32_t* experts,
              float* weights) override;

 private:
  int n_embd_;
  std::vector<float> noise_weight_;  // [n_expert, n_embd]
  NormalSource noise_;
  std::vector<float> noisy_;         // [T, n_expert]
};

}  // namespace specmoe::moe
