#include "core/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "core/logits_processors.h"

namespace specmoe::core {

namespace {

constexpr size_t kSampleBlock = 512;
// sample_with's block sums, filled by check_distribution (per thread: chains may be shared).
thread_local std::vector<double> t_block_sums;

// Sums of consecutive blocks of kSampleBlock probabilities (each in eight double lanes, so the
// pass vectorises); returns the total. The inverse-CDF walk of sample_with skips whole blocks.
double block_sums(std::span<const float> probs, std::vector<double>& sums) {
  const size_t n = probs.size();
  sums.assign((n + kSampleBlock - 1) / kSampleBlock, 0.0);
  double total = 0.0;
  for (size_t b = 0; b < sums.size(); ++b) {
    const size_t begin = b * kSampleBlock, end = std::min(n, begin + kSampleBlock);
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = begin;
    for (; i + 8 <= end; i += 8)
      for (size_t j = 0; j < 8; ++j) lane[j] += probs[i + j];
    for (; i < end; ++i) lane[0] += probs[i];
    sums[b] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    total += sums[b];
  }
  return total;
}

}  // namespace

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
  // -inf is a legitimate mask; NaN or +inf would poison the softmax. A branch-free scan (which
  // the compiler vectorises) first, the offending index only when there is one.
  unsigned bad = 0;
  for (const float l : logits) bad |= static_cast<unsigned>(!(l < std::numeric_limits<float>::infinity()));
  if (bad) {
    for (size_t i = 0; i < logits.size(); ++i)
      if (!(logits[i] < std::numeric_limits<float>::infinity()))
        throw_error(ErrorKind::Runtime, "sampling: logit of token {} is {}", i, logits[i]);
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
  unsigned bad = 0;
  for (const float v : probs)
    bad |= static_cast<unsigned>(!(v >= 0.0f && v < std::numeric_limits<float>::infinity()));
  if (bad) {
    for (size_t i = 0; i < probs.size(); ++i)
      if (!(probs[i] >= 0.0f && probs[i] < std::numeric_limits<float>::infinity()))
        throw_error(ErrorKind::InvalidArgument,
                    "sampling: probability of token {} is {} (must be finite and >= 0)", i, probs[i]);
  }
  const double total = block_sums(probs, t_block_sums);
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
  // The cumulative mass is the sum of the whole blocks before a token plus the token's prefix of
  // its block, so the walk skips whole blocks until the one where it passes the target.
  const double target = u * total;
  double cum = 0.0;
  size_t start = 0;
  for (size_t b = 0; b + 1 < t_block_sums.size() && cum + t_block_sums[b] <= target; ++b) {
    cum += t_block_sums[b];
    start += kSampleBlock;
  }
  int32_t last_positive = -1;
  for (size_t i = start; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) {
      cum += probs[i];
      last_positive = static_cast<int32_t>(i);
      if (cum > target) return last_positive;
    }
  }
  if (last_positive >= 0) return last_positive;
  // Rounding put the target past the skipped blocks' sum: the last positive token before them.
  for (size_t i = start; i-- > 0;)
    if (probs[i] > 0.0f) return static_cast<int32_t>(i);
  return 0;
}

int32_t SamplerChain::sample_logits(std::span<const float> logits,
                                    std::span<const int32_t> history, Rng& rng,
                                    std::vector<float>& probs_scratch) const {
  distribution(logits, history, probs_scratch);
  return sample(probs_scratch, rng);
}

int32_t argmax(std::span<const float> values) {
  // The maximum in a vectorised pass (NaN skipped), then the first index holding it.
  const float best = max_value(values);
  const auto it = std::find(values.begin(), values.end(), best);
  if (it == values.end()) {  // no number: every value is NaN (a -inf maximum is found)
    throw_error(ErrorKind::InvalidArgument, "argmax: {} values, none of them a number",
                values.size());
  }
  return static_cast<int32_t>(it - values.begin());
}

}  // namespace specmoe::core
