// Greedy verification: see greedy_verifier.h.
#include "verify/greedy_verifier.h"

#include "core/sampling.h"

namespace specmoe::verify {

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
