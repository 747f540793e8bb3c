// Plain autoregressive decoding: see autoregressive.h.
#include "verify/autoregressive.h"

#include <algorithm>

#include "base/error.h"
#include "core/sampler.h"
#include "verify/step_timer.h"

namespace specmoe::verify {

GenerationResult generate_autoregressive(core::Model& model, std::span<const int32_t> prompt,
                                         const core::SamplingParams& sampling, const DecodeOptions& options,
                                         uint64_t stream, core::KVCache* kv) {
  options.validate();
  const core::Sampler sampler(sampling);
  if (prompt.empty()) throw_error(ErrorKind::InvalidArgument, "generate: empty prompt (add BOS)");
  // The last generated token is never fed: prompt + max_tokens - 1 tokens are stored.
  const int needed = static_cast<int>(prompt.size()) + std::max(options.max_tokens - 1, 0);
  core::KVCache local;
  if (kv == nullptr) {
    local = model.new_cache(options.n_ctx > 0 ? options.n_ctx : needed);
    kv = &local;
  }
  if (kv->capacity() < needed)
    throw_error(ErrorKind::Limit, "generate: the KV cache holds {} tokens, the prompt ({}) + max_tokens ({}) need {}",
                kv->capacity(), prompt.size(), options.max_tokens, needed);
  kv->clear();

  core::Rng rng(sampling.seed, stream);
  GenerationResult out;
  Metrics& m = out.metrics;
  m.n_prompt = static_cast<int64_t>(prompt.size());
  if (options.max_tokens == 0) return out;
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  core::RowBuffer p(model.backend());
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  double step_forward_s = 0.0;
  const StepTimer clock;
  core::ForwardResult f;
  {
    StepTimer t(&m.time.verify_forward_s, &model.backend());
    f = model.forward(prompt, *kv, last_only);
  }
  m.moe.record_load(f.stats, model);
  m.prefill_s = clock.seconds();
  while (true) {
    int32_t next;
    {
      StepTimer t(&m.time.sampling_s);
      next = sampler.sample(sampler.distributions(f.logits, history, {}, p), 0, rng);
    }
    history.push_back(next);
    out.tokens.push_back(next);
    if (out.tokens.size() == 1) m.ttft_s = clock.seconds();
    if (options.stop_at_eog && model.tokenizer().is_eog(next)) {
      out.stopped_at_eog = true;
      break;
    }
    if (static_cast<int>(out.tokens.size()) >= options.max_tokens) break;
    {
      StepTimer t(&m.time.verify_forward_s, &model.backend(), &step_forward_s);
      f = model.forward(std::span<const int32_t>(&history.back(), 1), *kv, last_only);
    }
    m.record_step(0, 0);
    m.moe.record_forward(f.stats, model, 1, 1);  // MoE targets: the baseline reads k experts per layer
  }
  m.finish(clock.seconds(), static_cast<int64_t>(out.tokens.size()), /*first_from_prefill=*/true);
  if (m.n_steps > 0) m.target_step_s = step_forward_s / static_cast<double>(m.n_steps);
  m.target_weight_bytes = static_cast<double>(model.weight_bytes_per_token());
  return out;
}

}  // namespace specmoe::verify
