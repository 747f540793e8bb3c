// The tree drafters' trees: static widths give every node its width of children at each depth
// (top-k: distinct, most probable first, one-hot; drawn: q rows shared by siblings, distinct
// without replacement), node and depth budgets hold, dynamic trees stay trees within their
// budget, and the n-gram trie ranks continuations by how many matches pass through them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <set>

#include "core/model.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "test_data.h"

namespace specmoe::draft {
namespace {

using Tokens = std::vector<int32_t>;

class TreeDrafterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path =
        (testing::scratch_dir() / ("tree-drafter-tiny-draft-" + std::to_string(getpid()) + ".gguf")).string();
    core::synth_write(core::synth_spec("tiny-draft"), path, 7);
    core::LoadOptions o;
    o.n_threads = 1;
    draft_ = core::Model::load(path, o);
  }
  static void TearDownTestSuite() { draft_.reset(); }
  static inline std::unique_ptr<core::Model> draft_;
};

core::SamplingParams sampling(float t) {
  core::SamplingParams sp;
  sp.temperature = t;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  return sp;
}

// Nodes per depth and children per node of a tree.
std::vector<int> nodes_per_depth(const TokenTree& t) {
  std::vector<int> out(static_cast<size_t>(t.max_depth()), 0);
  for (int i = 0; i < t.size(); ++i) ++out[static_cast<size_t>(t.depth(i) - 1)];
  return out;
}

TEST_F(TreeDrafterTest, StaticTopKTreesHaveTheirWidthsOfDistinctMostProbableChildren) {
  ModelDrafter d(draft_.get(), 320, -1, 256);
  const Tokens context = {1, 80, 81, 82, 83};
  const core::Sampler sampler(sampling(0.0f));
  core::Rng rng(1);
  TreeSpec spec;
  spec.widths = {4, 2, 2, 1};
  Draft out;
  d.begin(context);
  d.propose(context, {4, 0.0f, &sampler, &rng, &spec, 0}, out);
  ASSERT_EQ(out.size(), 4 + 8 + 16 + 16);
  out.validate(320);
  EXPECT_TRUE(out.one_hot);
  EXPECT_TRUE(out.q.empty());
  EXPECT_EQ(nodes_per_depth(out), (std::vector<int>{4, 8, 16, 16}));
  for (int v = -1; v < out.size(); ++v) {
    const std::vector<int32_t> kids = out.children(v);
    if (kids.empty()) continue;
    EXPECT_EQ(static_cast<int>(kids.size()), spec.widths[static_cast<size_t>(v < 0 ? 0 : out.depth(v))]);
    std::set<int32_t> tokens;
    for (int32_t k : kids) tokens.insert(out.tokens[static_cast<size_t>(k)]);
    EXPECT_EQ(tokens.size(), kids.size()) << "top-k children are distinct";
  }
  // The root's first child is the draft's argmax: the greedy chain is the tree's first branch.
  Draft chain;
  ModelDrafter c(draft_.get(), 320, -1, 256);
  c.begin(context);
  c.propose(context, {3, 0.0f, &sampler, &rng}, chain);
  ASSERT_EQ(chain.size(), 3);
  EXPECT_EQ(out.tokens[0], chain.tokens[0]);
  EXPECT_EQ(out.tokens[static_cast<size_t>(out.children(0)[0])], chain.tokens[1]);
  // Budgets: at most node_max nodes, at most draft_max deep; in breadth-first order.
  Draft small;
  d.propose(context, {2, 0.0f, &sampler, &rng, &spec, 7}, small);
  EXPECT_EQ(small.size(), 7);
  EXPECT_LE(small.max_depth(), 2);
}

