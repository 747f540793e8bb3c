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

  while (!out.stopped_at_eog && static_cast<int>(out.tokens.size()) < options_.max_tokens) {
    // Invariant: kv_ holds history_ but its last token, which this step feeds.
    const int c = static_cast<int>(history_.size());
    // A step emits up to g+1 tokens: never draft past max_tokens or the cache.
    const int g_max = std::min({options_.draft_max, options_.max_tokens - static_cast<int>(out.tokens.size()) - 1,
                                kv_.capacity() - c});
    draft_.clear();
    if (g_max > 0) {
      StepTimer t(&m.time.draft_s, nullptr, &propose_s);
      drafter_.propose(history_, {g_max, options_.draft_p_min, &sampler_, &draft_rng}, draft_);
      if (draft_.size() > g_max) draft_.tokens.resize(g_max);  // a drafter over-proposing is cut
    }
    if (draft_.size() < std::max(options_.draft_min, 1)) draft_.clear();
    const int g = draft_.size();

    batch_.assign(1, history_.back());  // one batched target forward over (last token, x_1..x_g)
    batch_.insert(batch_.end(), draft_.tokens.begin(), draft_.tokens.end());
    core::ForwardOptions fwd;
    fwd.logits_all = g > 0;
    core::ForwardResult f;
    double forward_s = 0.0;  // this step's verify forward, for verify_cost_ratio r(g+1)
    {
      StepTimer t(&m.time.verify_forward_s, &target_.backend(), &forward_s);
      f = target_.forward(batch_, kv_, fwd);
    }
    VerifyResult r;
    {
      StepTimer t(&m.time.sampling_s);
      // p rows i condition on history + x_1..x_i (the penalties see the drafted prefix). A plain
      // step (nothing drafted) samples exactly as the autoregressive baseline.
      const core::Rows p = sampler_.distributions(f.logits, history_, draft_.tokens, p_);
      r = g == 0 ? VerifyResult{0, sampler_.sample(p, 0, rng)} : verifier_.verify(draft_, p, rng);
    }
    m.record_step(g, r.n_accepted, forward_s);
    m.moe.record_forward(f.stats, target_, g + 1, r.n_accepted + 1);  // positions 0..n_accepted stay cached

    kv_.truncate(c + r.n_accepted);  // keeps history_ + x_1..x_n
    {
      StepTimer t(&m.time.draft_s, nullptr, &propose_s);
      drafter_.accepted(r.n_accepted, r.next_token);
    }
    emit(r, out);
    if (m.ttft_s == 0.0) m.ttft_s = clock.seconds();
  }
  m.finish(clock.seconds(), static_cast<int64_t>(out.tokens.size()), /*first_from_prefill=*/false);
  if (m.n_drafted > 0) m.draft_token_s = propose_s / static_cast<double>(m.n_drafted);
  m.target_step_s = probe_step_seconds(options_.cost_probe_forwards);
  return out;
}

GenerationResult SpeculativeDecoder::start(std::span<const int32_t> prompt) {
  if (prompt.empty()) throw_error(ErrorKind::InvalidArgument, "generate: empty prompt (add BOS)");
  // Stored at most: prompt + emitted tokens but the last + g drafted + 1 for the cost probe.
  ensure_capacity(static_cast<int>(prompt.size()) + options_.max_tokens + options_.draft_max + 1);
  kv_.clear();
  history_.assign(prompt.begin(), prompt.end());
  GenerationResult out;
  out.metrics.n_prompt = static_cast<int64_t>(prompt.size());
  out.metrics.resize_positions(options_.draft_max);
  return out;
}

void SpeculativeDecoder::prefill(std::span<const int32_t> prompt, Metrics& m) {
  {
    StepTimer t(&m.time.draft_s);
    drafter_.begin(prompt);
  }
  if (prompt.size() < 2) return;
  // All but the last prompt token: the first step feeds it with the first draft, so the first
  // generated token is speculated like every other.
  StepTimer t(&m.time.verify_forward_s, &target_.backend());
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  m.moe.record_load(target_.forward(prompt.first(prompt.size() - 1), kv_, last_only).stats, target_);
}

void SpeculativeDecoder::emit(const VerifyResult& r, GenerationResult& out) {
  for (int i = 0; i <= r.n_accepted && !out.stopped_at_eog; ++i) {
    const int32_t tok = i < r.n_accepted ? draft_.tokens[i] : r.next_token;
    history_.push_back(tok);
    out.tokens.push_back(tok);
    if (options_.stop_at_eog && target_.tokenizer().is_eog(tok)) out.stopped_at_eog = true;
  }
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
