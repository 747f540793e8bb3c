// Drafting with the target's multi-token-prediction block: see mtp_drafter.h.
#include "draft/mtp_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

MtpDrafter::MtpDrafter(core::Model& target, int n_ctx) : target_(target), block_(&target) { init(n_ctx); }

MtpDrafter::MtpDrafter(core::Model& target, std::shared_ptr<core::Model> block, int n_ctx)
    : target_(target), owned_block_(std::move(block)), block_(owned_block_.get()) {
  if (block_ == nullptr) throw_error(ErrorKind::InvalidArgument, "mtp drafter: no block model given");
  const core::ModelConfig &t = target.config(), &b = block_->config();
  if (t.n_embd != b.n_embd || t.n_vocab != b.n_vocab)
    throw_error(ErrorKind::InvalidArgument,
                "mtp drafter: the block of {} (width {}, {} ids) does not fit the target {} (width {}, {} ids)",
                block_->file().path(), b.n_embd, b.n_vocab, target.file().path(), t.n_embd, t.n_vocab);
  if (!(block_->device() == target.device()))
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: the block of {} runs on {}, the target {} on {}: load both on one device",
                block_->file().path(), block_->device().name(), target.file().path(), target.device().name());
  init(n_ctx);
}

void MtpDrafter::init(int n_ctx) {
  if (!block_->has_mtp())
    throw_error(ErrorKind::Unsupported,
                "mtp drafter: {} has no multi-token-prediction block specmoe runs (nextn_predict_layers of a deepseek2, "
                "glm4moe, qwen35 or qwen35moe file converted with its NextN/MTP tensors)",
                block_->file().path());
  d_ = block_->config().n_embd;
  cache_ = block_->new_mtp_cache(n_ctx);
  core::Backend& be = block_->backend();
  h_ = pending_ = queue_h_ = chain_h_ = q_ = dist_ = node_h_ = level_h_ = core::RowBuffer(be);
  grower_ = TreeGrower(be);
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
  block_->backend().upload(pending_.reserve(1, d_), zeros.data(), zeros.size() * sizeof(float));
}

void MtpDrafter::target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0 || hidden.rows != T || hidden.cols != d_)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: {} hidden rows of {} for {} tokens (expected rows of {})",
                hidden.rows, hidden.cols, T, d_);
  core::Backend& be = block_->backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  if (block_ != &target_) target_.backend().synchronize();  // the rows, read by the block's backend
  if (awaiting_prefill_) {
    // The prompt's prefill: every token it fed is committed; position p reads h_{p-1}.
    awaiting_prefill_ = false;
    float* q = queue_h_.reserve(T + 1, d_);  // + the next proposal's root (root_forward)
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
  o.head_rows = 1;  // nobody reads these logits: the head's first row only
  block_->forward_mtp(queue_tokens_, queue_h_.view(static_cast<int64_t>(queue_tokens_.size()), d_).data, cache_, o);
  queue_tokens_.clear();
}

core::ForwardResult MtpDrafter::root_forward(int32_t token) {
  // The queued committed positions and the root in one forward: the root's row after them.
  core::Backend& be = block_->backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int64_t n = static_cast<int64_t>(queue_tokens_.size());
  float* q = queue_h_.reserve(n + 1, d_);  // commit() reserved the root's row: no reallocation
  be.copy_rows(q + n * d_, row, pending_.view(1, d_).data, row, row, 1);
  queue_tokens_.push_back(token);
  core::ForwardOptions o;
  o.logits_all = false;
  o.hidden = true;
  o.head_rows = head_rows_;
  core::ForwardResult r = block_->forward_mtp(queue_tokens_, q, cache_, o);
  r.hidden = r.hidden.slice(n, 1);
  queue_tokens_.clear();
  return r;
}

void MtpDrafter::accepted(int n_accepted, int32_t) {
  commit_rows_.clear();
  for (int i = 0; i <= std::clamp(n_accepted, 0, static_cast<int>(h_tokens_.size()) - 1); ++i) commit_rows_.push_back(i);
  commit(commit_rows_);
}

void MtpDrafter::accepted_path(std::span<const int32_t> path, int32_t) {
  // The verify batch holds the root, then node v at row 1 + v.
  commit_rows_.assign(1, 0);
  for (int32_t v : path) {
    if (v + 1 >= static_cast<int32_t>(h_tokens_.size())) break;
    commit_rows_.push_back(v + 1);
  }
  commit(commit_rows_);
}

