// Tree drafting with a draft model (ModelDrafter::propose_tree): see model_drafter.h. The tree
// grows as draft/tree_grower.h grows it, one batched forward of the draft model per level with the
// tree attention the target verifies with.
#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "draft/model_drafter.h"

namespace specmoe::draft {

void ModelDrafter::propose_tree(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  const int c = static_cast<int>(context.size());
  const int room = cache_.capacity() - c;  // rows the levels' forwards may add after the context
  if (room < 0) return;
  sync(context);
  proposed_from_ = context.size();
  tree_proposal_ = true;
  tree_tokens_.clear();
  // One batched forward of the draft model per level (TreeGrower builds the tree batch over the
  // rows the earlier levels stored in the draft cache).
  const TreeGrower::LevelForward level = [&](const core::Batch& batch) -> core::Rows {
    if (tree_tokens_.size() + batch.tokens.size() > static_cast<size_t>(room)) return {};  // no room in the cache
    core::ForwardOptions opt;
    opt.exit_layer = exit_layer_;
    opt.head_rows = head_rows_;
    const core::Rows logits = model_->forward(batch, cache_, opt).logits;
    tree_tokens_.insert(tree_tokens_.end(), batch.tokens.begin(), batch.tokens.end());
    return logits;
  };
  grower_.grow(logits_, context, head_rows_, target_n_vocab_, params, level, out);
  tree_rows_ = grower_.fed_nodes();
}

void ModelDrafter::accepted_path(std::span<const int32_t> path, int32_t next_token) {
  if (!tree_proposal_) {
    accepted(static_cast<int>(path.size()), next_token);
    return;
  }
  tree_proposal_ = false;
  // The cache holds the context, then the rows of the levels' forwards (tree_rows_): keep the
  // accepted path's rows among them, moved into place; the next sync feeds the rest.
  const size_t c = proposed_from_;
  std::vector<int> keep(c);
  std::iota(keep.begin(), keep.end(), 0);
  cached_.resize(c);
  for (int32_t node : path) {
    const auto it = std::find(tree_rows_.begin(), tree_rows_.end(), node);
    if (it == tree_rows_.end()) break;
    const size_t r = static_cast<size_t>(it - tree_rows_.begin());
    const int row = static_cast<int>(c + r);
    if (row >= cache_.size() || (!keep.empty() && row <= keep.back())) break;
    keep.push_back(row);
    cached_.push_back(tree_tokens_[r]);
  }
  cache_.keep(keep);
}

}  // namespace specmoe::draft
