// The speculative decoding loop (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2):
// the drafter proposes up to g tokens, the target scores the last emitted token plus the g draft
// tokens in ONE batched forward (g+1 positions), the verifier accepts a prefix and emits one
// more token, and the target's KV cache is truncated to what was accepted. With a tree shape
// (DecodeOptions::tree) the drafter proposes a token tree, the forward attends along it, the
// verifier accepts a root-to-node path (SpecInfer, Miao et al. 2024), and the path's KV rows are
// compacted into place (KVCache::keep). The same loop runs
// on every backend: the logits, p and q rows stay where the models run (core::Rows), and only
// token ids and the verdict reach the host.
#pragma once
#include <memory>
#include <span>

#include "core/model.h"
#include "core/sampler.h"
#include "draft/drafter.h"
#include "verify/generation.h"
#include "verify/verifier.h"

namespace specmoe::verify {

class SpeculativeDecoder {
 public:
  // target, drafter and verifier are not owned and must outlive the decoder. The verifier must
  // be the implementation for the target's device (verify::make_verifier with the target's
  // device): the target's distributions live there.
  SpeculativeDecoder(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                     const core::SamplingParams& sampling, const DecodeOptions& options);

  // Generates up to options.max_tokens tokens after `prompt` (non-empty). The target prefills all
  // but the last prompt token; every step, the first included, feeds the last token plus the
  // draft, so the first generated token is speculated too. Random numbers: the target's from
  // Rng(sampling.seed, stream) (verification and plain steps), the drafter's from
  // Rng(sampling.seed, draft_stream_id(stream)); same (seed, stream) -> same tokens.
  // Steps that draft nothing (or fewer than draft_min tokens) sample exactly as
  // generate_autoregressive does, so a drafter that never proposes reproduces the baseline.
  GenerationResult generate(std::span<const int32_t> prompt, uint64_t stream = 0);

  // After generate(): holds the prompt and every emitted token but the last (unless generation
  // stopped at an accepted EOG draft token, when it may hold more).
  const core::KVCache& target_cache() const { return kv_; }

 private:
  void ensure_capacity(int needed);
  // generate()'s pieces: the empty result and cleared state for `prompt`; the drafter's and the
  // target's prefill; the accepted tokens and the next one appended (stopping at EOG).
  GenerationResult start(std::span<const int32_t> prompt);
  void prefill(std::span<const int32_t> prompt, Metrics& m);
  void emit(const VerifyResult& r, GenerationResult& out);
  // The target's processed distributions of one verification forward (row 0 after the root, row
  // i + 1 after draft node i), each conditioned on its own prefix.
  core::Rows target_distributions(const core::Rows& logits);
  // One single-token target forward timed `probes` times on this run's cache (cost_ratio's
  // denominator); returns the median seconds, 0 when there is no room.
  double probe_step_seconds(int probes);

  core::Model& target_;
  draft::Drafter& drafter_;
  const Verifier& verifier_;
  core::Sampler sampler_;
  DecodeOptions options_;
  core::KVCache kv_;
  // Scratch reused across steps (vocab-sized rows are allocated once).
  draft::Draft draft_;
  core::RowBuffer p_;  // (g+1, n_vocab) processed target distributions, in the target's memory
  std::vector<int32_t> batch_, batch_parents_, history_, node_history_, path_;
  std::vector<int> hidden_layers_;  // the drafter's target_hidden_layers, read once (the forwards' span points here)
  // Asks a target forward for the rows the drafter reads (Drafter::reads_target_hidden).
  void set_hidden_request(core::ForwardOptions& o);
  std::vector<int> keep_;
};

}  // namespace specmoe::verify
