// Token trees as data and the tree verifiers on hand-built distributions (no model): TokenTree and
// TreeSpec, the greedy walk, chains as one-child trees (same tokens, same uniforms), the random-
// number layout, and losslessness of the speculative rule on trees of every candidate kind
// (deterministic top-k, drawn with replacement: SpecInfer; without: recursive rejection sampling)
// proven statistically on a first-order Markov "model" whose exact distributions are known, with
// deliberately broken variants failing the same tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

#include "base/error.h"
#include "core/rng.h"
#include "core/sampling.h"
#include "draft/token_tree.h"
#include "host_rows.h"
#include "tree_stats.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_verifier.h"

namespace specmoe::verify {
namespace {

using draft::TreeSampling;
using Dist = std::vector<float>;

// ---- TokenTree and TreeSpec ------------------------------------------------------------------

TEST(TokenTree, DepthsChildrenPathsAndTheVerifyBatch) {
  // root -> {0: 10, 1: 11}; 0 -> {2: 12, 3: 13}; 3 -> {4: 14}
  draft::TokenTree t;
  t.tokens = {10, 11, 12, 13, 14};
  t.parents = {-1, -1, 0, 0, 3};
  t.validate(100);
  EXPECT_FALSE(t.is_chain());
  EXPECT_EQ(t.depth(0), 1);
  EXPECT_EQ(t.depth(4), 3);
  EXPECT_EQ(t.max_depth(), 3);
  EXPECT_EQ(t.children(-1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(t.children(0), (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(t.children(4).empty());
  std::vector<int32_t> path;
  t.path_to(4, path);
  EXPECT_EQ(path, (std::vector<int32_t>{0, 3, 4}));
  std::vector<int32_t> bt, bp;
  t.verify_batch(7, bt, bp);
  EXPECT_EQ(bt, (std::vector<int32_t>{7, 10, 11, 12, 13, 14}));
  EXPECT_EQ(bp, (std::vector<int32_t>{-1, 0, 0, 1, 1, 4}));
  const TreeChildren kids(t);
  EXPECT_EQ(std::vector<int32_t>(kids.of(-1).begin(), kids.of(-1).end()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::vector<int32_t>(kids.of(3).begin(), kids.of(3).end()), (std::vector<int32_t>{4}));
  EXPECT_TRUE(kids.of(1).empty());

  // A chain needs no parents; its batch has none either.
  draft::TokenTree c;
  c.tokens = {5, 6, 7};
  EXPECT_TRUE(c.is_chain());
  EXPECT_EQ(c.depth(2), 3);
  EXPECT_EQ(c.children(0), (std::vector<int32_t>{1}));
  c.verify_batch(4, bt, bp);
  EXPECT_EQ(bt, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_TRUE(bp.empty());

  // Truncation keeps parents before children and re-indexes them.
  draft::TokenTree u = t;
  EXPECT_EQ(u.truncate(4, 2), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(u.tokens, (std::vector<int32_t>{10, 11, 12, 13}));
  u = t;
  u.tokens = {10, 11, 12, 13, 14};
  u.parents = {-1, 0, 1, -1, 3};  // depths 1 2 3 1 2
  EXPECT_EQ(u.truncate(10, 2), (std::vector<int32_t>{0, 1, 3, 4}));
  EXPECT_EQ(u.parents, (std::vector<int32_t>{-1, 0, -1, 2}));

  draft::TokenTree bad = t;
  bad.parents[2] = 2;  // not an earlier node
  EXPECT_THROW(bad.validate(100), Error);
  bad = t;
  bad.tokens[1] = 100;
  EXPECT_THROW(bad.validate(100), Error);
}

TEST(TreeSpec, ParsesValidatesAndDescribes) {
  draft::TreeSpec s;
  EXPECT_TRUE(s.empty());
  s.widths = draft::parse_tree_widths("4,2,2,1");
  EXPECT_EQ(s.widths, (std::vector<int>{4, 2, 2, 1}));
  EXPECT_EQ(s.max_nodes(), 4 + 8 + 16 + 16);
  EXPECT_EQ(s.max_depth(9), 4);
  EXPECT_EQ(s.describe(), "widths 4,2,2,1, topk");
  s.validate();
  for (const char* bad : {"", "4,,2", "0", "4,a", "65", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"})
    EXPECT_THROW(draft::parse_tree_widths(bad), Error) << bad;
  draft::TreeSpec d;
  d.nodes = 16;
  d.top_k = 3;
  d.sampling = draft::parse_tree_sampling("stochastic-noreplace");
  EXPECT_EQ(d.max_depth(5), 5);  // no depth: the draft length
  EXPECT_EQ(d.max_nodes(), 16);
  EXPECT_EQ(d.describe(), "nodes 16, depth 0, top-k 3, stochastic-noreplace");
  d.validate();
  d.widths = {2};
  EXPECT_THROW(d.validate(), Error);  // both shapes
  EXPECT_THROW(draft::parse_tree_sampling("beam"), Error);
  draft::TreeSpec big;
  big.widths = {64, 64};
  EXPECT_THROW(big.validate(), Error);  // 64 + 4096 nodes
}

// ---- greedy ------------------------------------------------------------------------------------

TEST(GreedyTree, FollowsTheChildEqualToTheTargetArgmax) {
  draft::TokenTree t;  // root -> {0: 3, 1: 5}; 1 -> {2: 1, 3: 2}; 3 -> {4: 4}
  t.tokens = {3, 5, 1, 2, 4};
  t.parents = {-1, -1, 1, 1, 3};
  // argmax per row: root 5 (node 1), node 1 -> 2 (node 3), node 3 -> 4 (node 4), node 4 -> 6.
  const std::vector<int32_t> am = {5, 0, 2, 0, 4, 6};
  VerifyResult r = verify_greedy_tree(t, am);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(r.n_accepted, 3);
  EXPECT_EQ(r.next_token, 6);
  const std::vector<int32_t> am2 = {5, 0, 7, 0, 4, 6};  // node 1's argmax 7 is no child: stop there
  r = verify_greedy_tree(t, am2);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1}));
  EXPECT_EQ(r.next_token, 7);
  const std::vector<int32_t> am3 = {8, 0, 0, 0, 0, 0};
  r = verify_greedy_tree(t, am3);
  EXPECT_EQ(r.n_accepted, 0);
  EXPECT_EQ(r.next_token, 8);
  EXPECT_THROW(verify_greedy_tree(t, std::vector<int32_t>{1, 2}), Error);
}

// ---- the Markov toy ------------------------------------------------------------------------------
//
// P[a] is the target's next-token distribution after token a, Q[a] the draft's. A "drafter" grows
// a tree from the last token with children from Q (the top-k, or draws with or without
// replacement); the target's row of a node is P[its token]. The loop emits the accepted path and
// the next token until D tokens are out, exactly as SpeculativeDecoder does, so the first D tokens
// must be distributed as P's chain: joint P[s0][t1] P[t1][t2] ... and marginals by its powers.

constexpr int V = 5;

struct Markov {
  std::vector<Dist> P, Q;
};

Dist random_dist(core::Rng& rng, double floor) {
  Dist d(V);
  double s = 0.0;
  for (auto& v : d) s += (v = static_cast<float>(floor + rng.uniform()));
  for (auto& v : d) v = static_cast<float>(v / s);
  return d;
}

// Temperature 1: random rows with every entry >= ~5% (expected joint counts >= 5 everywhere).
// Temperature 0.7 + top-p 0.9: rows processed by the real sampling chain from random logits, so
// target and draft keep different supports (draft children the target never emits, target tokens
// the draft never proposes).
Markov make_markov(uint64_t seed, bool top_p) {
  core::Rng rng(seed);
  Markov m;
  core::SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_p = 0.9f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  const core::SamplerChain chain(sp);
  auto row = [&] {
    if (!top_p) return random_dist(rng, 0.4);
    std::vector<float> logits(V), probs;
    for (auto& l : logits) l = static_cast<float>(0.8 * rng.normal());
    chain.distribution(logits, {}, probs);
    return probs;
  };
  for (int a = 0; a < V; ++a) m.P.push_back(row());
  for (int a = 0; a < V; ++a) m.Q.push_back(row());
  return m;
}

// Children of one node drawn from q as a tree drafter of `mode` draws them.
void draw_children(const Dist& q, int width, TreeSampling mode, core::Rng& rng, std::vector<int32_t>& out) {
  out.clear();
  if (mode == TreeSampling::TopK) {
    std::vector<int32_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
    for (int i = 0; i < width && i < V && q[ids[i]] > 0.0f; ++i) out.push_back(ids[i]);
    return;
  }
  Dist left = q;
  for (int i = 0; i < width; ++i) {
    const int32_t x = sample_weights(left, rng);
    if (x < 0) break;
    out.push_back(x);
    if (mode == TreeSampling::StochasticNoReplace) left[x] = 0.0f;
  }
}

struct Trial {
  draft::Draft d;
  testing::HostRows q_rows, p_rows;
  std::vector<int32_t> kids;
};

// Grows a static tree of `widths` below `root` into t.d (q rows per expanded node) and the
// target rows (root first).
void grow(const Markov& mk, int32_t root, const std::vector<int>& widths, TreeSampling mode, core::Rng& rng,
          Trial& t) {
  draft::Draft& d = t.d;
  d.clear();
  d.one_hot = mode == TreeSampling::TopK;
  d.without_replacement = mode == TreeSampling::StochasticNoReplace;
  t.q_rows.clear();
  std::vector<int32_t> frontier = {-1}, next;
  int n_q = 0;
  for (int w : widths) {
    next.clear();
    for (int32_t node : frontier) {
      const int32_t ctx = node < 0 ? root : d.tokens[static_cast<size_t>(node)];
      draw_children(mk.Q[static_cast<size_t>(ctx)], w, mode, rng, t.kids);
      if (t.kids.empty()) continue;
      if (!d.one_hot) t.q_rows.push_back(mk.Q[static_cast<size_t>(ctx)]);
      for (int32_t x : t.kids) {
        next.push_back(d.size());
        d.tokens.push_back(x);
        d.parents.push_back(node);
        if (!d.one_hot) d.q_row.push_back(n_q);
      }
      if (!d.one_hot) ++n_q;
    }
    frontier = next;
  }
  if (!d.one_hot) d.q = t.q_rows;
  t.p_rows.clear();
  t.p_rows.push_back(mk.P[static_cast<size_t>(root)]);
  for (int32_t x : d.tokens) t.p_rows.push_back(mk.P[static_cast<size_t>(x)]);
}

// The loop: verify trees until D tokens are out; the first D tokens of each of n runs.
testing::FirstTokens run_markov(const Verifier& v, const Markov& mk, const std::vector<int>& widths,
                                TreeSampling mode, int D, int n, uint64_t seed, double* acceptance = nullptr) {
  constexpr int32_t s0 = 2;
  core::Rng draft_rng(seed, 1), verify_rng(seed, 2);
  testing::FirstTokens f(V, D);
  Trial t;
  std::vector<int32_t> out;
  int64_t drafted_depth = 0, accepted = 0;
  for (int i = 0; i < n; ++i) {
    out.clear();
    int32_t last = s0;
    while (static_cast<int>(out.size()) < D) {
      grow(mk, last, widths, mode, draft_rng, t);
      const VerifyResult r = v.verify(t.d, t.p_rows, verify_rng);
      for (int k = 0; k < r.n_accepted; ++k) out.push_back(t.d.tokens[static_cast<size_t>(r.accepted_node(k))]);
      out.push_back(r.next_token);
      last = out.back();
      drafted_depth += t.d.max_depth();
      accepted += r.n_accepted;
    }
    f.add(out);
  }
  if (acceptance) *acceptance = drafted_depth > 0 ? static_cast<double>(accepted) / drafted_depth : 0.0;
  return f;
}

// The exact first-D distribution of P's chain from s0 = 2.
void fill_expected(const Markov& mk, testing::FirstTokens& f) {
  const int D = f.D;
  size_t cells = 1;
  for (int d = 0; d < D; ++d) cells *= V;
  f.joint.expect.assign(cells, 0.0);
  for (auto& m : f.marginal) m.expect.assign(V, 0.0);
  std::vector<int32_t> t(static_cast<size_t>(D));
  for (size_t c = 0; c < cells; ++c) {
    size_t rest = c;
    for (int d = D - 1; d >= 0; --d) {
      t[static_cast<size_t>(d)] = static_cast<int32_t>(rest % V);
      rest /= V;
    }
    double p = 1.0;
    int32_t prev = 2;
    for (int d = 0; d < D; ++d) {
      p *= mk.P[static_cast<size_t>(prev)][static_cast<size_t>(t[static_cast<size_t>(d)])];
      prev = t[static_cast<size_t>(d)];
    }
    f.joint.expect[c] = p;
    for (int d = 0; d < D; ++d) f.marginal[static_cast<size_t>(d)].expect[static_cast<size_t>(t[static_cast<size_t>(d)])] += p;
  }
}

// Presents stochastic candidates with the other replacement rule (a verifier that trusts the wrong
// flag), or as one-hot candidates (ignoring q: which is lossless, only slower).
class FlagFlip : public Verifier {
 public:
  enum Kind { SwapReplacement, IgnoreQ };
  explicit FlagFlip(Kind k) : kind_(k) {}
  std::string name() const override { return "flag-flip"; }
  VerifyResult verify(const draft::Draft& d, const core::Rows& p, core::Rng& rng) const override {
    draft::Draft copy = d;
    if (kind_ == SwapReplacement) copy.without_replacement = !copy.without_replacement;
    else {
      copy.one_hot = true;
      copy.q = {};
    }
    return real_.verify(copy, p, rng);
  }

 private:
  Kind kind_;
  SpeculativeVerifier real_;
};

// Significance 0.001 per chi-square; fixed seeds (deterministic). Power: with n = 120,000 runs the
// joint of the first D = 3 tokens (at most 124 df, pooled) detects any output distribution at
// total variation 0.02 from the target's with probability > 0.999 (noncentrality >= n (2 delta)^2
// = 192 against a critical value of ~172 for 124 df: testing::chi2_power_at_tv, checked below for
// the df each test actually has), and each marginal (4 df) with probability ~1. The 4th token's
// marginal covers depth-4 trees. Runtime: ~0.5-1.5 s per tree shape and candidate kind on one
// core.
constexpr int kRuns = 120000;
constexpr int kDepth = 3;  // tokens in the joint; marginals of the first kMarginals tokens
constexpr int kMarginals = 4;

const std::vector<std::vector<int>> kShapes = {{1, 1, 1, 1}, {4}, {2, 2}, {3, 2, 1}, {4, 2, 2, 1}};

std::string shape_name(const std::vector<int>& w) { return draft::format_tree_widths(w); }

// Runs every shape through `v` and expects a pass (lossless) or a failure of at least one shape.
void check_rule(const Verifier& v, TreeSampling mode, bool top_p, uint64_t seed, bool expect_lossless,
                const std::vector<std::vector<int>>& shapes = kShapes) {
  const Markov mk = make_markov(seed, top_p);
  bool some_failure = false;
  for (const auto& widths : shapes) {
    // The first kMarginals tokens of every run: their marginals, and the joint of the first kDepth.
    testing::FirstTokens f = run_markov(v, mk, widths, mode, kMarginals, kRuns, seed + 17);
    fill_expected(mk, f);
    testing::FirstTokens j(V, kDepth);
    fill_expected(mk, j);
    for (const auto& [cell, count] : f.joint.counts) j.joint.counts[cell / V] += count;  // drop the last token
    j.joint.n = f.joint.n;
    j.marginal = f.marginal;
    const testing::Verdict verdict = testing::judge(j);
    const double power = testing::chi2_power_at_tv(verdict.joint_df, kRuns, 0.02);
    std::printf("%-16s %-20s %-9s widths %-8s: worst chi2/critical %.3f (joint df %d, power at TV 0.02: %.4f)%s\n",
                v.name().c_str(), draft::tree_sampling_name(mode), top_p ? "T0.7/p0.9" : "T1", shape_name(widths).c_str(),
                verdict.worst_ratio, verdict.joint_df, power, verdict.impossible ? " impossible outcomes" : "");
    if (expect_lossless) {
      EXPECT_TRUE(verdict.all_pass) << shape_name(widths) << ": worst ratio " << verdict.worst_ratio << ", "
                                    << verdict.impossible << " impossible";
      EXPECT_GE(verdict.joint_df, 20) << "enough cells to mean something";
      EXPECT_GT(power, 0.999) << "df " << verdict.joint_df;
    }
    some_failure |= verdict.any_fail;
  }
  if (!expect_lossless) {
    EXPECT_TRUE(some_failure) << v.name() << " should be caught";
  }
}

TEST(TreeLossless, DeterministicCandidatesTemperature1) {
  check_rule(SpeculativeVerifier(), TreeSampling::TopK, false, 301, true);
}
TEST(TreeLossless, DeterministicCandidatesTopP) {
  check_rule(SpeculativeVerifier(), TreeSampling::TopK, true, 302, true);
}
TEST(TreeLossless, WithReplacementTemperature1) {
  check_rule(SpeculativeVerifier(), TreeSampling::Stochastic, false, 303, true);
}
TEST(TreeLossless, WithReplacementTopP) {
  check_rule(SpeculativeVerifier(), TreeSampling::Stochastic, true, 304, true);
}
TEST(TreeLossless, WithoutReplacementTemperature1) {
  check_rule(SpeculativeVerifier(), TreeSampling::StochasticNoReplace, false, 305, true);
}
TEST(TreeLossless, WithoutReplacementTopP) {
  check_rule(SpeculativeVerifier(), TreeSampling::StochasticNoReplace, true, 306, true);
}

// The broken variants, each on the shapes with more than one child somewhere (a one-child
// chain has no residual to get wrong twice, and no siblings to renormalise for).
const std::vector<std::vector<int>> kBranching = {{4}, {3, 2, 1}};

TEST(TreeLossless, BrokenVariantsFail) {
  const SpeculativeVerifier keep_residual(RuleFault::KeepResidual);
  const FlagFlip swap(FlagFlip::SwapReplacement);
  for (bool top_p : {false, true}) {
    check_rule(keep_residual, TreeSampling::TopK, top_p, 311, false, kBranching);
    check_rule(keep_residual, TreeSampling::Stochastic, top_p, 312, false, kBranching);
    check_rule(keep_residual, TreeSampling::StochasticNoReplace, top_p, 313, false, kBranching);
    // Draws with replacement verified with q renormalised after each child, and the reverse.
    check_rule(swap, TreeSampling::Stochastic, top_p, 314, false, kBranching);
    check_rule(swap, TreeSampling::StochasticNoReplace, top_p, 315, false, kBranching);
  }
}

TEST(TreeLossless, RealDraftDistributionsAcceptMoreThanOneHot) {
  // Treating sampled children as one-hot (what engines without draft probabilities do) is still
  // lossless, but accepts less: the ratio test with the real q is the point of multi-draft
  // verification.
  const Markov mk = make_markov(321, false);
  const FlagFlip one_hot(FlagFlip::IgnoreQ);
  for (TreeSampling mode : {TreeSampling::Stochastic, TreeSampling::StochasticNoReplace}) {
    double with_q = 0.0, without_q = 0.0;
    run_markov(SpeculativeVerifier(), mk, {3, 2}, mode, 3, 20000, 41, &with_q);
    testing::FirstTokens f = run_markov(one_hot, mk, {3, 2}, mode, 3, kRuns, 41, &without_q);
    fill_expected(mk, f);
    EXPECT_TRUE(testing::judge(f).all_pass) << "one-hot treatment is lossless too";
    EXPECT_GT(with_q, without_q + 0.05) << draft::tree_sampling_name(mode);
    std::printf("%s: acceptance per drafted depth %.3f with q, %.3f treating children as one-hot\n",
                draft::tree_sampling_name(mode), with_q, without_q);
  }
}

// ---- chains are one-child trees; the random-number layout ----------------------------------------

TEST(TreeRule, ChainAsOneChildTreeGivesTheSameTokensAndUniforms) {
  core::Rng rng(51);
  const SpeculativeVerifier v;
  int rejected = 0, full = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int g = 1 + static_cast<int>(rng.next_u32() % 4);
    const bool one_hot = trial % 3 == 0;
    std::vector<Dist> p, q;
    for (int i = 0; i <= g; ++i) p.push_back(random_dist(rng, 0.05));
    draft::Draft chain;
    chain.one_hot = one_hot;
    for (int i = 0; i < g; ++i) {
      q.push_back(random_dist(rng, 0.05));
      chain.tokens.push_back(sample_weights(q.back(), rng));
    }
    const testing::HostRows q_rows(q), p_rows(p);
    if (!one_hot) chain.q = q_rows;
    draft::Draft tree = chain;
    for (int i = 0; i < g; ++i) tree.parents.push_back(i - 1);
    core::Rng a(trial, 3), b(trial, 3);
    const VerifyResult ra = v.verify(chain, p_rows, a), rb = v.verify(tree, p_rows, b);
    ASSERT_EQ(ra.n_accepted, rb.n_accepted);
    ASSERT_EQ(ra.next_token, rb.next_token);
    ASSERT_EQ(ra.path, rb.path);
    ASSERT_EQ(a.uniform(), b.uniform()) << "the same uniforms consumed";
    rejected += ra.n_accepted < g;
    full += ra.n_accepted == g;
  }
  EXPECT_GT(rejected, 500);
  EXPECT_GT(full, 100);
}

TEST(TreeRule, UniformsAreDrawnOnlyWhenTheOutcomeIsUncertain) {
  // One-hot p (temperature 0): every ratio is 0 or 1, so the walk draws nothing and only the
  // emitted token takes one uniform; the result is the greedy walk's.
  draft::Draft t;
  t.tokens = {1, 3, 0, 4};
  t.parents = {-1, -1, 1, 1};
  t.one_hot = true;
  auto one_hot = [](int id) {
    Dist d(V, 0.0f);
    d[static_cast<size_t>(id)] = 1.0f;
    return d;
  };
  // Rows: root -> 3 (node 1) -> 4 (node 3) -> 4 (no child: emitted).
  const std::vector<Dist> p = {one_hot(3), one_hot(0), one_hot(4), one_hot(1), one_hot(4)};
  core::Rng rng(9), expect(9);
  const VerifyResult r = SpeculativeVerifier().verify(t, testing::HostRows(p), rng);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(r.next_token, 4);
  expect.uniform();
  EXPECT_EQ(rng.uniform(), expect.uniform()) << "exactly one uniform: the emitted token's";
  const std::vector<int32_t> am = {3, 0, 4, 1, 4};
  const VerifyResult g = verify_greedy_tree(t, am);
  EXPECT_EQ(g.path, r.path);
  EXPECT_EQ(g.next_token, r.next_token);

  // Sampled children with p(x) >= q(x) are accepted without a uniform; one with 0 < p/q < 1
  // takes exactly one.
  draft::Draft s;
  s.tokens = {0, 1};
  s.parents = {-1, -1};
  s.q_row = {0, 0};
  const std::vector<Dist> q = {{0.5f, 0.5f, 0.0f, 0.0f, 0.0f}};
  const testing::HostRows q_rows(q);
  s.q = q_rows;
  const std::vector<Dist> p2 = {{0.25f, 0.5f, 0.25f, 0.0f, 0.0f}, one_hot(1), one_hot(2)};
  core::Rng r2(10), e2(10);
  SpeculativeVerifier().verify(s, testing::HostRows(p2), r2);
  // Child 0: ratio 0.25 / 0.5, one uniform. Accepted: node 0 has no children, one uniform for its
  // bonus. Rejected: the residual is {0, 0, 1}, child 1's ratio 0 takes none, one for the draw.
  e2.uniform();
  e2.uniform();
  EXPECT_EQ(r2.uniform(), e2.uniform());
}

TEST(TreeRule, RejectsMalformedTrees) {
  const SpeculativeVerifier v;
  core::Rng rng(1);
  draft::Draft d;
  d.one_hot = true;
  d.tokens = {1, 2};
  d.parents = {-1, 1};  // node 1 its own parent
  const std::vector<Dist> rows(3, Dist(V, 0.2f));
  EXPECT_THROW(v.verify(d, testing::HostRows(rows), rng), Error);
  d.parents = {-1};
  EXPECT_THROW(v.verify(d, testing::HostRows(rows), rng), Error);
  d.parents = {-1, 0};
  d.one_hot = false;
  d.q_row = {0, 3};  // row 3 of a single q row
  const testing::HostRows q(std::vector<Dist>{Dist(V, 0.2f)});
  d.q = q;
  EXPECT_THROW(v.verify(d, testing::HostRows(rows), rng), Error);
}

}  // namespace
}  // namespace specmoe::verify
