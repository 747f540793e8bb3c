#include "core/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "core/logits_processors.h"

namespace specmoe::core {

void SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    throw_error(ErrorKind::InvalidArgument,
                "temperature = {} must be finite and >= 0 (0 = greedy)", temperature);
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw_error(ErrorKind::InvalidArgument, "top_p = {} is outside (0, 1]", top_p);
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw_error(ErrorKind::InvalidArgument, "min_p = {} is outside [0, 1]", min_p);
  }
  if (!std::isfinite(repeat_penalty) || repeat_penalty <= 0.0f) {
    throw_error(ErrorKind::InvalidArgument,
                "repeat_penalty = {} must be finite and > 0 (1 disables)", repeat_penalty);
  }
  if (repeat_last_n < -1) {
    throw_error(ErrorKind::InvalidArgument,
                "repeat_last_n = {} must be >= -1 (-1 = all history, 0 disables)", repeat_last_n);
  }
  if (no_repeat_ngram < 0) {
    throw_error(ErrorKind::InvalidArgument, "no_repeat_ngram = {} must be >= 0 (0 disables)",
                no_repeat_ngram);
  }
  // top_k: every value is valid (<= 0 disables, >= n_vocab keeps all).
}

SamplerChain::SamplerChain(const SamplingParams& params) : params_(params) { params_.validate(); }

void SamplerChain::distribution(std::span<const float> logits, std::span<const int32_t> history,
                                std::vector<float>& probs) const {
  probs.resize(logits.size());
  distribution(logits, history, std::span<float>(probs));
}

void SamplerChain::distribution(std::span<const float> logits, std::span<const int32_t> history,
                                std::span<float> probs) const {
  if (logits.empty()) throw_error(ErrorKind::InvalidArgument, "sampling: logits row is empty");
  if (probs.size() != logits.size())
    throw_error(ErrorKind::InvalidArgument, "sampling: {} probabilities for {} logits", probs.size(), logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    // -inf is a legitimate mask; NaN or +inf would poison the softmax.
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) {
      throw_error(ErrorKind::Runtime, "sampling: logit of token {} is {}", i, logits[i]);
    }
  }
  check_history(history, logits.size());
  if (probs.data() != logits.data()) std::copy(logits.begin(), logits.end(), probs.begin());
  apply_repetition_penalty(probs, history, params_.repeat_penalty, params_.repeat_last_n);
  apply_no_repeat_ngram(probs, history, params_.no_repeat_ngram);
  if (params_.greedy()) {
    const int32_t best = argmax(probs);
    if (probs[best] == -std::numeric_limits<float>::infinity()) {
      throw_error(ErrorKind::Runtime,
                  "sampling: every one of the {} tokens is banned (all logits are -inf)",
                  probs.size());
    }
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[best] = 1.0f;
    return;
  }
  truncated_softmax(probs, params_.temperature, params_.top_k, params_.top_p, params_.min_p);
}

int32_t SamplerChain::sample(std::span<const float> probs, Rng& rng) const {
  if (probs.empty()) throw_error(ErrorKind::InvalidArgument, "sampling: distribution is empty");
  if (params_.greedy()) return argmax(probs);
  return sample_with(probs, rng.uniform());
}

double SamplerChain::check_distribution(std::span<const float> probs) const {
  if (probs.empty()) throw_error(ErrorKind::InvalidArgument, "sampling: distribution is empty");
  double total = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] >= 0.0f) || std::isinf(probs[i])) {
      throw_error(ErrorKind::InvalidArgument,
                  "sampling: probability of token {} is {} (must be finite and >= 0)", i,
                  probs[i]);
    }
    total += probs[i];
  }
  if (!(total > 0.0)) {
    throw_error(ErrorKind::InvalidArgument, "sampling: distribution of {} tokens sums to 0",
                probs.size());
  }
  return total;
}

int32_t SamplerChain::sample_with(std::span<const float> probs, double u) const {
  if (params_.greedy()) {
    if (probs.empty()) throw_error(ErrorKind::InvalidArgument, "sampling: distribution is empty");
    return argmax(probs);
  }
  const double total = check_distribution(probs);
  // Inverse CDF against the actual total, so a distribution that sums to 1 only up to rounding
  // is sampled without bias. The first token whose cumulative mass exceeds the target always has
  // positive probability (the sum only grows there); if rounding leaves the target at or past the
  // final sum, the last positive token is taken.
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) {
      cum += probs[i];
      last_positive = static_cast<int32_t>(i);
      if (cum > target) return last_positive;
    }
  }
  return last_positive;
}

int32_t SamplerChain::sample_logits(std::span<const float> logits,
                                    std::span<const int32_t> history, Rng& rng,
                                    std::vector<float>& probs_scratch) const {
  distribution(logits, history, probs_scratch);
  return sample(probs_scratch, rng);
}

int32_t argmax(std::span<const float> values) {
  int32_t best = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    if (best < 0 || values[i] > values[best]) best = static_cast<int32_t>(i);
  }
  if (best < 0) {
    throw_error(ErrorKind::InvalidArgument, "argmax: {} values, none of them a number",
                values.size());
  }
  return best;
}

}  // namespace specmoe::core
