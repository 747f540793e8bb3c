// Token trees through the model and the whole decoding loop on synthetic models (core/synth.h
// `tiny`, vocab 320, and its one-layer draft `tiny-draft`): a tree batch's logits equal each
// root-to-leaf path run as a chain (bit for bit on the CPU, whose kernels give a token the same
// result alone or in any batch); the target's and the drafter's KV caches after tree steps equal a
// fresh chain run over the accepted tokens, bit for bit; greedy tree decoding is token-identical to
// autoregressive decoding for every drafter and verifier; and the speculative verifier's output
// through the loop is distributed as the target's (tests/tree_lossless.h), for each kind of
// candidates, while deliberately broken variants fail.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "base/error.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "test_data.h"
#include "tree_lossless.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_verifier.h"

namespace specmoe::verify {
namespace {

using Tokens = std::vector<int32_t>;
using draft::TreeSampling;
using draft::TreeSpec;

std::string synth_file(const std::string& preset, uint64_t seed) {
  const std::string path =
      (testing::scratch_dir() / ("tree-" + preset + "-" + std::to_string(seed) + "-" + std::to_string(getpid()) + ".gguf"))
          .string();
  core::synth_write(core::synth_spec(preset), path, seed);
  return path;
}

core::LoadOptions one_thread() {
  core::LoadOptions o;
  o.n_threads = 1;
  return o;
}

TreeSpec widths(std::vector<int> w, TreeSampling s = TreeSampling::TopK) {
  TreeSpec t;
  t.widths = std::move(w);
  t.sampling = s;
  return t;
}

TreeSpec dynamic(int nodes, int depth, int k, TreeSampling s = TreeSampling::TopK) {
  TreeSpec t;
  t.nodes = nodes;
  t.depth = depth;
  t.top_k = k;
  t.sampling = s;
  return t;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// ---- tree batches against chains -------------------------------------------------------------

// Random trees of a given shape: node i's parent uniform among the earlier nodes and the root.
draft::TokenTree random_tree(core::Rng& rng, int n, int n_vocab) {
  draft::TokenTree t;
  for (int i = 0; i < n; ++i) {
    t.tokens.push_back(static_cast<int32_t>(3 + rng.next_u32() % static_cast<uint32_t>(n_vocab - 3)));
    t.parents.push_back(static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(i + 1)) - 1);
  }
  return t;
}

// Forwards prefix, then (root + tree) as one tree batch; every node's logits must equal those of
// its root-to-node path run as a chain after the same prefix (tolerance 0: the CPU kernels promise
// batch independence, and a node sees exactly its path's keys, in the same order).
void expect_tree_equals_chains(core::Model& m, const Tokens& prefix, int32_t root, const draft::TokenTree& tree,
                               const std::string& what) {
  const int V = m.config().n_vocab;
  core::KVCache kv = m.new_cache(static_cast<int>(prefix.size()) + tree.size() + 4);
  m.forward(prefix, kv);
  Tokens bt, bp;
  tree.verify_batch(root, bt, bp);
  core::Batch batch(bt);
  batch.parents = bp;
  std::vector<float> tree_logits, chain_logits;
  m.forward(batch, kv).logits.to_host(tree_logits);
  ASSERT_EQ(kv.size(), static_cast<int>(prefix.size() + bt.size()));
  // Every leaf's path (which covers every node).
  std::vector<int32_t> path;
  double max_abs = 0.0;
  for (int leaf = 0; leaf < tree.size(); ++leaf) {
    if (!tree.children(leaf).empty()) continue;
    tree.path_to(leaf, path);
    Tokens chain = {root};
    for (int32_t v : path) chain.push_back(tree.tokens[static_cast<size_t>(v)]);
    core::KVCache ref = m.new_cache(static_cast<int>(prefix.size() + chain.size()) + 1);
    m.forward(prefix, ref);
    m.forward(chain, ref).logits.to_host(chain_logits);
    EXPECT_TRUE(same_bits(tree_logits.data(), chain_logits.data(), static_cast<size_t>(V))) << what << ": the root";
    for (size_t k = 0; k < path.size(); ++k) {
      const float* a = tree_logits.data() + static_cast<size_t>(path[k] + 1) * V;
      const float* b = chain_logits.data() + (k + 1) * V;
      EXPECT_TRUE(same_bits(a, b, static_cast<size_t>(V))) << what << ": node " << path[k] << " on the path to leaf " << leaf;
      for (int j = 0; j < V; ++j) max_abs = std::max(max_abs, static_cast<double>(std::abs(b[j])));
    }
  }
  EXPECT_GT(max_abs, 0.1) << "real logits, not zeros";

  // The same tree fed in parts, as a drafter grows it level by level: the nodes before `split`
  // first, then the rest with the first part's parents given as cached rows
  // (Batch::cached_parents; the batch numbering stays the whole tree's). Every node's logits and
  // every cache row are the one-batch forward's, bit for bit.
  const int n = static_cast<int>(bt.size());
  for (int split : {1, n / 2, n - 1}) {
    if (split <= 0 || split >= n) continue;
    core::KVCache parts = m.new_cache(static_cast<int>(prefix.size()) + n + 4);
    m.forward(prefix, parts);
    const std::span<const int32_t> tokens(bt), parents(bp);
    core::Batch first(tokens.first(static_cast<size_t>(split)));
    first.parents = parents.first(static_cast<size_t>(split));
    std::vector<float> part_logits;
    m.forward(first, parts).logits.to_host(part_logits);
    EXPECT_TRUE(same_bits(part_logits.data(), tree_logits.data(), static_cast<size_t>(split) * V))
        << what << ": the first " << split << " nodes";
    core::Batch rest(tokens.subspan(static_cast<size_t>(split)));
    rest.parents = parents.subspan(static_cast<size_t>(split));
    rest.cached_parents = parents.first(static_cast<size_t>(split));
    m.forward(rest, parts).logits.to_host(part_logits);
    EXPECT_TRUE(same_bits(part_logits.data(), tree_logits.data() + static_cast<size_t>(split) * V,
                          static_cast<size_t>(n - split) * V))
        << what << ": the nodes after " << split << ", their ancestors cached";
    ASSERT_EQ(parts.size(), kv.size());
    for (int l = 0; l < kv.n_layer(); ++l)
      EXPECT_EQ(parts.read_layer(l), kv.read_layer(l)) << what << ": cache layer " << l << ", split " << split;
    for (int r = 0; r < kv.size(); ++r)
      EXPECT_EQ(parts.position(r), kv.position(r)) << what << ": position of row " << r;
  }
}

TEST(TreeForward, EveryRootToLeafPathEqualsItsChain) {
  core::Rng rng(3);
  // llama F32 and Q8_0 (activations quantized per token), qwen3 (QK-norm), gemma3 (a sliding
  // window of 4 positions, so deep nodes stop seeing the prefix's start).
  for (const char* preset : {"tiny", "tiny-q8_0", "qwen3-tiny", "gemma3-tiny"}) {
    SCOPED_TRACE(preset);
    auto m = core::Model::load(synth_file(preset, 5), one_thread());
    const int V = m->config().n_vocab;
    const Tokens prefix = {1, 40, 41, 42, 43, 44};
    draft::TokenTree wide, deep, chainlike;
    wide.tokens = {50, 51, 52, 53};  // four children of the root
    wide.parents = {-1, -1, -1, -1};
    deep.tokens = {60, 61, 62, 63, 64, 65, 66};  // 2 x 2 below the root, one grandchild deeper
    deep.parents = {-1, -1, 0, 0, 1, 1, 5};
    chainlike.tokens = {70, 71, 72, 73};  // a chain written as a tree
    chainlike.parents = {-1, 0, 1, 2};
    expect_tree_equals_chains(*m, prefix, 45, wide, "widths 4");
    expect_tree_equals_chains(*m, prefix, 45, deep, "2,2,1");
    expect_tree_equals_chains(*m, prefix, 45, chainlike, "1,1,1,1");
    for (int n : {5, 13}) expect_tree_equals_chains(*m, prefix, 45, random_tree(rng, n, V), "random " + std::to_string(n));
  }
}

TEST(TreeForward, Stories260K) {
  SPECMOE_REQUIRE_DATA("models/stories260K.gguf");
  auto m = core::Model::load(testing::data_path("models/stories260K.gguf").string(), one_thread());
  core::Rng rng(4);
  for (int n : {3, 9, 21})
    expect_tree_equals_chains(*m, {1, 403, 407, 261, 378}, 432, random_tree(rng, n, 500), "random " + std::to_string(n));
}

TEST(TreeForward, CachedTreeRowsAreChecked) {
  auto m = core::Model::load(synth_file("tiny", 5), one_thread());
  core::KVCache kv = m->new_cache(16);
  m->forward(Tokens{1, 40, 41}, kv);
  const Tokens tokens = {50, 51};
  const Tokens cached = {-1, 0};  // the cache's last two rows: a node and its child
  auto forward = [&](std::span<const int32_t> parents, std::span<const int32_t> cached_parents) {
    core::Batch b(tokens);
    b.parents = parents;
    b.cached_parents = cached_parents;
    m->forward(b, kv);
  };
  auto expect_invalid = [&](std::span<const int32_t> parents, std::span<const int32_t> cached_parents,
                            const std::string& what) {
    try {
      forward(parents, cached_parents);
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << what << ": " << e.what();
    }
    EXPECT_EQ(kv.size(), 3) << what << ": the cache is unchanged";
  };
  expect_invalid({}, cached, "cached rows' parents without a tree batch");
  expect_invalid(Tokens{2, 3}, cached, "a token its own parent (index M + i)");
  expect_invalid(Tokens{-2, 0}, cached, "parent -2");
  expect_invalid(Tokens{0, 0}, Tokens{-1, 1}, "a cached row its own parent");
  expect_invalid(Tokens{0, 0}, Tokens{-1, 0, 1, 2}, "more cached rows than the cache holds");
  // Valid: a child of cached row 1 and a child of that child, at the cached row's position + 1, 2.
  forward(Tokens{1, 2}, cached);
  EXPECT_EQ(kv.size(), 5);
  EXPECT_EQ(kv.position(3), 3);
  EXPECT_EQ(kv.position(4), 4);
}

// ---- the decoding loop ---------------------------------------------------------------------------

class TreeDecodingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_ = core::Model::load(synth_file("tiny", 7), one_thread());
    tiny_draft_ = core::Model::load(synth_file("tiny-draft", 7), one_thread());
  }
  static void TearDownTestSuite() {
    tiny_.reset();
    tiny_draft_.reset();
  }
  static std::vector<Tokens> prompts() {
    std::vector<Tokens> out;
    for (const char* text : {"Once upon a time", "abcabcabc", "The", "x = 1; y = 2; x = 1;"})
      out.push_back(tiny_->tokenizer().encode(text, true));
    return out;
  }
  static inline std::unique_ptr<core::Model> tiny_, tiny_draft_;
};

