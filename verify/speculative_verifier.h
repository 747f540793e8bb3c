// SpeculativeVerifier: lossless speculative sampling (Leviathan et al. 2023, Alg. 1; Chen et al.
// 2023, Alg. 2). Accepts x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection
// emits a sample of norm(max(0, p_i - q_i)) and stops; after g acceptances emits a bonus sample of
// p_{g+1}. The emitted tokens are distributed exactly as sampling from p alone. One-hot drafts
// use q_i(x) = 1 (and 0 elsewhere). With one-hot p and q (temperature 0) this is exactly the
// greedy rule: a matching token has ratio 1, a mismatching one ratio 0, and the residual is the
// target's argmax.
#pragma once
#include "verify/verifier.h"

namespace specmoe::verify {

class SpeculativeVerifier : public Verifier {
 public:
  std::string name() const override { return "speculative"; }
  VerifyResult verify(const draft::Draft& draft, std::span<const std::vector<float>> p,
                      core::Rng& rng) const override;
};

}  // namespace specmoe::verify
