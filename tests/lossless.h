// Losslessness of speculative sampling on a real forward, shared by the CPU loop's test
// (speculative_test.cpp) and the device-resident loop's (cuda_speculative_test.cpp): the exact
// joint distribution of the first two generated tokens by enumeration over the target, and a
// pooled chi-square of the speculative loop's empirical joint against it, with a power check (a
// verifier that always accepts must fail the same test).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/sampling.h"
#include "draft/model_drafter.h"
#include "verify/speculative_decoder.h"
#include "verify/registry.h"
#include "verify/speculative_verifier.h"

namespace specmoe::testing {

using Tokens = std::vector<int32_t>;

// A reduced draft head (ForwardOptions::head_rows): the logits of the vocabulary's first `rows` ids
// for every token of `tokens` equal the full head's first columns, within `tol` (0: bit for bit,
// as the CPU's head rows are independent outputs).
inline void expect_head_prefix(core::Model& m, const Tokens& tokens, int64_t rows, float tol, const std::string& what) {
  const int64_t V = m.config().n_vocab;
  core::KVCache a = m.new_cache(static_cast<int>(tokens.size()) + 8), b = m.new_cache(static_cast<int>(tokens.size()) + 8);
  std::vector<float> full, part;
  m.forward(tokens, a).logits.to_host(full);
  core::ForwardOptions fo;
  fo.head_rows = rows;
  const core::Rows r = m.forward(tokens, b, fo).logits;
  ASSERT_EQ(r.rows, static_cast<int64_t>(tokens.size())) << what;
  ASSERT_EQ(r.cols, rows) << what;
  r.to_host(part);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int64_t j = 0; j < rows; ++j) {
      const float got = part[t * static_cast<size_t>(rows) + static_cast<size_t>(j)];
      const float want = full[t * static_cast<size_t>(V) + static_cast<size_t>(j)];
      if (tol == 0.0f) {
        ASSERT_EQ(got, want) << what << ": token " << t << " id " << j;
      } else {
        ASSERT_NEAR(got, want, tol) << what << ": token " << t << " id " << j;
      }
    }
}

// The target's exact distribution of the first two generated tokens, by enumeration: p(t1) from
// the prompt, then p(t2 | t1) for every t1 in p(t1)'s support. joint[t1 * V + t2].
inline std::vector<double> exact_joint(core::Model& target, const Tokens& prompt, const core::SamplingParams& sp) {
  const int V = target.config().n_vocab;
  const core::SamplerChain chain(sp);
  core::KVCache kv = target.new_cache(64);
  std::vector<float> logits, p1, p2;
  core::ForwardOptions fo;
  fo.logits_all = false;
  target.forward(prompt, kv, fo).logits.to_host(logits);
  chain.distribution(logits, prompt, p1);
  std::vector<double> joint(static_cast<size_t>(V) * V, 0.0);
  Tokens history = prompt;
  history.push_back(0);
  for (int32_t t1 = 0; t1 < V; ++t1) {
    if (p1[t1] <= 0.0f) continue;
    kv.truncate(static_cast<int>(prompt.size()));
    target.forward(std::span<const int32_t>(&t1, 1), kv, fo).logits.to_host(logits);
    history.back() = t1;
    chain.distribution(logits, history, p2);
    for (int32_t t2 = 0; t2 < V; ++t2) joint[static_cast<size_t>(t1) * V + t2] = double(p1[t1]) * p2[t2];
  }
  return joint;
}

// Pearson's chi-square over cells, pooling every cell whose expected count is below 5 into one
// bucket (the usual validity condition of the chi-square approximation). Counts in cells with
// probability 0 are impossible events, reported separately.
struct ChiSquare {
  double stat = 0.0;
  int df = 0;
  int64_t impossible = 0;
  double pooled_mass = 0.0;  // probability of the cells pooled into the one bucket
};
inline ChiSquare pooled_chi_square(const std::map<size_t, int64_t>& counts, const std::vector<double>& p, int64_t n) {
  ChiSquare r;
  double pooled_e = 0.0;
  int64_t pooled_o = 0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const auto it = counts.find(i);
    const int64_t o = it == counts.end() ? 0 : it->second;
    if (p[i] <= 0.0) {
      r.impossible += o;
      continue;
    }
    const double e = static_cast<double>(n) * p[i];
    if (e < 5.0) {
      pooled_e += e;
      pooled_o += o;
      r.pooled_mass += p[i];
      continue;
    }
    r.stat += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_e > 0.0) {
    r.stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  r.df = cells - 1;
  return r;
}

