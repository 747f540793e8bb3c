// NgramDrafter: prompt lookup decoding (Saxena 2023; llama.cpp's "lookup" example). Matches the
// last n tokens of the context, n from ngram_max down to ngram_min, against the earlier context
// (prompt + generated text) and proposes the tokens that followed the most recent match. No model:
// the proposals are deterministic, so the draft is one-hot (q(x) = 1). Asked for a tree, it merges
// the continuations of every match of the longest n-gram that matches into a trie and keeps its
// most frequent nodes (lookup_tree).
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
  // The tree lookup: for the longest n in [ngram_min, ngram_max] whose last-n-token pattern occurs
  // earlier in the context, the continuations (up to max_depth tokens) of all its matches, merged
  // into a trie; the max_nodes nodes kept are chosen best first by how many matches pass through
  // them (the more recent match first among equals), a node only after its parent, at most
  // widths[d] children per node at depth d when widths is given. Nodes are in selection order.
  static void lookup_tree(std::span<const int32_t> context, int ngram_min, int ngram_max, int max_depth,
                          int max_nodes, std::span<const int> widths, TokenTree& out);

 private:
  int ngram_min_, ngram_max_;
};

}  // namespace specmoe::draft
