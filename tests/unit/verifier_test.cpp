// Verifiers on hand-built distributions (no model): lossless speculative sampling proven
// statistically, the greedy rule on exact cases, the registry, and the metrics formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "base/error.h"
#include "core/rng.h"
#include "core/sampling.h"
#include "verify/greedy_verifier.h"
#include "verify/metrics.h"
#include "verify/registry.h"
#include "verify/speculative_verifier.h"
#include "host_rows.h"

namespace specmoe::verify {
namespace {

using Dist = std::vector<float>;

// A random distribution with every entry >= floor / n (before normalisation), so expected cell
// counts stay large enough for the chi-square approximation (>= 5 per cell).
Dist random_dist(core::Rng& rng, int n, double floor = 0.2) {
  Dist d(n);
  double s = 0.0;
  for (auto& v : d) {
    v = static_cast<float>(floor + rng.uniform());
    s += v;
  }
  for (auto& v : d) v = static_cast<float>(v / s);
  return d;
}

// Pearson's chi-square of observed counts against probabilities, over the cells with p > 0.
// Observations in cells with p == 0 are impossible events and are counted in `impossible`.
struct ChiSquare {
  double stat = 0.0;
  int df = 0;
  int64_t impossible = 0;
};
ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  ChiSquare r;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0) {
      r.impossible += counts[i];
      continue;
    }
    const double e = n * p[i];
    r.stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  r.df = cells - 1;
  return r;
}

// Upper 0.001 quantile of chi-square(df) by the Wilson-Hilferty cube approximation
// (z_{0.999} = 3.0902). It slightly overestimates the exact quantile for small df (24.5 vs 24.32
// at df 7), i.e. errs on the conservative side; within 1% for df >= 5.
double chi2_critical_0001(int df) {
  const double k = df, z = 3.0902;
  const double a = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * a * a * a;
}

double total_variation(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  double tv = 0.0;
  for (size_t i = 0; i < p.size(); ++i) tv += std::abs(counts[i] / n - p[i]);
  return 0.5 * tv;
}

int32_t draw(const Dist& d, core::Rng& rng) { return sample_weights(d, rng); }

// Power of the tests below (N = 200,000 trials, significance 0.001): a wrong output distribution
// p' at total variation delta from p gives the chi-square a noncentrality
// lambda = N * sum (p'-p)^2 / p >= N * (sum |p'-p|)^2 = N * (2 delta)^2 (Cauchy-Schwarz with
// sum p = 1). For delta = 0.02: lambda >= 320. With df = 7 the critical value is 24.3 while the
// noncentral statistic has mean >= 327 and sd ~36; with df = 63 (joint of two tokens) critical
// ~103 vs mean >= 383, sd ~38: a 2% TV error is detected with probability > 0.9999 either way.
// Seeds are fixed, so the tests are deterministic; a correct verifier fails a given seed with
// probability 0.001.
constexpr int kTrials = 200000;
constexpr int kVocab = 8;

// An always-accept verifier: emits the draft tokens and a bonus from p_{g+1}, i.e. samples from
// q instead of p. The statistical tests must reject it.
class AlwaysAcceptVerifier : public Verifier {
 public:
  std::string name() const override { return "always-accept"; }
  VerifyResult verify(const draft::Draft& d, const core::Rows& p, core::Rng& rng) const override {
    return {d.size(), sample_weights(std::span<const float>(p.row(d.size()), static_cast<size_t>(p.cols)), rng), {}};
  }
};

