#include "core/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "core/logits_processors.h"

namespace specmoe::core {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Only the processor under test is on.
SamplingParams plain(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.no_repeat_ngram = 0;
  return p;
}

std::vector<float> dist(const SamplingParams& p, std::vector<float> logits,
                        std::vector<int32_t> history = {}) {
  std::vector<float> probs;
  SamplerChain(p).distribution(logits, history, probs);
  return probs;
}

// Expected values below are exact softmaxes computed in double (Python math.exp); float results
// agree to a few ulp of 1, so 2e-7 absolute (about 2 float epsilons at 1) is the tolerance.
constexpr double kTol = 2e-7;
void expect_probs(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0.0) {
      EXPECT_EQ(got[i], 0.0f) << "token " << i;  // outside the kept set: exactly zero
    } else {
      EXPECT_NEAR(got[i], want[i], kTol) << "token " << i;
    }
  }
}

TEST(Distribution, PlainSoftmaxAtTemperatureOne) {
  expect_probs(dist(plain(), {1, 2, 3, 4}),
               {0.03205860328008499, 0.08714431874203257, 0.23688281808991013, 0.6439142598879724});
}

TEST(Distribution, TemperatureHalfIsSoftmaxOfDoubledLogits) {
  expect_probs(dist(plain(0.5f), {1, 2, 3, 4}), {0.002144008783584634, 0.01584220117850692,
                                                 0.11705891323853293, 0.8649548767993754});
}

TEST(Distribution, TopKTwoKeepsTheTwoLargest) {
  auto p = plain();
  p.top_k = 2;
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0.2689414213699951, 0.7310585786300049});
  expect_probs(dist(p, {4, 1, 3, 2}), {0.7310585786300049, 0, 0.2689414213699951, 0});
}

TEST(Distribution, TopKTiesGoToLowerIds) {
  auto p = plain();
  p.top_k = 2;
  expect_probs(dist(p, {1, 5, 5, 5}), {0, 0.5, 0.5, 0});
  p.top_k = 1;
  expect_probs(dist(p, {1, 5, 5, 5}), {0, 1, 0, 0});
  p.top_k = 17;  // larger than the vocabulary: no effect
  expect_probs(dist(p, {1, 2, 3, 4}),
               {0.03205860328008499, 0.08714431874203257, 0.23688281808991013, 0.6439142598879724});
}

TEST(TopKSoftmax, LargestFirstWithTheirFullSoftmaxProbabilities) {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  top_k_softmax(std::vector<float>{1, 2, 3, 4}, 2, ids, probs);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_NEAR(probs[0], 0.6439142598879724, 1e-7);  // normalised over all four, not the two
  EXPECT_NEAR(probs[1], 0.23688281808991013, 1e-7);
  // Ties go to the lower id; banned (-inf) and NaN entries are never chosen.
  const float inf = std::numeric_limits<float>::infinity();
  top_k_softmax(std::vector<float>{5, -inf, 5, std::nanf(""), 1}, 4, ids, probs);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2, 4}));
  // A probability that rounds to 0 as a float is left out.
  top_k_softmax(std::vector<float>{0, -200, -1}, 3, ids, probs);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2}));
  // The whole row is the normaliser, also past the vectorised blocks (a 150k-like length).
  std::vector<float> row(1003);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 4.0);
  top_k_softmax(row, 3, ids, probs);
  double z = 0.0;
  const float mx = *std::max_element(row.begin(), row.end());
  for (float v : row) z += std::exp(static_cast<double>(v) - mx);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(row[static_cast<size_t>(ids[0])], mx);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(probs[i], std::exp(static_cast<double>(row[static_cast<size_t>(ids[i])]) - mx) / z, 1e-9);
  EXPECT_GE(row[static_cast<size_t>(ids[1])], row[static_cast<size_t>(ids[2])]);
  top_k_softmax(std::vector<float>{-inf, -inf}, 2, ids, probs);
  EXPECT_TRUE(ids.empty());
}

