// Sampling as a chain of logits processors. The chain turns one row of logits into the processed
// probability distribution (which speculative verification needs as p and q), then draws a token
// from it with a seeded Rng. Order (the Hugging Face / vLLM order): repetition penalty,
// no-repeat-ngram ban, temperature, top-k, top-p, min-p, softmax. Temperature 0 is greedy: the
// distribution is one-hot on the argmax (ties -> lowest id).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace specmoe::core {

struct SamplingParams {
  float temperature = 0.8f;     // 0 = greedy
  int top_k = 40;               // <= 0 disables
  float top_p = 0.95f;          // 1 disables; must be in (0, 1]
  float min_p = 0.05f;          // 0 disables; must be in [0, 1]
  float repeat_penalty = 1.0f;  // 1 disables (CTRL-style: divide positive logits, multiply negative)
  int repeat_last_n = 64;       // window of recent tokens the penalty looks at (-1 = all history)
  int no_repeat_ngram = 0;      // ban tokens that would repeat an n-gram of this size (0 disables)
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  void validate() const;  // throws Error(InvalidArgument) naming the field and its allowed range
};

class SamplerChain {
 public:
  explicit SamplerChain(const SamplingParams& params);
  const SamplingParams& params() const { return params_; }

  // logits: one row (n_vocab). history: the tokens so far (prompt + generated), for penalties.
  // Writes the processed distribution (sums to 1, zeros outside the kept set) into probs.
  void distribution(std::span<const float> logits, std::span<const int32_t> history,
                    std::vector<float>& probs) const;
  // The same into probs (logits.size() floats; may be the logits themselves).
  void distribution(std::span<const float> logits, std::span<const int32_t> history, std::span<float> probs) const;

  // Draws a token from a processed distribution by inverse CDF over one uniform from rng
  // (argmax without touching rng when greedy).
  int32_t sample(std::span<const float> probs, Rng& rng) const;
  // The same draw with the uniform u in [0, 1) given (the argmax when greedy, u unused): the
  // first token, in id order, whose cumulative probability exceeds u * sum(probs).
  int32_t sample_with(std::span<const float> probs, double u) const;

  // distribution + sample.
  int32_t sample_logits(std::span<const float> logits, std::span<const int32_t> history, Rng& rng,
                        std::vector<float>& probs_scratch) const;

 private:
  // Throws Error(InvalidArgument) unless probs is a non-empty row of finite, non-negative values
  // with a positive sum; returns the sum, and leaves the per-block sums that sample_with walks in
  // a thread-local buffer.
  double check_distribution(std::span<const float> probs) const;
  SamplingParams params_;
};

int32_t argmax(std::span<const float> values);  // lowest index among ties

}  // namespace specmoe::core
