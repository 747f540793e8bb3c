// Token trees on a CUDA device: the tree forward against chains (within F32 tolerance: the GPU
// kernels promise no batch independence), KV compaction after a tree step, the tree rule on the
// device against the host rule with the same uniforms (deterministic, with and without
// replacement), greedy tree decoding identical to greedy decoding, and losslessness through the
// whole loop on a GPU target, with the statistical test the CPU runs (tests/tree_lossless.h).
// Every test skips without a device (GTEST_SKIP).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "core/synth.h"
#include "draft/model_drafter.h"
#include "host_rows.h"
#include "require_cuda.h"
#include "test_data.h"
#include "tree_lossless.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/registry.h"
#include "verify/speculative_verifier.h"

namespace specmoe {
namespace {

using Tokens = std::vector<int32_t>;
using draft::TreeSampling;

std::string synth_file(const std::string& preset, uint64_t seed) {
  const std::string path = (testing::scratch_dir() / ("cuda-tree-" + preset + "-" + std::to_string(seed) + ".gguf")).string();
  core::synth_write(core::synth_spec(preset), path, seed);
  return path;
}

std::unique_ptr<core::Model> load(const std::string& path, const std::string& device) {
  core::LoadOptions o;
  o.n_threads = 1;
  o.device = device;
  // F32 caches: the tree-vs-chain tolerances are about summation orders on the device, which
  // rounding keys and values to f16 would turn into whole half steps.
  o.cache_types = {DType::F32, DType::F32};
  return core::Model::load(path, o);
}

class CudaTree : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (core::cuda_device_count() == 0) return;
    target_ = load(synth_file("tiny", 7), "cuda");
    draft_ = load(synth_file("tiny-draft", 7), "cuda");
    cpu_target_ = load(synth_file("tiny", 7), "cpu");
  }
  static void TearDownTestSuite() {
    target_.reset();
    draft_.reset();
    cpu_target_.reset();
  }
  void SetUp() override { SPECMOE_REQUIRE_CUDA(); }
  static inline std::unique_ptr<core::Model> target_, draft_, cpu_target_;
};

// |a - b| <= 1e-4 + 1e-3 |b| over logits of magnitude ~1-10: F32 with another summation order
// (cuBLAS, a tiled attention); a wrong mask moves logits by O(1).
void expect_close(const float* a, const float* b, int n, const std::string& what) {
  for (int i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-4 + 1e-3 * std::abs(b[i])) << what << " at " << i;
}

TEST_F(CudaTree, TreeForwardEqualsEachPathsChainAndCompacts) {
  const int V = target_->config().n_vocab;
  const Tokens prefix = {1, 40, 41, 42, 43};
  draft::TokenTree t;  // root -> {a, b}; a -> {c, d}; d -> {e}
  t.tokens = {60, 61, 62, 63, 64};
  t.parents = {-1, -1, 0, 0, 3};
  Tokens bt, bp;
  t.verify_batch(45, bt, bp);
  core::KVCache kv = target_->new_cache(32);
  target_->forward(prefix, kv);
  core::Batch batch(bt);
  batch.parents = bp;
  const std::vector<float> tree = target_->forward(batch, kv).logits.to_host();
  // Path root a d e, on the GPU and on the CPU.
  const Tokens chain = {45, 60, 63, 64};
  for (core::Model* m : {target_.get(), cpu_target_.get()}) {
    core::KVCache ref = m->new_cache(32);
    m->forward(prefix, ref);
    const std::vector<float> c = m->forward(chain, ref).logits.to_host();
    const std::string where = m->device().name();
    expect_close(tree.data(), c.data(), V, where + " root");
    expect_close(tree.data() + 1 * V, c.data() + 1 * V, V, where + " a");
    expect_close(tree.data() + 4 * V, c.data() + 2 * V, V, where + " d");
    expect_close(tree.data() + 5 * V, c.data() + 3 * V, V, where + " e");
  }
  // Keep the accepted path a d e (batch rows 1, 4, 5 after the root), continue, compare.
  std::vector<int> keep = {0, 1, 2, 3, 4, 5, 6, 9, 10};
  kv.keep(keep);
  ASSERT_EQ(kv.size(), 9);
  core::KVCache ref = target_->new_cache(32);
  target_->forward(prefix, ref);
  target_->forward(chain, ref);
  const int32_t next[1] = {70};
  const std::vector<float> a = target_->forward(next, kv).logits.to_host();
  const std::vector<float> b = target_->forward(next, ref).logits.to_host();
  expect_close(a.data(), b.data(), V, "after keep");
}

