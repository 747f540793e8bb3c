// TreeGrower: grows a draft token tree level by level from a drafter's logits, the tree drafting
// the model, layer-skip and mtp drafters share. The drafter supplies the root's logits and, for
// each level, one batched forward over the nodes that get children (LevelForward: the same tree
// attention the target verifies with); the grower picks the children: the top-k of q (one-hot
// candidates, ranked at temperature 0 by the plain softmax of the draft logits, EAGLE-2's draft
// confidence) or draws from q with or without replacement (SpecInfer, Miao et al. 2024; Jeon et
// al. 2024), keeping a q row per expanded node. Static shapes (TreeSpec::widths) expand every node;
// dynamic ones (EAGLE-2, Li et al. 2024) expand the k nodes of highest cumulative draft probability
// at each depth, and a top-k tree then keeps the N best nodes overall (a child never outscores its
// parent, so the kept set is a tree).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/model.h"
#include "draft/drafter.h"

namespace specmoe::draft {

class TreeGrower {
 public:
  // One level's forward: `batch` holds the nodes that get children (their tokens), each one's
  // parent among the rows the earlier levels fed (Batch::parents; -1: the root) and those rows'
  // own parents (Batch::cached_parents), so that each node sees the context, its ancestors and
  // itself; returns their logits, row e for node e of the batch. Empty rows (rows == 0) stop the
  // growth (no room left).
  using LevelForward = std::function<core::Rows(const core::Batch& batch)>;

  TreeGrower() = default;
  // backend: where the drafter's logits live and q rows are kept.
  explicit TreeGrower(core::Backend& backend);

  // Grows `out` (empty) below the root whose children's logits are `root` (one row of the draft
  // vocabulary: head_rows ids, or all). context: the penalties' history (ids inside the draft
  // vocabulary count). n_target: the width of q (the target's vocabulary). Sets out's q rows,
  // one_hot and without_replacement.
  void grow(const core::Rows& root, std::span<const int32_t> context, int64_t head_rows, int64_t n_target,
            const DraftParams& params, const LevelForward& level, Draft& out);
  // After grow(): the node of `out` each level forward fed, row by row in feeding order (-1: a
  // node the dynamic tree's final rerank dropped).
  const std::vector<int32_t>& fed_nodes() const { return fed_; }

 private:
  // Adds up to k children of `parent` (-1: the root) from its draft logits row.
  int add_children(int parent, const core::Rows& row, int k, const DraftParams& params, Draft& out);
  void push_history(int32_t id) {
    if (head_rows_ == 0 || id < head_rows_) history_.push_back(id);
  }

  core::Backend* backend_ = nullptr;
  core::RowBuffer q_, dist_;
  int64_t head_rows_ = 0, n_target_ = 0;
  std::vector<int32_t> history_;
  size_t history_context_ = 0;
  std::vector<double> score_;  // each node's cumulative log draft probability
  int n_q_rows_ = 0;
  float* q_rows_ = nullptr;
  std::vector<float> host_row_;
  std::vector<int32_t> top_ids_, path_;
  // The level forwards' rows: the node each holds, each one's parent row, each node's row (-1:
  // not fed), and one level's batch.
  std::vector<int32_t> fed_, fed_parents_, row_of_, batch_tokens_, batch_parents_;
  std::vector<double> top_probs_;
};

}  // namespace specmoe::draft
