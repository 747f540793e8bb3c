// Drafting with a head that reads the target's hidden states: see feature_drafter.h.
#include "draft/feature_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

FeatureDrafter::FeatureDrafter(core::Model& target, core::Model& head, int64_t width, int offset, int64_t input_width)
    : target_(target), head_(head), d_(width), offset_(offset), input_width_(input_width) {}

void FeatureDrafter::init(core::KVCache cache) {
  cache_ = std::move(cache);
  core::Backend& be = head_.backend();
  h_ = pending_ = queue_h_ = chain_h_ = q_ = dist_ = node_h_ = level_h_ = core::RowBuffer(be);
  grower_ = TreeGrower(be);
}

void FeatureDrafter::set_vocabulary_limit(int64_t n) {
  const int64_t V = target_.config().n_vocab;
  if (n < 0 || n > V)
    throw_error(ErrorKind::InvalidArgument, "{} drafter: draft vocabulary of {} ids outside [0, {}] (the model's n_vocab)",
                name(), n, V);
  if (own_vocabulary_ && n != 0 && n != V)
    throw_error(ErrorKind::InvalidArgument, "{} drafter: {} drafts its own vocabulary of {} ids (d2t); no limit applies",
                name(), head_.file().path(), head_.config().n_draft_vocab);
  head_rows_ = n == V ? 0 : n;
}

void FeatureDrafter::begin(std::span<const int32_t> prompt) {
  cache_.clear();
  queue_tokens_.clear();
  h_tokens_.clear();
  n_committed_ = 0;
  awaiting_prefill_ = prompt.size() > 1;
  // The first position has no token before it: its feature row is zeros (llama.cpp's draft-mtp's
  // too; an EAGLE-3 head has no row for it).
  const std::vector<float> zeros(static_cast<size_t>(d_), 0.0f);
  head_.backend().upload(pending_.reserve(1, d_), zeros.data(), zeros.size() * sizeof(float));
}

void FeatureDrafter::target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0 || hidden.rows != T || hidden.cols != input_width_)
    throw_error(ErrorKind::InvalidArgument, "{} drafter: {} hidden rows of {} for {} tokens (expected rows of {})",
                name(), hidden.rows, hidden.cols, T, input_width_);
  core::Backend& be = head_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  if (&head_ != &target_) target_.backend().synchronize();  // the rows, read by the head's backend
  const float* f = encode(hidden);
  if (awaiting_prefill_) {
    // The prompt's prefill: every token it fed is committed; token j (j >= offset) reads f_{j-1}.
    awaiting_prefill_ = false;
    const int64_t n = T - offset_;  // the rows it adds
    float* q = queue_h_.reserve(n + 1, d_);  // + the next proposal's root (root_forward)
    if (offset_ == 0) {
      be.copy_rows(q, row, pending_.view(1, d_).data, row, row, 1);
      if (T > 1) be.copy_rows(q + d_, row, f, row, row, T - 1);
    } else if (n > 0) {
      be.copy_rows(q, row, f, row, row, n);
    }
    queue_tokens_.assign(tokens.begin() + offset_, tokens.end());
    be.copy_rows(pending_.reserve(1, d_), row, f + (T - 1) * d_, row, row, 1);
    n_committed_ += static_cast<int>(T);
    return;
  }
  // A verify batch: which of its rows stay is known after verification (accepted()).
  be.copy_rows(h_.reserve(T, d_), row, f, row, row, T);
  h_tokens_.assign(tokens.begin(), tokens.end());
}

void FeatureDrafter::flush() {
  if (queue_tokens_.empty()) return;
  core::ForwardOptions o;
  o.logits_all = false;
  if (!own_vocabulary_) o.head_rows = 1;  // nobody reads these logits: the head's first row only
  head_forward(queue_tokens_, queue_h_.view(static_cast<int64_t>(queue_tokens_.size()), d_).data, cache_, o);
  queue_tokens_.clear();
}

core::ForwardResult FeatureDrafter::root_forward(int32_t token) {
  // The queued committed positions and the root in one forward: the root's row after them.
  core::Backend& be = head_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int64_t n = static_cast<int64_t>(queue_tokens_.size());
  float* q = queue_h_.reserve(n + 1, d_);  // commit() reserved the root's row: no reallocation
  be.copy_rows(q + n * d_, row, pending_.view(1, d_).data, row, row, 1);
  queue_tokens_.push_back(token);
  core::ForwardOptions o;
  o.logits_all = false;
  o.hidden = true;
  o.head_rows = head_rows_;
  core::ForwardResult r = head_forward(queue_tokens_, q, cache_, o);
  r.hidden = r.hidden.slice(n, 1);
  queue_tokens_.clear();
  return r;
}

