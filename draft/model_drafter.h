// ModelDrafter: drafts with a transformer (an independent, smaller draft model, or the target
// itself exiting after its first layers: see layerskip_drafter.h). It keeps its own KV cache in
// step with the context: accepted() rolls it back to the accepted prefix; each proposal first
// feeds the context tokens the cache lacks (one batched forward; it finds them by comparing the
// cached tokens with the context, so any context works), then decodes g tokens one at a time,
// sampling each from the processed distribution of the shared Sampler with the draft's own Rng.
// The distributions and draws run where the draft model runs (its backend); q stays there
// (Draft::q), in the target's vocabulary.
//
// Asked for a tree (DraftParams::tree; model_drafter_tree.cpp), it grows one level per batched
// forward: the nodes to expand at the next depth are fed as one tree batch after the context and
// the nodes earlier levels stored (Batch::cached_parents: the same tree attention the target
// verifies with, so each node's logits are those of the whole tree in one batch), and each
// expanded node's children are the top-k of its q (one-hot candidates) or draws
// from q with or without replacement. Static shapes expand every node; dynamic ones (EAGLE-2, Li
// et al. 2024) expand the k nodes of highest cumulative draft probability at each depth, and a
// top-k tree then keeps the N best nodes overall. After verification accepted_path() keeps the
// KV rows of the accepted path that the cache holds (KVCache::keep); the next sync feeds the rest.
//
// A reduced draft vocabulary (set_vocabulary_limit, `--draft-vocab N`) computes the draft head's
// first N rows only, as FR-Spec (Zhao et al. 2025, "FR-Spec: Accelerating Large-Vocabulary
// Language Models via Frequency-Ranked Speculative Sampling") and EAGLE-3's 32K draft vocabulary
// do: the head of a small draft model with a large vocabulary is a large part of its weights
// (Qwen2.5-0.5B: 136M of 494M parameters). FR-Spec ranks tokens by corpus frequency; here the rank
// is the id, since BPE vocabularies number tokens in merge order and SentencePiece ones by score,
// both frequency orders (Qwen2.5's first 32768 ids cover 96% of HumanEval's tokens and 94% of
// MT-bench's). q is the softmax over those ids, 0 elsewhere, and the verifiers see exactly that q,
// so decoding stays lossless; tokens outside the subset are never drafted (the target emits them).
#pragma once
#include <memory>

#include "core/model.h"
#include "draft/drafter.h"
#include "draft/tree_grower.h"

namespace specmoe::draft {

class ModelDrafter : public Drafter {
 public:
  // model: the draft model (owned; keep `model` alive otherwise, see the raw-pointer overload).
  // target_n_vocab: the q rows are written in the target's vocabulary size (the draft's extra
  // padding ids are masked out; missing ids get probability 0). exit_layer: early exit after that
  // many blocks (-1 = all). n_ctx: the draft cache's capacity (<= 0: the model's training context).
  ModelDrafter(std::shared_ptr<core::Model> model, int target_n_vocab, int exit_layer = -1, int n_ctx = 0);
  ModelDrafter(core::Model* model, int target_n_vocab, int exit_layer = -1, int n_ctx = 0);  // not owned

  std::string name() const override { return "model"; }
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;
  void accepted_path(std::span<const int32_t> path, int32_t next_token) override;

  // Drafts from the draft vocabulary's first n ids only (0 = all; the default). Throws
  // Error(InvalidArgument) unless 0 <= n <= the draft model's n_vocab.
  void set_vocabulary_limit(int64_t n);
  int64_t vocabulary_limit() const { return head_rows_; }

  const core::KVCache& cache() const { return cache_; }
  // The tokens whose keys/values cache() holds, in order.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  core::Model& model() { return *model_; }

 private:
  void init(int n_ctx);
  // Makes the cache hold context[0..c) and leaves the logits of context[c-1] in logits_.
  void sync(std::span<const int32_t> context);
  // Appends to the cache; the last token's logits go to logits_.
  void forward(std::span<const int32_t> tokens);
  // Tree proposals (model_drafter_tree.cpp).
  void propose_tree(std::span<const int32_t> context, const DraftParams& params, Draft& out);
  // The penalties' history gets a drafted token (draft_history holds the context's).
  void push_history(int32_t id);

  std::shared_ptr<core::Model> owned_;
  core::Model* model_;
  int target_n_vocab_;
  int exit_layer_;
  int64_t head_rows_ = 0;           // reduced draft vocabulary: ids [0, head_rows_) (0 = all)
  core::KVCache cache_;
  std::vector<int32_t> cached_;     // mirror of the cache's tokens
  size_t proposed_from_ = 0;        // context length of the last proposal
  std::vector<int32_t> history_;    // context + drafted tokens (ids < head_rows_), for the penalties
  core::Rows logits_;               // [1, n_vocab draft or head_rows_] of the last fed token (the model's memory)
  core::RowBuffer q_, dist_;        // q rows [g, n_vocab target]; one draft-vocabulary row
  // The last tree proposal: the node each cache row after the context holds (-1: dropped) and its
  // token.
  bool tree_proposal_ = false;
  TreeGrower grower_;
  std::vector<int32_t> tree_rows_, tree_tokens_;
};

}  // namespace specmoe::draft
