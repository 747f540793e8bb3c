#include "core/logits_processors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"

namespace specmoe::core {

void check_history(std::span<const int32_t> history, size_t n_vocab) {
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i] < 0 || static_cast<size_t>(history[i]) >= n_vocab) {
      throw_error(ErrorKind::InvalidArgument,
                  "sampling: history token {} at position {} is outside the vocabulary [0, {})",
                  history[i], i, n_vocab);
    }
  }
}

std::vector<int32_t> penalized_tokens(std::span<const int32_t> history, int last_n) {
  if (last_n == 0 || history.empty()) return {};
  const size_t window = last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(last_n));
  // The window is short (64 by default): sorting a copy is cheaper than marking the vocabulary.
  std::vector<int32_t> tokens(history.end() - window, history.end());
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history,
                              float penalty, int last_n) {
  if (penalty == 1.0f) return;
  for (const int32_t t : penalized_tokens(history, last_n)) {
    float& l = logits[t];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

std::vector<int32_t> banned_tokens(std::span<const int32_t> history, int n) {
  std::vector<int32_t> banned;
  if (n <= 0) return banned;
  const size_t len = history.size(), size = static_cast<size_t>(n);
  if (len < size) return banned;  // no complete n-gram in history yet
  // The n-1 most recent tokens are the prefix; every earlier n-gram that starts with the same
  // n-1 tokens bans its last token.
  const auto prefix = history.subspan(len - (size - 1));
  for (size_t start = 0; start + size <= len; ++start)
    if (std::equal(prefix.begin(), prefix.end(), history.begin() + start)) banned.push_back(history[start + size - 1]);
  return banned;
}

void apply_no_repeat_ngram(std::span<float> logits, std::span<const int32_t> history, int n) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (const int32_t t : banned_tokens(history, n)) logits[t] = kBanned;
}

namespace {

struct Candidate {
  float logit;
  int32_t id;
  float weight;  // exp((logit - max) / temperature), unnormalised probability
};

// Strict total order: higher logit first, lower id among equal logits.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Top-p (Holtzman et al. 2020, nucleus sampling): keeps the shortest prefix of the ranked
// candidates whose weight reaches threshold (top_p times the total weight), at least one.
// A flat distribution has a nucleus of most of the vocabulary, so instead of sorting, this is a
// quickselect on mass: split the undecided range at its median rank, and keep searching the half
// where the cumulative weight crosses the threshold. O(n) expected; only the last <= 64
// candidates are sorted. Ranks [0, lo) are then known to be in the nucleus, [hi, end) out of it.
void keep_nucleus(std::vector<Candidate>& cands, double threshold) {
  size_t lo = 0, hi = cands.size();
  double need = threshold;  // weight still needed from ranks lo and beyond
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(cands.begin() + lo, cands.begin() + mid, cands.begin() + hi, ranks_before);
    double mass = 0.0;
    for (size_t j = lo; j < mid; ++j) mass += cands[j].weight;
    if (mass >= need) {
      hi = mid;
    } else {
      need -= mass;
      lo = mid;
    }
  }
  std::sort(cands.begin() + lo, cands.begin() + hi, ranks_before);
  double cum = 0.0;
  for (size_t j = lo; j < hi; ++j) {
    cum += cands[j].weight;
    if (cum >= need) {
      cands.resize(j + 1);
      return;
    }
  }
  // Summation order rounding left the crossing just past [lo, hi): hi is the boundary.
  cands.resize(std::max<size_t>(hi, 1));
}

// The k best candidates by ranks_before, in no particular order. Small k (the usual 20-100) keeps
// a heap whose front is the worst kept candidate: almost every token is rejected by one compare
// and nothing vocabulary-sized is allocated. Large k uses nth_element over all candidates.
void select_top_k(std::span<const float> values, size_t k, std::vector<Candidate>& cands) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const size_t n = values.size();
  cands.clear();
  if (k <= 256) {
    for (size_t i = 0; i < n; ++i) {
      if (!(values[i] > kBanned)) continue;
      const Candidate c{values[i], static_cast<int32_t>(i), 0.0f};
      if (cands.size() < k) {
        cands.push_back(c);
        std::push_heap(cands.begin(), cands.end(), ranks_before);
      } else if (ranks_before(c, cands.front())) {
        std::pop_heap(cands.begin(), cands.end(), ranks_before);
        cands.back() = c;
        std::push_heap(cands.begin(), cands.end(), ranks_before);
      }
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (values[i] > kBanned) cands.push_back({values[i], static_cast<int32_t>(i), 0.0f});
  }
  if (k < cands.size()) {
    std::nth_element(cands.begin(), cands.begin() + k, cands.end(), ranks_before);
    cands.resize(k);
  }
}

// The smallest weight a token of the nucleus can have, up to a factor of 2: weights lie in
// [0, 1] (the max token's is exactly 1), so the float exponent field sorts them into 128 binary
// buckets [2^(e-127), 2^(e-126)); the buckets from the top whose mass first reaches threshold hold
// every token of the nucleus (a weight is monotone in the logit, so a bucket's tokens all rank
// before a lower bucket's), and the lowest of them gives the bound. One pass with no sort: the
// nucleus search then sees a few hundred candidates instead of the vocabulary. Four interleaved
// histograms, so that runs of tokens in the same bucket do not wait on one another's store.
float nucleus_weight_bound(std::span<const float> w, double threshold) {
  constexpr int kBuckets = 128, kWays = 4;
  std::array<std::array<double, kBuckets>, kWays> mass{};
  const size_t n = w.size();
  size_t i = 0;
  for (; i + kWays <= n; i += kWays)
    for (int k = 0; k < kWays; ++k) mass[k][std::bit_cast<uint32_t>(w[i + k]) >> 23] += w[i + k];
  for (; i < n; ++i) mass[0][std::bit_cast<uint32_t>(w[i]) >> 23] += w[i];
  double cum = 0.0;
  for (int e = kBuckets - 1; e > 0; --e) {
    cum += mass[0][e] + mass[1][e] + mass[2][e] + mass[3][e];
    // One bucket of margin, so that the nucleus search's own summation order cannot need more.
    if (cum >= threshold) return std::bit_cast<float>(static_cast<uint32_t>(std::max(e - 1, 1)) << 23);
  }
  return 0.0f;
}

}  // namespace

