// Sampler: the sampling steps of a decoding loop (the target's processed distributions p, a
// draft's q, the draws), run where the logits live (Backend::distributions / sample / draw), with
// the random numbers drawn on the host from the loop's core::Rng in one layout for every
// backend: the same seed gives the same uniforms on the CPU and on a GPU.
#pragma once
#include <cstdint>
#include <span>

#include "core/backend.h"
#include "core/rng.h"
#include "core/sampling.h"

namespace specmoe::core {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // throws Error(InvalidArgument) naming the field
  const SamplingParams& params() const { return params_; }

  // The processed distributions of logits' rows into `out` (logits.rows x logits.cols floats in
  // the same backend's memory): row r's penalties see history followed by extra[0, r) (a
  // verification conditions each position on the drafted prefix). Returns the view of out.
  Rows distributions(const Rows& logits, std::span<const int32_t> history, std::span<const int32_t> extra,
                     float* out) const;
  // The same into a buffer of the logits' backend (grown as needed).
  Rows distributions(const Rows& logits, std::span<const int32_t> history, std::span<const int32_t> extra,
                     RowBuffer& out) const;

  // A token from row r of the processed distributions p: inverse CDF over one uniform from rng,
  // or the argmax without touching rng when greedy.
  int32_t sample(const Rows& p, int64_t r, Rng& rng) const;

  // A drafter's draw (Backend::draw) from row r of its processed distributions into q_out, a row of
  // n_out floats in the same memory (the target's vocabulary). Returns token -1, and leaves rng as
  // it was, when the row has no mass in that vocabulary or (p_min > 0) the confidence is below
  // p_min; confidence_logits: the draft logits the row came from (greedy confidence), required
  // when p_min > 0. Otherwise rng advances by the draw's one uniform (none when greedy).
  Draw draw(const Rows& probs, int64_t r, float* q_out, int64_t n_out, Rng& rng, float p_min,
            const float* confidence_logits) const;

 private:
  SamplingParams params_;
};

}  // namespace specmoe::core
