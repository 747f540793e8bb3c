// Growing a draft token tree level by level: see tree_grower.h.
#include "draft/tree_grower.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "core/logits_processors.h"

namespace specmoe::draft {
namespace {

// The value at column `col` of row r, wherever the rows live (a 4-byte copy from a device).
float value_at(const core::Rows& rows, int64_t r, int64_t col) {
  float v = 0.0f;
  rows.backend->download(&v, rows.row(r) + col, sizeof v);
  return v;
}

// The ids of the k largest positive w[0, n), largest first, the lower id first among equals.
void top_k_positive(const float* w, int64_t n, int k, std::vector<int32_t>& out) {
  out.clear();
  if (k <= 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const float v = w[i];
    if (!(v > 0.0f)) continue;
    if (static_cast<int>(out.size()) == k && !(v > w[out.back()])) continue;
    auto at = std::upper_bound(out.begin(), out.end(), v, [&](float x, int32_t id) { return x > w[id]; });
    out.insert(at, static_cast<int32_t>(i));
    if (static_cast<int>(out.size()) > k) out.pop_back();
  }
}

}  // namespace

TreeGrower::TreeGrower(core::Backend& backend) : backend_(&backend), q_(backend), dist_(backend) {}

int TreeGrower::add_children(int parent, const core::Rows& row, int k, const DraftParams& params, Draft& out) {
  if (k <= 0) return 0;
  const core::Sampler& sampler = *params.sampler;
  const TreeSampling mode = params.tree->sampling;
  const int64_t n_draft = row.cols, n_target = n_target_;  // n_draft: head_rows_ when reduced
  const double parent_score = parent < 0 ? 0.0 : score_[static_cast<size_t>(parent)];
  auto add = [&](int32_t token, double prob, int q_row) {
    out.tokens.push_back(token);
    out.parents.push_back(parent);
    if (q_row >= 0) out.q_row.push_back(q_row);
    score_.push_back(parent_score + std::log(std::max(prob, 1e-30)));
  };

  if (mode == TreeSampling::TopK) {
    // Deterministic candidates: the k most probable ids the target has. At temperature 0 the
    // processed q is one-hot, so the plain softmax of the draft logits ranks them (EAGLE-2's
    // draft confidence); otherwise the processed q does.
    const int64_t m = std::min(n_draft, n_target);
    if (sampler.params().greedy()) {
      row.to_host(host_row_);
      core::top_k_softmax(std::span<const float>(host_row_.data(), static_cast<size_t>(m)), k, top_ids_, top_probs_);
      for (size_t i = 0; i < top_ids_.size(); ++i) add(top_ids_[i], top_probs_[i], -1);
      return static_cast<int>(top_ids_.size());
    }
    sampler.distributions(row, history_, {}, dist_).to_host(host_row_);
    top_k_positive(host_row_.data(), m, k, top_ids_);
    for (int32_t id : top_ids_) add(id, host_row_[static_cast<size_t>(id)], -1);
    return static_cast<int>(top_ids_.size());
  }

  // Stochastic candidates: the node's q row in the target's vocabulary and the first draw, as a
  // chain's draw; then more draws from the same row.
  float* q = q_rows_ + static_cast<size_t>(n_q_rows_) * static_cast<size_t>(n_target);
  const core::Rows dist =
      sampler.distributions(row, history_, {}, n_draft == n_target ? q : dist_.reserve(1, n_draft));
  const core::Draw first = sampler.draw(dist, 0, q, n_target, *params.rng, 0.0f, nullptr);
  if (first.token < 0) return 0;  // no mass in the target's vocabulary
  const int q_row = n_q_rows_++;
  const core::Rows q_view{q, 1, n_target, backend_};
  const float q_first = value_at(q_view, 0, first.token);
  add(first.token, q_first, q_row);
  int added = 1;
  if (mode == TreeSampling::Stochastic) {
    // With replacement (SpecInfer): independent draws. A one-hot row (temperature 0) would only
    // repeat its token, so drawing stops there (a decision on earlier draws only: still lossless).
    while (added < k && q_first < 1.0f) {
      const int32_t x = sampler.sample(q_view, 0, *params.rng);
      add(x, value_at(q_view, 0, x), q_row);
      ++added;
    }
    return added;
  }
  // Without replacement (Jeon et al. 2024): each draw from the row with the earlier draws
  // removed, by inverse CDF against u * (the mass left), in id order; the argmax of what is left
  // at temperature 0 (where the one-hot row leaves nothing).
  q_view.to_host(host_row_);
  host_row_[static_cast<size_t>(first.token)] = 0.0f;
  while (added < k) {
    double left = 0.0;
    for (int64_t i = 0; i < n_target; ++i) left += host_row_[static_cast<size_t>(i)];
    if (!(left > 0.0)) break;
    int32_t x = -1;
    if (sampler.params().greedy()) {
      x = static_cast<int32_t>(std::max_element(host_row_.begin(), host_row_.end()) - host_row_.begin());
    } else {
      const double target = params.rng->uniform() * left;
      double cum = 0.0;
      for (int64_t i = 0; i < n_target; ++i) {
        const float v = host_row_[static_cast<size_t>(i)];
        if (v <= 0.0f) continue;
        cum += v;
        x = static_cast<int32_t>(i);
        if (cum > target) break;
      }
    }
    add(x, host_row_[static_cast<size_t>(x)], q_row);
    host_row_[static_cast<size_t>(x)] = 0.0f;
    ++added;
  }
  return added;
}

void TreeGrower::grow(const core::Rows& root, std::span<const int32_t> context, int64_t head_rows, int64_t n_target,
                      const DraftParams& params, const LevelForward& level, Draft& out) {
  if (backend_ == nullptr) throw_error(ErrorKind::InvalidArgument, "tree grower: no backend");
  const TreeSpec& spec = *params.tree;
  const TreeSampling mode = spec.sampling;
  const int depth = std::min(spec.max_depth(params.draft_max), params.draft_max);
  int budget = spec.max_nodes();
  if (params.node_max > 0) budget = std::min(budget, params.node_max);
  score_.clear();
  fed_.clear();
  fed_parents_.clear();
  row_of_.clear();
  head_rows_ = head_rows;
  n_target_ = n_target;
  draft_history(context, head_rows, history_);
  history_context_ = history_.size();
  out.one_hot = mode == TreeSampling::TopK;
  out.without_replacement = mode == TreeSampling::StochasticNoReplace;
  if (depth <= 0 || budget <= 0) return;
  // A dynamic top-k tree grows k children for each of the k best nodes of every level and keeps
  // the `nodes` best overall. Stochastic candidates must stay draws from q, so no sibling is
  // dropped for its value: those trees, and static ones, stop growing at the budget (a count, not
  // a value).
  const bool rerank = !spec.is_static() && mode == TreeSampling::TopK;
  const int k = spec.expansion_k();
  const int grow_budget = rerank ? std::min(k + (depth - 1) * k * k, 512) : budget;
  n_q_rows_ = 0;
  q_rows_ = mode == TreeSampling::TopK ? nullptr : q_.reserve(grow_budget + 1, n_target);  // a row per expansion

  // The nodes expanded at this depth (-1: the root); expanded node e's logits are row e of
  // `logits` (the root's, then the level forward's).
  std::vector<int32_t> expand = {-1};
  core::Rows logits = root;
  for (int d = 0; d < depth; ++d) {
    const int level_begin = out.size();
    for (size_t e = 0; e < expand.size() && out.size() < grow_budget; ++e) {
      const int parent = expand[e];
      const int width = spec.is_static() ? spec.widths[static_cast<size_t>(d)] : k;
      // Penalties (repetition, n-gram bans) see the node's own prefix.
      history_.resize(history_context_);
      if (parent >= 0) {
        out.path_to(parent, path_);
        for (int32_t v : path_) push_history(out.tokens[static_cast<size_t>(v)]);
      }
      add_children(parent, logits.slice(static_cast<int64_t>(e), 1), std::min(width, grow_budget - out.size()), params, out);
    }
    const int level_end = out.size();
    if (d + 1 >= depth || level_end == level_begin || level_end >= grow_budget) break;

    // The nodes of the new level that get children next.
    expand.clear();
    for (int i = level_begin; i < level_end; ++i) expand.push_back(i);
    if (spec.is_static()) {
      const int w = spec.widths[static_cast<size_t>(d) + 1];
      const size_t fit = static_cast<size_t>((grow_budget - level_end + w - 1) / w);
      if (expand.size() > fit) expand.resize(fit);
    } else {
      std::stable_sort(expand.begin(), expand.end(), [&](int32_t a, int32_t b) {
        return score_[static_cast<size_t>(a)] > score_[static_cast<size_t>(b)];
      });
      if (expand.size() > static_cast<size_t>(k)) expand.resize(static_cast<size_t>(k));
      std::sort(expand.begin(), expand.end());
    }
    // Those nodes as a tree after the rows earlier levels fed: a node of this level is the child of
    // one the last level fed, so every ancestor is among them.
    batch_tokens_.clear();
    batch_parents_.clear();
    for (int32_t v : expand) {
      batch_tokens_.push_back(out.tokens[static_cast<size_t>(v)]);
      const int p = out.parent(v);
      batch_parents_.push_back(p < 0 ? -1 : row_of_[static_cast<size_t>(p)]);
    }
    core::Batch batch(batch_tokens_);
    batch.parents = batch_parents_;
    batch.cached_parents = fed_parents_;
    logits = level(batch);  // row e: expand[e]'s logits
    if (logits.rows == 0) break;
    row_of_.resize(static_cast<size_t>(out.size()), -1);
    for (size_t e = 0; e < expand.size(); ++e) {
      row_of_[static_cast<size_t>(expand[e])] = static_cast<int32_t>(fed_.size());
      fed_.push_back(expand[e]);
      fed_parents_.push_back(batch_parents_[e]);
    }
  }

  if (rerank && out.size() > budget) {
    std::vector<int32_t> order(static_cast<size_t>(out.size()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return score_[static_cast<size_t>(a)] > score_[static_cast<size_t>(b)];
    });
    order.resize(static_cast<size_t>(budget));
    std::sort(order.begin(), order.end());
    std::vector<int32_t> new_index(static_cast<size_t>(out.size()), -1), tokens, parents;
    std::vector<double> scores;
    for (int32_t v : order) {
      new_index[static_cast<size_t>(v)] = static_cast<int32_t>(tokens.size());
      tokens.push_back(out.tokens[static_cast<size_t>(v)]);
      const int p = out.parent(v);
      parents.push_back(p < 0 ? -1 : new_index[static_cast<size_t>(p)]);
      scores.push_back(score_[static_cast<size_t>(v)]);
    }
    out.tokens = std::move(tokens);
    out.parents = std::move(parents);
    score_ = std::move(scores);
    for (int32_t& v : fed_) v = new_index[static_cast<size_t>(v)];
  }
  if (mode != TreeSampling::TopK) out.q = core::Rows{q_rows_, n_q_rows_, n_target, backend_};
}

}  // namespace specmoe::draft