TEST(Distribution, TopPBoundaries) {
  // Probabilities at T = 1: 0.0321, 0.0871, 0.2369, 0.6439.
  auto p = plain();
  p.top_p = 0.5f;  // 0.6439 >= 0.5: only the top token
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0, 1});
  p.top_p = 0.64f;  // just under 0.6439: still one token
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0, 1});
  p.top_p = 0.65f;  // just over: two tokens
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0.2689414213699951, 0.7310585786300049});
  p.top_p = 0.9f;  // 0.6439 + 0.2369 = 0.8808 < 0.9: three tokens
  expect_probs(dist(p, {1, 2, 3, 4}),
               {0, 0.09003057317038046, 0.24472847105479764, 0.6652409557748219});
}

TEST(Distribution, TopPIsInclusiveAndBreaksTiesByLowerId) {
  // Four equal tokens: cumulative 0.25, 0.5 reaches top_p = 0.5 exactly (all exact in binary),
  // so the nucleus is ids 0 and 1.
  auto p = plain();
  p.top_p = 0.5f;
  expect_probs(dist(p, {2, 2, 2, 2}), {0.5, 0.5, 0, 0});
  p.top_p = 0.25f;
  expect_probs(dist(p, {2, 2, 2, 2}), {1, 0, 0, 0});
}

TEST(Distribution, MinP) {
  auto p = plain();
  p.min_p = 0.1f;  // threshold 0.0644: drops token 0 (0.0321), keeps token 1 (0.0871)
  expect_probs(dist(p, {1, 2, 3, 4}),
               {0, 0.09003057317038046, 0.24472847105479764, 0.6652409557748219});
  p.min_p = 0.2f;  // threshold 0.1288: drops tokens 0 and 1
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0.2689414213699951, 0.7310585786300049});
  p.min_p = 1.0f;  // only tokens tied with the max
  expect_probs(dist(p, {4, 2, 4, 1}), {0.5, 0, 0.5, 0});
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerToken) {
  std::vector<float> logits = {1, -2, 3, 0.5f, 0};
  const std::vector<int32_t> history = {0, 1, 1, 4};
  apply_repetition_penalty(logits, history, 2.0f, -1);
  EXPECT_EQ(logits, (std::vector<float>{0.5f, -4, 3, 0.5f, 0}));  // token 1 once, not twice

  logits = {1, -2, 3, 0.5f, 0};
  apply_repetition_penalty(logits, history, 2.0f, 2);  // window = {1, 4}
  EXPECT_EQ(logits, (std::vector<float>{1, -4, 3, 0.5f, 0}));

  logits = {1, -2, 3, 0.5f, 0};
  apply_repetition_penalty(logits, history, 2.0f, 0);  // 0 disables
  EXPECT_EQ(logits, (std::vector<float>{1, -2, 3, 0.5f, 0}));

  logits = {1, -2, 3, 0.5f, 0};
  apply_repetition_penalty(logits, history, 2.0f, 64);  // window longer than history
  EXPECT_EQ(logits, (std::vector<float>{0.5f, -4, 3, 0.5f, 0}));
}

TEST(RepetitionPenalty, InTheChain) {
  auto p = plain();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = -1;
  expect_probs(dist(p, {1, -2, 3, 0.5f, 0}, {0, 1, 1, 4}),
               {0.06756695756141325, 0.0007506010976493046, 0.8231340524350248,
                0.06756695756141325, 0.04098143134449948});
  p.repeat_last_n = 2;
  expect_probs(dist(p, {1, -2, 3, 0.5f, 0}, {0, 1, 1, 4}),
               {0.10672126074649443, 0.0007190821985854598, 0.7885693826044528,
                0.06472971668593523, 0.039260557764532154});
}

std::vector<int> banned(int n, const std::vector<int32_t>& history, int vocab = 6) {
  std::vector<float> logits(vocab, 0.0f);
  apply_no_repeat_ngram(logits, history, n);
  std::vector<int> out;
  for (int i = 0; i < vocab; ++i) {
    if (logits[i] == kNegInf) out.push_back(i);
    else EXPECT_EQ(logits[i], 0.0f);
  }
  return out;
}

