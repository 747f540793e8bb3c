// GreedyVerifier: accepts draft tokens while each equals the argmax of the target's distribution
// at its position; then emits the target's argmax (the correction at the first mismatch, or the
// bonus token). Consumes no randomness. Exact for temperature 0.
#pragma once
#include "verify/verifier.h"

namespace specmoe::verify {

class GreedyVerifier : public Verifier {
 public:
  std::string name() const override { return "greedy"; }
  VerifyResult verify(const draft::Draft& draft, std::span<const std::vector<float>> p,
                      core::Rng& rng) const override;
};

}  // namespace specmoe::verify
