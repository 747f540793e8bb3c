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

VerifyResult verify_greedy_tree(const draft::TokenTree& tree, std::span<const int32_t> target_argmax) {
  if (target_argmax.size() != static_cast<size_t>(tree.size()) + 1)
    throw_error(ErrorKind::InvalidArgument, "greedy verification: {} target ids for {} tree nodes (need {})",
                target_argmax.size(), tree.size(), tree.size() + 1);
  const TreeChildren kids(tree);
  VerifyResult r;
  int node = -1;
  for (;;) {
    const int32_t y = target_argmax[static_cast<size_t>(node + 1)];
    int next = -1;
    for (int32_t c : kids.of(node))
      if (tree.tokens[static_cast<size_t>(c)] == y) {
        next = c;
        break;
      }
    if (next < 0) {
      r.n_accepted = static_cast<int>(r.path.size());
      r.next_token = y;
      return r;
    }
    r.path.push_back(next);
    node = next;
  }
}

VerifyResult GreedyVerifier::verify(const draft::Draft& draft, const core::Rows& p, core::Rng&) const {
  check_verify_inputs("greedy", draft, p);
  if (draft.is_chain()) return verify_greedy_argmax(draft.tokens, p.argmax());
  return verify_greedy_tree(draft, p.argmax());
}

}  // namespace specmoe::verify