TEST(NoRepeatNgram, BansExactlyTheCompletingTokens) {
  // History 1 2 3 1 2: the trigram prefix is (1, 2), seen before followed by 3.
  EXPECT_EQ(banned(3, {1, 2, 3, 1, 2}), std::vector<int>{3});
  // Bigram prefix (2), followed earlier by 3 and by 4.
  EXPECT_EQ(banned(2, {1, 2, 3, 1, 2, 4, 2}), (std::vector<int>{3, 4}));
  // Trigram prefix (4, 2) never seen before: nothing banned.
  EXPECT_EQ(banned(3, {1, 2, 3, 1, 2, 4, 2}), std::vector<int>{});
  // n = 1 bans every token already present.
  EXPECT_EQ(banned(1, {5, 2, 2}), (std::vector<int>{2, 5}));
  // History shorter than n, and n = 0: nothing.
  EXPECT_EQ(banned(4, {1, 1, 1}), std::vector<int>{});
  EXPECT_EQ(banned(0, {1, 1, 1}), std::vector<int>{});
  // Repeated token: 1 1 1 with n = 2 bans 1 (the bigram (1, 1) exists).
  EXPECT_EQ(banned(2, {1, 1, 1}), std::vector<int>{1});
}

TEST(NoRepeatNgram, InTheChain) {
  auto p = plain();
  p.no_repeat_ngram = 3;
  expect_probs(dist(p, {1, 2, 3, 4}, {1, 2, 3, 1, 2}),
               {0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 0});
}

TEST(Chain, TemperatureComesBeforeTopP) {
  // At T = 0.5 the top two tokens hold 0.8650 + 0.1171 >= 0.9, so top_p = 0.9 keeps two; at
  // T = 1 it keeps three (see TopPBoundaries).
  auto p = plain(0.5f);
  p.top_p = 0.9f;
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0.11920292202211755, 0.8807970779778824});
}

TEST(Chain, TopKComesBeforeTopP) {
  // After top-k 2 the top token has 0.7311 >= 0.7: one token. Top-p first would keep two
  // (0.6439 < 0.7).
  auto p = plain();
  p.top_k = 2;
  p.top_p = 0.7f;
  expect_probs(dist(p, {1, 2, 3, 4}), {0, 0, 0, 1});
}

TEST(Chain, BansComeBeforeTopK) {
  // Token 3 is banned by the trigram rule, so top-k 1 keeps token 2.
  auto p = plain();
  p.top_k = 1;
  p.no_repeat_ngram = 3;
  expect_probs(dist(p, {1, 2, 3, 4}, {1, 2, 3, 1, 2}), {0, 0, 1, 0});
}

TEST(Chain, AllBannedThrows) {
  auto p = plain();
  p.no_repeat_ngram = 1;
  EXPECT_THROW(dist(p, {1, 2}, {0, 1}), Error);
  p.temperature = 0.0f;
  EXPECT_THROW(dist(p, {1, 2}, {0, 1}), Error);
}

TEST(Greedy, OneHotOnArgmaxLowestIdAmongTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{7}), 0);
  EXPECT_EQ(argmax(std::vector<float>{std::nanf(""), -1, -1}), 1);
  expect_probs(dist(plain(0.0f), {1, 3, 3, 2}), {0, 1, 0, 0});
  // Other processors do not matter when greedy, except penalties, which come first.
  auto p = plain(0.0f);
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.5f;
  expect_probs(dist(p, {1, 3, 3, 2}), {0, 1, 0, 0});
  p.repeat_penalty = 1.1f;  // 3 / 1.1 = 2.727 < 2.9: the argmax moves to token 2
  expect_probs(dist(p, {1, 3, 2.9f}, {1}), {0, 0, 1});
}

