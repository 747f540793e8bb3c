// Losslessness of tree verification through the whole decoding loop on a real forward, shared by
// the CPU tests (tree_decoding_test.cpp) and the GPU ones (cuda_tree_test.cpp): the target's exact
// distribution of the first three generated tokens, enumerated with tree batches (all of a
// prefix's continuations as the children of one root, in one forward), and chi-square tests of the
// loop's joint and marginals against it.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <map>
#include <memory>
#include <vector>

#include "core/model.h"
#include "core/sampling.h"
#include "draft/drafter.h"
#include "tree_stats.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"
#include "verify/verifier.h"

namespace specmoe::testing {

// The exact distribution of the first three tokens after `prompt`: the joint's cells whose
// expected count over n runs is at least 5 (exactly), the rest pooled; each token's marginal; and
// the support of every step, to count impossible outcomes.
struct ExactThree {
  int V = 0;
  int64_t n = 0;
  std::map<size_t, double> cells;              // t1 V^2 + t2 V + t3 -> probability, cells with n p >= 5
                                               // (judged with fewer runs, those with runs p >= 5)
  std::vector<std::vector<double>> marginal;   // [3][V]
  std::vector<float> p1;                       // [V]
  std::vector<float> p2;                       // [V * V]: p(t2 | t1)
  std::vector<std::vector<uint8_t>> support3;  // [t1 V + t2]: t3 possible (empty: p(t1 t2) = 0)
};

// One forward per first token t1 in p1's support: the prompt's cache plus t1, then every t2 of
// p(. | t1)'s support as a child of t1 in one tree batch, whose rows are p(t3 | t1 t2).
inline ExactThree exact_three(core::Model& target, const std::vector<int32_t>& prompt, const core::SamplingParams& sp,
                              int64_t n) {
  ExactThree e;
  const int V = e.V = target.config().n_vocab;
  e.n = n;
  e.marginal.assign(3, std::vector<double>(static_cast<size_t>(V), 0.0));
  e.p2.assign(static_cast<size_t>(V) * V, 0.0f);
  e.support3.resize(static_cast<size_t>(V) * V);
  const core::SamplerChain chain(sp);
  const int c = static_cast<int>(prompt.size());
  core::KVCache kv = target.new_cache(c + V + 2);
  core::ForwardOptions last;
  last.logits_all = false;
  std::vector<float> logits, row, p3;
  target.forward(prompt, kv, last).logits.to_host(logits);
  chain.distribution(logits, prompt, e.p1);
  std::vector<int32_t> history = prompt, kids, parents;
  for (int32_t t1 = 0; t1 < V; ++t1) {
    const double a = e.p1[static_cast<size_t>(t1)];
    if (a <= 0.0) continue;
    e.marginal[0][static_cast<size_t>(t1)] += a;
    kv.truncate(c);
    target.forward(std::span<const int32_t>(&t1, 1), kv, last).logits.to_host(logits);
    history.resize(static_cast<size_t>(c));
    history.push_back(t1);
    std::vector<float> p2;
    chain.distribution(logits, history, p2);
    kids.clear();
    for (int32_t t2 = 0; t2 < V; ++t2)
      if (p2[static_cast<size_t>(t2)] > 0.0f) kids.push_back(t2);
    std::copy(p2.begin(), p2.end(), e.p2.begin() + static_cast<size_t>(t1) * V);
    parents.assign(kids.size(), -1);  // every t2 a child of t1, the last cached token
    core::Batch batch(kids);
    batch.parents = parents;
    target.forward(batch, kv).logits.to_host(logits);
    history.push_back(0);
    for (size_t i = 0; i < kids.size(); ++i) {
      const int32_t t2 = kids[i];
      const double ab = a * p2[static_cast<size_t>(t2)];
      e.marginal[1][static_cast<size_t>(t2)] += ab;
      history.back() = t2;
      row.assign(logits.begin() + static_cast<ptrdiff_t>(i) * V, logits.begin() + static_cast<ptrdiff_t>(i + 1) * V);
      chain.distribution(row, history, p3);
      auto& sup = e.support3[static_cast<size_t>(t1) * V + static_cast<size_t>(t2)];
      sup.assign(static_cast<size_t>(V), 0);
      for (int32_t t3 = 0; t3 < V; ++t3) {
        const double abc = ab * p3[static_cast<size_t>(t3)];
        if (p3[static_cast<size_t>(t3)] <= 0.0f) continue;
        sup[static_cast<size_t>(t3)] = 1;
        e.marginal[2][static_cast<size_t>(t3)] += abc;
        if (abc * static_cast<double>(n) >= 5.0)
          e.cells[(static_cast<size_t>(t1) * V + static_cast<size_t>(t2)) * V + static_cast<size_t>(t3)] = abc;
      }
    }
  }
  return e;
}

// The loop's first three tokens over n generations (streams 0..n-1), against `exact`.
struct LoopVerdict {
  double joint_stat = 0.0, joint_critical = 0.0, worst_ratio = 0.0;
  int joint_df = 0;
  int64_t impossible = 0;
  double listed_mass = 0.0;  // exact mass of the joint's separate cells (the rest is one pooled cell)
  bool pass() const { return worst_ratio < 1.0 && impossible == 0; }
};

inline LoopVerdict judge_three(const ExactThree& e, const std::vector<std::vector<int32_t>>& runs) {
  const int V = e.V;
  const int64_t n = static_cast<int64_t>(runs.size());
  LoopVerdict v;
  std::map<size_t, int64_t> joint;
  std::vector<std::map<size_t, int64_t>> marg(3);
  for (const auto& t : runs) {
    const size_t a = static_cast<size_t>(t[0]), b = static_cast<size_t>(t[1]), c = static_cast<size_t>(t[2]);
    const bool possible = e.p1[a] > 0.0f && e.p2[a * V + b] > 0.0f && !e.support3[a * V + b].empty() &&
                          e.support3[a * V + b][c] != 0;
    if (!possible) {
      ++v.impossible;
      continue;
    }
    ++joint[(a * V + b) * V + c];
    ++marg[0][a];
    ++marg[1][b];
    ++marg[2][c];
  }
  // The joint: the cells expected 5 or more times in these n runs, plus one pooled cell for
  // everything else (its exact mass is 1 - theirs).
  double stat = 0.0;
  int64_t listed_o = 0;
  int df = 0;
  for (const auto& [cell, p] : e.cells) {
    if (static_cast<double>(n) * p < 5.0) continue;
    ++df;
    v.listed_mass += p;
    const auto it = joint.find(cell);
    const int64_t o = it == joint.end() ? 0 : it->second;
    listed_o += o;
    const double ex = static_cast<double>(n) * p;
    stat += (o - ex) * (o - ex) / ex;
  }
  const double rest_e = static_cast<double>(n) * (1.0 - v.listed_mass);
  if (rest_e >= 1e-9) {
    const double rest_o = static_cast<double>(n - v.impossible - listed_o);
    stat += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
    ++df;
  }
  v.joint_stat = stat;
  v.joint_df = df - 1;
  v.joint_critical = chi2_critical_0001(std::max(v.joint_df, 1));
  v.worst_ratio = v.joint_df > 0 ? stat / v.joint_critical : 0.0;
  for (int d = 0; d < 3; ++d) {
    const ChiSquare cs = pooled_chi_square(marg[static_cast<size_t>(d)], e.marginal[static_cast<size_t>(d)], n);
    if (cs.df > 0) v.worst_ratio = std::max(v.worst_ratio, cs.stat / chi2_critical_0001(cs.df));
  }
  return v;
}

// n generations of three tokens with `drafter` and `verifier` (trees of `tree`), max_tokens 3.
inline std::vector<std::vector<int32_t>> loop_three(core::Model& target, draft::Drafter& drafter,
                                                    const verify::Verifier& verifier, const std::vector<int32_t>& prompt,
                                                    const core::SamplingParams& sp, const draft::TreeSpec& tree,
                                                    int draft_max, int n) {
  verify::DecodeOptions o;
  o.max_tokens = 3;
  o.draft_max = draft_max;
  o.tree = tree;
  o.cost_probe_forwards = 0;
  o.stop_at_eog = false;
  verify::SpeculativeDecoder dec(target, drafter, verifier, sp, o);
  std::vector<std::vector<int32_t>> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(dec.generate(prompt, static_cast<uint64_t>(i)).tokens);
  return out;
}

// A tree's shape: children per node at each depth (widths), or a dynamic tree of `nodes` nodes,
// `depth` deep, expanding the top `k` (draft/token_tree.h TreeSpec), with children drawn as `s` says.
inline draft::TreeSpec tree_spec(std::vector<int> widths, int nodes, int depth, int k, draft::TreeSampling s) {
  draft::TreeSpec t;
  t.widths = std::move(widths);
  t.nodes = nodes;
  t.depth = depth;
  t.top_k = k;
  t.sampling = s;
  return t;
}

// A drafter's trees (make_drafter: a fresh one per use) drawn from q with replacement (3,2), without
// (2,2) and top-k (dynamic 6/3/2) through the loop at `sp`: the first three tokens after `prompt`
// against the target's exact joint (6000 runs each); the verifier that keeps p after a rejection
// (no residual) fails the same test where it changes tokens (2000 runs).
inline void expect_trees_lossless(core::Model& target, const std::vector<int32_t>& prompt, const core::SamplingParams& sp,
                                  const std::function<std::unique_ptr<draft::Drafter>()>& make_drafter,
                                  const std::string& label) {
  constexpr int kRuns = 6000, kBroken = 2000;
  const ExactThree exact = exact_three(target, prompt, sp, kRuns);
  const verify::SpeculativeVerifier good, keep_residual(verify::RuleFault::KeepResidual);
  const std::vector<std::pair<std::string, draft::TreeSpec>> cases = {
      {"widths 3,2 with replacement", tree_spec({3, 2}, 0, 0, 0, draft::TreeSampling::Stochastic)},
      {"widths 2,2 without replacement", tree_spec({2, 2}, 0, 0, 0, draft::TreeSampling::StochasticNoReplace)},
      {"dynamic 6/3/2 top-k", tree_spec({}, 6, 3, 2, draft::TreeSampling::TopK)}};
  for (const auto& [name, shape] : cases) {
    const auto d = make_drafter(), bad_d = make_drafter();
    const auto runs = loop_three(target, *d, good, prompt, sp, shape, 4, kRuns);
    const LoopVerdict v = judge_three(exact, runs);
    const auto bad_runs = loop_three(target, *bad_d, keep_residual, prompt, sp, shape, 4, kBroken);
    const LoopVerdict bad = judge_three(exact, bad_runs);
    const bool triggered = !std::equal(bad_runs.begin(), bad_runs.end(), runs.begin());
    std::printf("%s tree %s: joint chi2 %.1f df %d critical %.1f, worst ratio %.3f | no residual: worst ratio %.2f\n",
                label.c_str(), name.c_str(), v.joint_stat, v.joint_df, v.joint_critical, v.worst_ratio, bad.worst_ratio);
    EXPECT_TRUE(v.pass()) << label << " " << name << ": worst ratio " << v.worst_ratio << ", impossible " << v.impossible;
    EXPECT_GE(v.joint_df, 20) << label << " " << name;
    if (triggered) {
      EXPECT_FALSE(bad.pass()) << label << " " << name << ": the broken rule (no residual) passed";
    }
  }
}

}  // namespace specmoe::testing
