// SpeculativeVerifier: lossless speculative sampling over a chain or a token tree.
//
// Chains (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2): accept x_i with probability
// min(1, p_i(x_i) / q_i(x_i)); at the first rejection emit a sample of norm(max(0, p_i - q_i)) and
// stop; after g acceptances emit a bonus sample of p_{g+1}. With one-hot p and q (temperature 0)
// this is exactly the greedy rule.
//
// Trees: a chain is the one-child tree, and every node is verified the same way. At the current
// node (first the root), with target distribution p there, its children x_1..x_k are tried in
// index order: accept x_j with probability min(1, p(x_j) / q_j(x_j)); the first accepted child
// becomes the current node (p = its own row); on rejection p becomes norm(max(0, p - q_j)) and the
// next child is tried; when every child is rejected (or the node has none) the emitted token is a
// sample of the current p (the residual, or the node's own row: the bonus). q_j is what x_j was
// drawn from, given the siblings before it:
//  - deterministic candidates (Draft::one_hot: n-gram tries, top-k trees): q_j = one-hot(x_j). The
//    rule is then "draw y from p, follow the child equal to y, else emit y": lossless whatever the
//    candidates are.
//  - drawn from q with replacement: q_j = q, the node's draft distribution: multi-step speculative
//    sampling (SpecInfer, Miao et al. 2024, Thm 4.2).
//  - drawn from q without replacement (Draft::without_replacement): q_j = q with x_1..x_{j-1}
//    removed and renormalised: recursive rejection sampling (Jeon et al. 2024, "Recursive
//    Speculative Decoding", Alg. 1 with sampling without replacement).
// Each step emits p's distribution exactly: P(x_j accepted) + P(all of x_1..x_j rejected) *
// residual = min(q_j, p) + max(0, p - q_j) = p, and the later siblings are fresh draws given the
// earlier ones, so the argument recurses; the subtree of an accepted child is verified against
// that child's own p.
//
// Random numbers: uniforms from rng in this order, each drawn only when its outcome is uncertain:
// walking down from the root, one per child tested whose acceptance ratio is strictly between 0
// and 1 (children in index order); then one for the emitted token (the residual's draw, or the
// bonus's), one more for the node's p itself when the residual is empty (p <= q up to rounding).
// A chain thus consumes exactly what the chain rule always has. The CUDA implementation
// (speculative_verifier_cuda.cpp) consumes the same uniforms in the same order.
#pragma once
#include <memory>

#include "verify/verifier.h"

namespace specmoe::verify {

// Deliberately wrong variants of the rule, for the statistical tests' power checks: a test that
// cannot tell them from the real rule proves nothing.
enum class RuleFault {
  None,
  KeepResidual,  // after a rejection p is left as it was (no residual): biased toward rejected tokens
};

// The implementation for distributions in host memory.
class SpeculativeVerifier : public Verifier {
 public:
  explicit SpeculativeVerifier(RuleFault fault = RuleFault::None) : fault_(fault) {}
  std::string name() const override { return "speculative"; }
  VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const override;

 private:
  RuleFault fault_;
  mutable std::vector<float> q_host_;     // a draft's q rows copied from another device
  mutable std::vector<double> residual_;  // the current node's residual distribution
};

// The implementation for distributions in CUDA memory (Error(Unsupported) in builds without CUDA).
std::unique_ptr<Verifier> make_speculative_verifier_cuda();

}  // namespace specmoe::verify
