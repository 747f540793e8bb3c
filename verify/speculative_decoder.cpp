// The speculative decoding loop: see speculative_decoder.h.
#include "verify/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_verifier.h"

namespace specmoe::verify {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

SpeculativeDecoder::SpeculativeDecoder(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                                       const core::SamplingParams& sampling, const DecodeOptions& options)
    : target_(target), drafter_(drafter), verifier_(verifier), sampler_(sampling), options_(options) {
  options_.validate();
  sampling.validate();
  argmax_only_ = dynamic_cast<const GreedyVerifier*>(&verifier) != nullptr && sampling.greedy() &&
                 sampling.repeat_penalty == 1.0f && sampling.no_repeat_ngram == 0;
  if (!argmax_only_ && dynamic_cast<const SpeculativeVerifier*>(&verifier) != nullptr &&
      core::DeviceSampler::supported(target, sampling))
    device_ = std::make_unique<core::DeviceSampler>(target);
}

void SpeculativeDecoder::ensure_capacity(int needed) {
  const int want = options_.n_ctx > 0 ? options_.n_ctx : needed;
  if (want < needed)
    throw_error(ErrorKind::Limit, "speculative decoding: n_ctx {} is too small, the request needs {} tokens",
                options_.n_ctx, needed);
  if (kv_.capacity() < needed || (options_.n_ctx > 0 && kv_.capacity() != want)) kv_ = target_.new_cache(want);
}

GenerationResult SpeculativeDecoder::generate(std::span<const int32_t> prompt, uint64_t stream) {
  if (prompt.empty()) throw_error(ErrorKind::InvalidArgument, "generate: empty prompt (add BOS)");
  const int n_vocab = target_.config().n_vocab;
  const int g_cfg = options_.draft_max;
  // Stored at most: prompt + emitted tokens but the last + g drafted + 1 for the cost probe.
  ensure_capacity(static_cast<int>(prompt.size()) + options_.max_tokens + g_cfg + 1);
  kv_.clear();

  core::Rng rng(sampler_.params().seed, stream);
  core::Rng draft_rng(sampler_.params().seed, draft_stream_id(stream));
  const core::Tokenizer& tok = target_.tokenizer();
  GenerationResult out;
  Metrics& m = out.metrics;
  m.n_prompt = static_cast<int64_t>(prompt.size());
  m.resize_positions(g_cfg);
  if (options_.max_tokens == 0) return out;

  const auto t_start = Clock::now();
  double propose_s = 0.0;
  history_.assign(prompt.begin(), prompt.end());
  std::vector<float> probs;  // plain-step distribution (undrafted steps)

  auto emit = [&](int32_t t) {
    history_.push_back(t);
    out.tokens.push_back(t);
    if (options_.stop_at_eog && tok.is_eog(t)) out.stopped_at_eog = true;
  };
  auto done = [&] {
    return out.stopped_at_eog || static_cast<int>(out.tokens.size()) >= options_.max_tokens;
  };

  auto t = Clock::now();
  drafter_.begin(prompt);
  m.time.draft_s += seconds_since(t);

  // Prefill all but the last prompt token: the first step feeds it with the first draft, so the
  // first generated token is speculated like every other.
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  if (prompt.size() > 1) {
    t = Clock::now();
    if (device_) {  // the prefill's logits are not used: they stay on the device
      target_.forward_device(prompt.first(prompt.size() - 1), {}, kv_, nullptr, last_only);
      device_->wait();
    } else {
      target_.forward(prompt.first(prompt.size() - 1), {}, kv_, logits_, last_only);
    }
    m.time.verify_forward_s += seconds_since(t);
  }
  m.prefill_s = seconds_since(t_start);

  while (!done()) {
    // Invariant: kv_ holds history_ but its last token, which this step feeds.
    const int c = static_cast<int>(history_.size());
    const int remaining = options_.max_tokens - static_cast<int>(out.tokens.size());
    // A step emits up to g+1 tokens: never draft past max_tokens or the cache.
    const int g_max = std::min({g_cfg, remaining - 1, kv_.capacity() - c});

    draft_.clear();
    if (g_max > 0) {
      draft::DraftParams dp;
      dp.max_tokens = g_max;
      dp.p_min = options_.draft_p_min;
      dp.sampler = &sampler_;
      dp.rng = &draft_rng;
      if (device_) dp.device = target_.device();
      t = Clock::now();
      drafter_.propose(history_, dp, draft_);
      const double dt = seconds_since(t);
      m.time.draft_s += dt;
      propose_s += dt;
      if (draft_.size() > g_max) draft_.tokens.resize(g_max);  // a drafter over-proposing is cut
    }
    if (draft_.size() < std::max(options_.draft_min, 1)) draft_.clear();
    const int g = draft_.size();

    // One batched target forward over (last token, x_1..x_g).
    batch_.assign(1, history_.back());
    batch_.insert(batch_.end(), draft_.tokens.begin(), draft_.tokens.end());
    positions_.resize(g + 1);
    for (int i = 0; i <= g; ++i) positions_[i] = c - 1 + i;
    core::ForwardOptions fwd;
    fwd.logits_all = g > 0;
    t = Clock::now();
    const float* d_logits = nullptr;
    if (device_) {
      device_->stage_draft(draft_.tokens);  // before the forward is queued: the upload does not wait for it
      d_logits = target_.forward_device(batch_, positions_, kv_, nullptr, fwd);
      device_->wait();  // so that the forward's time is counted as the forward's
    } else if (argmax_only_) {
      target_.forward_argmax(batch_, positions_, kv_, argmax_, fwd);
    } else {
      target_.forward(batch_, positions_, kv_, logits_, fwd);
    }
    m.time.verify_forward_s += seconds_since(t);

    t = Clock::now();
    VerifyResult r;
    if (device_) {
      // p for the g + 1 positions, then the verdict: the only copy back. A plain step (g = 0)
      // samples exactly as the device-resident autoregressive loop does.
      float* p = device_->buffer(0, static_cast<size_t>(g + 1) * n_vocab);
      device_->distributions(d_logits, g + 1, n_vocab, sampler_.params(), p);
      if (g == 0) {
        r.next_token = device_->sample(p, n_vocab, rng);
      } else {
        const float* q = nullptr;
        if (!draft_.one_hot) {
          q = draft_.q_device;
          if (q == nullptr) {  // a drafter that kept q on the host (another device, or the CPU)
            float* up = device_->buffer(1, static_cast<size_t>(g) * n_vocab);
            device_->upload_rows(std::span<const std::vector<float>>(draft_.q.data(), g), n_vocab, up);
            q = up;
          }
        }
        const core::DeviceSampler::Verdict v = device_->verify(p, q, n_vocab, rng);
        r.n_accepted = v.n_accepted;
        r.next_token = v.next_token;
      }
    } else if (argmax_only_) {
      // argmax_ has g + 1 ids (one when g = 0: the plain greedy step).
      r = verify_greedy_argmax(draft_.tokens, argmax_);
    } else if (g == 0) {
      // Plain step: exactly the baseline's sampling.
      r.next_token = sampler_.sample_logits(logits_, history_, rng, probs);
    } else {
      if (static_cast<int>(p_.size()) < g + 1) p_.resize(g + 1);
      // p_[i] conditions on history + x_1..x_i (the penalties see the drafted prefix).
      for (int i = 0; i <= g; ++i) {
        const std::span<const float> row(logits_.data() + static_cast<size_t>(i) * n_vocab, n_vocab);
        sampler_.distribution(row, history_, p_[i]);
        if (i < g) history_.push_back(draft_.tokens[i]);
      }
      history_.resize(c);
      r = verifier_.verify(draft_, std::span<const std::vector<float>>(p_.data(), g + 1), rng);
    }
    m.time.sampling_s += seconds_since(t);
    m.record_step(g, r.n_accepted);
    // MoE targets: experts this forward read; positions 0..n_accepted stay in the cache.
    m.moe.record_forward(target_, g + 1, r.n_accepted + 1);

    kv_.truncate(c + r.n_accepted);  // keeps history_ + x_1..x_n
    t = Clock::now();
    drafter_.accepted(r.n_accepted, r.next_token);
    const double dt = seconds_since(t);
    m.time.draft_s += dt;
    propose_s += dt;

    for (int i = 0; i < r.n_accepted && !out.stopped_at_eog; ++i) emit(draft_.tokens[i]);
    if (!out.stopped_at_eog) emit(r.next_token);
    if (m.ttft_s == 0.0) m.ttft_s = seconds_since(t_start);
  }
  m.total_s = seconds_since(t_start);
  m.n_generated = static_cast<int64_t>(out.tokens.size());
  m.n_decoded = m.n_generated;  // every token came from a decode step
  m.time.other_s = std::max(0.0, m.total_s - m.time.draft_s - m.time.verify_forward_s - m.time.sampling_s);
  if (m.n_drafted > 0) m.draft_token_s = propose_s / static_cast<double>(m.n_drafted);

  // cost_ratio's denominator: single-token target forwards in this run, on this cache (median).
  const int probes = options_.cost_probe_forwards;
  if (probes > 0 && kv_.size() < kv_.capacity()) {
    const int n = kv_.size();
    const int32_t last = history_.back();
    std::vector<double> times;
    for (int i = 0; i < probes; ++i) {
      t = Clock::now();
      if (device_) {  // the step cost of this run's own forward kind
        target_.forward_device(std::span<const int32_t>(&last, 1), {}, kv_, nullptr, last_only);
        device_->wait();
      } else if (argmax_only_)
        target_.forward_argmax(std::span<const int32_t>(&last, 1), {}, kv_, argmax_, last_only);
      else
        target_.forward(std::span<const int32_t>(&last, 1), {}, kv_, logits_, last_only);
      times.push_back(seconds_since(t));
      kv_.truncate(n);
    }
    std::sort(times.begin(), times.end());
    m.target_step_s = times[times.size() / 2];
  }
  return out;
}

}  // namespace specmoe::verify