core::SamplingParams greedy() {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  return sp;
}

DecodeOptions tree_options(const TreeSpec& tree, int max_tokens, int draft_max = 4) {
  DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = draft_max;
  o.tree = tree;
  o.stop_at_eog = false;
  return o;
}

// Speculative and autoregressive decoding of every prompt; returns the merged metrics.
Metrics expect_identical(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                         const std::vector<Tokens>& prompts, const DecodeOptions& o, const std::string& what) {
  SpeculativeDecoder dec(target, drafter, verifier, greedy(), o);
  Metrics all;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerationResult ar = generate_autoregressive(target, prompts[i], greedy(), o, i);
    const GenerationResult sd = dec.generate(prompts[i], i);
    EXPECT_EQ(sd.tokens, ar.tokens) << what << ", prompt " << i;
    all.merge(sd.metrics);
  }
  return all;
}

TEST_F(TreeDecodingTest, GreedyTreesAreTokenIdenticalForEveryDrafterAndVerifier) {
  const auto ps = prompts();
  const GreedyVerifier greedy_v;
  const SpeculativeVerifier spec_v;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 512);
  draft::ModelDrafter limited(tiny_draft_.get(), 320, -1, 512);  // a reduced draft vocabulary
  limited.set_vocabulary_limit(105);
  draft::LayerSkipDrafter skip(*tiny_, 2, 512);
  draft::NgramDrafter ngram(1, 3);
  const std::vector<std::pair<std::string, TreeSpec>> shapes = {
      {"widths 4", widths({4})},
      {"widths 2,2,1", widths({2, 2, 1})},
      {"widths 1,1,1,1", widths({1, 1, 1, 1})},
      {"widths 4,2,2,1", widths({4, 2, 2, 1})},
      {"dynamic 10/4/3", dynamic(10, 4, 3)},
      {"widths 3,2 stochastic", widths({3, 2}, TreeSampling::Stochastic)},
      {"widths 3,2 noreplace", widths({3, 2}, TreeSampling::StochasticNoReplace)},
      {"dynamic 8/3/2 noreplace", dynamic(8, 3, 2, TreeSampling::StochasticNoReplace)},
  };
  for (const auto& [name, tree] : shapes) {
    for (draft::Drafter* d : {static_cast<draft::Drafter*>(&model), static_cast<draft::Drafter*>(&limited),
                              static_cast<draft::Drafter*>(&skip), static_cast<draft::Drafter*>(&ngram)}) {
      for (const Verifier* v : {static_cast<const Verifier*>(&greedy_v), static_cast<const Verifier*>(&spec_v)}) {
        const std::string what = name + ", " + d->name() + ", " + v->name();
        const Metrics m = expect_identical(*tiny_, *d, *v, ps, tree_options(tree, 33), what);
        if (d == &model) {
          EXPECT_GT(m.n_accepted, 0) << what;
          EXPECT_LE(m.tree_size_max, std::max(tree.max_nodes(), 1)) << what;
        }
      }
    }
  }
}