void MtpDrafter::commit(std::span<const int32_t> rows) {
  flush();  // a prefill no proposal followed
  const int T = static_cast<int>(h_tokens_.size());
  if (T == 0) return;
  const int root = n_committed_;  // the verify batch's first token sits at this position
  if (cache_.size() < root)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: its cache holds {} positions, the target {}", cache_.size(),
                root);
  const int n = static_cast<int>(rows.size()) - 1;  // accepted tokens
  // Rows past the root were read from the block's own hidden rows: dropped. The root's (from
  // x_root and h_{root-1}, when a proposal fed it) stays.
  const int keep = std::min(cache_.size(), root + 1);
  cache_.truncate(keep);
  // Positions keep .. root + n, each its token with h of the position before: the pending row for
  // the root, else the verify batch's row of the token before.
  core::Backend& be = block_->backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int count = root + n + 1 - keep;
  float* q = queue_h_.reserve(count + 1, d_);  // + the next proposal's root (root_forward)
  const core::Rows h = h_.view(T, d_);
  for (int p = keep, i = 0; p <= root + n; ++p, ++i) {
    const int k = p - root;  // the committed token's index along the accepted path
    const float* src = k == 0 ? pending_.view(1, d_).data : h.row(rows[static_cast<size_t>(k) - 1]);
    be.copy_rows(q + static_cast<int64_t>(i) * d_, row, src, row, row, 1);
    queue_tokens_.push_back(h_tokens_[static_cast<size_t>(rows[static_cast<size_t>(k)])]);
  }
  be.copy_rows(pending_.reserve(1, d_), row, h.row(rows[static_cast<size_t>(n)]), row, row, 1);
  n_committed_ = root + n + 1;
  h_tokens_.clear();
  // The next proposal feeds these with its root in one forward (root_forward).
}

void MtpDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  out.without_replacement = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: propose needs a sampler and an rng");
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "mtp drafter: empty context");
  const int c = static_cast<int>(context.size());
  if (n_committed_ != c - 1 || cache_.size() + static_cast<int>(queue_tokens_.size()) != c - 1)
    throw_error(ErrorKind::InvalidArgument,
                "mtp drafter: it has read {} positions of the target's hidden rows for a context of {} tokens: the "
                "decoding loop must hand them over (Drafter::target_hidden)", n_committed_, c);
  if (params.wants_tree()) {
    propose_tree(context, params, out);
    return;
  }
  const int g = std::min(params.draft_max, cache_.capacity() - (c - 1));
  if (g <= 0) return;
  core::Backend& be = block_->backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int64_t n_vocab = target_.config().n_vocab;
  draft_history(context, head_rows_, history_);
  float* q_rows = q_.reserve(g, n_vocab);
  float* chain = chain_h_.reserve(1, d_);
  const float* h = pending_.view(1, d_).data;
  int32_t token = context.back();
  core::ForwardOptions o;
  o.logits_all = false;
  o.hidden = true;
  o.head_rows = head_rows_;
  for (int i = 0; i < g; ++i) {
    // The first: the last context token with the target's row of the token before it, after the
    // committed positions the block has not read yet, in one forward.
    const core::ForwardResult r =
        i == 0 ? root_forward(token) : block_->forward_mtp(std::span<const int32_t>(&token, 1), h, cache_, o);
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

void MtpDrafter::propose_tree(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  const TreeSpec& spec = *params.tree;
  const int room = cache_.capacity() - static_cast<int>(context.size());  // rows the levels may add after the root's
  if (room < 0) return;
  core::Backend& be = block_->backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  // The root: the last token with the target's row of the token before it (position c - 1).
  const core::ForwardResult root = root_forward(context.back());
  // Output rows: the root's first, then each fed node's (the inputs of their children).
  const int fed_max = std::min(room, std::max(spec.max_nodes(), 512));
  float* node_h = node_h_.reserve(fed_max + 1, d_);
  be.copy_rows(node_h, row, root.hidden.data, row, row, 1);
  int fed = 0;
  const TreeGrower::LevelForward level = [&](const core::Batch& batch) -> core::Rows {
    const int E = static_cast<int>(batch.tokens.size());
    if (fed + E > fed_max) return {};  // no room in the cache
    // Each node reads its parent's output row (the root's for the root's children).
    float* in = level_h_.reserve(E, d_);
    for (int e = 0; e < E; ++e)
      be.copy_rows(in + static_cast<int64_t>(e) * d_, row, node_h + static_cast<int64_t>(batch.parents[e] + 1) * d_, row,
                   row, 1);
    core::ForwardOptions lo;
    lo.hidden = true;
    lo.head_rows = head_rows_;
    const core::ForwardResult r = block_->forward_mtp(batch, in, cache_, lo);
    be.copy_rows(node_h + static_cast<int64_t>(fed + 1) * d_, row, r.hidden.data, row, row, E);
    fed += E;
    return r.logits;  // row e: the batch's node e's children
  };
  grower_.grow(root.logits, context, head_rows_, target_.config().n_vocab, params, level, out);
}

}  // namespace specmoe::draft