// Upper 0.001 quantile of chi-square(df), Wilson-Hilferty (within 1% for df >= 5; conservative).
inline double chi2_critical_0001(int df) {
  const double k = df, z = 3.0902;
  const double a = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * a * a * a;
}

// Emits the draft and a bonus: samples from q, not p. Must fail the test below (power check).
// Works wherever p lives (it copies the bonus row to the host).
class AlwaysAcceptVerifier : public verify::Verifier {
 public:
  std::string name() const override { return "always-accept"; }
  verify::VerifyResult verify(const draft::Draft& d, const core::Rows& p, core::Rng& rng) const override {
    p.slice(d.size(), 1).to_host(row_);
    return {d.size(), verify::sample_weights(row_, rng), {}};
  }

 private:
  mutable std::vector<float> row_;
};

// Joint counts of the first two tokens over n_trials generations (streams 0..n-1). With
// max_tokens 3 and draft_max g the first step drafts min(g, 2) tokens, so the second token comes
// from an accepted draft, a correction, the bonus (g = 1: the bonus token after an accepted
// first token) or the next step.
inline std::map<size_t, int64_t> two_token_counts(core::Model& target, draft::Drafter& drafter,
                                                  const verify::Verifier& verifier, const Tokens& prompt,
                                                  const core::SamplingParams& sp, int n_trials, int draft_max = 3) {
  verify::DecodeOptions o;
  o.max_tokens = 3;
  o.draft_max = draft_max;
  o.cost_probe_forwards = 0;
  o.stop_at_eog = false;
  verify::SpeculativeDecoder dec(target, drafter, verifier, sp, o);
  const size_t V = static_cast<size_t>(target.config().n_vocab);
  std::map<size_t, int64_t> counts;
  for (int i = 0; i < n_trials; ++i) {
    const verify::GenerationResult r = dec.generate(prompt, static_cast<uint64_t>(i));
    ++counts[static_cast<size_t>(r.tokens[0]) * V + r.tokens[1]];
  }
  return counts;
}

// The first token's marginal of joint counts / probabilities over V x V cells.
inline std::map<size_t, int64_t> first_token_counts(const std::map<size_t, int64_t>& joint, size_t V) {
  std::map<size_t, int64_t> m;
  for (const auto& [cell, n] : joint) m[cell / V] += n;
  return m;
}
inline std::vector<double> first_token_probs(const std::vector<double>& joint, size_t V) {
  std::vector<double> m(V, 0.0);
  for (size_t c = 0; c < joint.size(); ++c) m[c / V] += joint[c];
  return m;
}

// Significance 0.001 (fixed seeds: deterministic). Power: with N = 6,000 generations, a wrong
// output distribution at total variation delta from the target's gives a noncentrality of at
// least N (2 delta)^2 (Cauchy-Schwarz over the pooled cells). With the ~140 pooled cells of the
// temperature-1 case (critical value ~194) the test detects delta = 0.071 with probability 0.99;
// with the ~50 cells of the top-p case (critical ~91), delta = 0.060. The hand-built tests in
// verifier_test.cpp cover 2% errors; this one proves the whole loop (draft sampling, batched
// target forward, per-position distributions with the drafted prefix as history, rollback,
// bonus and next step) on a real forward, and the always-accept verifier must fail it.
constexpr int kModelTrials = 6000;

// Among short prompts (BOS + one byte token), the one whose first token is the most uncertain
// (highest entropy of the processed distribution): the most cells for the test to check,
// whatever the synthetic weights are. Fills `joint` with its exact two-token distribution.
inline Tokens most_uncertain_prompt(core::Model& target, const core::SamplingParams& sp, std::vector<double>& joint) {
  const core::SamplerChain chain(sp);
  core::KVCache kv = target.new_cache(8);
  std::vector<float> logits, p1;
  core::ForwardOptions fo;
  fo.logits_all = false;
  Tokens best;
  double best_entropy = -1.0;
  for (int32_t byte = 32; byte < 127; ++byte) {
    const Tokens prompt = {1, 3 + byte};  // BOS, then the byte token <0xNN> (ids 3..258)
    kv.clear();
    target.forward(prompt, kv, fo).logits.to_host(logits);
    chain.distribution(logits, prompt, p1);
    double h = 0.0;
    for (float p : p1)
      if (p > 0.0f) h -= p * std::log(static_cast<double>(p));
    if (h > best_entropy) {
      best_entropy = h;
      best = prompt;
    }
  }
  joint = exact_joint(target, best, sp);
  return best;
}

