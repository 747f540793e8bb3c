// MtpDrafter: self-speculative decoding with the target's own multi-token-prediction block
// (Gloeckle et al. 2024, "Better & Faster Large Language Models via Multi-token Prediction";
// DeepSeek-AI 2024, DeepSeek-V3 sec. 2.2; GLM-4.5's and Qwen3.5's NextN layer): a decoder layer
// trained to predict the token after next from a token and the target's final hidden row of the
// token before it (core::Model::forward_mtp). It shares the target's weights and keeps a cache of
// its own layer only.
//
// The block's cache holds one row per committed position p, computed from (x_p, h_{p-1}) with
// h the target's hidden rows (zeros before the first token), as the model was trained and as
// llama.cpp's draft-mtp runs it (common/speculative.cpp). A proposal after context x_0..x_{c-1}
// feeds (x_{c-1}, h_{c-2}) at position c - 1, draws d_1 from its logits, then feeds (d_1, the
// block's own output row) at position c, and so on, a chain of g one-token forwards. After
// verification the rows past position c - 1 (computed from the block's own rows) are dropped and
// the accepted tokens are fed again with the target's rows of the verify batch (in the next
// proposal's first forward, with its root), so the cache always holds what the target's hidden
// states say. Draws and q as ModelDrafter's: the target's
// logits processors, the draft's own Rng, q in the target's vocabulary (the same model's).
// Trees grow as the model drafter's do (draft/tree_grower.h): the root's forward, then a batched
// forward per level over the nodes that get children, each node read with its parent's output row
// under the tree's attention (as EAGLE's trees feed the draft head's own features).
#pragma once
#include <memory>
#include <vector>

#include "core/model.h"
#include "draft/drafter.h"
#include "draft/tree_grower.h"

namespace specmoe::draft {

class MtpDrafter : public Drafter {
 public:
  // target: not owned, must outlive the drafter; Error(Unsupported) naming its file unless it has
  // a multi-token-prediction block (core::Model::has_mtp). n_ctx: the block's cache capacity (<= 0:
  // the model's training context).
  explicit MtpDrafter(core::Model& target, int n_ctx = 0);
  // The block from another file (`block`, owned): a file of the block alone (ModelConfig::mtp_only,
  // llama.cpp's --mtp export) or any file of the same model that carries it, beside a target
  // converted without it. Error(InvalidArgument) naming both files unless the widths and
  // vocabularies agree and both run on the same device.
  MtpDrafter(core::Model& target, std::shared_ptr<core::Model> block, int n_ctx = 0);

  std::string name() const override { return "mtp"; }
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;
  void accepted_path(std::span<const int32_t> path, int32_t next_token) override;
  bool reads_target_hidden() const override { return true; }
  void target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) override;

  // Drafts from the vocabulary's first n ids only (0 = all; ModelDrafter's reduced draft vocabulary:
  // the block's head computes those rows, q is 0 above them). Throws Error(InvalidArgument) unless
  // 0 <= n <= n_vocab.
  void set_vocabulary_limit(int64_t n);
  int64_t vocabulary_limit() const { return head_rows_; }

  // The block's cache. After verification the accepted positions wait for the next proposal, which
  // feeds them with its root in one forward; flush() feeds them now.
  const core::KVCache& cache() const { return cache_; }
  void flush();

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
  // Queues position `pos`'s token with a hidden row of `src` (the model's memory).
  void queue(int32_t token, const float* src);

  void init(int n_ctx);

  core::Model& target_;
  std::shared_ptr<core::Model> owned_block_;
  core::Model* block_ = nullptr;       // runs the block: the target, or owned_block_
  int64_t d_ = 0;
  core::KVCache cache_;
  core::RowBuffer h_, pending_, queue_h_, chain_h_, q_, dist_;
  int64_t head_rows_ = 0;              // reduced draft vocabulary (0: all)
  std::vector<int32_t> h_tokens_;      // the last target forward's tokens (h_ holds their rows)
  std::vector<int32_t> queue_tokens_;  // committed tokens the block has not read yet
  int n_committed_ = 0;                // positions whose target hidden rows were handed over
  bool awaiting_prefill_ = false;      // begin() saw a prompt the target prefills
  std::vector<int32_t> history_;       // context + drafted tokens inside the draft vocabulary (penalties)
  TreeGrower grower_;
  core::RowBuffer node_h_, level_h_;   // trees: each fed node's output row; a level's input rows
  std::vector<int32_t> commit_rows_;
};

}  // namespace specmoe::draft
