// What a generation is asked to do and what it returns; shared by plain autoregressive decoding
// (autoregressive.h) and speculative decoding (speculative_decoder.h) so the two compare directly.
#pragma once
#include <cstdint>
#include <vector>

#include "draft/token_tree.h"
#include "verify/metrics.h"

namespace specmoe::verify {

struct DecodeOptions {
  int max_tokens = 64;       // generate at most this many tokens (never more)
  bool stop_at_eog = true;   // stop after emitting an end-of-generation token (EOS, EOT, ...)
  int draft_max = 4;         // g: draft tokens per step (speculative only)
  int draft_min = 0;         // a draft shorter than this is discarded: a plain target step instead
  float draft_p_min = 0.0f;  // adaptive length: the drafter stops when its confidence < this
  int n_ctx = 0;             // target KV cache capacity (<= 0: just enough for the request)
  int cost_probe_forwards = 3;  // single-token target forwards timed after a speculative run to
                                // measure cost_ratio (0 = skip); their time is not in total_s
  // Token trees (speculative only): the shape tree drafters grow each step (empty: chains of
  // draft_max). A tree is at most tree.max_depth(draft_max) deep and tree.max_nodes() large.
  draft::TreeSpec tree;
  bool record_steps = false;  // speculative only: GenerationResult::steps (what each step drafted and kept)
  void validate() const;     // throws Error(InvalidArgument) naming the field
};

// One speculative step as the verifier saw it (DecodeOptions::record_steps).
struct StepRecord {
  std::vector<int32_t> drafted;   // the proposal's tokens (a tree's nodes in order)
  std::vector<int32_t> parents;   // a tree's parent of each node (-1: the root); empty for a chain
  std::vector<int32_t> accepted;  // the accepted nodes from the root down (a chain's 0..n-1)
  int32_t next_token = -1;        // the token the target emitted after them
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated tokens (prompt excluded; a final EOG token included)
  bool stopped_at_eog = false;
  Metrics metrics;
  std::vector<StepRecord> steps;  // with DecodeOptions::record_steps
};

// The stream the drafter samples from, independent of the target's stream `stream` for the same
// seed (so drafting never shifts the target's random numbers).
uint64_t draft_stream_id(uint64_t stream);

}  // namespace specmoe::verify
