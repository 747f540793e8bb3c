// NgramDrafter: prompt lookup decoding (Saxena 2023; llama.cpp's "lookup" example). Matches the
// last n tokens of the context, n from ngram_max down to ngram_min, against the earlier context
// (prompt + generated text) and proposes the tokens that followed the most recent match. No model:
// the proposals are deterministic, so the draft is one-hot (q(x) = 1).
#pragma once
#include "draft/drafter.h"

namespace specmoe::draft {

class NgramDrafter : public Drafter {
 public:
  // Throws Error(InvalidArgument) unless 1 <= ngram_min <= ngram_max.
  NgramDrafter(int ngram_min, int ngram_max);

  std::string name() const override { return "ngram"; }
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;

  // The lookup itself, exposed for tests: the proposal for `context` of at most max_tokens tokens.
  static void lookup(std::span<const int32_t> context, int ngram_min, int ngram_max, int max_tokens,
                     std::vector<int32_t>& out);

 private:
  int ngram_min_, ngram_max_;
};

}  // namespace specmoe::draft