// First emitted token of one speculative step, drafting g tokens from the fixed q rows (a
// context-free draft), with target rows p (g+1 of them).
std::vector<int64_t> first_token_counts(const Verifier& v, const std::vector<Dist>& p, const std::vector<Dist>& q,
                                        bool one_hot, int32_t one_hot_token, uint64_t seed) {
  const int g = static_cast<int>(p.size()) - 1;
  core::Rng draft_rng(seed, 1), verify_rng(seed, 2);
  std::vector<int64_t> counts(p[0].size(), 0);
  draft::Draft d;
  d.one_hot = one_hot;
  const testing::HostRows q_rows(q), p_rows(p);
  if (!one_hot) d.q = q_rows;
  for (int t = 0; t < kTrials; ++t) {
    d.tokens.clear();
    for (int i = 0; i < g; ++i) d.tokens.push_back(one_hot ? one_hot_token : draw(q[i], draft_rng));
    const VerifyResult r = v.verify(d, p_rows, verify_rng);
    ++counts[r.n_accepted > 0 ? d.tokens[0] : r.next_token];
  }
  return counts;
}

std::vector<double> as_double(const Dist& d) { return std::vector<double>(d.begin(), d.end()); }

TEST(SpeculativeVerifier, FirstTokenIsDistributedAsTargetG1) {
  core::Rng rng(11);
  const std::vector<Dist> p = {random_dist(rng, kVocab), random_dist(rng, kVocab)};
  const std::vector<Dist> q = {random_dist(rng, kVocab)};
  const auto counts = first_token_counts(SpeculativeVerifier(), p, q, false, 0, 101);
  const ChiSquare cs = chi_square(counts, as_double(p[0]));
  EXPECT_EQ(cs.df, kVocab - 1);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "TV " << total_variation(counts, as_double(p[0]));
  // Sampling noise: sd of TV at N = 2e5, 8 cells is ~0.002; 0.01 is 5 sd away.
  EXPECT_LT(total_variation(counts, as_double(p[0])), 0.01);
  // Non-trivial guard: p and q differ, so the draft alone would be visibly wrong.
  const auto q_counts = first_token_counts(AlwaysAcceptVerifier(), p, q, false, 0, 101);
  EXPECT_GT(total_variation(q_counts, as_double(p[0])), 0.05);
}

TEST(SpeculativeVerifier, FirstTokenIsDistributedAsTargetG3) {
  core::Rng rng(12);
  std::vector<Dist> p, q;
  for (int i = 0; i < 4; ++i) p.push_back(random_dist(rng, kVocab));
  for (int i = 0; i < 3; ++i) q.push_back(random_dist(rng, kVocab));
  const auto counts = first_token_counts(SpeculativeVerifier(), p, q, false, 0, 102);
  const ChiSquare cs = chi_square(counts, as_double(p[0]));
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df));
}

TEST(SpeculativeVerifier, AlwaysAcceptFailsTheSameTest) {
  core::Rng rng(11);  // the same p and q as FirstTokenIsDistributedAsTargetG1
  const std::vector<Dist> p = {random_dist(rng, kVocab), random_dist(rng, kVocab)};
  const std::vector<Dist> q = {random_dist(rng, kVocab)};
  const auto counts = first_token_counts(AlwaysAcceptVerifier(), p, q, false, 0, 101);
  const ChiSquare cs = chi_square(counts, as_double(p[0]));
  EXPECT_GT(cs.stat, chi2_critical_0001(cs.df));
}

TEST(SpeculativeVerifier, OneHotDraftIsLossless) {
  // An n-gram style draft: always proposes token 3 with q = one-hot. Accepted with prob p(3);
  // otherwise the residual is p without token 3, renormalised.
  core::Rng rng(13);
  const std::vector<Dist> p = {random_dist(rng, kVocab), random_dist(rng, kVocab), random_dist(rng, kVocab)};
  const auto counts = first_token_counts(SpeculativeVerifier(), p, {}, true, 3, 103);
  const ChiSquare cs = chi_square(counts, as_double(p[0]));
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df));
  // Always-accept would emit token 3 every time.
  const auto bad = first_token_counts(AlwaysAcceptVerifier(), p, {}, true, 3, 103);
  EXPECT_EQ(bad[3], kTrials);
  EXPECT_GT(chi_square(bad, as_double(p[0])).stat, chi2_critical_0001(cs.df));
}