TEST_F(TreeDecodingTest, TopKTreesAcceptMoreThanTheirFirstBranch) {
  // The top-k tree's first branch is the greedy chain, so at temperature 0 a tree accepts at
  // least what the chain of its depth does, step for step; over whole generations it is clearly
  // more for this draft (greedy agreement ~0.7).
  const auto ps = prompts();
  const GreedyVerifier v;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 512);
  DecodeOptions chain = tree_options({}, 48, 3);
  const Metrics mc = expect_identical(*tiny_, model, v, ps, chain, "chain g=3");
  const Metrics mt = expect_identical(*tiny_, model, v, ps, tree_options(widths({3, 2, 1}), 48), "tree 3,2,1");
  std::printf("tau: chain g=3 %.3f, tree 3,2,1 %.3f (%.1f nodes per step)\n", mc.mean_accepted_length(),
              mt.mean_accepted_length(), mt.tree_size());
  EXPECT_GT(mt.mean_accepted_length(), mc.mean_accepted_length() + 0.1);
  // Metrics: acceptance by depth is a conditional rate in [0, 1], the histogram covers every step.
  ASSERT_EQ(mt.depth_tried.size(), 3u);
  for (double a : mt.acceptance_by_depth()) EXPECT_TRUE(a >= 0.0 && a <= 1.0);
  int64_t steps = 0;
  for (int64_t h : mt.accept_length_histogram) steps += h;
  EXPECT_EQ(steps, mt.n_steps);
  EXPECT_EQ(mt.tree_size_max, 3 + 6 + 6);
}

