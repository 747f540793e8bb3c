// Draft-model drafting: see model_drafter.h.
#include "draft/model_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace specmoe::draft {

ModelDrafter::ModelDrafter(std::shared_ptr<core::Model> model, int target_n_vocab, int exit_layer, int n_ctx)
    : owned_(std::move(model)), model_(owned_.get()), target_n_vocab_(target_n_vocab), exit_layer_(exit_layer) {
  init(n_ctx);
}

ModelDrafter::ModelDrafter(core::Model* model, int target_n_vocab, int exit_layer, int n_ctx)
    : model_(model), target_n_vocab_(target_n_vocab), exit_layer_(exit_layer) {
  init(n_ctx);
}

void ModelDrafter::init(int n_ctx) {
  if (model_ == nullptr) throw_error(ErrorKind::InvalidArgument, "model drafter: no draft model given");
  const auto& cfg = model_->config();
  if (target_n_vocab_ <= 0)
    throw_error(ErrorKind::InvalidArgument, "model drafter: target vocabulary size {} must be positive",
                target_n_vocab_);
  if (exit_layer_ == 0 || exit_layer_ > cfg.n_layer || exit_layer_ < -1)
    throw_error(ErrorKind::InvalidArgument, "model drafter: exit layer {} outside 1..{} (or -1 = all)", exit_layer_,
                cfg.n_layer);
  if (exit_layer_ == cfg.n_layer) exit_layer_ = -1;
  // A full-depth cache even for early exit: Model::forward checks that the cache was made for the
  // model's layer count; only the first exit_layer layers' rows are ever written.
  cache_ = model_->new_cache(n_ctx);
  q_ = core::RowBuffer(model_->backend());
  dist_ = core::RowBuffer(model_->backend());
  grower_ = TreeGrower(model_->backend());
}

void ModelDrafter::set_vocabulary_limit(int64_t n) {
  if (n < 0 || n > model_->config().n_vocab)
    throw_error(ErrorKind::InvalidArgument, "model drafter: draft vocabulary of {} ids outside [0, {}] (the draft's n_vocab)", n,
                model_->config().n_vocab);
  head_rows_ = n == model_->config().n_vocab ? 0 : n;
}

void ModelDrafter::push_history(int32_t id) {
  if (head_rows_ == 0 || id < head_rows_) history_.push_back(id);
}

void ModelDrafter::forward(std::span<const int32_t> tokens) {
  core::ForwardOptions opt;
  opt.exit_layer = exit_layer_;
  opt.logits_all = false;
  opt.head_rows = head_rows_;
  logits_ = model_->forward(core::Batch(tokens), cache_, opt).logits;
  cached_.insert(cached_.end(), tokens.begin(), tokens.end());
}

void ModelDrafter::begin(std::span<const int32_t> prompt) {
  cache_.clear();
  cached_.clear();
  // Prefill all but the last prompt token; the first proposal feeds it and gets its logits.
  if (prompt.size() > 1) forward(prompt.first(prompt.size() - 1));
}

void ModelDrafter::sync(std::span<const int32_t> context) {
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "model drafter: empty context");
  const size_t c = context.size();
  size_t common = 0;
  const size_t limit = std::min(cached_.size(), c);
  while (common < limit && cached_[common] == context[common]) ++common;
  common = std::min(common, c - 1);  // always re-feed the last token to get its logits
  // A recurrent draft (qwen35) restores its state only over the last few tokens it fed; further
  // back it starts over.
  if (!cache_.can_truncate(static_cast<int>(common))) common = 0;
  cache_.truncate(static_cast<int>(common));
  cached_.resize(common);
  forward(context.subspan(common));
}

void ModelDrafter::accepted(int n_accepted, int32_t) {
  // The cache holds context + x_1..x_{g-1}: roll back to context + x_1..x_n now. What is still
  // missing (x_g after a full acceptance, and next_token) is fed by the next proposal's sync(),
  // batched with the token whose logits it needs.
  const size_t keep = std::min(cached_.size(), proposed_from_ + static_cast<size_t>(std::max(n_accepted, 0)));
  cache_.truncate(static_cast<int>(keep));
  cached_.resize(keep);
}

void ModelDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  out.without_replacement = false;
  tree_proposal_ = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "model drafter: propose needs a sampler and an rng");
  // A recurrent draft's states must reach back over what a proposal feeds (the last context
  // token, then a chain or a tree level by level) to what accepted() keeps.
  int reach = params.draft_max;
  if (params.wants_tree()) {
    reach = params.tree->max_nodes();
    if (params.node_max > 0) reach = std::min(reach, params.node_max);
  }
  cache_.reserve_rollback(reach + 2);
  if (params.wants_tree()) {
    propose_tree(context, params, out);
    return;
  }
  // Room in the cache: context (c) + g - 1 drafted tokens are stored.
  const int room = cache_.capacity() - static_cast<int>(context.size()) + 1;
  const int g = std::min(params.draft_max, room);
  if (g <= 0) return;
  sync(context);
  proposed_from_ = context.size();
  draft_history(context, head_rows_, history_);
  const int64_t n_draft = logits_.cols, n_target = target_n_vocab_;  // n_draft: head_rows_ when reduced
  float* q_rows = q_.reserve(g, n_target);
  for (int i = 0; i < g; ++i) {
    float* q = q_rows + static_cast<size_t>(i) * static_cast<size_t>(n_target);
    // The processed distribution straight into q when the vocabularies agree, else into a draft-
    // vocabulary row that draw() moves into the target's.
    const core::Rows dist = params.sampler->distributions(
        logits_, history_, {}, n_draft == n_target ? q : dist_.reserve(1, n_draft));
    const core::Draw d = params.sampler->draw(dist, 0, q, n_target, *params.rng, params.p_min, logits_.data);
    if (d.token < 0) break;  // no mass in the target's vocabulary, or not confident enough
    out.tokens.push_back(d.token);
    push_history(d.token);
    if (i + 1 < g) forward(std::span<const int32_t>(&out.tokens.back(), 1));
  }
  out.q = core::Rows{q_rows, out.size(), n_target, &model_->backend()};
}

}  // namespace specmoe::draft