TEST(Greedy, SampleIsArgmaxAndLeavesRngUntouched) {
  const SamplerChain chain(plain(0.0f));
  Rng rng(5, 0), fresh(5, 0);
  std::vector<float> probs;
  EXPECT_EQ(chain.sample_logits(std::vector<float>{0.5f, 2, 1, 2}, {}, rng, probs), 1);
  EXPECT_EQ(rng.counter(), 0u);
  EXPECT_EQ(rng.next_u32(), fresh.next_u32());
}

void expect_invalid(SamplingParams p, const std::string& field) {
  try {
    p.validate();
    ADD_FAILURE() << "validate() accepted a bad " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind(field + " = ", 0), 0u) << e.what();
  }
  EXPECT_THROW(SamplerChain{p}, Error);
}

TEST(Validate, RejectsEachBadValueNamingTheField) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  SamplingParams good;
  EXPECT_NO_THROW(good.validate());
  for (float v : {-0.1f, nan, inf}) {
    auto p = good;
    p.temperature = v;
    expect_invalid(p, "temperature");
  }
  for (float v : {0.0f, -0.5f, 1.5f, nan}) {
    auto p = good;
    p.top_p = v;
    expect_invalid(p, "top_p");
  }
  for (float v : {-0.01f, 1.01f, nan}) {
    auto p = good;
    p.min_p = v;
    expect_invalid(p, "min_p");
  }
  for (float v : {0.0f, -1.0f, nan, inf}) {
    auto p = good;
    p.repeat_penalty = v;
    expect_invalid(p, "repeat_penalty");
  }
  {
    auto p = good;
    p.repeat_last_n = -2;
    expect_invalid(p, "repeat_last_n");
    p = good;
    p.no_repeat_ngram = -1;
    expect_invalid(p, "no_repeat_ngram");
  }
  {
    auto p = good;
    p.top_p = 1.5f;
    try {
      p.validate();
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "top_p = 1.5 is outside (0, 1]");
    }
  }
  // Edges that are allowed.
  auto p = good;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.top_k = -3;
  p.repeat_last_n = -1;
  EXPECT_NO_THROW(p.validate());
}

TEST(Inputs, BadLogitsHistoryAndProbsThrow) {
  const SamplerChain chain(plain());
  std::vector<float> probs;
  EXPECT_THROW(chain.distribution(std::vector<float>{}, {}, probs), Error);
  EXPECT_THROW(chain.distribution(std::vector<float>{1, std::nanf("")}, {}, probs), Error);
  EXPECT_THROW(
      chain.distribution(std::vector<float>{1, std::numeric_limits<float>::infinity()}, {}, probs),
      Error);
  const std::vector<int32_t> bad_high = {0, 2}, bad_low = {-1};
  EXPECT_THROW(chain.distribution(std::vector<float>{1, 2}, bad_high, probs), Error);
  EXPECT_THROW(chain.distribution(std::vector<float>{1, 2}, bad_low, probs), Error);
  // -inf is a mask, not an error.
  chain.distribution(std::vector<float>{kNegInf, 0}, {}, probs);
  EXPECT_EQ(probs, (std::vector<float>{0, 1}));
  Rng rng(1);
  EXPECT_THROW(chain.sample(std::vector<float>{}, rng), Error);
  EXPECT_THROW(chain.sample(std::vector<float>{0.5f, -0.1f}, rng), Error);
  EXPECT_THROW(chain.sample(std::vector<float>{0.5f, std::nanf("")}, rng), Error);
  EXPECT_THROW(chain.sample(std::vector<float>{0, 0}, rng), Error);
}

// ---- sampling from the distribution ----

TEST(Sample, FrequenciesMatchTheDistribution) {
  // 20000 draws from a 6-token distribution with one zero. Pearson chi-square over the 5
  // non-zero tokens has 4 degrees of freedom; the critical value at significance 0.001 is 18.467.
  const std::vector<float> probs = {0.1f, 0.0f, 0.2f, 0.3f, 0.15f, 0.25f};
  const SamplerChain chain(plain());
  Rng rng(12345, Rng::stream_id({0, 0}));
  const int n = 20000;
  std::vector<int> counts(probs.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[chain.sample(probs, rng)];
  EXPECT_EQ(counts[1], 0);
  double chi2 = 0;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] == 0) continue;
    const double expected = n * probs[t];
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
  }
  EXPECT_LT(chi2, 18.467);
  EXPECT_GT(counts[3], 0);  // guard: the counts are real
}

