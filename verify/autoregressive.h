// Plain autoregressive decoding, the baseline every speculative run is compared with: one target
// forward per token, sampling with SamplerChain(sampling) from Rng(sampling.seed, stream).
#pragma once
#include <span>

#include "core/model.h"
#include "core/sampling.h"
#include "verify/generation.h"

namespace specmoe::verify {

// Prefills the prompt (one batched forward; the first token comes from its last logits), then
// decodes one token per forward until options.max_tokens or an EOG token. kv: the cache to use
// (cleared first; nullptr = a new one sized for the request), left holding prompt + every
// generated token but the last. Metrics: n_steps counts the decode forwards (tau = 1),
// target_step_s is their mean time. Throws Error(InvalidArgument) for an empty prompt,
// Error(Limit) when the cache is too small for prompt + max_tokens.
GenerationResult generate_autoregressive(core::Model& model, std::span<const int32_t> prompt,
                                         const core::SamplingParams& sampling, const DecodeOptions& options,
                                         uint64_t stream = 0, core::KVCache* kv = nullptr);

}  // namespace specmoe::verify