// A broken greedy rule: on a mismatch it emits the first child's token instead of the target's.
class BrokenGreedy : public Verifier {
 public:
  std::string name() const override { return "broken-greedy"; }
  VerifyResult verify(const draft::Draft& d, const core::Rows& p, core::Rng& rng) const override {
    VerifyResult r = GreedyVerifier().verify(d, p, rng);
    const int stop = r.n_accepted > 0 ? r.accepted_node(r.n_accepted - 1) : -1;
    for (int i = 0; i < d.size(); ++i)
      if (d.parent(i) == stop) {
        r.next_token = d.tokens[static_cast<size_t>(i)];
        break;
      }
    return r;
  }
};

TEST_F(TreeDecodingTest, BrokenGreedyIsCaught) {
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 512);
  const BrokenGreedy bad;
  const DecodeOptions o = tree_options(widths({2, 2}), 33);
  SpeculativeDecoder dec(*tiny_, model, bad, greedy(), o);
  int differ = 0;
  for (const Tokens& p : prompts())
    differ += dec.generate(p).tokens != generate_autoregressive(*tiny_, p, greedy(), o).tokens;
  EXPECT_GT(differ, 0);
}

// Keys and values of `tokens` run as one chain on a fresh cache (the first n_layers layers).
core::KVCache fresh_cache(core::Model& m, const Tokens& tokens, int n_layers = -1) {
  core::KVCache kv = m.new_cache(static_cast<int>(tokens.size()) + 1);
  core::ForwardOptions fo;
  fo.exit_layer = n_layers;
  m.forward(tokens, kv, fo);
  return kv;
}