TEST(Sample, IsInverseCdfOfOneUniform) {
  // The determinism contract: the token depends only on (probs, rng state); the chain's
  // non-greedy parameters and the history play no part, and exactly one uniform is consumed.
  const std::vector<float> probs = {0.0f, 0.25f, 0.0f, 0.5f, 0.25f};
  SamplingParams a = plain(), b = plain(1.7f);
  b.top_k = 2;
  b.top_p = 0.3f;
  b.min_p = 0.4f;
  b.repeat_penalty = 3.0f;
  b.no_repeat_ngram = 2;
  const SamplerChain ca(a), cb(b);
  for (uint64_t s = 0; s < 200; ++s) {
    Rng ra(77, s), rb(77, s), twin(77, s);
    const int32_t ta = ca.sample(probs, ra);
    EXPECT_EQ(ta, cb.sample(probs, rb));
    const double u = twin.uniform();
    const int32_t want = u < 0.25 ? 1 : u < 0.75 ? 3 : 4;
    EXPECT_EQ(ta, want) << "u = " << u;
    const uint64_t after = twin.next_u64();  // both are at the same position afterwards
    EXPECT_EQ(ra.next_u64(), after);
    EXPECT_EQ(rb.next_u64(), after);
  }
}

// Finds a stream whose first uniform() satisfies pred, so the edges of the inverse CDF can be
// hit on purpose.
template <typename Pred>
uint64_t stream_with_first_uniform(Pred pred) {
  for (uint64_t s = 0;; ++s) {
    Rng r(0, s);
    if (pred(r.uniform())) return s;
  }
}

TEST(Sample, RobustAtTheEdgesOfTheUnitInterval) {
  const SamplerChain chain(plain());
  // u close to 1 (expected 10^4 tries): the last positive token, never a trailing zero, even for
  // a distribution whose sum is off by float rounding.
  const uint64_t high = stream_with_first_uniform([](double u) { return u > 1 - 1e-4; });
  {
    Rng rng(0, high);
    EXPECT_EQ(chain.sample(std::vector<float>{0.2f, 0.7999999f, 0, 0}, rng), 1);
    Rng again(0, high);
    EXPECT_EQ(chain.sample(std::vector<float>{0.2f, 0.8000001f, 0, 0}, again), 1);
  }
  // u close to 0: the first positive token, never a leading zero.
  const uint64_t low = stream_with_first_uniform([](double u) { return u < 1e-4; });
  Rng rng(0, low);
  EXPECT_EQ(chain.sample(std::vector<float>{0, 0, 0.5f, 0.5f}, rng), 2);
}

TEST(Sample, SameSeedSameTokenSequence) {
  // Autoregressive loop over a 17-token vocabulary with every processor on; the logits depend on
  // the history so the sequence feeds back into itself.
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 9;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  p.repeat_penalty = 1.3f;
  p.repeat_last_n = 8;
  p.no_repeat_ngram = 3;
  const SamplerChain chain(p);
  auto run = [&](uint64_t seed) {
    Rng rng(seed, Rng::stream_id({3, 0}));
    std::vector<int32_t> history = {1, 2, 3};
    std::vector<float> logits(17), probs;
    for (int step = 0; step < 60; ++step) {
      for (int t = 0; t < 17; ++t) {
        logits[t] = std::sin(0.7f * t + 0.3f * history.back()) * 3.0f + 0.1f * (t % 5);
      }
      const int32_t tok = chain.sample_logits(logits, history, rng, probs);
      EXPECT_GT(probs[tok], 0.0f);
      history.push_back(tok);
    }
    return history;
  };
  const auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 3u);  // not a degenerate sequence
}

// ---- the fast paths against a plain reference, on awkward and large vocabularies ----