TEST(SpeculativeVerifier, ProcessedTemperatureTopPDistributionsAreLossless) {
  // Temperature 0.7 + top-p 0.9 on random logits (vocab 17): p and q have different supports,
  // including draft tokens outside p's support (always rejected) and target tokens outside q's.
  constexpr int V = 17;
  core::SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_p = 0.9f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  const core::SamplerChain chain(sp);
  core::Rng rng(14);
  auto processed = [&](double scale) {
    std::vector<float> logits(V), probs;
    for (auto& l : logits) l = static_cast<float>(scale * rng.normal());
    chain.distribution(logits, {}, probs);
    return probs;
  };
  const std::vector<Dist> p = {processed(1.5), processed(1.5), processed(1.5)};
  const std::vector<Dist> q = {processed(1.5), processed(1.5)};
  int zeros_p = 0, q_outside_p = 0;
  for (int i = 0; i < V; ++i) {
    zeros_p += p[0][i] == 0.0f;
    q_outside_p += q[0][i] > 0.0f && p[0][i] == 0.0f;
  }
  ASSERT_GT(zeros_p, 0) << "top-p should have cut some tokens";
  ASSERT_GT(q_outside_p, 0) << "the draft should propose tokens the target never emits";
  const auto counts = first_token_counts(SpeculativeVerifier(), p, q, false, 0, 104);
  const ChiSquare cs = chi_square(counts, as_double(p[0]));
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df));
  const auto bad = first_token_counts(AlwaysAcceptVerifier(), p, q, false, 0, 104);
  const ChiSquare bad_cs = chi_square(bad, as_double(p[0]));
  EXPECT_GT(bad_cs.impossible, 0);
}

// A first-order Markov toy "model": P[a] is the target's next-token distribution after token a,
// Q[a] the draft's. Speculative decoding with g = 2 runs until two tokens are emitted; the joint
// of (t1, t2) must be P[s0][t1] * P[t1][t2] (64 cells), which checks the second token too,
// whether it came from an accepted draft, a correction or a bonus.
std::vector<int64_t> joint_two_token_counts(const Verifier& v, const std::vector<Dist>& P, const std::vector<Dist>& Q,
                                            int32_t s0, uint64_t seed) {
  const int g = 2;
  core::Rng draft_rng(seed, 1), verify_rng(seed, 2);
  std::vector<int64_t> counts(kVocab * kVocab, 0);
  draft::Draft d;
  std::vector<Dist> p(g + 1);
  std::vector<int32_t> emitted;
  testing::HostRows q_rows;
  for (int t = 0; t < kTrials; ++t) {
    emitted.clear();
    int32_t prev = s0;
    while (emitted.size() < 2) {
      d.tokens.clear();
      q_rows.clear();
      p[0] = P[prev];
      int32_t ctx = prev;
      for (int i = 0; i < g; ++i) {
        const int32_t x = draw(Q[ctx], draft_rng);
        d.tokens.push_back(x);
        q_rows.push_back(Q[ctx]);
        p[i + 1] = P[x];
        ctx = x;
      }
      d.q = q_rows;
      const VerifyResult r = v.verify(d, testing::HostRows(p), verify_rng);
      for (int i = 0; i < r.n_accepted; ++i) emitted.push_back(d.tokens[i]);
      emitted.push_back(r.next_token);
      prev = emitted.back();
    }
    ++counts[emitted[0] * kVocab + emitted[1]];
  }
  return counts;
}