void expect_same_cache(const core::KVCache& a, const core::KVCache& b, int n_layers, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (int t = 0; t < a.size(); ++t) ASSERT_EQ(a.position(t), b.position(t)) << what << " token " << t;
  for (int l = 0; l < n_layers; ++l) EXPECT_EQ(a.read_layer(l), b.read_layer(l)) << what << " layer " << l;
}

TEST_F(TreeDecodingTest, CachesAfterTreeStepsEqualAFreshChainRun) {
  // After every tree step the target keeps exactly the accepted path's rows (KVCache::keep), the
  // drafter likewise for the rows its last level's forward wrote: both must be the rows a chain
  // run over the accepted tokens writes, bit for bit.
  const Tokens prompt = prompts()[0];
  const SpeculativeVerifier spec;
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 512);
  draft::LayerSkipDrafter skip(*tiny_, 2, 512);
  for (const TreeSpec& tree : {widths({3, 2, 1}), dynamic(9, 4, 3, TreeSampling::StochasticNoReplace)}) {
    for (draft::ModelDrafter* d : {&model, static_cast<draft::ModelDrafter*>(&skip)}) {
      for (int max_tokens : {7, 30}) {
        const std::string what = tree.describe() + ", " + d->name() + ", " + std::to_string(max_tokens) + " tokens";
        SpeculativeDecoder dec(*tiny_, *d, spec, sp, tree_options(tree, max_tokens));
        const GenerationResult r = dec.generate(prompt, 11);
        ASSERT_EQ(static_cast<int>(r.tokens.size()), max_tokens);
        EXPECT_GT(r.metrics.n_accepted, 0) << what;
        Tokens all = prompt;
        all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
        expect_same_cache(dec.target_cache(), fresh_cache(*tiny_, all), tiny_->config().n_layer, what + ", target");
        const Tokens cached = d->cached_tokens();
        Tokens full = prompt;
        full.insert(full.end(), r.tokens.begin(), r.tokens.end());
        ASSERT_LE(cached.size(), full.size());
        EXPECT_TRUE(std::equal(cached.begin(), cached.end(), full.begin())) << what << ": not a prefix of the output";
        const int layers = d == &skip ? 2 : tiny_draft_->config().n_layer;
        expect_same_cache(d->cache(), fresh_cache(d->model(), cached, d == &skip ? 2 : -1), layers, what + ", drafter");
      }
    }
  }
}

