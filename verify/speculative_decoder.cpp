// The speculative decoding loop: see speculative_decoder.h.
#include "verify/speculative_decoder.h"

#include <algorithm>

#include "base/error.h"
#include "verify/step_timer.h"

namespace specmoe::verify {

SpeculativeDecoder::SpeculativeDecoder(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                                       const core::SamplingParams& sampling, const DecodeOptions& options)
    : target_(target), drafter_(drafter), verifier_(verifier), sampler_(sampling), options_(options),
      p_(target.backend()) {
  options_.validate();
  if (drafter_.reads_target_hidden()) hidden_layers_ = drafter_.target_hidden_layers();
}

void SpeculativeDecoder::ensure_capacity(int needed) {
  const int want = options_.n_ctx > 0 ? options_.n_ctx : needed;
  if (want < needed)
    throw_error(ErrorKind::Limit, "speculative decoding: n_ctx {} is too small, the request needs {} tokens",
                options_.n_ctx, needed);
  if (kv_.capacity() < needed || (options_.n_ctx > 0 && kv_.capacity() != want)) kv_ = target_.new_cache(want);
}

GenerationResult SpeculativeDecoder::generate(std::span<const int32_t> prompt, uint64_t stream) {
  GenerationResult out = start(prompt);
  Metrics& m = out.metrics;
  if (options_.max_tokens == 0) return out;
  core::Rng rng(sampler_.params().seed, stream), draft_rng(sampler_.params().seed, draft_stream_id(stream));
  const StepTimer clock;
  double propose_s = 0.0;  // drafter time behind draft_token_s (its begin() excluded)
  prefill(prompt, m);
  m.prefill_s = clock.seconds();

  const bool tree = !options_.tree.empty();
  const int depth_max = tree ? options_.tree.max_depth(options_.draft_max) : options_.draft_max;
  const int nodes_max = tree ? options_.tree.max_nodes() : options_.draft_max;
  // A recurrent target (qwen35) keeps the states a verify step may roll back to.
  kv_.reserve_rollback(nodes_max + 1);
  while (!out.stopped_at_eog && static_cast<int>(out.tokens.size()) < options_.max_tokens) {
    // Invariant: kv_ holds history_ but its last token, which this step feeds.
    const int c = static_cast<int>(history_.size());
    // A step emits up to depth+1 tokens and stores up to nodes+1: never draft past max_tokens
    // or the cache.
    const int room = kv_.capacity() - c;
    const int g_max = std::min({depth_max, options_.max_tokens - static_cast<int>(out.tokens.size()) - 1, room});
    const int node_max = std::min(nodes_max, room);
    draft_.clear();
    if (g_max > 0) {
      StepTimer t(&m.time.draft_s, nullptr, &propose_s);
      const draft::DraftParams params{g_max, options_.draft_p_min, &sampler_, &draft_rng,
                                      tree ? &options_.tree : nullptr, node_max, depth_max};
      drafter_.propose(history_, params, draft_);
      draft_.truncate(draft_.is_chain() ? g_max : node_max, g_max);  // a drafter over-proposing is cut
    }
    if (draft_.size() < std::max(options_.draft_min, 1)) draft_.clear();
    const int g = draft_.size();

    // One batched target forward over the root (the last token) and the draft: a chain, or a
    // tree whose attention and positions follow its parents.
    draft_.verify_batch(history_.back(), batch_, batch_parents_);
    core::Batch batch(batch_);
    batch.parents = batch_parents_;
    core::ForwardOptions fwd;
    fwd.logits_all = g > 0;
    set_hidden_request(fwd);
    core::ForwardResult f;
    {
      StepTimer t(&m.time.verify_forward_s, &target_.backend(), g > 0 ? &m.verify_draft_s : nullptr);
      f = target_.forward(batch, kv_, fwd);
    }
    if (fwd.hidden || !fwd.hidden_layers.empty()) {
      StepTimer t(&m.time.draft_s, nullptr, &propose_s);
      drafter_.target_hidden(batch_, f.hidden);
    }
    VerifyResult r;
    {
      StepTimer t(&m.time.sampling_s);
      // A plain step (nothing drafted) samples exactly as the autoregressive baseline.
      const core::Rows p = target_distributions(f.logits);
      r = g == 0 ? VerifyResult{0, sampler_.sample(p, 0, rng), {}} : verifier_.verify(draft_, p, rng);
    }
    if (draft_.is_chain()) {
      m.record_step(g, r.n_accepted);
      m.moe.record_forward(f.stats, target_, g + 1, r.n_accepted + 1);  // positions 0..n_accepted stay cached
      kv_.truncate(c + r.n_accepted);  // keeps history_ + x_1..x_n
    } else {
      const int stop = r.n_accepted > 0 ? r.accepted_node(r.n_accepted - 1) : -1;
      const bool deeper = std::any_of(draft_.parents.begin(), draft_.parents.end(), [&](int32_t v) { return v == stop; });
      m.record_tree_step(g, draft_.max_depth(), r.n_accepted, deeper);
      // The accepted path's rows move into place behind the root (forward row c - 1); the rest go.
      keep_.clear();
      for (int i = 0; i < c; ++i) keep_.push_back(i);
      for (int i = 0; i < r.n_accepted; ++i) keep_.push_back(c + r.accepted_node(i));
      std::vector<int> kept_rows(keep_.begin() + (c - 1), keep_.end());  // batch rows that stay
      for (int& v : kept_rows) v -= c - 1;
      m.moe.record_forward(f.stats, target_, g + 1, static_cast<int>(kept_rows.size()), kept_rows);
      kv_.keep(keep_);
    }
    {
      StepTimer t(&m.time.draft_s, nullptr, &propose_s);
      if (draft_.is_chain()) drafter_.accepted(r.n_accepted, r.next_token);
      else drafter_.accepted_path(r.path, r.next_token);
    }
    if (options_.record_steps) {
      StepRecord& rec = out.steps.emplace_back();
      rec.drafted = draft_.tokens;
      if (!draft_.is_chain()) rec.parents = draft_.parents;
      for (int i = 0; i < r.n_accepted; ++i) rec.accepted.push_back(r.accepted_node(i));
      rec.next_token = r.next_token;
    }
    emit(r, out);
    if (m.ttft_s == 0.0) m.ttft_s = clock.seconds();
  }
  m.finish(clock.seconds(), static_cast<int64_t>(out.tokens.size()), /*first_from_prefill=*/false);
  if (m.n_drafted > 0) m.draft_token_s = propose_s / static_cast<double>(m.n_drafted);
  m.target_step_s = probe_step_seconds(options_.cost_probe_forwards);
  m.target_weight_bytes = static_cast<double>(target_.weight_bytes_per_token());
  return out;
}

GenerationResult SpeculativeDecoder::start(std::span<const int32_t> prompt) {
  if (prompt.empty()) throw_error(ErrorKind::InvalidArgument, "generate: empty prompt (add BOS)");
  // Stored at most: prompt + emitted tokens but the last + g drafted (a tree's nodes) + 1 for the
  // cost probe.
  const bool tree = !options_.tree.empty();
  const int nodes = tree ? std::max(options_.tree.max_nodes(), 1) : options_.draft_max;
  ensure_capacity(static_cast<int>(prompt.size()) + options_.max_tokens + nodes + 1);
  kv_.clear();
  history_.assign(prompt.begin(), prompt.end());
  GenerationResult out;
  out.metrics.n_prompt = static_cast<int64_t>(prompt.size());
  out.metrics.resize_positions(tree ? options_.tree.max_depth(options_.draft_max) : options_.draft_max);
  return out;
}

void SpeculativeDecoder::set_hidden_request(core::ForwardOptions& o) {
  if (!drafter_.reads_target_hidden()) return;
  o.hidden = hidden_layers_.empty();
  o.hidden_layers = hidden_layers_;
}

void SpeculativeDecoder::prefill(std::span<const int32_t> prompt, Metrics& m) {
  {
    StepTimer t(&m.time.draft_s);
    drafter_.begin(prompt);
  }
  if (prompt.size() < 2) return;
  // All but the last prompt token: the first step feeds it with the first draft, so the first
  // generated token is speculated like every other.
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  set_hidden_request(last_only);
  core::ForwardResult f;
  {
    StepTimer t(&m.time.verify_forward_s, &target_.backend());
    f = target_.forward(prompt.first(prompt.size() - 1), kv_, last_only);
  }
  m.moe.record_load(f.stats, target_);
  if (last_only.hidden || !last_only.hidden_layers.empty()) {
    StepTimer t(&m.time.draft_s);
    drafter_.target_hidden(prompt.first(prompt.size() - 1), f.hidden);
  }
}

void SpeculativeDecoder::emit(const VerifyResult& r, GenerationResult& out) {
  for (int i = 0; i <= r.n_accepted && !out.stopped_at_eog; ++i) {
    const int32_t tok = i < r.n_accepted ? draft_.tokens[static_cast<size_t>(r.accepted_node(i))] : r.next_token;
    history_.push_back(tok);
    out.tokens.push_back(tok);
    if (options_.stop_at_eog && target_.tokenizer().is_eog(tok)) out.stopped_at_eog = true;
  }
}

core::Rows SpeculativeDecoder::target_distributions(const core::Rows& logits) {
  // A chain's row i conditions its penalties on history + x_1..x_i. Without penalties the rows
  // never read the history beyond its size check, so a tree's rows go through the same call.
  const core::SamplingParams& sp = sampler_.params();
  const bool penalties = sp.repeat_penalty != 1.0f || sp.no_repeat_ngram > 0;
  if (draft_.is_chain() || !penalties) return sampler_.distributions(logits, history_, draft_.tokens, p_);
  // A tree with penalties: each row sees the context and the path to its own node.
  float* out = p_.reserve(logits.rows, logits.cols);
  for (int64_t row = 0; row < logits.rows; ++row) {
    node_history_ = history_;
    if (row > 0) {
      draft_.path_to(static_cast<int>(row) - 1, path_);
      for (int32_t v : path_) node_history_.push_back(draft_.tokens[static_cast<size_t>(v)]);
    }
    sampler_.distributions(logits.slice(row, 1), node_history_, {}, out + row * logits.cols);
  }
  return p_.view(logits.rows, logits.cols);
}

double SpeculativeDecoder::probe_step_seconds(int probes) {
  if (probes <= 0 || kv_.size() >= kv_.capacity()) return 0.0;
  const int n = kv_.size();
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  std::vector<double> times;
  for (int i = 0; i < probes; ++i) {
    double s = 0.0;
    {
      StepTimer t(&s, &target_.backend());
      target_.forward(std::span<const int32_t>(&history_.back(), 1), kv_, last_only);
    }
    times.push_back(s);
    kv_.truncate(n);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace specmoe::verify