TEST(SpeculativeVerifier, JointOfFirstTwoTokensMatchesTargetG2) {
  core::Rng rng(15);
  std::vector<Dist> P, Q;
  for (int a = 0; a < kVocab; ++a) P.push_back(random_dist(rng, kVocab, 0.3));
  for (int a = 0; a < kVocab; ++a) Q.push_back(random_dist(rng, kVocab, 0.3));
  const int32_t s0 = 5;
  std::vector<double> expect(kVocab * kVocab);
  for (int a = 0; a < kVocab; ++a)
    for (int b = 0; b < kVocab; ++b) expect[a * kVocab + b] = double(P[s0][a]) * P[a][b];
  const auto counts = joint_two_token_counts(SpeculativeVerifier(), P, Q, s0, 105);
  const ChiSquare cs = chi_square(counts, expect);
  EXPECT_EQ(cs.df, kVocab * kVocab - 1);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "TV " << total_variation(counts, expect);
  // Power check on the same setup: always-accept draws from Q and must fail.
  const auto bad = joint_two_token_counts(AlwaysAcceptVerifier(), P, Q, s0, 105);
  EXPECT_GT(chi_square(bad, expect).stat, chi2_critical_0001(cs.df));
}

TEST(SpeculativeVerifier, DraftEqualToTargetAcceptsEverything) {
  core::Rng rng(16);
  const Dist p0 = random_dist(rng, kVocab), p1 = random_dist(rng, kVocab), p2 = random_dist(rng, kVocab);
  draft::Draft d;
  const testing::HostRows q_rows(std::vector<Dist>{p0, p1});
  d.q = q_rows;
  core::Rng vr(1);
  for (int t = 0; t < 1000; ++t) {
    d.tokens = {draw(p0, rng), draw(p1, rng)};
    const std::vector<Dist> p = {p0, p1, p2};
    EXPECT_EQ(SpeculativeVerifier().verify(d, testing::HostRows(p), vr).n_accepted, 2);
  }
}

// One-hot rows, as the processors produce at temperature 0.
Dist one_hot(int32_t id, int n = kVocab) {
  Dist d(n, 0.0f);
  d[id] = 1.0f;
  return d;
}

TEST(GreedyVerifier, AcceptsExactlyTheMatchingPrefix) {
  const GreedyVerifier v;
  core::Rng rng(1);
  // Target argmaxes per position: 4, 1, 6, 2 (bonus). Rows are non-one-hot to show argmax use.
  auto peaked = [](int32_t id) {
    Dist d(kVocab, 0.1f);
    d[id] = 0.3f;
    return d;
  };
  const std::vector<Dist> p = {peaked(4), peaked(1), peaked(6), peaked(2)};
  draft::Draft d;
  d.one_hot = true;
  struct Case {
    std::vector<int32_t> draft;
    int n_accepted;
    int32_t next;
  };
  const std::vector<Case> cases = {
      {{0, 1, 6}, 0, 4},  // rejected at the first position
      {{4, 0, 6}, 1, 1},  // in the middle
      {{4, 1, 5}, 2, 6},  // at the last position
      {{4, 1, 6}, 3, 2},  // all accepted: bonus
  };
  for (const Case& c : cases) {
    d.tokens = c.draft;
    const VerifyResult r = v.verify(d, testing::HostRows(p), rng);
    EXPECT_EQ(r.n_accepted, c.n_accepted);
    EXPECT_EQ(r.next_token, c.next);
  }
  EXPECT_EQ(rng.counter(), 0u) << "greedy verification must not consume randomness";
  // Empty draft: plain greedy step.
  d.tokens.clear();
  const std::vector<Dist> p1 = {peaked(7)};
  const VerifyResult r = v.verify(d, testing::HostRows(p1), rng);
  EXPECT_EQ(r.n_accepted, 0);
  EXPECT_EQ(r.next_token, 7);
}

