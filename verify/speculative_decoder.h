// The speculative decoding loop (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2):
// the drafter proposes up to g tokens, the target scores the last emitted token plus the g draft
// tokens in ONE batched forward (g+1 positions), the verifier accepts a prefix and emits one
// more token, and the target's KV cache is truncated to what was accepted.
#pragma once
#include <memory>
#include <span>

#include "core/device_sampler.h"
#include "core/model.h"
#include "core/sampling.h"
#include "draft/drafter.h"
#include "verify/generation.h"
#include "verify/verifier.h"

namespace specmoe::verify {

class SpeculativeDecoder {
 public:
  // target, drafter and verifier are not owned and must outlive the decoder.
  SpeculativeDecoder(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                     const core::SamplingParams& sampling, const DecodeOptions& options);

  // Generates up to options.max_tokens tokens after `prompt` (non-empty). The target prefills all
  // but the last prompt token; every step, the first included, feeds the last token plus the
  // draft, so the first generated token is speculated too. Random numbers: the target's from
  // Rng(sampling.seed, stream) (verification and plain steps), the
  // drafter's from Rng(sampling.seed, draft_stream_id(stream)); same (seed, stream) -> same tokens.
  // Steps that draft nothing (or fewer than draft_min tokens) sample exactly as
  // generate_autoregressive does, so a drafter that never proposes reproduces the baseline.
  GenerationResult generate(std::span<const int32_t> prompt, uint64_t stream = 0);

  // After generate(): holds the prompt and every emitted token but the last (unless generation
  // stopped at an accepted EOG draft token, when it may hold more).
  const core::KVCache& target_cache() const { return kv_; }

  // True when the loop runs device-resident: a target on a GPU, the speculative verifier and no
  // penalties. The target's logits and distributions, the draft's q (a draft model on the same
  // device keeps it there) and the verification stay in device memory; per step only the drafted
  // ids go up and the verdict (two ids) comes back. Random numbers are Philox blocks of the same
  // streams, drawn on the device (core::DeviceSampler), so tokens differ from the host loop's
  // but the same seed and stream still give the same tokens.
  bool device_resident() const { return device_ != nullptr; }

 private:
  void ensure_capacity(int needed);

  core::Model& target_;
  draft::Drafter& drafter_;
  const Verifier& verifier_;
  core::SamplerChain sampler_;
  DecodeOptions options_;
  // Greedy verifier, temperature 0 and no penalties: the target returns only argmax ids
  // (Model::forward_argmax; on a GPU T ids come back instead of T x n_vocab logits). The tokens
  // are the same as through the processed distributions, which are one-hot on those ids.
  bool argmax_only_ = false;
  std::unique_ptr<core::DeviceSampler> device_;  // device-resident loop (device_resident())
  core::KVCache kv_;
  // Scratch reused across steps (vocab-sized rows are allocated once).
  draft::Draft draft_;
  std::vector<std::vector<float>> p_;  // (g+1, n_vocab) processed target distributions
  std::vector<float> logits_;          // (g+1, n_vocab)
  std::vector<int32_t> batch_, positions_, history_, argmax_;
};

}  // namespace specmoe::verify
