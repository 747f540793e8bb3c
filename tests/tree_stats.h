// Statistics shared by the token-tree tests (tree_verifier_test.cpp on hand-built Markov chains,
// tree_decoding_test.cpp and cuda_tree_test.cpp through the whole decoding loop): the pooled
// Pearson chi-square of tests/lossless.h, its 0.001 critical value, and the power of the test
// against a wrong distribution at a given total variation distance.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "lossless.h"

namespace specmoe::testing {

// P(chi-square(df, lambda) > crit): Patnaik's approximation of the noncentral chi-square by a
// scaled central one, rho * chi-square(nu) with rho = (df + 2 lambda) / (df + lambda) and
// nu = (df + lambda)^2 / (df + 2 lambda), whose upper tail is taken with the Wilson-Hilferty cube
// approximation (the same one chi2_critical_0001 inverts).
inline double noncentral_chi2_tail(int df, double lambda, double crit) {
  const double k = df + lambda, rho = (df + 2.0 * lambda) / k, nu = k * k / (df + 2.0 * lambda);
  const double x = crit / rho;
  const double z = (std::cbrt(x / nu) - (1.0 - 2.0 / (9.0 * nu))) / std::sqrt(2.0 / (9.0 * nu));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// The power of the 0.001-level test on `df` degrees of freedom with n samples against any output
// distribution at total variation delta from the target's: the noncentrality is
// lambda = n sum (p' - p)^2 / p >= n (sum |p' - p|)^2 = n (2 delta)^2 (Cauchy-Schwarz with
// sum p = 1, over the test's cells), and the power grows with lambda.
inline double chi2_power_at_tv(int df, int64_t n, double delta) {
  const double lambda = static_cast<double>(n) * 4.0 * delta * delta;
  return noncentral_chi2_tail(df, lambda, chi2_critical_0001(df));
}

// Counts of one categorical outcome against its exact probabilities, pooled (tests/lossless.h).
struct CellTest {
  std::map<size_t, int64_t> counts;
  std::vector<double> expect;
  int64_t n = 0;
  ChiSquare result() const { return pooled_chi_square(counts, expect, n); }
};

// The joint of the first D tokens over a vocabulary of V (cell = t1 * V^(D-1) + ... + tD), and
// each token's marginal, observed over generations.
struct FirstTokens {
  int V = 0, D = 0;
  CellTest joint;
  std::vector<CellTest> marginal;  // [d]

  FirstTokens(int vocab, int depth) : V(vocab), D(depth), marginal(static_cast<size_t>(depth)) {}
  void add(const std::vector<int32_t>& tokens) {
    size_t cell = 0;
    for (int d = 0; d < D; ++d) {
      cell = cell * static_cast<size_t>(V) + static_cast<size_t>(tokens[static_cast<size_t>(d)]);
      ++marginal[static_cast<size_t>(d)].counts[static_cast<size_t>(tokens[static_cast<size_t>(d)])];
      ++marginal[static_cast<size_t>(d)].n;
    }
    ++joint.counts[cell];
    ++joint.n;
  }
};

// The verdict on one FirstTokens: every chi-square below the 0.001 critical value (passes) or
// some above it (fails); the largest statistic over critical value, and the joint's df.
struct Verdict {
  bool all_pass = true, any_fail = false;
  double worst_ratio = 0.0;  // max over the tests of statistic / critical value
  int joint_df = 0;
  int64_t impossible = 0;    // outcomes of probability 0 (a correct rule has none)
};
inline Verdict judge(const FirstTokens& f) {
  Verdict v;
  auto one = [&](const CellTest& t, bool is_joint) {
    const ChiSquare cs = t.result();
    v.impossible += cs.impossible;
    if (is_joint) v.joint_df = cs.df;
    if (cs.df < 1) return;
    const double ratio = cs.stat / chi2_critical_0001(cs.df);
    v.worst_ratio = std::max(v.worst_ratio, ratio);
    if (ratio >= 1.0) v.any_fail = true;
  };
  one(f.joint, true);
  for (const auto& m : f.marginal) one(m, false);
  v.all_pass = !v.any_fail && v.impossible == 0;
  v.any_fail = v.any_fail || v.impossible > 0;
  return v;
}

}  // namespace specmoe::testing
