// MoE models in the shared transformer: Mixtral-style (llama) and Qwen-MoE-style (qwen2moe)
// synthetic GGUF files in llama.cpp's layout load and run; the model's forward equals a plain
// double-precision reference whose MoE block is written out here (norm -> router -> loop over
// tokens and their top-k experts -> residual); batched = sequential; the k override and the
// capacity factor change routing; the model's expert statistics match the routing; Q8_0 experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/model_weights.h"
#include "core/synth.h"
#include "kernels/cpu/quant.h"
#include "moe/expert_stats.h"
#include "moe_reference_forward.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::scratch_dir;

namespace {

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

// F32 KV caches everywhere here: the double-precision reference forward and exact routing
// comparisons were written for unrounded keys and values.
LoadOptions f32_caches() {
  LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  return o;
}

std::string write_preset(const std::string& preset, const std::string& file, DType type = DType::F32,
                         uint64_t seed = 42) {
  SynthSpec s = synth_spec(preset);
  s.type = type;
  const std::string path = scratch(file);
  synth_write(s, path, seed);
  return path;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

const std::vector<int32_t> kIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};

using specmoe::testing::MoEReferenceForward;

// Model vs the double reference (tests/moe_reference_forward.h) on kIds with k experts per token
// (0 = the file's): routing equal per token and layer, logits within rel_tol of the logit range.
// float32 activations through 2-3 layers of dot products over <= 128 terms against double:
// measured max error 1.9e-7 to 2.4e-7 of the logit range (F32 and Q8_0, k = 1..E); 1e-5 leaves
// 40x room, while flipping the weight renormalisation alone gives 0.2-0.6.
void check_against_reference(const std::string& path, int k = 0, double rel_tol = 1e-5) {
  specmoe::testing::check_moe_against_reference(path, kIds, k, rel_tol);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Files in llama.cpp's layout

TEST(MoESynth, MixtralStyleFileHasLlamaCppLayoutAndLoads) {
  const std::string path = write_preset("moe-tiny", "moe_tiny.gguf");
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.expert_count"), 4);
  EXPECT_EQ(f->get_int("llama.expert_used_count"), 2);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 96);  // Mixtral: the expert width
  auto shape = [&](const std::string& n) { return f->tensor(n).ne; };
  EXPECT_EQ(shape("blk.0.ffn_gate_inp.weight"), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
  EXPECT_EQ(shape("blk.2.ffn_gate_exps.weight"), (std::vector<int64_t>{64, 96, 4}));
  EXPECT_EQ(shape("blk.2.ffn_up_exps.weight"), (std::vector<int64_t>{64, 96, 4}));
  EXPECT_EQ(shape("blk.2.ffn_down_exps.weight"), (std::vector<int64_t>{96, 64, 4}));
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_shexp.weight"), nullptr);

  auto m = Model::load(path, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_expert, 96);
  EXPECT_TRUE(c.expert_weights_norm);  // Mixtral renormalises
  EXPECT_EQ(c.expert_gating, ExpertGating::Softmax);
  EXPECT_EQ(m->moe_k(), 2);
  // gate + up + down slices of one expert: 3 x 64 x 96 F32.
  EXPECT_EQ(m->moe_expert_bytes(0), size_t{3} * 64 * 96 * 4);
  EXPECT_EQ(m->moe_expert_bytes(3), 0u);  // out of range
}

TEST(MoESynth, QwenMoEStyleFileHasLlamaCppLayoutAndLoads) {
  const std::string path = write_preset("qwen2moe-tiny", "qwen2moe_tiny.gguf");
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->get_string("general.architecture"), "qwen2moe");
  EXPECT_EQ(f->get_int("qwen2moe.expert_count"), 6);
  EXPECT_EQ(f->get_int("qwen2moe.expert_used_count"), 2);
  EXPECT_EQ(f->get_int("qwen2moe.expert_feed_forward_length"), 64);
  EXPECT_EQ(f->get_int("qwen2moe.expert_shared_feed_forward_length"), 128);
  auto shape = [&](const std::string& n) { return f->tensor(n).ne; };
  EXPECT_EQ(shape("blk.1.ffn_gate_inp.weight"), (std::vector<int64_t>{64, 6}));
  EXPECT_EQ(shape("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{64, 64, 6}));
  EXPECT_EQ(shape("blk.1.ffn_down_exps.weight"), (std::vector<int64_t>{64, 64, 6}));
  EXPECT_EQ(shape("blk.1.ffn_gate_shexp.weight"), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(shape("blk.1.ffn_up_shexp.weight"), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(shape("blk.1.ffn_down_shexp.weight"), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(shape("blk.1.ffn_gate_inp_shexp.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("blk.1.attn_q.bias"), (std::vector<int64_t>{64}));

  auto m = Model::load(path, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Qwen2Moe);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(c.n_ff_expert, 64);
  EXPECT_EQ(c.n_ff_shared_expert, 128);
  EXPECT_FALSE(c.expert_weights_norm);  // Qwen-MoE keeps the raw softmax weights
  EXPECT_EQ(m->moe_k(), 2);
}

// ------------------------------------------------------------------------------------------
// The forward against the reference

TEST(MoEForward, MixtralStyleMatchesReference) { check_against_reference(write_preset("moe-tiny", "moe_ref.gguf")); }

TEST(MoEForward, QwenMoEStyleMatchesReference) {
  check_against_reference(write_preset("qwen2moe-tiny", "qwen2moe_ref.gguf"));
}

TEST(MoEForward, KOverrideMatchesReferenceForOneAndAllExperts) {
  const std::string path = write_preset("moe-tiny", "moe_ref_k.gguf");
  check_against_reference(path, 1);
  check_against_reference(path, 4);  // k = E: every expert for every token
  check_against_reference(write_preset("qwen2moe-tiny", "qwen2moe_ref_k.gguf"), 3);
}

TEST(MoEForward, Q8_0ExpertsMatchReference) {
  // The reference reads the same dequantized weights, so the bound is the same as for F32.
  // Q8_0 matmuls quantize activations to 8 bits per block (kernels/cpu integer path): measured
  // 1.0-1.5% of the logit range through 2-3 layers; 4e-2 leaves room, a wrong expert is O(1).
  check_against_reference(write_preset("moe-tiny", "moe_ref_q8.gguf", DType::Q8_0), 0, 4e-2);
  check_against_reference(write_preset("qwen2moe-tiny", "qwen2moe_ref_q8.gguf", DType::Q8_0), 0, 4e-2);
  auto f = GGUFFile::open(scratch("moe_ref_q8.gguf"));
  EXPECT_EQ(f->tensor("blk.0.ffn_down_exps.weight").type, DType::Q8_0);
}

TEST(MoEForward, BatchedEqualsOneTokenForwards) {
  // A token's routing and expert outputs do not depend on the other tokens of its batch (every
  // dot product's order depends only on the row length), so the logits are bit-identical.
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny"}) {
    LoadOptions o;
    o.cache_types = {DType::F32, DType::F32};
    o.n_threads = 3;
    auto m = Model::load(write_preset(preset, std::string(preset) + "_batch.gguf"), o);
    KVCache a = m->new_cache(32), b = m->new_cache(32);
    std::vector<float> batched, one, seq;
    m->forward(kIds, a).logits.to_host(batched);
    for (size_t i = 0; i < kIds.size(); ++i) {
      m->forward(std::span<const int32_t>(kIds).subspan(i, 1), b).logits.to_host(one);
      seq.insert(seq.end(), one.begin(), one.end());
    }
    ASSERT_EQ(seq.size(), batched.size());
    EXPECT_TRUE(same_bits(seq.data(), batched.data(), seq.size())) << preset;
  }
}

TEST(MoEForward, ThreadCountDoesNotChangeLogits) {
  const std::string path = write_preset("moe-tiny", "moe_threads.gguf");
  std::vector<float> ref;
  for (int threads : {1, 2, 5}) {
    LoadOptions o;
    o.cache_types = {DType::F32, DType::F32};
    o.n_threads = threads;
    auto m = Model::load(path, o);
    KVCache kv = m->new_cache(32);
    std::vector<float> logits;
    m->forward(kIds, kv).logits.to_host(logits);
    if (ref.empty()) ref = logits;
    EXPECT_TRUE(same_bits(ref.data(), logits.data(), ref.size())) << threads << " threads";
  }
}

// ------------------------------------------------------------------------------------------
// Runtime k, capacity, statistics

TEST(MoEForward, KOverrideChangesRouting) {
  const std::string path = write_preset("moe-tiny", "moe_k.gguf");
  auto m = Model::load(path, f32_caches());
  ForwardStats last;
  auto run = [&](int k) {
    ForwardOptions o;
    o.moe_k = k;
    KVCache kv = m->new_cache(32);
    std::vector<float> logits;
    ForwardResult f = m->forward(kIds, kv, o);
    f.logits.to_host(logits);
    last = std::move(f.stats);
    return logits;
  };
  const auto k2 = run(2), k1 = run(1), k4 = run(4);
  EXPECT_EQ(m->moe_k(), 2);  // a per-forward k leaves the model's own
  EXPECT_EQ(last.moe[0].k, 4);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(last.distinct_experts(l), 4);  // k = E touches all
  EXPECT_FALSE(same_bits(k1.data(), k2.data(), k1.size()));
  EXPECT_FALSE(same_bits(k4.data(), k2.data(), k4.size()));
  EXPECT_EQ(run(2), k2);  // back to the file's k: the same logits again
  EXPECT_EQ(run(0), k2);  // 0: the model's k

  EXPECT_THROW(run(5), Error);
  EXPECT_THROW(run(-1), Error);
  LoadOptions bad;
  bad.cache_types = {DType::F32, DType::F32};
  bad.moe_k_override = 5;
  try {
    Model::load(path, bad);
    ADD_FAILURE() << "k 5 of 4 experts accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  // Dense models reject MoE options instead of ignoring them, and report no routing.
  const std::string dense = scratch("moe_dense_tiny.gguf");
  synth_write("tiny", dense, 1);
  LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  o.moe_k_override = 1;
  EXPECT_THROW(Model::load(dense, o), Error);
  auto d = Model::load(dense, f32_caches());
  EXPECT_EQ(d->moe_k(), 0);
  EXPECT_EQ(d->moe_expert_bytes(0), 0u);
  KVCache dkv = d->new_cache(32);
  const ForwardStats ds = d->forward(kIds, dkv).stats;
  for (int l = 0; l < d->config().n_layer; ++l) {
    EXPECT_EQ(ds.moe[l].n_tokens, 0);
    EXPECT_EQ(ds.distinct_experts(l), -1);
  }
  ForwardOptions dk;
  dk.moe_k = 1;
  EXPECT_THROW(d->forward(kIds, dkv, dk), Error);
}

TEST(MoEForward, ExpertStatsMatchTheRouting) {
  const std::string path = write_preset("moe-tiny", "moe_stats.gguf");
  auto m = Model::load(path, f32_caches());
  const int T = static_cast<int>(kIds.size()), L = m->config().n_layer, E = m->config().n_expert;
  KVCache kv = m->new_cache(32);
  // The model keeps no statistics: every forward returns its own routing, accumulated here.
  std::vector<moe::ExpertStats> stats;
  for (int l = 0; l < L; ++l) stats.emplace_back(E, 2, l);
  auto record = [&](const ForwardStats& f) {
    for (int l = 0; l < L; ++l)
      if (f.moe[l].n_tokens > 0) stats[l].record_forward(f.moe[l], m->moe_expert_bytes(l));
  };
  const ForwardStats first = m->forward(kIds, kv).stats;
  record(first);
  // Independently routed by the double reference: the model's counts per expert agree.
  MoEReferenceForward ref(path, 2);
  ref.run(kIds);
  for (int l = 0; l < L; ++l) {
    const moe::ExpertStats* s = &stats[l];
    EXPECT_EQ(s->layer(), l);
    EXPECT_EQ(s->n_forwards(), 1);
    EXPECT_EQ(s->n_tokens(), T);
    std::vector<int64_t> want(E, 0);
    std::set<int> touched;
    for (const auto& experts : ref.routing[l])
      for (int e : experts) ++want[e], touched.insert(e);
    EXPECT_EQ(s->expert_tokens(), want) << "layer " << l;
    EXPECT_EQ(std::accumulate(want.begin(), want.end(), int64_t{0}), int64_t{T} * 2);
    EXPECT_EQ(first.distinct_experts(l), static_cast<int>(touched.size()));
    ASSERT_EQ(s->by_size().count({T, 2}), 1u);
    EXPECT_EQ(s->by_size().at({T, 2}).sum_distinct, static_cast<int64_t>(touched.size()));
    EXPECT_EQ(s->dropped_assignments(), 0);
  }
  // Decode steps accumulate per forward size; early exit routes only the layers it ran.
  const int32_t next[1] = {65};
  record(m->forward(next, kv).stats);
  ForwardOptions early;
  early.exit_layer = 1;
  const int32_t next2[1] = {66};
  const ForwardStats third = m->forward(next2, kv, early).stats;
  record(third);
  EXPECT_EQ(stats[0].n_forwards(), 3);
  EXPECT_EQ(stats[0].n_tokens(), T + 2);
  EXPECT_EQ(stats[0].by_size().at({1, 2}).n_forwards, 2);
  EXPECT_EQ(stats[1].n_forwards(), 2);
  EXPECT_EQ(third.distinct_experts(0), 2);   // one token, k = 2
  EXPECT_EQ(third.distinct_experts(1), -1);  // not run by the early exit
  EXPECT_EQ(third.moe[0].n_tokens, 1);       // this call's routing only
}

TEST(MoEForward, CapacityFactorDropsAssignments) {
  const std::string path = write_preset("moe-tiny", "moe_capacity.gguf");
  auto run = [&](double cf, int64_t* dropped) {
    LoadOptions o;
    o.cache_types = {DType::F32, DType::F32};
    o.moe_capacity_factor = cf;
    auto m = Model::load(path, o);
    KVCache kv = m->new_cache(32);
    std::vector<float> logits;
    const ForwardResult f = m->forward(kIds, kv);
    f.logits.to_host(logits);
    *dropped = 0;
    for (int l = 0; l < m->config().n_layer; ++l) *dropped += f.stats.moe[l].n_dropped_assignments;
    for (float v : logits) EXPECT_TRUE(std::isfinite(v));
    return logits;
  };
  int64_t d0 = -1, d1 = -1;
  const auto dropless = run(0.0, &d0);
  // cf 0.5: capacity ceil(0.5 * 11 * 2 / 4) = 3 slots per expert for 22 assignments: at least
  // 22 - 4 * 3 = 10 drops in every layer.
  const auto tight = run(0.5, &d1);
  EXPECT_EQ(d0, 0);
  EXPECT_GE(d1, 3 * 10);
  EXPECT_FALSE(same_bits(dropless.data(), tight.data(), dropless.size()));
  LoadOptions bad;
  bad.cache_types = {DType::F32, DType::F32};
  bad.moe_capacity_factor = std::nan("");
  EXPECT_THROW(Model::load(path, bad), Error);
}

namespace {

// Copies a GGUF file with edits: a tensor dropped or its ne[1], ne[2] swapped, metadata keys
// dropped or set.
struct Edit {
  std::string drop_tensor, swap12_tensor, drop_key;
  std::vector<std::pair<std::string, uint32_t>> u32;
  std::vector<std::pair<std::string, float>> f32;
};

void rewrite(const std::string& src, const std::string& dst, const Edit& e) {
  auto f = GGUFFile::open(src);
  GGUFWriter w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment" && k != e.drop_key) w.set_value(k, v);
  for (const auto& [k, v] : e.u32) w.set_u32(k, v);
  for (const auto& [k, v] : e.f32) w.set_f32(k, v);
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<int64_t> ne = t.ne;
    if (t.name == e.swap12_tensor) std::swap(ne[1], ne[2]);
    w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.nbytes));
  }
  w.write(dst);
}

void expect_load_error(const std::string& path, ErrorKind kind, const std::string& needle) {
  try {
    Model::load(path, f32_caches());
    ADD_FAILURE() << "no throw for " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(MoELoad, MissingOrMisshapedExpertTensorIsNamed) {
  const std::string base = write_preset("moe-tiny", "moe_errors.gguf");
  Edit drop;
  drop.drop_tensor = "blk.1.ffn_up_exps.weight";
  rewrite(base, scratch("moe_missing.gguf"), drop);
  expect_load_error(scratch("moe_missing.gguf"), ErrorKind::Format, "blk.1.ffn_up_exps.weight");
  Edit swap;
  swap.swap12_tensor = "blk.2.ffn_gate_exps.weight";  // {64, 96, 4} -> {64, 4, 96}
  rewrite(base, scratch("moe_shape.gguf"), swap);
  expect_load_error(scratch("moe_shape.gguf"), ErrorKind::Format, "blk.2.ffn_gate_exps.weight");
}

TEST(MoELoad, RouterAndSizesFromMetadata) {
  const std::string base = write_preset("moe-tiny", "moe_meta.gguf");
  // k beyond the experts, an unknown gating function, softmax with a weight scale, groups that
  // do not divide the experts: each rejected naming the file.
  Edit k5;
  k5.u32 = {{"llama.expert_used_count", 5}};
  rewrite(base, scratch("moe_meta_k5.gguf"), k5);
  expect_load_error(scratch("moe_meta_k5.gguf"), ErrorKind::Format, "n_expert_used");
  Edit g3;
  g3.u32 = {{"llama.expert_gating_func", 3}};
  rewrite(base, scratch("moe_meta_g3.gguf"), g3);
  expect_load_error(scratch("moe_meta_g3.gguf"), ErrorKind::Unsupported, "llama.expert_gating_func");
  // Softmax gating with a weight scale (DeepSeek-V2's routed_scaling_factor): the softmax group
  // router, whose renormalised k = 2 weights (Mixtral's llama default) sum to the scale.
  Edit scale;
  scale.f32 = {{"llama.expert_weights_scale", 2.0f}};
  rewrite(base, scratch("moe_meta_scale.gguf"), scale);
  {
    auto ms = Model::load(scratch("moe_meta_scale.gguf"));
    EXPECT_EQ(config_router_spec(ms->config()).kind, moe::RouterKind::SoftmaxGroup);
    KVCache kvs = ms->new_cache(32);
    const ForwardStats f = ms->forward(kIds, kvs).stats;
    for (int t = 0; t < f.moe[0].n_tokens; ++t)
      EXPECT_NEAR(f.moe[0].weight_at(t, 0) + f.moe[0].weight_at(t, 1), 2.0f, 1e-5f);
  }
  Edit groups;
  groups.u32 = {{"llama.expert_gating_func", 2}, {"llama.expert_group_count", 3}};
  rewrite(base, scratch("moe_meta_groups.gguf"), groups);
  expect_load_error(scratch("moe_meta_groups.gguf"), ErrorKind::Format, "n_expert_group");

  // Sigmoid gating (expert_gating_func 2) with 2 groups of 2, 1 kept, scale 2.5: DeepSeek-style
  // routing; with renormalisation the k = 2 weights sum to the scale, both from the kept group.
  Edit sig;
  sig.u32 = {{"llama.expert_gating_func", 2}, {"llama.expert_group_count", 2}, {"llama.expert_group_used_count", 1}};
  sig.f32 = {{"llama.expert_weights_scale", 2.5f}};
  rewrite(base, scratch("moe_meta_sigmoid.gguf"), sig);
  auto m = Model::load(scratch("moe_meta_sigmoid.gguf"), f32_caches());
  EXPECT_EQ(m->config().expert_gating, ExpertGating::Sigmoid);
  EXPECT_EQ(m->config().n_expert_group, 2);
  EXPECT_FLOAT_EQ(m->config().expert_weights_scale, 2.5f);
  KVCache kv = m->new_cache(32);
  const ForwardStats fs = m->forward(kIds, kv).stats;
  const moe::Routing* r = &fs.moe[1];
  for (int t = 0; t < r->n_tokens; ++t) {
    EXPECT_NEAR(r->weight_at(t, 0) + r->weight_at(t, 1), 2.5f, 1e-5f);
    EXPECT_EQ(r->expert_at(t, 0) / 2, r->expert_at(t, 1) / 2) << "token " << t;  // same group
  }

  // qwen2moe without expert_feed_forward_length: llama.cpp's default n_ff / k (128 / 2 = 64)
  // gives the same model.
  const std::string q = write_preset("qwen2moe-tiny", "qwen2moe_meta.gguf");
  Edit no_ff;
  no_ff.drop_key = "qwen2moe.expert_feed_forward_length";
  rewrite(q, scratch("qwen2moe_meta_noff.gguf"), no_ff);
  auto a = Model::load(q, f32_caches()), b = Model::load(scratch("qwen2moe_meta_noff.gguf"), f32_caches());
  EXPECT_EQ(b->config().n_ff_expert, 64);
  KVCache ka = a->new_cache(32), kb = b->new_cache(32);
  std::vector<float> la, lb;
  a->forward(kIds, ka).logits.to_host(la);
  b->forward(kIds, kb).logits.to_host(lb);
  EXPECT_TRUE(same_bits(la.data(), lb.data(), la.size()));
}

TEST(MoELoad, RngNormalSourceFeedsTheNoisyRouter) {
  // core's adaptor: the same seed gives the same draws.
  auto a = rng_normal_source(std::make_shared<Rng>(7)), b = rng_normal_source(std::make_shared<Rng>(7));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a(), b());
}
