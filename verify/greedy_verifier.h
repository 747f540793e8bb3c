// GreedyVerifier: accepts draft tokens while each equals the argmax of the target's distribution
// at its position; then emits the target's argmax (the correction at the first mismatch, or the
// bonus token). For a tree: walks from the root, following the child equal to the target's argmax
// at the current node (the first such child in index order). Consumes no randomness. Exact for
// temperature 0. One implementation for every device: the argmax of each row runs where the rows
// live (Rows::argmax), and only g + 1 ids come back.
#pragma once
#include "verify/verifier.h"

namespace specmoe::verify {

// The greedy rule on the target's argmax ids (target_argmax[i] = argmax of position i's
// distribution, g + 1 of them for g draft tokens). Throws Error(InvalidArgument) when
// target_argmax does not have draft_tokens.size() + 1 entries.
VerifyResult verify_greedy_argmax(std::span<const int32_t> draft_tokens, std::span<const int32_t> target_argmax);

// The greedy rule on a tree (target_argmax[0]: the root's, [i + 1]: node i's); the result's path
// holds the accepted nodes. Throws Error(InvalidArgument) unless there are tree.size() + 1 ids.
VerifyResult verify_greedy_tree(const draft::TokenTree& tree, std::span<const int32_t> target_argmax);

class GreedyVerifier : public Verifier {
 public:
  std::string name() const override { return "greedy"; }
  VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const override;
};

}  // namespace specmoe::verify