// ---- lossless through the loop -------------------------------------------------------------------
//
// Significance 0.001 per chi-square (the joint of the first three tokens, pooled as in
// tests/lossless.h, and each token's marginal); seeds fixed. Power: with n = 6,000 generations a
// wrong output distribution at total variation delta from the target's gives a noncentrality of
// at least n (2 delta)^2 (testing::chi2_power_at_tv); for the 90-160 df of these joints that is
// detection with probability >= 0.98 from delta = 0.07 (printed per case). 2% errors are the
// business of tree_verifier_test.cpp (120,000 runs on exactly known chains, every shape, where
// the power at total variation 0.02 is > 0.999); these prove the plumbing with real models: the
// drafters' trees and q rows, the tree forward, per-node target rows, compaction and the next
// step. The broken rule (no residual after a rejection) runs 2,000 generations: it fails by
// factors of 10-100, so fewer suffice. Replacement-rule swaps are caught only where q is
// concentrated (the Markov chains); over tiny's 320 tokens a child's q is too small for
// renormalisation to move the distribution measurably. Runtime: ~3-5 s per test on one core
// (the exact distributions, ~1.5 s each, are computed once per prompt and sampling).
constexpr int kLoopRuns = 6000, kBrokenRuns = 2000;

core::SamplingParams temperature(float t, float top_p, uint64_t seed) {
  core::SamplingParams sp;
  sp.temperature = t;
  sp.top_k = 0;
  sp.top_p = top_p;
  sp.min_p = 0.0f;
  sp.seed = seed;
  return sp;
}

struct LoopCase {
  std::string name;
  TreeSpec tree;
  const char* drafter;  // model, layerskip, ngram
  // The no-residual rule moves the output by about p(x) (1 - p(x)) per rejected child x; the
  // n-gram trie's guesses have small target probability here, below what 2,000 runs resolve, so
  // for them the broken rule is shown, not judged (it is caught on the model's top-k trees and,
  // at 2%, in tree_verifier_test.cpp).
  bool judge_broken = true;
};

// For the n-gram trie: BOS a b c a d e a, whose last token matched twice gives the root two
// children (b, d).
Tokens repetitive_prompt() {
  Tokens t = {1};
  for (char ch : std::string("abcadea")) t.push_back(3 + static_cast<int32_t>(ch));
  return t;
}

// The prompt (the most uncertain BOS + byte for model drafters, the repetitive one for n-grams)
// and its exact distribution, computed once per sampling setting.
const std::pair<Tokens, testing::ExactThree>& exact_for(core::Model& target, const core::SamplingParams& sp, bool ngram) {
  static std::map<std::string, std::pair<Tokens, testing::ExactThree>> cache;
  const std::string key = fmt::format("{}/{}/{}", sp.temperature, sp.top_p, ngram);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<double> unused;
    Tokens prompt = ngram ? repetitive_prompt() : testing::most_uncertain_prompt(target, sp, unused);
    testing::ExactThree e = testing::exact_three(target, prompt, sp, kLoopRuns);
    it = cache.emplace(key, std::make_pair(std::move(prompt), std::move(e))).first;
  }
  return it->second;
}

std::unique_ptr<draft::Drafter> make_drafter(core::Model& target, core::Model& draft_model, const char* name) {
  if (std::string(name) == "model") return std::make_unique<draft::ModelDrafter>(&draft_model, 320, -1, 64);
  if (std::string(name) == "model-v160") {  // a reduced draft vocabulary: ids 0..159 (model_drafter.h)
    auto d = std::make_unique<draft::ModelDrafter>(&draft_model, 320, -1, 64);
    d->set_vocabulary_limit(160);
    return d;
  }
  if (std::string(name) == "layerskip") return std::make_unique<draft::LayerSkipDrafter>(target, 1, 64);
  return std::make_unique<draft::NgramDrafter>(1, 2);
}

