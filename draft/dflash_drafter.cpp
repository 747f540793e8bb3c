// Drafting with a DFlash block: see dflash_drafter.h.
#include "draft/dflash_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

namespace {

core::Model& checked_draft(core::Model& target, const std::shared_ptr<core::Model>& draft) {
  if (draft == nullptr) throw_error(ErrorKind::InvalidArgument, "dflash drafter: no draft model given");
  if (!draft->is_dflash())
    throw_error(ErrorKind::Unsupported, "dflash drafter: {} is not a DFlash draft (general.architecture {}, not dflash)",
                draft->file().path(), draft->config().arch_name);
  draft->bind_target(target);
  return *draft;
}

}  // namespace

DFlashDrafter::DFlashDrafter(core::Model& target, std::shared_ptr<core::Model> draft, int n_ctx)
    : DFlashDrafter(target, checked_draft(target, draft), draft, n_ctx) {}

DFlashDrafter::DFlashDrafter(core::Model& target, core::Model& draft, std::shared_ptr<core::Model> owned, int n_ctx)
    : target_(target), draft_(draft), owned_(std::move(owned)), width_(draft.config().head_feature_width()),
      cache_(draft.new_cache(n_ctx)) {
  core::Backend& be = draft_.backend();
  h_ = gathered_ = q_ = core::RowBuffer(be);
}

void DFlashDrafter::begin(std::span<const int32_t> prompt) {
  cache_.clear();
  h_tokens_.clear();
  n_committed_ = 0;
  awaiting_prefill_ = prompt.size() > 1;
}

void DFlashDrafter::target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0 || hidden.rows != T || hidden.cols != width_)
    throw_error(ErrorKind::InvalidArgument, "dflash drafter: {} hidden rows of {} for {} tokens (expected rows of {})",
                hidden.rows, hidden.cols, T, width_);
  if (&draft_ != &target_) target_.backend().synchronize();  // the rows, read by the draft's backend
  if (awaiting_prefill_) {
    // The prompt's prefill: every token it fed is committed.
    awaiting_prefill_ = false;
    draft_.dflash_inject(hidden.data, T, cache_);
    n_committed_ += static_cast<int>(T);
    return;
  }
  // A verify batch: which of its rows stay is known after verification (accepted()). The rows are
  // the target's until its next forward: copied.
  const size_t row = static_cast<size_t>(width_) * sizeof(float);
  draft_.backend().copy_rows(h_.reserve(T, width_), row, hidden.data, row, row, T);
  h_tokens_.assign(tokens.begin(), tokens.end());
}

void DFlashDrafter::accepted(int n_accepted, int32_t) {
  commit_rows_.clear();
  for (int i = 0; i <= std::clamp(n_accepted, 0, static_cast<int>(h_tokens_.size()) - 1); ++i) commit_rows_.push_back(i);
  commit(commit_rows_);
}

void DFlashDrafter::accepted_path(std::span<const int32_t> path, int32_t) {
  // The verify batch holds the root, then node v at row 1 + v.
  commit_rows_.assign(1, 0);
  for (int32_t v : path) {
    if (v + 1 >= static_cast<int32_t>(h_tokens_.size())) break;
    commit_rows_.push_back(v + 1);
  }
  commit(commit_rows_);
}

void DFlashDrafter::commit(std::span<const int32_t> rows) {
  const int T = static_cast<int>(h_tokens_.size());
  if (T == 0) return;
  const int64_t n = static_cast<int64_t>(rows.size());
  const core::Rows h = h_.view(T, width_);
  bool prefix = true;
  for (int64_t i = 0; i < n; ++i) prefix = prefix && rows[static_cast<size_t>(i)] == i;
  const float* f = h.data;
  if (!prefix) {  // a tree's path: its rows gathered in order
    const size_t row = static_cast<size_t>(width_) * sizeof(float);
    float* g = gathered_.reserve(n, width_);
    for (int64_t i = 0; i < n; ++i)
      draft_.backend().copy_rows(g + i * width_, row, h.row(rows[static_cast<size_t>(i)]), row, row, 1);
    f = g;
  }
  draft_.dflash_inject(f, n, cache_);
  n_committed_ += static_cast<int>(n);
  h_tokens_.clear();
}

void DFlashDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  out.without_replacement = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "dflash drafter: propose needs a sampler and an rng");
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "dflash drafter: empty context");
  const int c = static_cast<int>(context.size());
  if (n_committed_ != c - 1 || cache_.size() != c - 1)
    throw_error(ErrorKind::InvalidArgument,
                "dflash drafter: it has read {} positions of the target's features for a context of {} tokens: the "
                "decoding loop must hand them over (Drafter::target_hidden)", n_committed_, c);
  // The block [x_{c-1}, mask x b] needs b + 1 rows of the cache; b is the configured length even
  // when the token budget keeps fewer (the block's rows see each other: its length shapes them).
  const int b = std::min({std::max(params.draft_max, params.configured_max), max_draft(), cache_.capacity() - c});
  const int g = std::min(params.draft_max, b);
  if (g <= 0) return;
  block_.assign(static_cast<size_t>(b) + 1, draft_.config().mask_token_id);
  block_[0] = context.back();
  core::ForwardOptions o;
  o.logits_all = true;
  const core::ForwardResult r = draft_.forward_dflash(block_, cache_, o);
  cache_.truncate(c - 1);  // the block's rows leave the cache
  const int64_t n_vocab = target_.config().n_vocab;
  draft_history(context, 0, history_);
  float* q_rows = q_.reserve(g, n_vocab);
  for (int i = 0; i < g; ++i) {
    const core::Rows logits = r.logits.slice(i + 1, 1);
    float* q = q_rows + static_cast<int64_t>(i) * n_vocab;
    const core::Rows dist = params.sampler->distributions(logits, history_, {}, q);
    const core::Draw d = params.sampler->draw(dist, 0, q, n_vocab, *params.rng, params.p_min, logits.data);
    if (d.token < 0) break;  // no mass, or not confident enough
    out.tokens.push_back(d.token);
    history_.push_back(d.token);
  }
  out.q = core::Rows{q_rows, out.size(), n_vocab, &draft_.backend()};
}

}  // namespace specmoe::draft