TEST_F(TreeDrafterTest, DrawnChildrenShareTheirParentsQRow) {
  const Tokens context = {1, 90, 91, 92};
  const core::Sampler sampler(sampling(1.0f));
  for (TreeSampling mode : {TreeSampling::Stochastic, TreeSampling::StochasticNoReplace}) {
    ModelDrafter d(draft_.get(), 320, -1, 256);
    core::Rng rng(5);
    TreeSpec spec;
    spec.widths = {3, 2};
    spec.sampling = mode;
    Draft out;
    d.begin(context);
    d.propose(context, {2, 0.0f, &sampler, &rng, &spec, 0}, out);
    ASSERT_EQ(out.size(), 3 + 6);
    EXPECT_FALSE(out.one_hot);
    EXPECT_EQ(out.without_replacement, mode == TreeSampling::StochasticNoReplace);
    ASSERT_EQ(out.q_row.size(), 9u);
    EXPECT_EQ(out.q.rows, 1 + 3) << "one q row per expanded node";
    const std::vector<float> q = out.q.to_host();
    for (int v = -1; v < out.size(); ++v) {
      const std::vector<int32_t> kids = out.children(v);
      std::set<int32_t> tokens;
      for (int32_t k : kids) {
        EXPECT_EQ(out.q_row[static_cast<size_t>(k)], out.q_row[static_cast<size_t>(kids[0])]) << "siblings share q";
        const float qx = q[static_cast<size_t>(out.q_row[static_cast<size_t>(k)]) * 320 + static_cast<size_t>(out.tokens[static_cast<size_t>(k)])];
        EXPECT_GT(qx, 0.0f) << "drawn from q";
        tokens.insert(out.tokens[static_cast<size_t>(k)]);
      }
      if (mode == TreeSampling::StochasticNoReplace) {
        EXPECT_EQ(tokens.size(), kids.size());
      }
    }
    // Each q row is a distribution.
    for (int64_t r = 0; r < out.q.rows; ++r) {
      double s = 0.0;
      for (int i = 0; i < 320; ++i) s += q[static_cast<size_t>(r) * 320 + i];
      EXPECT_NEAR(s, 1.0, 1e-4);
    }
  }
}

TEST_F(TreeDrafterTest, DynamicTreesStayWithinTheirBudgets) {
  const Tokens context = {1, 100, 101, 102, 103, 104};
  for (TreeSampling mode : {TreeSampling::TopK, TreeSampling::Stochastic, TreeSampling::StochasticNoReplace}) {
    for (float t : {0.0f, 1.0f}) {
      const core::Sampler sampler(sampling(t));
      ModelDrafter d(draft_.get(), 320, -1, 256);
      core::Rng rng(9);
      TreeSpec spec;
      spec.nodes = 10;
      spec.depth = 4;
      spec.top_k = 3;
      spec.sampling = mode;
      Draft out;
      d.begin(context);
      d.propose(context, {6, 0.0f, &sampler, &rng, &spec, 0}, out);
      SCOPED_TRACE(tree_sampling_name(mode));
      out.validate(320);
      EXPECT_LE(out.size(), 10);
      EXPECT_GE(out.size(), mode == TreeSampling::TopK || t > 0.0f ? 10 : 1);
      EXPECT_LE(out.max_depth(), 4);
      for (int v = -1; v < out.size(); ++v) EXPECT_LE(out.children(v).size(), 3u);
    }
  }
}

TEST(NgramTrie, RanksContinuationsByHowManyMatchesPassThroughThem) {
  // The last two tokens (1 2) occur earlier three times, followed by 3 1 2 / 4 1 2 / 3 1 2.
  const Tokens context = {1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2};
  TokenTree t;
  NgramDrafter::lookup_tree(context, 1, 2, 3, 4, {}, t);
  EXPECT_EQ(t.tokens, (Tokens{3, 1, 2, 4}));
  EXPECT_EQ(t.parents, (Tokens{-1, 0, 1, -1}));
  // At most one child of the root (widths 1): the more frequent branch only.
  const std::vector<int> one = {1};
  NgramDrafter::lookup_tree(context, 1, 2, 3, 4, one, t);
  EXPECT_EQ(t.tokens, (Tokens{3, 1, 2}));
  // Budgets.
  NgramDrafter::lookup_tree(context, 1, 2, 2, 10, {}, t);
  EXPECT_EQ(t.tokens, (Tokens{3, 1, 4, 1}));
  EXPECT_EQ(t.max_depth(), 2);
  NgramDrafter::lookup_tree(Tokens{5, 6, 7}, 1, 2, 3, 10, {}, t);  // 7 never occurred before
  EXPECT_TRUE(t.empty());
  // The drafter proposes the trie, one-hot.
  NgramDrafter d(1, 2);
  TreeSpec spec;
  spec.nodes = 4;
  spec.depth = 3;
  Draft out;
  const core::Sampler sampler(sampling(0.0f));
  core::Rng rng(1);
  d.propose(context, {3, 0.0f, &sampler, &rng, &spec, 0}, out);
  EXPECT_TRUE(out.one_hot);
  EXPECT_EQ(out.tokens, (Tokens{3, 1, 2, 4}));
}

}  // namespace
}  // namespace specmoe::draft
