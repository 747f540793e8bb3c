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
  tree_rows_.clear();
  tree_tokens_.clear();
  tree_parents_.clear();
  row_of_.clear();
  // One batched forward of the draft model per level: the nodes that get children, as a tree
  // after the context and the nodes earlier levels stored (each new node sees the context, its
  // ancestors and itself). Their ancestors are all cached: a node of a level is the child of one
  // the last level's forward fed.
  const TreeGrower::LevelForward level = [&](std::span<const int32_t> expand, const Draft& tree) -> core::Rows {
    if (tree_rows_.size() + expand.size() > static_cast<size_t>(room)) return {};  // no room in the cache
    batch_tokens_.clear();
    batch_parents_.clear();
    for (int32_t v : expand) {
      batch_tokens_.push_back(tree.tokens[static_cast<size_t>(v)]);
      const int p = tree.parent(v);
      batch_parents_.push_back(p < 0 ? -1 : static_cast<int32_t>(row_of_[static_cast<size_t>(p)]));
    }
    core::Batch batch(batch_tokens_);
    batch.parents = batch_parents_;
    batch.cached_parents = tree_parents_;
    core::ForwardOptions opt;
    opt.exit_layer = exit_layer_;
    opt.head_rows = head_rows_;
    const core::Rows logits = model_->forward(batch, cache_, opt).logits;  // row e: expand[e]'s logits
    row_of_.resize(static_cast<size_t>(tree.size()), -1);
    for (size_t e = 0; e < expand.size(); ++e) {
      row_of_[static_cast<size_t>(expand[e])] = static_cast<int32_t>(tree_rows_.size());
      tree_rows_.push_back(expand[e]);
      tree_tokens_.push_back(batch_tokens_[e]);
      tree_parents_.push_back(batch_parents_[e]);
    }
    return logits;
  };
  grower_.grow(logits_, context, head_rows_, target_n_vocab_, params, level, out);
  if (!grower_.renumbered().empty())
    for (int32_t& v : tree_rows_) v = grower_.renumbered()[static_cast<size_t>(v)];
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
