// SpeculativeVerifier: lossless speculative sampling (Leviathan et al. 2023, Alg. 1; Chen et al.
// 2023, Alg. 2). Accepts x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection
// emits a sample of norm(max(0, p_i - q_i)) and stops; after g acceptances emits a bonus sample of
// p_{g+1}. The emitted tokens are distributed exactly as sampling from p alone. One-hot drafts
// use q_i(x) = 1 (and 0 elsewhere). With one-hot p and q (temperature 0) this is exactly the
// greedy rule: a matching token has ratio 1, a mismatching one ratio 0, and the residual is the
// target's argmax.
//
// Random numbers: uniforms from rng in this order, each drawn only when its outcome is uncertain:
// one per acceptance test whose ratio is strictly between 0 and 1, then one for the emitted token
// (the residual's draw; one more for p itself when the residual is empty). The CUDA implementation
// (speculative_verifier_cuda.cpp) consumes the same uniforms in the same order.
#pragma once
#include <memory>

#include "verify/verifier.h"

namespace specmoe::verify {

// The implementation for distributions in host memory.
class SpeculativeVerifier : public Verifier {
 public:
  std::string name() const override { return "speculative"; }
  VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const override;

 private:
  mutable std::vector<float> q_host_;  // a draft's q rows copied from another device
};

// The implementation for distributions in CUDA memory (Error(Unsupported) in builds without CUDA).
std::unique_ptr<Verifier> make_speculative_verifier_cuda();

}  // namespace specmoe::verify
