// FeatureDrafter: drafting with a head that reads the target's own hidden states, the shared loop
// of the multi-token-prediction drafter (draft/mtp_drafter.h) and the EAGLE-3 drafter
// (draft/eagle3_drafter.h). The head is one decoder layer with a cache of its own; token t is fed
// with a feature row f of the token before it: derived from the target's hidden rows for committed
// tokens (FeatureHead::encode), the head's own output row for the tokens it drafted.
//
// The head's cache holds one row per committed token x_j (j >= offset), computed from (x_j,
// f_{j-1}) at cache row and RoPE position j - offset: an MTP block has a row for the first token
// too (offset 0, with f_{-1} = zeros, as llama.cpp's draft-mtp), an EAGLE-3 head starts at x_1
// (offset 1: its row P pairs x_{P+1} with the target's features of position P, as llama.cpp's
// draft-eagle3). A proposal after context x_0..x_{c-1} feeds (x_{c-1}, f_{c-2}), draws d_1 from its
// logits, then feeds (d_1, the head's own output row), and so on, a chain of g one-token forwards.
// After verification the rows computed from the head's own rows are dropped and the accepted tokens
// are fed again with the target's features of the verify batch (in the next proposal's first
// forward, with its root), so the cache always holds what the target's hidden states say. Draws and
// q as ModelDrafter's: the target's logits processors, the draft's own Rng, q in the target's
// vocabulary. Trees grow as the model drafter's do (draft/tree_grower.h): the root's forward, then
// a batched forward per level over the nodes that get children, each node read with its parent's
// output row under the tree's attention (as EAGLE's trees feed the draft head's own features).
#pragma once
#include <memory>
#include <vector>

#include "core/model.h"
#include "draft/drafter.h"
#include "draft/tree_grower.h"

namespace specmoe::draft {

class FeatureDrafter : public Drafter {
 public:
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;
  void accepted_path(std::span<const int32_t> path, int32_t next_token) override;
  bool reads_target_hidden() const override { return true; }
  void target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) override;

  // Drafts from the vocabulary's first n ids only (0 = all; ModelDrafter's reduced draft vocabulary:
  // the head computes those rows, q is 0 above them). Throws Error(InvalidArgument) unless
  // 0 <= n <= n_vocab, or for a head with a draft vocabulary of its own.
  void set_vocabulary_limit(int64_t n);
  int64_t vocabulary_limit() const { return head_rows_; }

  // The head's cache. After verification the accepted positions wait for the next proposal, which
  // feeds them with its root in one forward; flush() feeds them now.
  const core::KVCache& cache() const { return cache_; }
  void flush();

 protected:
  // head: the model that runs the head (the target itself for an inline MTP block); width: its
  // feature rows' width; offset: 0 when the first token has a row (MTP), 1 when not (EAGLE-3);
  // input_width: the width of the target's rows the loop hands over (target_hidden).
  FeatureDrafter(core::Model& target, core::Model& head, int64_t width, int offset, int64_t input_width);
  // Makes the head's cache and scratch (call from the derived constructor, after its checks).
  void init(core::KVCache cache);

  // The head's forward over a batch, token i with feature row i of f ([T, width] in the head's
  // memory): its logits (over the target's vocabulary) and, with options.hidden, its output rows.
  virtual core::ForwardResult head_forward(const core::Batch& batch, const float* f, core::KVCache& kv,
                                           const core::ForwardOptions& options) = 0;
  // The feature rows [T, width] (the head's memory, valid until the next call) of the target's T
  // hidden rows as the loop handed them over ([T, input_width]).
  virtual const float* encode(const core::Rows& target_rows) = 0;
  // A head with its own draft vocabulary refuses a vocabulary limit.
  bool own_vocabulary_ = false;

  core::Model& target_;
  core::Model& head_;

 private:
  // The queued positions and then `token` with the pending row (the root of a proposal) in one
  // forward: the root's logits, and its output row in `hidden`.
  core::ForwardResult root_forward(int32_t token);
  // After verification: the last verify batch's rows `rows` (0: its first token, then the accepted
  // nodes' rows from the root down) are committed.
  void commit(std::span<const int32_t> rows);
  // Trees (draft/tree_grower.h): the root's forward, then one batched forward per level of the
  // nodes that get children, each with its parent's output row.
  void propose_tree(std::span<const int32_t> context, const DraftParams& params, Draft& out);

  int64_t d_ = 0;                      // the feature rows' width
  int offset_ = 0;                     // cache row of token j: j - offset_
  int64_t input_width_ = 0;
  core::KVCache cache_;
  core::RowBuffer h_, pending_, queue_h_, chain_h_, q_, dist_;
  int64_t head_rows_ = 0;              // reduced draft vocabulary (0: all)
  std::vector<int32_t> h_tokens_;      // the last target forward's tokens (h_ holds their feature rows)
  std::vector<int32_t> queue_tokens_;  // committed tokens the head has not read yet
  int n_committed_ = 0;                // tokens whose target hidden rows were handed over
  bool awaiting_prefill_ = false;      // begin() saw a prompt the target prefills
  std::vector<int32_t> history_;       // context + drafted tokens inside the draft vocabulary (penalties)
  TreeGrower grower_;
  core::RowBuffer node_h_, level_h_;   // trees: each fed node's output row; a level's input rows
  std::vector<int32_t> commit_rows_;
};

}  // namespace specmoe::draft