TEST(SpeculativeVerifier, TemperatureZeroReducesToGreedy) {
  // One-hot p and q: the speculative verifier must give exactly the greedy result, for random
  // drafts and targets (mismatches at every position occur).
  core::Rng rng(17), vr(2);
  const GreedyVerifier greedy;
  const SpeculativeVerifier spec;
  int rejected_at[4] = {0, 0, 0, 0};
  for (int t = 0; t < 2000; ++t) {
    const int g = 3;
    draft::Draft d;
    testing::HostRows q_rows;
    std::vector<Dist> p;
    for (int i = 0; i < g; ++i) {
      // The draft matches the target with probability 1/2 per position.
      const int32_t target = static_cast<int32_t>(rng.next_u32() % kVocab);
      const int32_t x = rng.uniform() < 0.5 ? target : static_cast<int32_t>((target + 1 + rng.next_u32() % 7) % kVocab);
      d.tokens.push_back(x);
      q_rows.push_back(one_hot(x));
      p.push_back(one_hot(target));
    }
    p.push_back(one_hot(static_cast<int32_t>(rng.next_u32() % kVocab)));
    d.q = q_rows;
    const testing::HostRows p_rows(p);
    const VerifyResult a = greedy.verify(d, p_rows, vr), b = spec.verify(d, p_rows, vr);
    EXPECT_EQ(a.n_accepted, b.n_accepted);
    EXPECT_EQ(a.next_token, b.next_token);
    ++rejected_at[a.n_accepted];
  }
  for (int k = 0; k <= 3; ++k) EXPECT_GT(rejected_at[k], 100) << k;
}

TEST(Verifier, RejectsMismatchedInputs) {
  const SpeculativeVerifier v;
  core::Rng rng(1);
  draft::Draft d;
  d.one_hot = true;
  d.tokens = {1, 2};
  const std::vector<Dist> two = {one_hot(0), one_hot(1)};
  EXPECT_THROW(v.verify(d, testing::HostRows(two), rng), Error);  // needs g+1 = 3 rows
  d.tokens = {1, 9};
  const std::vector<Dist> three = {one_hot(0), one_hot(1), one_hot(2)};
  EXPECT_THROW(v.verify(d, testing::HostRows(three), rng), Error);  // token 9 outside vocab 8
  d.one_hot = false;
  d.tokens = {1, 2};
  const testing::HostRows one_q(std::vector<Dist>{one_hot(1)});
  d.q = one_q;
  EXPECT_THROW(v.verify(d, testing::HostRows(three), rng), Error);  // one q row for two tokens
}