// A tree fed in two parts, as the tree drafter grows it level by level (the first part's rows
// cached, Batch::cached_parents): every node's logits are the one-batch forward's (within the
// device's float tolerance), and the next token after the rows is the same.
TEST_F(CudaTree, TreeOverCachedRowsEqualsTheWholeTree) {
  const int V = target_->config().n_vocab;
  const Tokens prefix = {1, 40, 41, 42, 43};
  const Tokens bt = {45, 60, 61, 62, 63, 64};  // root -> {a, b}; a -> {c, d}; d -> {e}
  const Tokens bp = {-1, 0, 0, 1, 1, 4};
  core::KVCache whole = target_->new_cache(32);
  target_->forward(prefix, whole);
  core::Batch batch(bt);
  batch.parents = bp;
  const std::vector<float> tree = target_->forward(batch, whole).logits.to_host();
  for (size_t split : {size_t{1}, size_t{3}, size_t{5}}) {
    core::KVCache parts = target_->new_cache(32);
    target_->forward(prefix, parts);
    const std::span<const int32_t> tokens(bt), parents(bp);
    core::Batch first(tokens.first(split));
    first.parents = parents.first(split);
    const std::vector<float> a = target_->forward(first, parts).logits.to_host();
    core::Batch rest(tokens.subspan(split));
    rest.parents = parents.subspan(split);
    rest.cached_parents = parents.first(split);
    const std::vector<float> b = target_->forward(rest, parts).logits.to_host();
    const std::string where = "split " + std::to_string(split);
    expect_close(a.data(), tree.data(), static_cast<int>(split) * V, where + ", first part");
    expect_close(b.data(), tree.data() + split * V, static_cast<int>(bt.size() - split) * V, where + ", the rest");
    ASSERT_EQ(parts.size(), whole.size());
  }
}

// Random distributions over n ids with some exact zeros.
std::vector<float> random_distribution(std::mt19937& gen, int n) {
  std::gamma_distribution<double> g(0.7, 1.0);
  std::vector<double> w(static_cast<size_t>(n));
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += (w[static_cast<size_t>(i)] = (i % 7 == 3) ? 0.0 : g(gen));
  std::vector<float> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<float>(w[static_cast<size_t>(i)] / sum);
  return p;
}

