// qwen35 (Qwen3.5): gated DeltaNet layers (a recurrent state per token) beside gated attention
// layers. The logits against the double-precision reference forward (tests/reference_forward.h,
// which reads the layer pattern and sizes from the file itself); the recurrent state kept in the
// KV cache's ring of slots: batches equal one token at a time, truncate within the ring's reach
// and trees (in one batch and level by level) equal chains run afresh, all bit for bit, and a
// rollback past the reach is a clear error; speculative decoding through the loop identical to
// autoregressive decoding at temperature 0 and lossless at temperature 1; clear errors for files
// that break the keys llama.cpp reads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/model_drafter.h"
#include "lossless.h"
#include "recurrent_model_helpers.h"
#include "reference_forward.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::expect_batch_equals_single;
using specmoe::testing::f32_caches;
using specmoe::testing::logits_of;
using specmoe::testing::reference_rel_error;
using specmoe::testing::same_bits;

namespace {

const std::vector<int32_t>& kIds = specmoe::testing::kRecurrentIds;
std::string write_preset(const std::string& preset, DType type = DType::F32) {
  return specmoe::testing::write_preset_file(preset, type);
}

}  // namespace

TEST(Qwen35, ReadsItsLayerPatternAndSizes) {
  auto m = Model::load(write_preset("qwen35-tiny"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Qwen35);
  // No full_attention_interval key: llama.cpp's 4, so layer 3 is attention.
  EXPECT_EQ(c.recurrent_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(c.ssm_d_conv, 4);
  EXPECT_EQ(c.ssm_d_state, 16);
  EXPECT_EQ(c.ssm_n_group, 2);
  EXPECT_EQ(c.ssm_dt_rank, 4);
  EXPECT_EQ(c.ssm_d_inner, 64);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_dims, 16);
  // A DeltaNet layer keeps a state (3 conv rows of 2*32 + 64 channels, 4 heads of 16 x 16) and no
  // rows; the attention layer keys and values of the asked type.
  LoadOptions f16;
  f16.cache_types = {DType::F16, DType::F16};
  auto h = Model::load(write_preset("qwen35-tiny"), f16);
  KVCache kv = h->new_cache(16);
  EXPECT_EQ(kv.layout(0), (KVLayerLayout{0, 0, DType::F32, DType::F32, 0, 3 * 128 + 4 * 16 * 16}));
  EXPECT_EQ(kv.layout(3), (KVLayerLayout{64, 64, DType::F16, DType::F16, 0, 0}));
  EXPECT_EQ(c.kv_bytes_per_token(), (64 + 64) * 4);
  EXPECT_EQ(kv.rollback(), 1);
  EXPECT_NE(kv.state_data(0), nullptr);
  EXPECT_EQ(kv.state_data(3), nullptr);
  // attention.recurrent_layers (BOOLs) when the file has it.
  auto x = Model::load(write_preset("qwen35-mix-tiny"), f32_caches());
  EXPECT_EQ(x->config().recurrent_layers, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(x->config().ssm_dt_rank, 2);
}

TEST(Qwen35, MatchesReference) {
  // float32 activations through 4-6 layers against double: relative error well below 1e-4 of the
  // logit range; a value head reading the wrong key head, a missing gate, decay or norm gives O(1).
  for (const char* preset : {"qwen35-tiny", "qwen35-mix-tiny"})
    for (DType t : {DType::F32, DType::F16}) EXPECT_LE(reference_rel_error(write_preset(preset, t)), 1e-4) << preset;
}

TEST(Qwen35, StateFollowsTheCacheBitForBit) {
  auto m = Model::load(write_preset("qwen35-mix-tiny"), f32_caches());
  const int V = m->config().n_vocab;
  // A batch equals one token at a time.
  expect_batch_equals_single(*m);

  // Rolling back within the ring's reach: truncate 11 -> 7 and feed other tokens = a fresh run
  // over the 7 and those. A ring widened later keeps the states it held, and no more.
  KVCache a = m->new_cache(32);
  logits_of(*m, kIds, a);
  EXPECT_FALSE(a.can_truncate(7));
  a.reserve_rollback(4);
  EXPECT_FALSE(a.can_truncate(7));
  EXPECT_TRUE(a.can_truncate(10));
  EXPECT_FALSE(a.can_truncate(9));
  const std::vector<int32_t> other = {61, 62, 63};
  KVCache r = m->new_cache(32);
  r.reserve_rollback(4);
  EXPECT_EQ(r.rollback(), 4);
  logits_of(*m, kIds, r);
  EXPECT_TRUE(r.can_truncate(7));
  EXPECT_FALSE(r.can_truncate(6));
  r.truncate(7);
  const std::vector<float> rolled = logits_of(*m, other, r);
  KVCache c = m->new_cache(32);
  const std::vector<int32_t> seq(kIds.begin(), kIds.begin() + 7);
  logits_of(*m, seq, c);
  const std::vector<float> fresh = logits_of(*m, other, c);
  EXPECT_TRUE(same_bits(rolled.data(), fresh.data(), fresh.size()));
  // A copy of the cache carries its states: both continue alike.
  KVCache copy = c;
  const std::vector<int32_t> next = {64, 65};
  EXPECT_EQ(logits_of(*m, next, copy), logits_of(*m, next, c));

  // A tree after 6 tokens: r -> {c1, c2}, c2 -> g -> h. Each node's logits equal its path run as
  // a chain (a node continues its parent's state, not its batch neighbour's), and after keeping
  // the accepted path r, c2, g the cache continues as a fresh chain's does.
  const std::vector<int32_t> prefix(kIds.begin(), kIds.begin() + 6);
  const std::vector<int32_t> tree = {90, 3, 17, 44, 120};
  const std::vector<int32_t> parents = {-1, 0, 0, 2, 3};
  KVCache t = m->new_cache(32), s = m->new_cache(32);
  logits_of(*m, prefix, t);
  logits_of(*m, prefix, s);
  Batch tb;
  tb.tokens = tree;
  tb.parents = parents;
  std::vector<float> tree_logits;
  m->forward(tb, t).logits.to_host(tree_logits);
  EXPECT_GE(t.rollback(), 5);  // a tree batch widens the ring to the tree
  const std::vector<int32_t> chain = {90, 17, 44, 120};
  const std::vector<float> path_logits = logits_of(*m, chain, s);
  for (int node : {0, 2, 3, 4}) {
    const int depth = node == 0 ? 0 : node - 1;
    EXPECT_TRUE(same_bits(tree_logits.data() + node * V, path_logits.data() + depth * V, V)) << node;
  }
  EXPECT_FALSE(same_bits(tree_logits.data() + 1 * V, tree_logits.data() + 2 * V, V));
  t.keep(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 8, 9});  // the prefix, r, c2, g
  KVCache want = m->new_cache(32);
  logits_of(*m, prefix, want);
  logits_of(*m, std::vector<int32_t>{90, 17, 44}, want);
  ASSERT_EQ(t.size(), want.size());
  for (int layer : {1, 4}) EXPECT_EQ(t.read_layer(layer), want.read_layer(layer)) << layer;  // attention rows
  EXPECT_EQ(logits_of(*m, next, t), logits_of(*m, next, want));                            // and the states

  // The same tree drafted level by level (its earlier levels cached, Batch::cached_parents).
  KVCache lv = m->new_cache(32);
  logits_of(*m, prefix, lv);
  logits_of(*m, std::vector<int32_t>{90}, lv);
  Batch b2;
  const std::vector<int32_t> l2 = {3, 17}, cached = {-1}, p2 = {0, 0};
  b2.tokens = l2;
  b2.cached_parents = cached;
  b2.parents = p2;
  std::vector<float> level2;
  m->forward(b2, lv).logits.to_host(level2);
  EXPECT_TRUE(same_bits(level2.data() + V, tree_logits.data() + 2 * V, V));
}

TEST(Qwen35, RollbackPastTheRingIsAClearError) {
  auto m = Model::load(write_preset("qwen35-tiny"), f32_caches());
  KVCache kv = m->new_cache(32);
  logits_of(*m, kIds, kv);
  EXPECT_EQ(kv.rollback(), 1);  // chains keep the last 2 states
  EXPECT_TRUE(kv.can_truncate(10));
  EXPECT_TRUE(kv.can_truncate(0));  // the start is the zero state
  try {
    kv.truncate(8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reserve_rollback"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.size(), 11);
  kv.truncate(0);  // starting over is always possible
  const std::vector<float> again = logits_of(*m, kIds, kv);
  KVCache fresh = m->new_cache(32);
  EXPECT_EQ(again, logits_of(*m, kIds, fresh));
  // A keep whose last kept token's state is gone is refused too.
  EXPECT_THROW(kv.keep(std::vector<int>{0, 1, 2, 3, 4, 5}), Error);
}

TEST(Qwen35, SpeculativeDecodingIsIdenticalAtTemperatureZero) {
  auto target = Model::load(write_preset("qwen35-mix-tiny"), f32_caches());
  auto draft = Model::load(write_preset("qwen35-tiny"), f32_caches());
  const verify::GreedyVerifier gv;
  const verify::SpeculativeVerifier sv;
  draft::ModelDrafter model(draft.get(), 320, -1, 256);
  draft::LayerSkipDrafter skip(*target, 2, 256);
  std::vector<draft::TreeSpec> shapes(3);
  shapes[1].widths = {3, 2, 1};
  shapes[2].nodes = 8;
  shapes[2].depth = 4;
  shapes[2].top_k = 2;
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  for (draft::ModelDrafter* d : {&model, static_cast<draft::ModelDrafter*>(&skip)})
    for (const verify::Verifier* v : {static_cast<const verify::Verifier*>(&gv), static_cast<const verify::Verifier*>(&sv)})
      specmoe::testing::expect_decoding_identical(*target, *d, *v, shapes, prompt, 40, 5);
}

TEST(Qwen35, SpeculativeSamplingIsLossless) {
  // The joint of the first two tokens at temperature 1 (tests/lossless.h: chi-square at 0.001 with
  // an always-accept verifier that must fail), a qwen35 draft for a qwen35 target.
  auto target = Model::load(write_preset("qwen35-mix-tiny"), f32_caches());
  auto draft = Model::load(write_preset("qwen35-tiny"), f32_caches());
  specmoe::testing::check_lossless(*target, *draft, specmoe::testing::plain_sampling(1.0f, 35), true);
}

TEST(Qwen3Next, ReadsItsLayoutsAndBatchesEqualSingleTokens) {
  // Its logits against the reference forward: test_model_arch_moe (MoE.NewFamiliesMatchReference's
  // qwen3next-tiny and qwen3next-legacy-tiny). Here: what the loader reads, and a batch equals one
  // token at a time in both layouts.
  auto m = Model::load(write_preset("qwen3next-tiny"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Qwen3Next);
  EXPECT_TRUE(c.attn_output_gate && c.qk_norm);
  EXPECT_TRUE(c.rope_still_pairs.empty());
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_EQ(c.ssm_n_group, 2);
  EXPECT_EQ(c.ssm_dt_rank, 6);
  EXPECT_EQ(c.n_recurrent_layers(), 3);
  // The two layouts of the same model: ssm_in holds attn_qkv's and attn_gate's rows, regrouped.
  auto legacy = Model::load(write_preset("qwen3next-legacy-tiny"), f32_caches());
  expect_batch_equals_single(*legacy);
  expect_batch_equals_single(*m);
}

TEST(Qwen3Next, SpeculativeDecodingIsIdenticalAndLossless) {
  auto target = Model::load(write_preset("qwen3next-tiny"), f32_caches());
  auto draft = Model::load(write_preset("qwen3next-legacy-tiny"), f32_caches());
  specmoe::testing::expect_draft_model_identical_and_lossless(*target, *draft, 36);
}

TEST(Qwen35, BadKeysGetClearErrors) {
  using specmoe::testing::expect_key_error;
  const std::string path = write_preset("qwen35-tiny");
  expect_key_error(path, "qwen35.ssm.state_size", std::nullopt, "'qwen35.ssm.state_size' is missing");
  expect_key_error(path, "qwen35.ssm.inner_size", 48u, "ssm.inner_size 48 is not 4 value heads x state size 16");
  expect_key_error(path, "qwen35.ssm.time_step_rank", 3u, "not a multiple of 2 key heads");
  // The tensors must follow the keys: a convolution of 3 taps against the file's 4.
  expect_key_error(path, "qwen35.ssm.conv_kernel", 3u, "blk.0.ssm_conv1d.weight");
  // Every second layer attention (interval 2): layer 1's DeltaNet tensors are not attention's.
  expect_key_error(path, "qwen35.full_attention_interval", 2u, "layer 1 is a gated attention layer with a fused attn_qkv");
}
