// MoE-aware speculative metrics (verify/moe_metrics.h): distinct experts per layer per target
// forward U(T), amplification against uniform routing, expert bytes per generated token and the
// share of expert reads spent on rejected tokens, on the synthetic Mixtral-style moe-tiny.
#include <gtest/gtest.h>

#include <set>

#include "core/model.h"
#include "core/synth.h"
#include "draft/model_drafter.h"
#include "moe/router.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"

using namespace specmoe;
using specmoe::testing::scratch_dir;

namespace {

std::string synth(const std::string& preset, const std::string& file) {
  const std::string path = (scratch_dir() / file).string();
  core::synth_write(preset, path, 42);
  return path;
}

core::SamplingParams greedy() {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  return sp;
}

verify::DecodeOptions options(int max_tokens, int g) {
  verify::DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = g;
  o.stop_at_eog = false;
  o.cost_probe_forwards = 0;
  return o;
}

int distinct(const moe::Routing& r, int n) {
  std::set<int> s;
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < r.k; ++j) s.insert(r.expert_at(t, j));
  return static_cast<int>(s.size());
}

const std::vector<int32_t> kPrompt = {1, 72, 105, 33, 44, 90, 17};

}  // namespace

TEST(MoEMetrics, RecordForwardCountsDistinctAndRejectedReads) {
  auto m = core::Model::load(synth("moe-tiny", "moespec_record.gguf"));
  core::KVCache kv = m->new_cache(32);
  const std::vector<int32_t> batch = {72, 105, 33, 44, 90};  // T = 5
  const core::ForwardStats stats = m->forward(batch, kv).stats;
  verify::MoEMetrics all_kept, one_kept;
  all_kept.record_forward(stats, *m, 5, 5);
  one_kept.record_forward(stats, *m, 5, 2);
  double sum_u = 0, rejected = 0;
  ASSERT_EQ(stats.moe.size(), 3u);
  for (int l = 0; l < 3; ++l) {
    ASSERT_EQ(stats.moe[l].n_tokens, 5);
    EXPECT_EQ(stats.distinct_experts(l), distinct(stats.moe[l], 5));
    sum_u += distinct(stats.moe[l], 5);
    rejected += distinct(stats.moe[l], 5) - distinct(stats.moe[l], 2);
  }
  // The per-layer load of this one forward: 5 tokens x 2 experts in every layer.
  ASSERT_EQ(all_kept.layers.size(), 3u);
  for (const moe::ExpertStats& s : all_kept.layers) EXPECT_EQ(s.n_tokens(), 5);
  EXPECT_EQ(all_kept.n_forwards, 1);
  EXPECT_EQ(all_kept.n_moe_layers, 3);
  EXPECT_DOUBLE_EQ(all_kept.sum_distinct, sum_u);
  EXPECT_DOUBLE_EQ(all_kept.mean_distinct(), sum_u / 3);
  EXPECT_DOUBLE_EQ(all_kept.sum_rejected_reads, 0.0);
  EXPECT_DOUBLE_EQ(one_kept.sum_rejected_reads, rejected);
  EXPECT_EQ(all_kept.expert_bytes, static_cast<uint64_t>(sum_u) * m->moe_expert_bytes(0));
  // 4 experts top-2, T = 5: uniform routing expects 4 (1 - 0.5^5) = 3.875 distinct.
  EXPECT_DOUBLE_EQ(all_kept.uniform_amplification(), 3.875 / 2);
  EXPECT_GE(all_kept.mean_distinct(), 2.0);
  EXPECT_LE(all_kept.mean_distinct(), 4.0);
  // Dense models record nothing.
  auto dense = core::Model::load(synth("tiny", "moespec_dense.gguf"));
  verify::MoEMetrics d;
  core::KVCache dkv = dense->new_cache(8);
  d.record_forward(dense->forward(batch, dkv).stats, *dense, 5, 5);
  EXPECT_EQ(d.n_forwards, 0);
  EXPECT_EQ(d.n_expert, 0);
}

TEST(MoEMetrics, SpeculativeLoopRecordsEveryTargetForward) {
  const std::string target_path = synth("moe-tiny", "moespec_target.gguf");
  auto target = core::Model::load(target_path);
  const verify::GreedyVerifier v;
  const int g = 4;

  // The target as its own draft: every draft token is accepted, so no read is wasted, and each
  // verification forward of g+1 tokens touches more experts than a single token's k.
  auto self = core::Model::load(target_path);
  draft::ModelDrafter same(self.get(), 320, -1, 256);
  verify::SpeculativeDecoder a(*target, same, v, greedy(), options(30, g));
  const verify::GenerationResult ra = a.generate(kPrompt);
  const verify::Metrics& ma = ra.metrics;
  EXPECT_EQ(ma.n_accepted, ma.n_drafted);
  EXPECT_EQ(ma.moe.n_expert, 4);
  EXPECT_EQ(ma.moe.k, 2);
  EXPECT_EQ(ma.moe.n_forwards, ma.n_steps);
  EXPECT_DOUBLE_EQ(ma.moe.rejected_read_share(), 0.0);
  EXPECT_GT(ma.moe.amplification(), 1.0);
  EXPECT_LE(ma.moe.mean_distinct(), 4.0);
  EXPECT_GT(ma.moe.expert_bytes_per_token(ma.n_generated), 0.0);
  ASSERT_EQ(ma.moe.layer_sum_distinct.size(), 3u);

  // A dense draft that shares only the embedding and head: some drafts are rejected, and some
  // expert reads are then spent on rejected tokens.
  auto dense = core::Model::load(synth("tiny-draft", "moespec_draft.gguf"));
  draft::ModelDrafter other(dense.get(), 320, -1, 256);
  verify::SpeculativeDecoder b(*target, other, v, greedy(), options(40, g));
  const verify::Metrics mb = b.generate(kPrompt).metrics;
  ASSERT_LT(mb.n_accepted, mb.n_drafted);
  EXPECT_EQ(mb.moe.n_forwards, mb.n_steps);
  EXPECT_GT(mb.moe.rejected_read_share(), 0.0);
  EXPECT_LT(mb.moe.rejected_read_share(), 1.0);

  // The autoregressive baseline: one token per forward, k experts per layer, amplification 1.
  const verify::Metrics mc = verify::generate_autoregressive(*target, kPrompt, greedy(), options(20, g)).metrics;
  EXPECT_EQ(mc.moe.n_forwards, mc.n_steps);
  EXPECT_DOUBLE_EQ(mc.moe.mean_distinct(), 2.0);
  EXPECT_DOUBLE_EQ(mc.moe.amplification(), 1.0);
  EXPECT_DOUBLE_EQ(mc.moe.uniform_amplification(), 1.0);

  // Merging adds counts.
  verify::Metrics sum = ma;
  sum.merge(mb);
  EXPECT_EQ(sum.moe.n_forwards, ma.moe.n_forwards + mb.moe.n_forwards);
  EXPECT_EQ(sum.moe.expert_bytes, ma.moe.expert_bytes + mb.moe.expert_bytes);
}
