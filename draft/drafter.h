// Drafter: proposes up to g tokens, or a tree of candidate continuations, that the target model
// then verifies in one batched forward (Leviathan et al. 2023; Chen et al. 2023; Miao et al.
// 2024). A drafter returns, for every drafted token, the processed distribution q it was sampled
// from (after the SAME logits processors as the target), or marks the draft one-hot when the
// tokens are deterministic (n-gram lookup, top-k trees): lossless verification needs q
// (DESIGN.md "Speculative sampling, exactly").
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "draft/token_tree.h"

namespace specmoe::draft {

// One proposal: a chain x_1..x_g, or a token tree (TokenTree::parents) below the last context
// token. tokens: the nodes (host). q: the draft distributions the nodes were drawn from, in the
// TARGET's vocabulary (n_vocab target columns), in the memory of the backend the drafter drew
// them on (a draft model's; q.where() says which), owned by the drafter and valid until its next
// proposal. Node i was drawn from row q_row_of(i): for a chain row i; in a tree the children of
// one node share their parent's row (q_row). When one_hot, q is empty and the nodes are
// deterministic candidates (q_i(x_i) = 1: n-gram lookup, top-k trees). Otherwise the children of
// a node were drawn from its row independently (with replacement; a chain's one child is the
// Leviathan et al. case) or, when without_replacement, one after another from the row with the
// earlier siblings removed and the rest renormalised (Jeon et al. 2024).
struct Draft : TokenTree {
  core::Rows q;
  std::vector<int32_t> q_row;  // trees: node i's q row; empty: row i
  bool one_hot = false;
  bool without_replacement = false;

  int q_row_of(int i) const { return q_row.empty() ? i : q_row[static_cast<size_t>(i)]; }
  void clear() {
    tokens.clear();
    parents.clear();
    q_row.clear();
    q = {};
  }
  // TokenTree::truncate for a draft: the kept nodes keep their q rows.
  void truncate(int max_nodes, int max_depth) {
    const std::vector<int32_t> kept = TokenTree::truncate(max_nodes, max_depth);
    bool prefix = true;
    for (size_t i = 0; i < kept.size(); ++i) prefix = prefix && kept[i] == static_cast<int32_t>(i);
    if (prefix) {
      if (!q_row.empty()) q_row.resize(kept.size());
      return;
    }
    std::vector<int32_t> rows;
    for (int32_t i : kept) rows.push_back(q_row_of(i));
    q_row = std::move(rows);
  }
};

// The repetition penalties' history of a draft whose head computes the first head_rows ids only
// (0: all; ModelDrafter::set_vocabulary_limit): the ids of `ids` it has logits for.
inline void draft_history(std::span<const int32_t> ids, int64_t head_rows, std::vector<int32_t>& out) {
  out.clear();
  for (int32_t id : ids)
    if (head_rows == 0 || id < head_rows) out.push_back(id);
}

// What the loop asks of one proposal.
struct DraftParams {
  int draft_max = 4;             // g: propose at most this many tokens (0 = propose nothing); for a
                                 // tree, at most this deep
  // Adaptive draft length: stop drafting when the draft's confidence (its top probability) falls
  // below p_min (0 disables). At temperature 0 the processed q is one-hot, so the confidence is
  // the top probability of the plain softmax of the draft logits instead. Chains only.
  float p_min = 0.0f;
  const core::Sampler* sampler = nullptr;  // the target's logits processors (required)
  core::Rng* rng = nullptr;                // the draft's own random stream (required)
  // Grow a tree of this shape (null or empty: a chain), with at most node_max nodes (the room
  // left in the caches; 0: the shape's own size). Drafters that grow no trees propose chains,
  // which are trees too.
  const TreeSpec* tree = nullptr;
  int node_max = 0;
  // The configured g before this step's cut by the token budget (0: draft_max). A drafter whose
  // drafts depend on how many it drafts (a DFlash block attends both ways) drafts this many and
  // keeps the first draft_max, as llama.cpp runs its configured block to the last step.
  int configured_max = 0;

  bool wants_tree() const { return tree != nullptr && !tree->empty(); }
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
  // The same after a tree proposal: the accepted nodes from the root down (node indices of the
  // last proposal, each a child of the one before). A chain's path is 0..n_accepted-1, which is
  // what the default passes on.
  virtual void accepted_path(std::span<const int32_t> path, int32_t next_token) {
    accepted(static_cast<int>(path.size()), next_token);
  }

  // Drafters that read the target's own hidden states (multi-token prediction: draft/mtp_drafter.h)
  // say so: the loop then asks each of its target forwards (the prompt's prefill, every verify
  // batch) for the final hidden rows (core::ForwardOptions::hidden) and hands them over with the
  // batch's tokens, after the forward and before the step's verification; the rows are the
  // target's, valid until its next forward (copy what is needed; run no forward of the target's
  // model here, whose logits the verifier has yet to read).
  virtual bool reads_target_hidden() const { return false; }
  // Which rows: the input rows of these target layers, side by side (core::ForwardOptions::
  // hidden_layers; an EAGLE-3 head's features), or when empty the final hidden rows after the
  // output norm (ForwardOptions::hidden).
  virtual std::vector<int> target_hidden_layers() const { return {}; }
  virtual void target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) {
    (void)tokens;
    (void)hidden;
  }
};

}  // namespace specmoe::draft