void FeatureDrafter::accepted(int n_accepted, int32_t) {
  commit_rows_.clear();
  for (int i = 0; i <= std::clamp(n_accepted, 0, static_cast<int>(h_tokens_.size()) - 1); ++i) commit_rows_.push_back(i);
  commit(commit_rows_);
}

void FeatureDrafter::accepted_path(std::span<const int32_t> path, int32_t) {
  // The verify batch holds the root, then node v at row 1 + v.
  commit_rows_.assign(1, 0);
  for (int32_t v : path) {
    if (v + 1 >= static_cast<int32_t>(h_tokens_.size())) break;
    commit_rows_.push_back(v + 1);
  }
  commit(commit_rows_);
}

void FeatureDrafter::commit(std::span<const int32_t> rows) {
  flush();  // a prefill no proposal followed
  const int T = static_cast<int>(h_tokens_.size());
  if (T == 0) return;
  const int root = n_committed_;  // the verify batch's first token is token `root`
  const int root_row = root - offset_;  // its cache row
  if (cache_.size() < root_row)
    throw_error(ErrorKind::InvalidArgument, "{} drafter: its cache holds {} rows, the target's {} tokens need {}", name(),
                cache_.size(), root, root_row);
  const int n = static_cast<int>(rows.size()) - 1;  // accepted tokens
  // Rows past the root's were read from the head's own output rows: dropped. The root's (from
  // x_root and f_{root-1}, when a proposal fed it) stays.
  const int keep = std::max(0, std::min(cache_.size(), root_row + 1));
  cache_.truncate(keep);
  // Tokens keep + offset .. root + n, each with f of the token before: the pending row for the
  // root, else the verify batch's row of the token before.
  core::Backend& be = head_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  const int first = keep + offset_;
  const int count = std::max(0, root + n + 1 - first);
  float* q = queue_h_.reserve(count + 1, d_);  // + the next proposal's root (root_forward)
  const core::Rows h = h_.view(T, d_);
  for (int p = first, i = 0; p <= root + n; ++p, ++i) {
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

void FeatureDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  out.without_replacement = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "{} drafter: propose needs a sampler and an rng", name());
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "{} drafter: empty context", name());
  const int c = static_cast<int>(context.size());
  if (n_committed_ != c - 1 || cache_.size() + static_cast<int>(queue_tokens_.size()) != std::max(0, c - 1 - offset_))
    throw_error(ErrorKind::InvalidArgument,
                "{} drafter: it has read {} positions of the target's hidden rows for a context of {} tokens: the "
                "decoding loop must hand them over (Drafter::target_hidden)", name(), n_committed_, c);
  // A head without a row for the first token has nothing to read before the target has run once.
  if (n_committed_ < offset_) return;
  if (params.wants_tree()) {
    propose_tree(context, params, out);
    return;
  }
  const int g = std::min(params.draft_max, cache_.capacity() - (c - 1 - offset_));
  if (g <= 0) return;
  core::Backend& be = head_.backend();
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
    // committed positions the head has not read yet, in one forward.
    const core::ForwardResult r =
        i == 0 ? root_forward(token) : head_forward(std::span<const int32_t>(&token, 1), h, cache_, o);
    float* q = q_rows + static_cast<int64_t>(i) * n_vocab;
    // The processed distribution straight into q over the whole vocabulary, else into a row of the
    // draft vocabulary that draw() moves into q.
    const core::Rows dist = params.sampler->distributions(r.logits, history_, {},
                                                          head_rows_ == 0 ? q : dist_.reserve(1, head_rows_));
    const core::Draw d = params.sampler->draw(dist, 0, q, n_vocab, *params.rng, params.p_min, r.logits.data);
    if (d.token < 0) break;  // no mass, or not confident enough
    out.tokens.push_back(d.token);
    history_.push_back(d.token);
    // The next step reads the head's own output row (the model's workspace: copied first).
    be.copy_rows(chain, row, r.hidden.data, row, row, 1);
    h = chain;
    token = d.token;
  }
  out.q = core::Rows{q_rows, out.size(), n_vocab, &be};
}

void FeatureDrafter::propose_tree(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  const TreeSpec& spec = *params.tree;
  // rows the levels may add after the root's
  const int room = cache_.capacity() - (static_cast<int>(context.size()) - offset_);
  if (room < 0) return;
  core::Backend& be = head_.backend();
  const size_t row = static_cast<size_t>(d_) * sizeof(float);
  // The root: the last token with the target's row of the token before it.
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
    const core::ForwardResult r = head_forward(batch, in, cache_, lo);
    be.copy_rows(node_h + static_cast<int64_t>(fed + 1) * d_, row, r.hidden.data, row, row, E);
    fed += E;
    return r.logits;  // row e: the batch's node e's children
  };
  grower_.grow(root.logits, context, head_rows_, target_.config().n_vocab, params, level, out);
}

}  // namespace specmoe::draft