void check_loop(core::Model& target, core::Model& draft_model, const core::SamplingParams& sp,
                const std::vector<LoopCase>& cases) {
  const SpeculativeVerifier good, keep_residual(RuleFault::KeepResidual);
  for (const LoopCase& c : cases) {
    const auto& [prompt, exact] = exact_for(target, sp, std::string(c.drafter) == "ngram");
    auto d = make_drafter(target, draft_model, c.drafter);
    const auto runs = testing::loop_three(target, *d, good, prompt, sp, c.tree, 4, kLoopRuns);
    const testing::LoopVerdict v = testing::judge_three(exact, runs);
    auto bad_d = make_drafter(target, draft_model, c.drafter);
    const auto bad_runs = testing::loop_three(target, *bad_d, keep_residual, prompt, sp, c.tree, 4, kBrokenRuns);
    const testing::LoopVerdict bad = testing::judge_three(exact, bad_runs);
    const bool triggered = !std::equal(bad_runs.begin(), bad_runs.end(), runs.begin());
    std::printf("%-22s T=%.1f p=%.2f: joint chi2 %.1f df %d critical %.1f (cells' mass %.2f), worst ratio %.3f, power at "
                "TV 0.07 %.3f | no residual: worst ratio %.2f%s\n",
                c.name.c_str(), sp.temperature, sp.top_p, v.joint_stat, v.joint_df, v.joint_critical, v.listed_mass,
                v.worst_ratio, testing::chi2_power_at_tv(v.joint_df, kLoopRuns, 0.07), bad.worst_ratio,
                triggered ? "" : " (same tokens: every rejected child had p = 0)");
    EXPECT_TRUE(v.pass()) << c.name << ": worst ratio " << v.worst_ratio << ", impossible " << v.impossible;
    EXPECT_GE(v.joint_df, 20) << c.name;
    if (triggered && c.judge_broken) {
      EXPECT_FALSE(bad.pass()) << c.name << ": the broken rule (no residual) passed";
    }
  }
}

const std::vector<LoopCase> kDeterministic = {{"model widths 4", widths({4}), "model"},
                                              {"ngram trie 6 nodes", dynamic(6, 3, 0), "ngram", false},
                                              {"model dynamic 6/3/3", dynamic(6, 3, 3), "model"}};
const std::vector<LoopCase> kWithReplacement = {
    {"model widths 3,2", widths({3, 2}, TreeSampling::Stochastic), "model"},
    {"model/160 widths 3,2", widths({3, 2}, TreeSampling::Stochastic), "model-v160"},
    {"layerskip widths 2,1,1", widths({2, 1, 1}, TreeSampling::Stochastic), "layerskip"}};
const std::vector<LoopCase> kWithoutReplacement = {
    {"model widths 4,1", widths({4, 1}, TreeSampling::StochasticNoReplace), "model"},
    {"model/160 widths 4,1", widths({4, 1}, TreeSampling::StochasticNoReplace), "model-v160"},
    {"model dynamic 7/3/2", dynamic(7, 3, 2, TreeSampling::StochasticNoReplace), "model"}};

TEST_F(TreeDecodingTest, LosslessDeterministicCandidatesT1) {
  check_loop(*tiny_, *tiny_draft_, temperature(1.0f, 1.0f, 31), kDeterministic);
}
TEST_F(TreeDecodingTest, LosslessDeterministicCandidatesTopP) {
  check_loop(*tiny_, *tiny_draft_, temperature(0.7f, 0.9f, 32), kDeterministic);
}
TEST_F(TreeDecodingTest, LosslessWithReplacementT1) {
  check_loop(*tiny_, *tiny_draft_, temperature(1.0f, 1.0f, 33), kWithReplacement);
}
TEST_F(TreeDecodingTest, LosslessWithReplacementTopP) {
  check_loop(*tiny_, *tiny_draft_, temperature(0.7f, 0.9f, 34), kWithReplacement);
}
TEST_F(TreeDecodingTest, LosslessWithoutReplacementT1) {
  check_loop(*tiny_, *tiny_draft_, temperature(1.0f, 1.0f, 35), kWithoutReplacement);
}
TEST_F(TreeDecodingTest, LosslessWithoutReplacementTopP) {
  check_loop(*tiny_, *tiny_draft_, temperature(0.7f, 0.9f, 36), kWithoutReplacement);
}

}  // namespace
}  // namespace specmoe::verify
