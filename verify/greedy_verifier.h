// GreedyVerifier: accepts draft tokens while each equals the argmax of the target's distribution
// at its position; then emits the target's argmax (the correction at the first mismatch, or the
// bonus token). Consumes no randomness. Exact for temperature 0.
#pragma once
#include "verify/verifier.h"

namespace specmoe::verify {

// The greedy rule on the target's argmax ids (target_argmax[i] = argmax of position i's logits,
// g + 1 of them for g draft tokens): what GreedyVerifier::verify decides from one-hot p rows.
// Used by the speculative loop when it takes only argmax ids from the target (Model::forward_argmax).
// Throws Error(InvalidArgument) when target_argmax does not have draft_tokens.size() + 1 entries.
VerifyResult verify_greedy_argmax(std::span<const int32_t> draft_tokens, std::span<const int32_t> target_argmax);

class GreedyVerifier : public Verifier {
 public:
  std::string name() const override { return "greedy"; }
  VerifyResult verify(const draft::Draft& draft, std::span<const std::vector<float>> p,
                      core::Rng& rng) const override;
};

}  // namespace specmoe::verify
