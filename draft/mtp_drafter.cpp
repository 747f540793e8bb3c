// Drafting with the target's multi-token-prediction block: see mtp_drafter.h.
#include "draft/mtp_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

MtpDrafter::MtpDrafter(core::Model& target, int n_ctx) : target_(target) {
  if (!target.has_mtp())
    throw_error(ErrorKind::Unsupported,
                "mtp drafter: {} has no multi-token-prediction block specmoe runs (nextn_predict_layers of a deepseek2, "
                "glm4moe, qwen35 or qwen35moe file converted with its NextN/MTP tensors)",
                target.file().path());
  d_ = target.config().n_embd;
  cache_ = target.new_mtp_cache(n_ctx);
  core::Backend& be = target.backend();
  h_ = pending_ = queue_h_ = chain_h_ = q_ = dist_ = core::RowBuffer(be);
}

void MtpDrafter::set_vocabulary_limit(int64_t n) {
  const int64_t V = target_.config().n_vocab;
  if (n < 0 || n > V)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: draft vocabulary of {} ids outside [0, {}] (the model's n_vocab)", n, V);
  head_rows_ = n == V ? 0 : n;
}

void MtpDrafter::begin(std::span<const int32_t> prompt) {
  cache_.clear();
  queue_tokens_.clear();
  h_tokens_.clear();
  n_committed_ = 0;
  awaiting_prefill_ = prompt.size() > 1;
  // The first position has no token before it: its hidden row is zeros (llama.cpp's too).
  const std::vector<float> zeros(static_cast<size_t>(d_), 0.0f);
  target_.backend().upload(pending_.reserve(1, d_), zeros.data(), zeros.size() * sizeof(float));
}

void MtpDrafter::target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0 || hidden.rows != T || hidden.cols != d_)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: {} hidden rows of {} for {} tokens (expected rows of {})",
                hidden.rows, hidden.cols, T, d_);
  core::Backend& be = target_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  if (awaiting_prefill_) {
    // The prompt's prefill: every token it fed is committed; position p reads h_{p-1}.
    awaiting_prefill_ = false;
    flush();
    float* q = queue_h_.reserve(T, d_);
    be.copy_rows(q, row, pending_.view(1, d_).data, row, row, 1);
    if (T > 1) be.copy_rows(q + d_, row, hidden.data, row, row, T - 1);
    queue_tokens_.assign(tokens.begin(), tokens.end());
    be.copy_rows(pending_.reserve(1, d_), row, hidden.row(T - 1), row, row, 1);
    n_committed_ += static_cast<int>(T);
    return;
  }
  // A verify batch: which of its rows stay is known after verification (accepted()).
  be.copy_rows(h_.reserve(T, d_), row, hidden.data, row, row, T);
  h_tokens_.assign(tokens.begin(), tokens.end());
}

void MtpDrafter::flush() {
  if (queue_tokens_.empty()) return;
  core::ForwardOptions o;
  o.logits_all = false;
  target_.forward_mtp(queue_tokens_, queue_h_.view(static_cast<int64_t>(queue_tokens_.size()), d_).data, cache_, o);
  queue_tokens_.clear();
}

void MtpDrafter::accepted(int n_accepted, int32_t) {
  flush();  // a prefill no proposal followed
  const int T = static_cast<int>(h_tokens_.size());
  if (T == 0) return;
  const int root = n_committed_;  // the verify batch's first token sits at this position
  if (cache_.size() < root)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: its cache holds {} positions, the target {}", cache_.size(),
                root);
  const int n = std::clamp(n_accepted, 0, T - 1);
  // Rows past the root were read from the block's own hidden rows: dropped. The root's (from
  // x_root and h_{root-1}, when a proposal fed it) stays.
  const int keep = std::min(cache_.size(), root + 1);
  cache_.truncate(keep);
  // Positions keep .. root + n, each its token with h of the position before: the pending row for
  // the root, else the verify batch's row of the token before.
  core::Backend& be = target_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int count = root + n + 1 - keep;
  float* q = queue_h_.reserve(count, d_);
  const core::Rows h = h_.view(T, d_);
  for (int p = keep, i = 0; p <= root + n; ++p, ++i) {
    const float* src = p == root ? pending_.view(1, d_).data : h.row(p - root - 1);
    be.copy_rows(q + static_cast<int64_t>(i) * d_, row, src, row, row, 1);
    queue_tokens_.push_back(h_tokens_[static_cast<size_t>(p - root)]);
  }
  be.copy_rows(pending_.reserve(1, d_), row, h.row(n), row, row, 1);
  n_committed_ = root + n + 1;
  h_tokens_.clear();
  flush();
}

void MtpDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  out.without_replacement = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: propose needs a sampler and an rng");
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "mtp drafter: empty context");
  flush();
  const int c = static_cast<int>(context.size());
  if (n_committed_ != c - 1 || cache_.size() != c - 1)
    throw_error(ErrorKind::InvalidArgument,
                "mtp drafter: it has read {} positions of the target's hidden rows for a context of {} tokens: the "
                "decoding loop must hand them over (Drafter::target_hidden)", n_committed_, c);
  const int g = std::min(params.draft_max, cache_.capacity() - cache_.size());
  if (g <= 0) return;
  core::Backend& be = target_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int64_t n_vocab = target_.config().n_vocab;
  // The penalties' history: the ids a reduced head has logits for.
  history_.clear();
  for (int32_t id : context)
    if (head_rows_ == 0 || id < head_rows_) history_.push_back(id);
  float* q_rows = q_.reserve(g, n_vocab);
  float* chain = chain_h_.reserve(1, d_);
  const float* h = pending_.view(1, d_).data;
  int32_t token = context.back();
  core::ForwardOptions o;
  o.logits_all = false;
  o.hidden = true;
  o.head_rows = head_rows_;
  for (int i = 0; i < g; ++i) {
    const core::ForwardResult r = target_.forward_mtp(std::span<const int32_t>(&token, 1), h, cache_, o);
    float* q = q_rows + static_cast<int64_t>(i) * n_vocab;
    // The processed distribution straight into q over the whole vocabulary, else into a row of the
    // draft vocabulary that draw() moves into q.
    const core::Rows dist = params.sampler->distributions(r.logits, history_, {},
                                                          head_rows_ == 0 ? q : dist_.reserve(1, head_rows_));
    const core::Draw d = params.sampler->draw(dist, 0, q, n_vocab, *params.rng, params.p_min, r.logits.data);
    if (d.token < 0) break;  // no mass, or not confident enough
    out.tokens.push_back(d.token);
    history_.push_back(d.token);
    // The next step reads the block's own output row (the model's workspace: copied first).
    be.copy_rows(chain, row, r.hidden.data, row, row, 1);
    h = chain;
    token = d.token;
  }
  out.q = core::Rows{q_rows, out.size(), n_vocab, &be};
}

}  // namespace specmoe::draft
