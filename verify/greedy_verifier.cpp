// Greedy verification: see greedy_verifier.h.
#include "verify/greedy_verifier.h"

#include "base/error.h"
#include "core/sampling.h"

namespace specmoe::verify {

VerifyResult verify_greedy_argmax(std::span<const int32_t> draft_tokens, std::span<const int32_t> target_argmax) {
  const size_t g = draft_tokens.size();
  if (target_argmax.size() != g + 1)
    throw_error(ErrorKind::InvalidArgument, "greedy verification: {} target ids for {} draft tokens (need {})",
                target_argmax.size(), g, g + 1);
  VerifyResult r;
  for (size_t i = 0; i <= g; ++i) {
    if (i == g || draft_tokens[i] != target_argmax[i]) {
      r.n_accepted = static_cast<int>(i);
      r.next_token = target_argmax[i];
      return r;
    }
  }
  return r;  // unreachable: the loop returns at i == g
}

VerifyResult GreedyVerifier::verify(const draft::Draft& draft, std::span<const std::vector<float>> p,
                                    core::Rng&) const {
  check_verify_inputs("greedy", draft, p);
  const int g = draft.size();
  VerifyResult r;
  for (int i = 0; i <= g; ++i) {
    const int32_t best = core::argmax(p[i]);
    if (i == g || draft.tokens[i] != best) {
      r.n_accepted = i;
      r.next_token = best;
      return r;
    }
  }
  return r;  // unreachable: the loop returns at i == g
}

}  // namespace specmoe::verify
