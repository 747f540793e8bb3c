// granitehybrid (Granite 4.0 H), mamba2 (Mamba-2 alone) and nemotron_h (Nemotron-H): Mamba-2 layers (a recurrent state per token, kept in the KV
// cache's ring of slots as qwen35's: tests/unit/model_qwen35_test.cpp) beside granite's attention.
// The logits against the double-precision reference forward and its MoE form (which read the
// layer pattern and sizes from the file itself); batches equal one token at a time, rollback and
// trees equal chains run afresh, bit for bit; speculative decoding identical to autoregressive
// decoding at temperature 0 and lossless at temperature 1; clear errors for bad keys.
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
#include "moe_reference_forward.h"
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

TEST(GraniteHybrid, ReadsItsLayerPatternAndSizes) {
  auto m = Model::load(write_preset("granitehybrid-tiny"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::GraniteHybrid);
  EXPECT_EQ(c.recurrent_mixer, RecurrentMixer::Mamba2);
  EXPECT_EQ(c.recurrent_layers, (std::vector<uint8_t>{1, 1, 0, 1}));  // head_count_kv 0 there
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.ssm_dt_rank, 8);
  EXPECT_EQ(c.ssm_d_inner, 128);
  EXPECT_EQ(c.ssm_n_group, 1);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.5f);  // granite's multipliers
  EXPECT_FLOAT_EQ(c.embd_scale, 2.0f);
  EXPECT_TRUE(c.has_rope(2));
  // A Mamba-2 layer keeps 3 conv rows of 128 + 2 * 16 channels and 8 heads of 16 x 16 per state.
  KVCache kv = m->new_cache(16);
  EXPECT_EQ(kv.layout(0), (KVLayerLayout{0, 0, DType::F32, DType::F32, 0, 3 * 160 + 128 * 16}));
  EXPECT_EQ(kv.layout(2).state_floats, 0);
  auto moe = Model::load(write_preset("granitehybrid-moe-tiny"), f32_caches());
  EXPECT_EQ(moe->config().n_expert, 8);
  EXPECT_EQ(moe->config().n_ff_shared_expert, 64);
  EXPECT_EQ(moe->config().ssm_n_group, 2);
  EXPECT_FALSE(moe->config().has_rope(2));  // rope.scaling.finetuned false
  EXPECT_TRUE(moe->config().expert_weights_norm);
}

TEST(GraniteHybrid, MatchesReference) {
  // float32 activations against double: relative error well below 1e-4 of the logit range; a head
  // in the wrong group, a skipped D, gate or grouped norm gives O(1).
  for (DType t : {DType::F32, DType::F16}) EXPECT_LE(reference_rel_error(write_preset("granitehybrid-tiny", t)), 1e-4);
  for (DType t : {DType::F32, DType::F16})
    specmoe::testing::check_moe_against_reference(write_preset("granitehybrid-moe-tiny", t), kIds, 0, 1e-4);
}

TEST(GraniteHybrid, StateFollowsTheCacheBitForBit) {
  auto m = Model::load(write_preset("granitehybrid-moe-tiny"), f32_caches());
  const int V = m->config().n_vocab;
  expect_batch_equals_single(*m);
  // Roll back 4 tokens and feed others = a fresh run.
  KVCache r = m->new_cache(32);
  r.reserve_rollback(4);
  logits_of(*m, kIds, r);
  r.truncate(7);
  const std::vector<int32_t> other = {61, 62, 63};
  const std::vector<float> rolled = logits_of(*m, other, r);
  KVCache c = m->new_cache(32);
  logits_of(*m, std::vector<int32_t>(kIds.begin(), kIds.begin() + 7), c);
  EXPECT_EQ(rolled, logits_of(*m, other, c));
  // A tree: each node equals its path as a chain; after keep the cache continues as a chain's.
  const std::vector<int32_t> prefix(kIds.begin(), kIds.begin() + 6);
  KVCache t = m->new_cache(32), s = m->new_cache(32);
  logits_of(*m, prefix, t);
  logits_of(*m, prefix, s);
  Batch tb;
  const std::vector<int32_t> tree = {90, 3, 17, 44, 120}, parents = {-1, 0, 0, 2, 3};
  tb.tokens = tree;
  tb.parents = parents;
  std::vector<float> tree_logits;
  m->forward(tb, t).logits.to_host(tree_logits);
  const std::vector<float> path_logits = logits_of(*m, std::vector<int32_t>{90, 17, 44, 120}, s);
  for (int node : {0, 2, 3, 4}) {
    const int depth = node == 0 ? 0 : node - 1;
    EXPECT_TRUE(same_bits(tree_logits.data() + node * V, path_logits.data() + depth * V, V)) << node;
  }
  t.keep(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 8, 9});
  KVCache want = m->new_cache(32);
  logits_of(*m, prefix, want);
  logits_of(*m, std::vector<int32_t>{90, 17, 44}, want);
  const std::vector<int32_t> next = {64, 65};
  EXPECT_EQ(logits_of(*m, next, t), logits_of(*m, next, want));
}