// The chain written out literally in double: full sort, each processor in the specified order,
// renormalising after each truncation.
std::vector<double> reference(const SamplingParams& p, const std::vector<float>& logits) {
  const size_t n = logits.size();
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (logits[i] > kNegInf) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  std::vector<double> pr(n, 0.0);
  auto renorm = [&] {
    double s = 0;
    for (int32_t i : order) s += pr[i];
    std::vector<double> out(n, 0.0);
    for (int32_t i : order) out[i] = pr[i] / s;
    pr = out;
  };
  const double m = logits[order[0]];
  for (int32_t i : order) pr[i] = std::exp((logits[i] - m) / p.temperature);
  renorm();
  double cum = 0;
  for (size_t j = 0; j < order.size(); ++j) {
    cum += pr[order[j]];
    if (cum >= p.top_p) {
      order.resize(j + 1);
      break;
    }
  }
  renorm();
  const double pmax = pr[order[0]];
  std::erase_if(order, [&](int32_t i) { return pr[i] < p.min_p * pmax; });
  renorm();
  return pr;
}

void expect_matches_reference(const SamplingParams& p, const std::vector<float>& logits) {
  const auto got = dist(p, logits);
  const auto want = reference(p, logits);
  double sum = 0;
  size_t kept = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    sum += got[i];
    kept += got[i] > 0;
    // Same kept set, and values within float rounding of exp: |(l - m) / T| stays below ~40
    // here, so the float argument is off by up to 40 * 6e-8 relative; 1e-5 relative + 1e-9
    // absolute covers it with margin.
    ASSERT_EQ(got[i] > 0, want[i] > 0) << "token " << i;
    ASSERT_NEAR(got[i], want[i], 1e-9 + 1e-5 * want[i]) << "token " << i;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);  // float sum of up to 150k terms
  EXPECT_GT(kept, 0u);
}

std::vector<float> random_logits(size_t n, uint64_t seed, double scale) {
  Rng rng(seed, 9);
  std::vector<float> logits(n);
  for (auto& l : logits) l = static_cast<float>(rng.normal() * scale);
  return logits;
}

TEST(Reference, AwkwardSizesAndSettings) {
  struct Case {
    size_t n;
    float temperature;
    int top_k;
    float top_p, min_p;
  };
  // top_k 40 takes the heap selection, top_k 300 the nth_element one (> 256); n = 1000 with
  // top-p and no top-k takes the mass quickselect of the nucleus (> 64 candidates).
  const Case cases[] = {
      {1, 0.8f, 40, 0.95f, 0.05f},  {3, 1.0f, 2, 0.5f, 0.0f},     {17, 0.7f, 0, 0.9f, 0.0f},
      {17, 1.3f, 5, 1.0f, 0.1f},    {1000, 1.0f, 0, 0.95f, 0.0f},  {1000, 2.0f, 0, 0.99f, 0.01f},
      {1000, 0.8f, 40, 0.95f, 0.05f}, {1000, 0.6f, 300, 0.7f, 0.0f}, {1000, 1.0f, 0, 1.0f, 0.2f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "n " << c.n << " T " << c.temperature << " k " << c.top_k
                                    << " p " << c.top_p << " min_p " << c.min_p);
    auto p = plain(c.temperature);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    expect_matches_reference(p, random_logits(c.n, c.n, 3.0));
  }
}

TEST(Reference, LargeVocabulary) {
  // A Qwen-sized vocabulary (151936). Logits N(0, 2^2): a flat distribution, so top-p 0.95
  // without top-k has a nucleus of tens of thousands of tokens and exercises the widening
  // partial sort; with defaults top-k bounds it at 40.
  const auto logits = random_logits(151936, 7, 2.0);
  SamplingParams defaults;
  defaults.repeat_penalty = 1.0f;
  expect_matches_reference(defaults, logits);
  auto p = plain(1.0f);
  p.top_p = 0.95f;
  expect_matches_reference(p, logits);
  p.min_p = 0.05f;
  expect_matches_reference(p, logits);
  expect_matches_reference(plain(0.7f), logits);
}

}  // namespace
}  // namespace specmoe::core
