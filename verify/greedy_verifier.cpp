// Greedy verification: see greedy_verifier.h.
#include "verify/greedy_verifier.h"

#include "base/error.h"

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

VerifyResult GreedyVerifier::verify(const draft::Draft& draft, const core::Rows& p, core::Rng&) const {
  check_verify_inputs("greedy", draft, p);
  return verify_greedy_argmax(draft.tokens, p.argmax());
}

}  // namespace specmoe::verify