TEST_F(CudaTree, DeviceTreeRuleMatchesTheHostRuleWithTheSameUniforms) {
  auto gpu = core::make_backend(Device{Device::Kind::Cuda, 0});
  const auto device_rule = verify::make_verifier("speculative", {Device{Device::Kind::Cuda, 0}});
  const verify::SpeculativeVerifier host_rule;
  std::mt19937 gen(99);
  const int n = 1031;  // not a multiple of the block size
  int agree = 0, trials = 0, deep = 0;
  for (int t = 0; t < 150; ++t) {
    const TreeSampling mode = static_cast<TreeSampling>(t % 3);
    // A random tree: widths 1..4 below the root and each node, depth up to 3.
    draft::Draft d;
    d.one_hot = mode == TreeSampling::TopK;
    d.without_replacement = mode == TreeSampling::StochasticNoReplace;
    std::vector<std::vector<float>> q, p;
    p.push_back(random_distribution(gen, n));
    std::vector<int32_t> frontier = {-1};
    for (int depth = 0; depth < 3; ++depth) {
      std::vector<int32_t> next;
      for (int32_t node : frontier) {
        const int width = 1 + static_cast<int>(gen() % 4);
        q.push_back(t % 5 == 0 ? p[static_cast<size_t>(node + 1)] : random_distribution(gen, n));
        std::vector<float> left = q.back();
        for (int w = 0; w < width; ++w) {
          std::discrete_distribution<int32_t> pick(left.begin(), left.end());
          const int32_t x = pick(gen);
          if (d.without_replacement) left[static_cast<size_t>(x)] = 0.0f;
          next.push_back(d.size());
          d.tokens.push_back(x);
          d.parents.push_back(node);
          d.q_row.push_back(static_cast<int32_t>(q.size()) - 1);
          p.push_back(random_distribution(gen, n));
        }
      }
      frontier = next;
    }
    if (d.one_hot) d.q_row.clear();
    std::vector<float> flat_p, flat_q;
    for (const auto& r : p) flat_p.insert(flat_p.end(), r.begin(), r.end());
    for (const auto& r : q) flat_q.insert(flat_q.end(), r.begin(), r.end());
    auto p_mem = gpu->allocate(flat_p.size() * sizeof(float));
    auto q_mem = gpu->allocate(flat_q.size() * sizeof(float));
    gpu->upload(p_mem.get(), flat_p.data(), flat_p.size() * sizeof(float));
    gpu->upload(q_mem.get(), flat_q.data(), flat_q.size() * sizeof(float));
    const core::Rows p_dev{static_cast<const float*>(p_mem.get()), static_cast<int64_t>(p.size()), n, gpu.get()};
    const testing::HostRows p_host(p), q_host(q);
    draft::Draft on_device = d, on_host = d;
    if (!d.one_hot) {
      on_device.q = core::Rows{static_cast<const float*>(q_mem.get()), static_cast<int64_t>(q.size()), n, gpu.get()};
      on_host.q = q_host;
    }
    core::Rng a(500 + t), b(500 + t);
    const verify::VerifyResult dev = device_rule->verify(on_device, p_dev, a);
    const verify::VerifyResult want = host_rule.verify(on_host, p_host, b);
    ++trials;
    deep += want.n_accepted >= 2;
    agree += dev.path == want.path && dev.next_token == want.next_token && a.uniform() == b.uniform();
  }
  std::printf("device vs host tree rule, same uniforms: %d / %d trials agree (%d accepted 2+ nodes)\n", agree, trials,
              deep);
  EXPECT_EQ(agree, trials);
  EXPECT_GT(deep, 10);
}

TEST_F(CudaTree, GreedyTreesEqualGreedyDecoding) {
  const auto greedy_v = verify::make_verifier("greedy", {target_->device()});
  const auto spec_v = verify::make_verifier("speculative", {target_->device()});
  draft::ModelDrafter model(draft_.get(), 320, -1, 256);
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  for (const char* widths : {"3,2,1", "1,1,1"}) {
    verify::DecodeOptions o;
    o.max_tokens = 30;
    o.stop_at_eog = false;
    o.tree.widths = draft::parse_tree_widths(widths);
    for (const verify::Verifier* v : {greedy_v.get(), spec_v.get()}) {
      verify::SpeculativeDecoder dec(*target_, model, *v, sp, o);
      const Tokens prompt = target_->tokenizer().encode("Once upon a time", true);
      EXPECT_EQ(dec.generate(prompt).tokens, verify::generate_autoregressive(*target_, prompt, sp, o).tokens)
          << widths << " " << v->name();
    }
  }
}

// The loop on the device, judged as on the CPU (tree_decoding_test.cpp): 6,000 generations, the
// joint of the first three tokens and each marginal at significance 0.001.
TEST_F(CudaTree, LosslessThroughTheLoop) {
  const auto spec_v = verify::make_verifier("speculative", {target_->device()});
  for (TreeSampling mode : {TreeSampling::TopK, TreeSampling::Stochastic, TreeSampling::StochasticNoReplace}) {
    core::SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = 41;
    std::vector<double> unused;
    const Tokens prompt = testing::most_uncertain_prompt(*target_, sp, unused);
    const testing::ExactThree exact = testing::exact_three(*target_, prompt, sp, 6000);
    draft::ModelDrafter model(draft_.get(), 320, -1, 64);
    draft::TreeSpec tree;
    tree.widths = {3, 2};
    tree.sampling = mode;
    const auto runs = testing::loop_three(*target_, model, *spec_v, prompt, sp, tree, 4, 6000);
    const testing::LoopVerdict v = testing::judge_three(exact, runs);
    std::printf("cuda %s: joint chi2 %.1f df %d critical %.1f, worst ratio %.3f\n", draft::tree_sampling_name(mode),
                v.joint_stat, v.joint_df, v.joint_critical, v.worst_ratio);
    EXPECT_TRUE(v.pass()) << draft::tree_sampling_name(mode);
  }
}

}  // namespace
}  // namespace specmoe