TEST(GraniteHybrid, SpeculativeDecodingIsIdenticalAndLossless) {
  auto target = Model::load(write_preset("granitehybrid-moe-tiny"), f32_caches());
  auto draft = Model::load(write_preset("granitehybrid-tiny"), f32_caches());
  const verify::SpeculativeVerifier sv;
  draft::ModelDrafter model(draft.get(), 320, -1, 256);
  draft::LayerSkipDrafter skip(*target, 2, 256);
  std::vector<draft::TreeSpec> shapes(2);
  shapes[1].widths = {3, 2, 1};
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  for (draft::ModelDrafter* d : {&model, static_cast<draft::ModelDrafter*>(&skip)})
    specmoe::testing::expect_decoding_identical(*target, *d, sv, shapes, prompt, 40, 5);
  // At temperature 0.5: granite's logit scale of 2 flattens these random heads, and the chi-square
  // needs most of the joint's mass in cells it can test.
  specmoe::testing::check_lossless(*target, *draft, specmoe::testing::plain_sampling(0.5f, 44), true);
}

TEST(GraniteHybrid, BadKeysGetClearErrors) {
  using specmoe::testing::expect_key_error;
  const std::string path = write_preset("granitehybrid-tiny");
  expect_key_error(path, "granitehybrid.ssm.group_count", std::nullopt, "'granitehybrid.ssm.group_count' is missing");
  expect_key_error(path, "granitehybrid.ssm.time_step_rank", 7u, "ssm.inner_size 128 is not a multiple of 7 heads");
  expect_key_error(path, "granitehybrid.ssm.group_count", 3u, "8 heads (ssm.time_step_rank) are not a multiple of 3 groups");
  // The tensors must follow the keys: a state of 32 against the file's 16.
  expect_key_error(path, "granitehybrid.ssm.state_size", 32u, "blk.0.ssm_in.weight");
}

TEST(Mamba2, ReadsMatchesReferenceAndDecodesIdentically) {
  // Every layer a Mamba-2 mixer, no feed-forward, no attention (head_count 0 in the file).
  const std::string path = write_preset("mamba2-tiny");
  auto m = Model::load(path, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Mamba2);
  EXPECT_FALSE(c.any_ffn());
  EXPECT_EQ(c.n_recurrent_layers(), 4);
  EXPECT_EQ(c.rope_style, RopeStyle::None);
  EXPECT_EQ(c.n_ff, 0);
  for (DType t : {DType::F32, DType::F16}) EXPECT_LE(reference_rel_error(write_preset("mamba2-tiny", t)), 1e-4);
  // A batch equals one token at a time; rollback and a tree as for granitehybrid.
  expect_batch_equals_single(*m);
  const verify::GreedyVerifier gv;
  draft::LayerSkipDrafter skip(*m, 2, 256);
  std::vector<draft::TreeSpec> shapes(2);
  shapes[1].nodes = 6;
  shapes[1].depth = 3;
  shapes[1].top_k = 2;
  specmoe::testing::expect_decoding_identical(*m, skip, gv, shapes, {1, 72, 101, 108, 108, 111}, 32, 4);
}

// A batch equals one token at a time, and speculative decoding with the first 3 layers drafting
// (chains and a tree) gives the autoregressive tokens.
void expect_batches_and_speculation_identical(Model& m) {
  expect_batch_equals_single(m);
  const verify::SpeculativeVerifier sv;
  draft::LayerSkipDrafter skip(m, 3, 256);
  std::vector<draft::TreeSpec> shapes(2);
  shapes[1].widths = {2, 2, 1};
  specmoe::testing::expect_decoding_identical(m, skip, sv, shapes, {1, 72, 101, 108, 108, 111}, 32, 4);
}

TEST(NemotronH, ReadsMatchesReferenceAndDecodesIdentically) {
  // One sublayer per layer, M M * - M -: the kinds from head_count_kv and feed_forward_length per
  // layer; the MLP layers cache nothing.
  const std::string path = write_preset("nemotron_h-tiny");
  auto m = Model::load(path, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::NemotronH);
  EXPECT_EQ(c.recurrent_layers, (std::vector<uint8_t>{1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(c.mixer_free_layers, (std::vector<uint8_t>{0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(c.ffn_free_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1, 0}));
  EXPECT_EQ(c.n_ff, 192);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.ffn_act, FfnActivation::ReluSqr);
  EXPECT_EQ(c.rope_style, RopeStyle::None);
  KVCache kv = m->new_cache(8);
  EXPECT_EQ(kv.layout(3), (KVLayerLayout{0, 0, DType::F32, DType::F32, 0, 0}));
  EXPECT_EQ(kv.layout(2).k_width, 64);
  EXPECT_EQ(c.kv_bytes_per_token(), 2 * 64 * 4);
  for (DType t : {DType::F32, DType::F16}) EXPECT_LE(reference_rel_error(write_preset("nemotron_h-tiny", t)), 1e-4);
  expect_batches_and_speculation_identical(*m);
}

TEST(NemotronH, MoeFormReadsAndDecodesIdentically) {
  // nemotron_h_moe (Nemotron 3 Nano): nemotron_h's layers, experts in the MLP layers 3 and 5 only
  // (ungated squared ReLUs and a shared one); its logits against the reference forward are
  // test_model_arch_moe's (MoEArchitectures.DeepseekStyleFamiliesMatchReferenceAndRoute).
  auto m = Model::load(write_preset("nemotron_h_moe-tiny"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::NemotronH);
  EXPECT_EQ(c.arch_name, "nemotron_h_moe");
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.is_moe_layer(l), l == 3 || l == 5) << l;
  EXPECT_EQ(c.n_ff_expert, 32);
  EXPECT_EQ(c.n_ff_shared_expert, 64);
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
  expect_batches_and_speculation_identical(*m);
  // Nemotron 3 Super's latent experts are refused by name.
  specmoe::testing::expect_key_error(write_preset("nemotron_h_moe-tiny"), "nemotron_h_moe.moe_latent_size", 32u,
                                     "latent experts");
}