TEST(VerifierRegistry, NamesAndUnknownName) {
  const auto names = verifier_names();
  EXPECT_EQ(names, (std::vector<std::string>{"greedy", "speculative"}));
  EXPECT_EQ(make_verifier("greedy")->name(), "greedy");
  EXPECT_EQ(make_verifier("speculative")->name(), "speculative");
  try {
    make_verifier("typical");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("greedy, speculative"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'typical'"), std::string::npos) << e.what();
  }
  register_verifier("always-accept", [](const VerifierOptions&) { return std::make_unique<AlwaysAcceptVerifier>(); });
  EXPECT_EQ(make_verifier("always-accept")->name(), "always-accept");
  // Registered for the CPU only: asking for it on a GPU names where it runs.
  try {
    make_verifier("always-accept", {Device{Device::Kind::Cuda, 0}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("runs on: cpu"), std::string::npos) << e.what();
  }
  // Removed again, so the test holds under --gtest_repeat.
  EXPECT_TRUE(unregister_verifier("always-accept"));
  EXPECT_EQ(verifier_names(), (std::vector<std::string>{"greedy", "speculative"}));
}

TEST(Metrics, CountsAndDerivedFigures) {
  Metrics m;
  m.resize_positions(3);
  m.record_step(3, 3);
  m.record_step(3, 1);
  m.record_step(2, 0);
  m.record_step(0, 0);  // a plain step
  EXPECT_EQ(m.n_steps, 4);
  EXPECT_EQ(m.n_drafted, 8);
  EXPECT_EQ(m.n_accepted, 4);
  EXPECT_DOUBLE_EQ(m.acceptance_rate(), 0.5);
  EXPECT_DOUBLE_EQ(m.mean_accepted_length(), (4.0 + 4.0) / 4.0);
  const auto pp = m.per_position_acceptance();
  ASSERT_EQ(pp.size(), 3u);
  EXPECT_DOUBLE_EQ(pp[0], 2.0 / 3.0);  // steps drafting >= 1: 3, accepting token 1: 2
  EXPECT_DOUBLE_EQ(pp[1], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(pp[2], 1.0 / 2.0);
  EXPECT_EQ(m.accept_length_histogram, (std::vector<int64_t>{2, 1, 0, 1}));
  m.target_step_s = 0.010;
  m.draft_token_s = 0.002;
  EXPECT_DOUBLE_EQ(m.cost_ratio(), 0.2);
  Metrics other = m;
  m.merge(other);
  EXPECT_EQ(m.n_steps, 8);
  EXPECT_EQ(m.accept_length_histogram, (std::vector<int64_t>{4, 2, 0, 2}));
  EXPECT_DOUBLE_EQ(m.mean_accepted_length(), 2.0);
  EXPECT_NEAR(m.cost_ratio(), 0.2, 1e-12);
}

TEST(Metrics, DecodePhaseThroughputExcludesThePrefill) {
  Metrics m;
  EXPECT_EQ(m.decode_tokens_per_second(), 0.0);  // nothing measured
  m.n_generated = 64;
  m.n_decoded = 64;
  m.total_s = 2.5;
  m.prefill_s = 0.5;
  EXPECT_DOUBLE_EQ(m.decode_s(), 2.0);
  EXPECT_DOUBLE_EQ(m.decode_tokens_per_second(), 32.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_second(), 64.0 / 2.5);
  Metrics other = m;
  other.n_decoded = 63;  // a baseline run: its first token came from the prefill
  other.total_s = 3.0;
  other.prefill_s = 0.2;
  m.merge(other);
  EXPECT_EQ(m.n_decoded, 127);
  EXPECT_DOUBLE_EQ(m.prefill_s, 0.7);
  EXPECT_DOUBLE_EQ(m.decode_tokens_per_second(), 127.0 / (5.5 - 0.7));
  m.prefill_s = 9.0;  // inconsistent input never gives a negative time
  EXPECT_EQ(m.decode_s(), 0.0);
  EXPECT_EQ(m.decode_tokens_per_second(), 0.0);
}

TEST(Metrics, AlphaFitAndPredictedSpeedup) {
  // tau = sum_{k<=g} a^k: a = 0.5, g = 3 -> 1.875.
  EXPECT_NEAR(fit_alpha(1.875, 3), 0.5, 1e-9);
  EXPECT_NEAR(fit_alpha(1.0 + 0.9 + 0.81, 2), 0.9, 1e-9);
  EXPECT_DOUBLE_EQ(fit_alpha(1.0, 4), 0.0);   // nothing ever accepted
  EXPECT_DOUBLE_EQ(fit_alpha(0.5, 4), 0.0);   // below the range
  EXPECT_DOUBLE_EQ(fit_alpha(5.0, 4), 1.0);   // everything accepted: tau = g+1
  EXPECT_DOUBLE_EQ(fit_alpha(7.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(fit_alpha(2.0, 0), 0.0);
  // Leviathan et al. Thm 3.8 at a = 0.8, g = 4, c = 0.05: (1 - 0.8^5) / (0.2 * 1.2).
  EXPECT_NEAR(speedup_model(0.8, 4, 0.05), (1.0 - std::pow(0.8, 5)) / (0.2 * 1.2), 1e-12);
  EXPECT_NEAR(speedup_model(1.0, 4, 0.05), 5.0 / 1.2, 1e-12);  // the a -> 1 limit
  EXPECT_DOUBLE_EQ(speedup_model(0.0, 4, 0.0), 1.0);
  Metrics m;
  m.resize_positions(3);
  m.record_step(3, 3);
  m.record_step(3, 3);
  EXPECT_DOUBLE_EQ(m.alpha_fit(), 1.0);
  EXPECT_DOUBLE_EQ(m.predicted_speedup(), 4.0);  // c unmeasured = 0
}

}  // namespace
}  // namespace specmoe::verify
