// Drafter: proposes up to g tokens that the target model then verifies in one batched forward
// (Leviathan et al. 2023; Chen et al. 2023). A drafter returns, for every drafted token, the
// processed distribution q it was sampled from (after the SAME logits processors as the target),
// or marks the draft one-hot when the tokens are deterministic (n-gram lookup): lossless
// verification needs q (DESIGN.md "Speculative sampling, exactly").
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/sampler.h"

namespace specmoe::draft {

// One proposal. tokens: x_1..x_g (host). q: row i is the distribution x_{i+1} was drawn from, in
// the TARGET's vocabulary ([g, n_vocab target]), in the memory of the backend the drafter drew it
// on (a draft model's; q.where() says which), owned by the drafter and valid until its next
// proposal. When one_hot, q is empty and q_i(x_i) = 1.
struct Draft {
  std::vector<int32_t> tokens;
  core::Rows q;
  bool one_hot = false;

  int size() const { return static_cast<int>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  void clear() {
    tokens.clear();
    q = {};
  }
};

// What the loop asks of one proposal.
struct DraftParams {
  int draft_max = 4;             // g: propose at most this many tokens (0 = propose nothing)
  // Adaptive draft length: stop drafting when the draft's confidence (its top probability) falls
  // below p_min (0 disables). At temperature 0 the processed q is one-hot, so the confidence is
  // the top probability of the plain softmax of the draft logits instead.
  float p_min = 0.0f;
  const core::Sampler* sampler = nullptr;  // the target's logits processors (required)
  core::Rng* rng = nullptr;                // the draft's own random stream (required)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;

  // Starts a new sequence: prefills the drafter's own state (e.g. its KV cache) on the prompt.
  virtual void begin(std::span<const int32_t> prompt) = 0;

  // Proposes up to params.draft_max tokens continuing `context` (prompt + generated so far)
  // into `out` (cleared first). May propose fewer, or none.
  virtual void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) = 0;

  // The verifier accepted the first n_accepted drafted tokens of the last proposal and then
  // emitted next_token: roll back / advance the drafter's own state accordingly.
  virtual void accepted(int n_accepted, int32_t next_token) = 0;
};

}  // namespace specmoe::draft
