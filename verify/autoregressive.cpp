// Plain autoregressive decoding: see autoregressive.h.
#include "verify/autoregressive.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/device_sampler.h"
#include "base/error.h"

namespace specmoe::verify {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

GenerationResult generate_autoregressive(core::Model& model, std::span<const int32_t> prompt,
                                         const core::SamplingParams& sampling, const DecodeOptions& options,
                                         uint64_t stream, core::KVCache* kv) {
  options.validate();
  sampling.validate();
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

  const core::SamplerChain sampler(sampling);
  core::Rng rng(sampling.seed, stream);
  const core::Tokenizer& tok = model.tokenizer();
  GenerationResult out;
  Metrics& m = out.metrics;
  m.n_prompt = static_cast<int64_t>(prompt.size());
  if (options.max_tokens == 0) return out;

  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<float> logits, probs;
  core::ForwardOptions fwd;
  fwd.logits_all = false;
  // Temperature 0 without penalties: the next token is the argmax of the logits, so only the ids
  // come back from the model (Model::forward_argmax: one int32 instead of n_vocab floats on a GPU).
  const bool argmax_only = sampling.greedy() && sampling.repeat_penalty == 1.0f && sampling.no_repeat_ngram == 0;
  std::vector<int32_t> ids;
  // A model on a GPU, any other sampling without penalties: the logits stay on the device, the
  // chain and the draw run there (core::DeviceSampler) and one id comes back per step. Philox
  // blocks of the same stream: the speculative loop's undrafted steps sample identically.
  std::unique_ptr<core::DeviceSampler> device;
  if (!argmax_only && core::DeviceSampler::supported(model, sampling))
    device = std::make_unique<core::DeviceSampler>(model);
  const float* d_logits = nullptr;
  auto step = [&](std::span<const int32_t> tokens) {
    if (device) {
      d_logits = model.forward_device(tokens, {}, *kv, nullptr, fwd);
      device->wait();  // the forward's time is counted as the forward's
    } else if (argmax_only) {
      model.forward_argmax(tokens, {}, *kv, ids, fwd);
    } else {
      model.forward(tokens, {}, *kv, logits, fwd);
    }
  };
  auto next_token = [&]() -> int32_t {
    if (argmax_only) return ids.at(0);
    if (!device) return sampler.sample_logits(logits, history, rng, probs);
    const int64_t n_vocab = model.config().n_vocab;
    float* p = device->buffer(0, static_cast<size_t>(n_vocab));
    device->distributions(d_logits, 1, n_vocab, sampling, p);
    return device->sample(p, n_vocab, rng);
  };
  const auto t_start = Clock::now();
  double step_forward_s = 0.0;

  auto t = Clock::now();
  step(prompt);
  m.time.verify_forward_s += seconds_since(t);
  m.prefill_s = seconds_since(t_start);
  while (true) {
    t = Clock::now();
    const int32_t next = next_token();
    m.time.sampling_s += seconds_since(t);
    history.push_back(next);
    out.tokens.push_back(next);
    if (out.tokens.size() == 1) m.ttft_s = seconds_since(t_start);
    if (options.stop_at_eog && tok.is_eog(next)) {
      out.stopped_at_eog = true;
      break;
    }
    if (static_cast<int>(out.tokens.size()) >= options.max_tokens) break;
    t = Clock::now();
    step(std::span<const int32_t>(&history.back(), 1));
    const double dt = seconds_since(t);
    m.time.verify_forward_s += dt;
    step_forward_s += dt;
    m.record_step(0, 0);
    m.moe.record_forward(model, 1, 1);  // MoE targets: the baseline reads k experts per layer
  }
  m.total_s = seconds_since(t_start);
  m.n_generated = static_cast<int64_t>(out.tokens.size());
  m.n_decoded = std::max<int64_t>(0, m.n_generated - 1);  // the first token came from the prefill
  if (m.n_steps > 0) m.target_step_s = step_forward_s / static_cast<double>(m.n_steps);
  m.time.other_s = std::max(0.0, m.total_s - m.time.verify_forward_s - m.time.sampling_s);
  return out;
}

}  // namespace specmoe::verify