// What check_lossless runs: the draft length of the loop under test (draft_max 1 puts the bonus
// token of an accepted first draft at the second position) and whether the always-accept
// verifier must fail the same test (the power check; it fails either by the statistic or by
// emitting tokens the target never emits, which top-p and top-k make possible).
struct LosslessCase {
  int draft_max = 3;
  bool power_check = true;
  int draft_vocab = 0;  // > 0: the drafter drafts from the first draft_vocab ids only
};

// The loop on the target's device: the speculative verifier's implementation for that device
// (the CUDA one for a GPU target), the draft model wherever it runs. Tests the joint of the first
// two tokens and, separately, the first token's marginal against the target's exact ones.
inline void check_lossless(core::Model& target, core::Model& draft_model, const core::SamplingParams& sp,
                           LosslessCase lc) {
  std::vector<double> expect;
  const Tokens prompt = most_uncertain_prompt(target, sp, expect);
  draft::ModelDrafter drafter(&draft_model, target.config().n_vocab, -1, 64);
  drafter.set_vocabulary_limit(lc.draft_vocab);
  const auto spec = verify::make_verifier("speculative", {target.device()});
  const auto counts = two_token_counts(target, drafter, *spec, prompt, sp, kModelTrials, lc.draft_max);
  const size_t V = static_cast<size_t>(target.config().n_vocab);
  const ChiSquare cs = pooled_chi_square(counts, expect, kModelTrials);
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_GE(cs.df, 5) << "enough cells to mean something";
  EXPECT_LT(cs.pooled_mass, 0.5) << "most of the mass must be in tested cells";
  std::printf("lossless T=%.1f top_k=%d top_p=%.2f min_p=%.2f rep=%.2f ngram=%d g=%d draft vocab %d: chi2 %.1f df %d "
              "critical %.1f (pooled mass %.3f)\n",
              sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty, sp.no_repeat_ngram, lc.draft_max, lc.draft_vocab,
              cs.stat, cs.df, chi2_critical_0001(cs.df), cs.pooled_mass);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "df " << cs.df;
  const std::vector<double> m_expect = first_token_probs(expect, V);
  const ChiSquare ms = pooled_chi_square(first_token_counts(counts, V), m_expect, kModelTrials);
  EXPECT_EQ(ms.impossible, 0);
  std::printf("  first token: chi2 %.1f df %d critical %.1f (pooled mass %.3f)\n", ms.stat, ms.df,
              chi2_critical_0001(std::max(ms.df, 1)), ms.pooled_mass);
  if (ms.df >= 1) {
    EXPECT_LT(ms.stat, chi2_critical_0001(ms.df)) << "first-token marginal, df " << ms.df;
  }
  if (lc.power_check) {
    const AlwaysAcceptVerifier bad;
    const auto bad_counts = two_token_counts(target, drafter, bad, prompt, sp, kModelTrials, lc.draft_max);
    const ChiSquare bcs = pooled_chi_square(bad_counts, expect, kModelTrials);
    EXPECT_TRUE(bcs.stat > chi2_critical_0001(bcs.df) || bcs.impossible > 0)
        << "the always-accept verifier passed: df " << bcs.df << " chi2 " << bcs.stat;
    std::printf("  always-accept: chi2 %.1f df %d critical %.1f, impossible %lld\n", bcs.stat, bcs.df,
                chi2_critical_0001(bcs.df), static_cast<long long>(bcs.impossible));
  }
}

inline void check_lossless(core::Model& target, core::Model& draft_model, const core::SamplingParams& sp,
                           bool power_check) {
  check_lossless(target, draft_model, sp, LosslessCase{3, power_check});
}

}  // namespace specmoe::testing