// Eight independent running maxima, so the loop is not one serial dependency chain (and the
// compiler vectorises it).
float max_value(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = values[i + j] > lane[j] ? values[i + j] : lane[j];
  }
  for (; i < values.size(); ++i) lane[0] = values[i] > lane[0] ? values[i] : lane[0];
  return *std::max_element(lane, lane + kLanes);
}

void top_k_softmax(std::span<const float> logits, int k, std::vector<int32_t>& ids, std::vector<double>& probs) {
  ids.clear();
  probs.clear();
  if (k <= 0 || logits.empty()) return;
  const float max_logit = max_value(logits);
  if (!(max_logit > -std::numeric_limits<float>::infinity())) return;
  thread_local std::vector<Candidate> cands;
  select_top_k(logits, static_cast<size_t>(k), cands);
  std::sort(cands.begin(), cands.end(), ranks_before);
  thread_local std::vector<float> w;
  w.resize(logits.size());
  const double z = kernels::cpu::exp_weights(logits.data(), max_logit, 1.0f, w.data(), static_cast<int64_t>(logits.size()));
  for (const Candidate& c : cands) {
    const double p = std::exp(static_cast<double>(c.logit) - static_cast<double>(max_logit)) / z;
    if (!(static_cast<float>(p) > 0.0f)) break;  // ranked by logit: the rest round to 0 too
    ids.push_back(c.id);
    probs.push_back(p);
  }
}

void truncated_softmax(std::span<float> values, float temperature, int top_k, float top_p,
                       float min_p) {
  const size_t n = values.size();
  const float max_logit = max_value(values);
  if (!(max_logit > -std::numeric_limits<float>::infinity())) {
    throw_error(ErrorKind::Runtime,
                "sampling: every one of the {} tokens is banned (all logits are -inf)", n);
  }
  // weight = exp((l - max) / T): the max token has weight exactly 1, so min-p's threshold
  // min_p * p_max is simply min_p in weight units. The passes over the whole vocabulary compute
  // it with kernels::cpu::exp_weights (vectorised, within 4e-7 of this); top-k's few candidates
  // with this libm form.
  auto weight = [&](float logit) { return std::exp((logit - max_logit) / temperature); };

  const bool use_top_k = top_k > 0 && static_cast<size_t>(top_k) < n;
  const bool use_top_p = top_p < 1.0f;
  const bool use_min_p = min_p > 0.0f;
  if (!use_top_k && !use_top_p && !use_min_p) {
    const double total = kernels::cpu::exp_weights(values.data(), max_logit, temperature, values.data(),
                                                   static_cast<int64_t>(n));
    const float scale = static_cast<float>(1.0 / total);
    for (float& v : values) v *= scale;
    return;
  }

  // Scratch reused across calls on this thread (a 150k vocabulary is 1.8 MB of candidates).
  thread_local std::vector<Candidate> cands;
  cands.clear();
  cands.reserve(use_top_k ? std::min<size_t>(n, static_cast<size_t>(top_k)) : n);
  double total = 0.0;  // weight of the distribution top-p sees: after top-k, before min-p
  if (use_top_k) {
    select_top_k(values, static_cast<size_t>(top_k), cands);
    for (Candidate& c : cands) {
      c.weight = weight(c.logit);
      total += c.weight;
    }
    if (use_min_p) {
      std::erase_if(cands, [&](const Candidate& c) { return c.weight < min_p; });
    }
  } else {
    thread_local std::vector<float> w;
    w.resize(n);
    total = kernels::cpu::exp_weights(values.data(), max_logit, temperature, w.data(), static_cast<int64_t>(n));
    // Zero-weight tokens can never be reached by the nucleus nor survive renormalisation, so
    // they are left out of the candidates; min-p is applied here too (see below), and so is a
    // bound that only tokens outside the nucleus fall below.
    float floor = std::max(min_p, std::numeric_limits<float>::denorm_min());
    if (use_top_p) floor = std::max(floor, nucleus_weight_bound(w, static_cast<double>(top_p) * total));
    for (size_t i = 0; i < n; ++i)
      if (w[i] >= floor) cands.push_back({values[i], static_cast<int32_t>(i), w[i]});
  }
  // Min-p before top-p gives the same set as the specified order (top-p, then min-p): both keep
  // a prefix of the same ranking, the max token survives top-p so p_max is unchanged, and
  // p < min_p * p_max does not depend on normalisation. Their intersection is the shorter prefix;
  // top-p's threshold still uses the pre-min-p total.
  if (use_top_p) keep_nucleus(cands, static_cast<double>(top_p) * total);

  double kept = 0.0;
  for (const Candidate& c : cands) kept += c.weight;
  std::fill(values.begin(), values.end(), 0.0f);
  for (const Candidate& c : cands) values[c.id] = static_cast<float>(c.weight / kept);
}

}  // namespace specmoe::core
