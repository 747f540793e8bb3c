// The MoE architectures of llama.cpp's layout beyond Mixtral and Qwen-MoE: qwen3moe (QK-norm per
// head, renormalised softmax top-k of narrow experts), olmoe (QK-norm over the whole projections,
// raw softmax weights) and deepseek2 (multi-head latent attention with a q LoRA or a full-rank
// query, the compressed cache, leading dense layers, shared experts, softmax routing over expert
// groups with a weight scale, YaRN with its score magnitude). Each synthetic model matches the
// double-precision reference forward with its MoE block (tests/moe_reference_forward.h): every
// token is routed to the reference's experts in every layer for F32 and F16 weights, and the
// logits agree; the latent cache has the layout the model needs and decoding one token at a time
// or through a tree gives the batch's logits bit for bit. The DeepSeek-style families of llama.cpp
// (deepseek, dots1, glm4moe, ernie4_5-moe, bailingmoe2) and qwen3vlmoe are checked the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/model.h"
#include "base/error.h"
#include "core/model_weights.h"
#include "core/synth.h"
#include "moe/expert_stats.h"
#include "moe_reference_forward.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::check_moe_against_reference;
using specmoe::testing::scratch_dir;

namespace {

const std::vector<int32_t> kIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};

std::string write(const SynthSpec& s, const std::string& file, uint64_t seed = 42) {
  const std::string path = (scratch_dir() / file).string();
  synth_write(s, path, seed);
  return path;
}

std::string write_preset(const std::string& preset, DType type, const std::string& file) {
  SynthSpec s = synth_spec(preset);
  s.type = type;
  return write(s, file);
}

bool same_bits(const std::vector<float>& a, size_t a0, const std::vector<float>& b, size_t b0, size_t n) {
  return std::memcmp(a.data() + a0, b.data() + b0, n * sizeof(float)) == 0;
}

// Tolerances (max |logit - reference| over the largest reference logit), per weight type. F32:
// float32 activations through 3 layers of dot products over <= 192 terms against double, measured
// 2e-7 to 6e-7; 1e-5 leaves more than 10x room, while a wrong op (a skipped norm, the other RoPE
// pairing, a missing scale or shared expert) moves logits by O(1) of the range. F16: the reference
// reads the same F16 weights, so only activation rounding differs: the same bound. Routing is
// compared exactly for both: a tie within float rounding among random router logits has
// probability ~1e-6 per token here.
constexpr double kTolF32 = 1e-5;

}  // namespace

TEST(MoEArchitectures, Qwen3MoeMatchesReferenceAndRoutes) {
  for (DType t : {DType::F32, DType::F16}) {
    const std::string path = write_preset("qwen3moe-tiny", t, fmt::format("qwen3moe_{}.gguf", dtype_name(t)));
    check_moe_against_reference(path, kIds, 0, kTolF32);
    check_moe_against_reference(path, kIds, 1, kTolF32);  // k override
  }
  auto m = Model::load(write_preset("qwen3moe-tiny", DType::F32, "qwen3moe_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_expert, 16);
  EXPECT_EQ(c.n_expert_used, 4);
  EXPECT_EQ(c.n_ff_expert, 32);  // expert_feed_forward_length, not feed_forward_length (128)
  EXPECT_TRUE(c.expert_weights_norm);
  // Renormalised softmax top-k: the four weights of every token sum to 1.
  KVCache kv = m->new_cache(32);
  const ForwardResult f = m->forward(kIds, kv);
  const moe::Routing& r = f.stats.moe[1];
  for (int t = 0; t < r.n_tokens; ++t) {
    double s = 0;
    for (int j = 0; j < r.k; ++j) s += r.weight_at(t, j);
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
}

TEST(MoEArchitectures, OlmoeMatchesReferenceAndRoutes) {
  for (DType t : {DType::F32, DType::F16})
    check_moe_against_reference(write_preset("olmoe-tiny", t, fmt::format("olmoe_{}.gguf", dtype_name(t))), kIds, 0,
                                kTolF32);
  auto m = Model::load(write_preset("olmoe-tiny", DType::F32, "olmoe_cfg.gguf"));
  EXPECT_EQ(m->config().arch, Arch::Olmoe);
  EXPECT_TRUE(m->config().qk_norm_full);
  EXPECT_FALSE(m->config().qk_norm);
  EXPECT_FALSE(m->config().expert_weights_norm);  // raw softmax weights
  EXPECT_EQ(m->config().n_ff_expert, 64);
}

TEST(MoEArchitectures, GraniteMoeMatchesReferenceAndRoutes) {
  // granite's multipliers around renormalised softmax top-2 experts of feed_forward_length; the
  // residual multiplier scales the MoE block's output too.
  for (DType t : {DType::F32, DType::F16})
    check_moe_against_reference(write_preset("granitemoe-tiny", t, fmt::format("granitemoe_{}.gguf", dtype_name(t))),
                                kIds, 0, kTolF32);
  auto m = Model::load(write_preset("granitemoe-tiny", DType::F32, "granitemoe_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::GraniteMoe);
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_ff_expert, 64);
  EXPECT_EQ(c.n_ff_shared_expert, 0);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.5f);
}

TEST(MoEArchitectures, Deepseek2MatchesReferenceAndRoutes) {
  // The q LoRA, groups (4 of 2 experts, 2 kept), scale 1.5 and YaRN; then DeepSeek-V2-Lite's form,
  // and mistral4 (deepseek2-tiny with its YaRN magnitude and an attention temperature from position 4
  // that the 11 tokens pass).
  for (const char* preset : {"deepseek2-tiny", "deepseek2-lite-tiny", "mistral4-tiny"})
    for (DType t : {DType::F32, DType::F16}) {
      const std::string path = write_preset(preset, t, fmt::format("{}_{}.gguf", preset, dtype_name(t)));
      check_moe_against_reference(path, kIds, 0, kTolF32);
    }
  // k = 4 = every expert of the two kept groups.
  check_moe_against_reference(write_preset("deepseek2-tiny", DType::F32, "deepseek2_k4.gguf"), kIds, 4, kTolF32);
  // A selection bias (exp_probs_b) with softmax gating, and sigmoid gating with the bias
  // (DeepSeek-V3's router on V2's attention).
  SynthSpec s = synth_spec("deepseek2-tiny");
  s.exp_probs_bias = true;
  check_moe_against_reference(write(s, "deepseek2_bias.gguf"), kIds, 0, kTolF32);
  s.expert_gating = 2;
  s.expert_weights_norm = 1;
  check_moe_against_reference(write(s, "deepseek2_sigmoid.gguf"), kIds, 0, kTolF32);
  // Q8_0: activations rounded to 8 bits per block (kernels/cpu integer path): ~1% of the logit
  // range through 3 layers (as Q8_0 in model_moe_test.cpp); routing still compared exactly.
  check_moe_against_reference(write_preset("deepseek2-lite-tiny", DType::Q8_0, "deepseek2_q8.gguf"), kIds, 0, 4e-2);
}

TEST(MoEArchitectures, AfmoeReadsItsLayout) {
  // Its logits against the reference: DeepseekStyleFamiliesMatchReferenceAndRoute. Here what the
  // loader reads: the embedding scale, pre- and post-norms, QK-norm, the output gate's tensor,
  // windows of 4 on layers 0-2 with their own base, no RoPE on layer 3, sigmoid scores by default.
  auto m = Model::load(write_preset("afmoe-tiny", DType::F32, "afmoe_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Afmoe);
  EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);
  EXPECT_TRUE(c.post_norms && c.pre_norms && c.qk_norm);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(c.window(l), l < 3 ? 4 : 0) << l;
    EXPECT_EQ(c.has_rope(l), l != 3) << l;
    EXPECT_EQ(c.is_moe_layer(l), l > 0) << l;
  }
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 5000.0f);
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  EXPECT_EQ(c.n_ff_shared_expert, c.n_ff_expert);
  auto f = core::GGUFFile::open((scratch_dir() / "afmoe_cfg.gguf").string());
  const auto w = core::bind_weights(*f, c);
  for (int l = 0; l < 4; ++l) EXPECT_FALSE(w.layers[l].attn_gate.empty()) << l;
}

TEST(MoEArchitectures, MapleReadsItsLayoutAndItsClampsMatter) {
  // Its logits against the reference: DeepseekStyleFamiliesMatchReferenceAndRoute. Here what the
  // loader reads: windows of 4 and RoPE (with the local base) on the flagged layers 0, 1 and 3 only,
  // QK-norm, a renormalised softmax, each layer's SwiGLU clamp (layer 1's 0: none); and the clamps
  // matter: the reference without them misses the model's logits by far more than the tolerance.
  const std::string path = write_preset("maple-tiny", DType::F32, "maple_cfg.gguf");
  core::LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  auto m = Model::load(path, o);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Maple);
  EXPECT_TRUE(c.qk_norm);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(c.window(l), l == 2 ? 0 : 4) << l;
    EXPECT_EQ(c.has_rope(l), l != 2) << l;
    EXPECT_TRUE(c.is_moe_layer(l)) << l;
  }
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 1000.0f);
  EXPECT_EQ(c.expert_gating, ExpertGating::Softmax);
  EXPECT_TRUE(c.expert_weights_norm);
  ASSERT_EQ(c.swiglu_clamp.size(), 4u);
  auto f = core::GGUFFile::open(path);
  const auto w = core::bind_weights(*f, c);
  const float want[4] = {0.75f, 0.0f, 1.25f, 1.5f};
  for (int l = 0; l < 4; ++l) {
    EXPECT_FLOAT_EQ(c.swiglu_clamp[l], want[l]) << l;
    EXPECT_FLOAT_EQ(w.layers[l].moe.weights.swiglu_limit, want[l]) << l;
  }
  EXPECT_LT(check_moe_against_reference(path, kIds, 0, kTolF32), kTolF32);
  core::KVCache kv = m->new_cache(32);
  std::vector<float> got;
  m->forward(kIds, kv).logits.to_host(got);
  specmoe::testing::MoEReferenceForward ref(path, c.n_expert_used);
  ref.set_context(32);
  ref.ablate_clamps();
  const auto unclamped = ref.run(kIds);
  double range = 0, diff = 0;
  for (size_t t = 0; t < kIds.size(); ++t)
    for (int j = 0; j < c.n_vocab; ++j) {
      range = std::max(range, std::fabs(unclamped[t][j]));
      diff = std::max(diff, std::fabs(unclamped[t][j] - got[t * c.n_vocab + j]));
    }
  EXPECT_GT(diff, 100 * kTolF32 * range);
}

TEST(MoEArchitectures, Mistral4IsDeepseek2WithItsOwnYarnMagnitudeAndATemperature) {
  // The same weights as deepseek2-tiny: read as mistral4 (with the temperature keys), the YaRN
  // magnitude moves from the RoPE into the scores as llama.cpp's context sets it for every
  // architecture but deepseek2; the temperature then scales the queries from position 4. Each
  // changes the logits; the reference test above checks their values.
  auto m = Model::load(write_preset("mistral4-tiny", DType::F32, "mistral4_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Deepseek2);
  EXPECT_EQ(c.arch_name, "mistral4");
  EXPECT_FLOAT_EQ(c.attn_temp_scale, 0.5f);
  EXPECT_EQ(c.attn_temp_floor, 4);
  EXPECT_FLOAT_EQ(c.attn_temp_offset, 0.0f);
  EXPECT_FALSE(c.attn_temp_nope_only);
  auto ds = Model::load(write_preset("deepseek2-tiny", DType::F32, "deepseek2_for_mistral4.gguf"));
  // llama_context: deepseek2's attn_factor is 1 / (1 + 0.1 ln 4); mistral4's also divides by
  // mscale(mscale_all_dim 0.707).
  const float ln4 = std::log(4.0f);
  EXPECT_NEAR(ds->config().yarn_attn_factor, 1.0f / (1.0f + 0.1f * ln4), 1e-6f);
  EXPECT_NEAR(c.yarn_attn_factor, 1.0f / (1.0f + 0.1f * 0.707f * ln4), 1e-5f);
  EXPECT_NE(c.attention_scale(), ds->config().attention_scale());
}

TEST(MoEArchitectures, DeepseekStyleFamiliesMatchReferenceAndRoute) {
  // qwen3vlmoe (interleaved M-RoPE), deepseek (softmax, raw weights, 2 shared experts), dots1 (QK-norm,
  // sigmoid with a selection bias, scale 2), glm4moe (biases, partial RoPE, post_attention_norm as
  // the FFN norm, sigmoid over groups), ernie4_5-moe (experts in every second layer, softmax with a
  // selection bias, one shared expert), bailingmoe2 (attn_qkv, QK-norm, sigmoid over groups) and
  // hunyuan-moe (QK-norm after RoPE, a shared expert in every layer), minimax-m2 (QK-norm over the
  // projections, partial RoPE, sigmoid with a selection bias) and exaone-moe (QK-norm, windows of 4
  // past which the 11 tokens reach, a global layer without RoPE, a dense first layer, a shared expert,
  // sigmoid with a selection bias, scale 2.5), lfm2moe (short convolutions beside attention, a dense
  // first layer, sigmoid with a selection bias) and smallthinker (the router on the layer's input,
  // ReLU-gated experts; with the window key a NoPE layer 0 and a local RoPE base), qwen35moe (gated
  // DeltaNet layers beside gated attention, experts in every layer with a gated shared expert), qwen3next
  // (qwen35moe's with plain RoPE, ssm_ba, value heads interleaved on the key heads; and with ssm_in),
  // mellum (qwen3moe's block with windows of 4 on layers 0-2 and 4, past which the 11 tokens reach),
  // bailingmoe (llama's attention, experts in every layer, softmax with raw weights times 2, 2 shared),
  // llama4 (QK L2 norm on the chunked layers, a NoPE layer, experts in every second layer reading
  // their sigmoid-weighted inputs, a shared expert; and with 128 experts, no QK norm), nemotron_h_moe
  // (Mamba-2 and attention layers beside MLP layers of ungated squared-ReLU experts and a shared one,
  // sigmoid with a selection bias, renormalised, scale 2.5), afmoe (embedding scale, pre- and
  // post-norms, QK-norm, an attention output gate, windows of 4 with a local base, a NoPE layer, a
  // dense first layer, sigmoid with a selection bias, a shared expert), maple (QK-norm, windows of 4
  // with RoPE on their layers only, a global layer without it, clamped SwiGLU experts).
  for (const char* preset :
       {"qwen3vlmoe-tiny", "deepseek-tiny", "dots1-tiny", "glm4moe-tiny", "ernie4_5-moe-tiny", "bailingmoe2-tiny",
        "hunyuan-moe-tiny", "minimax-m2-tiny", "exaone-moe-tiny", "lfm2moe-tiny", "smallthinker-tiny",
        "smallthinker-swa-tiny", "qwen35moe-tiny", "qwen3next-tiny", "qwen3next-legacy-tiny", "mellum-tiny", "bailingmoe-tiny",
        "llama4-tiny", "llama4-128e-tiny", "nemotron_h_moe-tiny", "afmoe-tiny", "maple-tiny"})
    for (DType t : {DType::F32, DType::F16})
      check_moe_against_reference(write_preset(preset, t, fmt::format("{}_{}.gguf", preset, dtype_name(t))), kIds, 0,
                                  kTolF32);
  check_moe_against_reference(write_preset("dots1-tiny", DType::F32, "dots1_k1.gguf"), kIds, 1, kTolF32);
  check_moe_against_reference(write_preset("ernie4_5-moe-tiny", DType::F32, "ernie_moe_k3.gguf"), kIds, 3, kTolF32);
  // deepseek's and ernie4_5-moe's graphs fix the router whatever the keys say (deepseek: softmax,
  // raw weights; ernie4_5-moe: softmax, renormalised, unscaled).
  SynthSpec s = synth_spec("deepseek-tiny");
  s.expert_gating = 2;
  s.expert_weights_norm = 1;
  s.expert_weights_scale = 3.0f;
  const std::string keyed = write(s, "deepseek_keys.gguf");
  check_moe_against_reference(keyed, kIds, 0, kTolF32);
  {
    auto m = Model::load(keyed);
    EXPECT_EQ(m->config().expert_gating, ExpertGating::Softmax);
    EXPECT_FALSE(m->config().expert_weights_norm);
    EXPECT_FLOAT_EQ(m->config().expert_weights_scale, 3.0f);  // deepseek reads the scale
  }
  s = synth_spec("ernie4_5-moe-tiny");
  s.expert_weights_norm = 0;
  s.expert_weights_scale = 3.0f;
  const std::string ernie_keyed = write(s, "ernie_moe_keys.gguf");
  check_moe_against_reference(ernie_keyed, kIds, 0, kTolF32);
  {
    auto m = Model::load(ernie_keyed);
    EXPECT_TRUE(m->config().expert_weights_norm);
    EXPECT_FLOAT_EQ(m->config().expert_weights_scale, 1.0f);
  }
}

TEST(MoEArchitectures, Llama4ReadsItsLayoutAndEachPartMatters) {
  // llama.cpp's constants and the file's layout: chunks of 8192 on layers 0-2 (the pattern's
  // default) or on the flagged ones, no RoPE on layer 3, the temperature there only, QK L2 norm
  // unless 128 experts, experts in layers 1 and 3 with a shared expert of their width, sigmoid
  // scores neither renormalised nor scaled that weight the experts' inputs.
  auto m = Model::load(write_preset("llama4-tiny", DType::F32, "llama4_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Llama4);
  EXPECT_TRUE(c.swa_chunked);
  EXPECT_TRUE(c.qk_l2_norm);
  EXPECT_TRUE(c.attn_temp_nope_only);
  EXPECT_FLOAT_EQ(c.attn_temp_offset, 1.0f);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(c.chunk(l), l < 3 ? 8192 : 0) << l;
    EXPECT_EQ(c.window(l), 0) << l;
    EXPECT_EQ(c.has_rope(l), l != 3) << l;
    EXPECT_EQ(c.is_moe_layer(l), l % 2 == 1) << l;
  }
  EXPECT_EQ(c.n_ff_shared_expert, c.n_ff_expert);
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  EXPECT_FALSE(c.expert_weights_norm);
  EXPECT_TRUE(c.rope_freq_factors);
  {
    auto f = core::GGUFFile::open((scratch_dir() / "llama4_cfg.gguf").string());
    EXPECT_TRUE(core::bind_weights(*f, c).layers[1].moe.weights.weight_inputs);
  }
  auto wide = Model::load(write_preset("llama4-128e-tiny", DType::F32, "llama4_128e_cfg.gguf"));
  EXPECT_FALSE(wide->config().qk_l2_norm);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(wide->config().chunk(l), l % 2 == 0 ? 8192 : 0) << l;

  // Each part matters to these logits: the model matches the reference, and the reference
  // without the QK norm, without the NoPE layer, or with the weights on the experts' outputs misses
  // the model's logits by far more than the tolerance.
  const std::string path = (scratch_dir() / "llama4_cfg.gguf").string();
  EXPECT_LT(check_moe_against_reference(path, kIds, 0, kTolF32), kTolF32);
  core::LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  auto f32 = Model::load(path, o);
  core::KVCache kv = f32->new_cache(32);
  std::vector<float> got;
  f32->forward(kIds, kv).logits.to_host(got);
  const int V = c.n_vocab;
  for (const char* part : {"qk_l2_norm", "nope", "weight_inputs"}) {
    specmoe::testing::MoEReferenceForward ref(path, c.n_expert_used);
    ref.set_context(32);
    ref.ablate_llama4(part);
    const auto want = ref.run(kIds);
    double range = 0, diff = 0;
    for (size_t t = 0; t < kIds.size(); ++t)
      for (int j = 0; j < V; ++j) {
        range = std::max(range, std::fabs(want[t][j]));
        diff = std::max(diff, std::fabs(want[t][j] - got[t * V + j]));
      }
    EXPECT_GT(diff, 100 * kTolF32 * range) << part;
  }
}

TEST(MoEArchitectures, SmallThinkerReadsItsKeys) {
  // Without the window key every layer rotates and none is windowed; with it, llama.cpp's fixed
  // window of 4096 on layers 1-3 (dense first), no RoPE on layers 0 and 4, the local base from the
  // file; a 4-layer model with windows rotates every layer (llama.cpp's step == n_layer test).
  auto m = Model::load(write_preset("smallthinker-tiny", DType::F32, "smallthinker_cfg.gguf"));
  EXPECT_EQ(m->config().arch, Arch::SmallThinker);
  EXPECT_TRUE(m->config().router_reads_layer_input);
  EXPECT_EQ(m->config().n_swa, 0);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(m->config().has_rope(l)) << l;
  {
    auto f = core::GGUFFile::open((scratch_dir() / "smallthinker_cfg.gguf").string());
    EXPECT_EQ(core::bind_weights(*f, m->config()).layers[0].moe.weights.act, moe::MoEActivation::ReGLU);
  }
  EXPECT_TRUE(m->config().expert_weights_norm);
  auto w = Model::load(write_preset("smallthinker-swa-tiny", DType::F32, "smallthinker_swa_cfg.gguf"));
  const ModelConfig& c = w->config();
  EXPECT_EQ(c.n_swa, 4096);  // the file says 4
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(c.is_swa(l), l % 4 != 0) << l;
    EXPECT_EQ(c.has_rope(l), l % 4 != 0) << l;
  }
  SynthSpec four = synth_spec("smallthinker-swa-tiny");
  four.n_layer = 4;
  const std::string four_path = write(four, "smallthinker_swa4.gguf");
  auto f4 = Model::load(four_path);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(f4->config().is_swa(l), l != 0) << l;
    EXPECT_TRUE(f4->config().has_rope(l)) << l;
  }
  check_moe_against_reference(four_path, kIds, 0, kTolF32);
  EXPECT_FLOAT_EQ(c.rope_at(1).freq_base, 1000.0f);
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  // (The router's input is checked by DeepseekStyleFamiliesMatchReferenceAndRoute: the reference
  // routes on the layer's input, and every token must go to its experts.)
  const std::string path = write(synth_spec("smallthinker-tiny"), "smallthinker_keys.gguf");
  // llama.cpp aborts without the gating key and builds empty experts without their width.
  for (const char* key : {"smallthinker.expert_gating_func", "smallthinker.expert_feed_forward_length"}) {
    auto f = core::GGUFFile::open(path);
    core::GGUFWriter out;
    for (const auto& [k, v] : f->metadata())
      if (k != key) out.set_value(k, v);
    for (const auto& t : f->tensors()) out.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
    const std::string bad = (scratch_dir() / "smallthinker_missing.gguf").string();
    out.write(bad);
    try {
      Model::load(bad);
      ADD_FAILURE() << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + key + "' is missing"), std::string::npos) << e.what();
    }
  }
}

TEST(MoEArchitectures, ExaoneMoeReadsItsKeys) {
  auto m = Model::load(write_preset("exaone-moe-tiny", DType::F32, "exaone_moe_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::ExaoneMoe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_swa, 4);
  for (int l = 0; l < c.n_layer; ++l) {
    EXPECT_EQ(c.is_swa(l), l < 3) << l;
    EXPECT_EQ(c.has_rope(l), l < 3) << l;  // the global layer has no RoPE
    EXPECT_EQ(c.is_moe_layer(l), l >= 1) << l;
  }
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.n_ff_shared_expert, 32);  // expert_shared_feed_forward_length absent: the expert width
  EXPECT_EQ(core::config_router_spec(c).kind, moe::RouterKind::SigmoidGroup);
  // llama.cpp requires the gating key and the window.
  SynthSpec s = synth_spec("exaone-moe-tiny");
  s.expert_gating = 0;
  EXPECT_THROW(Model::load(write(s, "exaone_moe_nogating.gguf")), Error);
}

TEST(MoEArchitectures, DbrxAndPhiMoEMatchReferenceAndRoute) {
  // dbrx: fused attn_qkv, LayerNorms without biases, attn_output_norm before the FFN, q/k/v clamped;
  // phimoe: RMSNorms with biases, q/k/v, output and logit biases, LongRoPE (short and long factors).
  // Both graphs fix the router to a renormalised, unscaled softmax top-k, whatever the keys say.
  for (const char* preset : {"dbrx-tiny", "phimoe-tiny"})
    for (DType t : {DType::F32, DType::F16})
      check_moe_against_reference(write_preset(preset, t, fmt::format("{}_{}.gguf", preset, dtype_name(t))), kIds, 0,
                                  kTolF32);
  check_moe_against_reference(write_preset("dbrx-tiny", DType::F32, "dbrx_k3.gguf"), kIds, 3, kTolF32);
  for (const char* preset : {"dbrx-tiny", "phimoe-tiny"}) {
    SynthSpec s = synth_spec(preset);
    s.expert_gating = 2;
    s.expert_weights_norm = 0;
    s.expert_weights_scale = 3.0f;
    const std::string keyed = write(s, fmt::format("{}_keys.gguf", preset));
    check_moe_against_reference(keyed, kIds, 0, kTolF32);
    auto m = Model::load(keyed);
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.expert_gating, ExpertGating::Softmax) << preset;
    EXPECT_TRUE(c.expert_weights_norm) << preset;
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.0f) << preset;
    EXPECT_EQ(core::config_router_spec(c).kind, moe::RouterKind::SoftmaxTopK) << preset;
  }
  auto dbrx = Model::load(write_preset("dbrx-tiny", DType::F32, "dbrx_cfg.gguf"));
  EXPECT_FLOAT_EQ(dbrx->config().clamp_kqv, 2.0f);
  EXPECT_TRUE(dbrx->config().layer_norm);
  auto phimoe = Model::load(write_preset("phimoe-tiny", DType::F32, "phimoe_cfg.gguf"));
  EXPECT_TRUE(phimoe->config().rms_norm_bias);
  EXPECT_TRUE(phimoe->config().rope_long_short_factors);
  // A cache past the original context of 64 takes the long factors, as phi3's does.
  check_moe_against_reference(write_preset("phimoe-tiny", DType::F32, "phimoe_long.gguf"), kIds, 0, kTolF32, 128);
}

TEST(MoEArchitectures, GptOssMatchesReferenceAndRoutes) {
  // gpt-oss: attention sinks, q/k/v and output biases, windows of 4 on layers 0 and 2, router and
  // expert biases, the clamped SwiGLU; F32 and F16, and k = 1 and 3.
  for (DType t : {DType::F32, DType::F16})
    check_moe_against_reference(write_preset("gpt-oss-tiny", t, fmt::format("gpt_oss_{}.gguf", dtype_name(t))), kIds,
                                0, kTolF32);
  check_moe_against_reference(write_preset("gpt-oss-tiny", DType::F32, "gpt_oss_k1.gguf"), kIds, 1, kTolF32);
  check_moe_against_reference(write_preset("gpt-oss-tiny", DType::F32, "gpt_oss_k3.gguf"), kIds, 3, kTolF32);
  auto m = Model::load(write_preset("gpt-oss-tiny", DType::F32, "gpt_oss_cfg.gguf"));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::GptOss);
  EXPECT_EQ(c.n_swa, 4);
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.is_swa(l), l % 2 == 0) << l;
  EXPECT_EQ(core::config_router_spec(c).kind, moe::RouterKind::SoftmaxTopK);
  const ModelWeights w = bind_weights(m->file(), c);
  EXPECT_EQ(w.layers[0].attn_sinks.n, 4);
  EXPECT_EQ(w.layers[1].moe.weights.act, moe::MoEActivation::SwiGLUOai);
  EXPECT_TRUE(w.layers[1].moe.weights.has_biases());
  // The clamped SwiGLU: min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1).
  EXPECT_NEAR(moe::swiglu_oai(10.0f, 10.0f), 7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 8.0, 1e-4);
  EXPECT_NEAR(moe::swiglu_oai(1.0f, -10.0f), 1.0 / (1.0 + std::exp(-1.702)) * -6.0, 1e-5);
  EXPECT_NEAR(moe::swiglu_oai(-2.0f, 0.5f), -2.0 / (1.0 + std::exp(3.404)) * 1.5, 1e-6);
}

TEST(MoEArchitectures, DeepseekStyleFamiliesReadTheirKeys) {
  auto load = [](const std::string& preset) { return Model::load(write_preset(preset, DType::F32, preset + "_cfg.gguf")); };
  // The host weights as the model binds them.
  auto weights = [](const std::unique_ptr<Model>& m) { return bind_weights(m->file(), m->config()); };
  {
    auto m = load("deepseek-tiny");
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.arch, Arch::Deepseek);
    EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
    EXPECT_EQ(c.n_layer_dense_lead, 1);
    EXPECT_EQ(c.n_ff, 128);
    EXPECT_EQ(c.n_ff_expert, 32);
    EXPECT_EQ(c.n_expert_shared, 2);
    EXPECT_EQ(c.n_ff_shared_expert, 64);
    EXPECT_FALSE(c.expert_weights_norm);
    EXPECT_EQ(m->moe_expert_bytes(0), 0u);
  }
  {
    auto m = load("dots1-tiny");
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.0f);
    EXPECT_EQ(c.n_ff_shared_expert, 32);
    EXPECT_EQ(core::config_router_spec(c).kind, moe::RouterKind::SigmoidGroup);
    EXPECT_FALSE(weights(m).layers[1].moe.bias.empty());  // exp_probs_b bound
  }
  {
    auto m = load("glm4moe-tiny");
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    EXPECT_EQ(c.rope_dims, 8);
    EXPECT_FALSE(c.qk_norm);  // the file has no attn_q_norm (GLM-4.5-Air)
    EXPECT_FALSE(c.post_norms);
    EXPECT_EQ(c.n_expert_group, 4);
    EXPECT_EQ(c.n_expert_group_used, 2);
    EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
    EXPECT_FALSE(weights(m).layers[1].bq.empty());
  }
  {
    auto m = load("ernie4_5-moe-tiny");
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.n_moe_layer_step, 2);
    EXPECT_FALSE(c.is_moe_layer(0));
    EXPECT_TRUE(c.is_moe_layer(1));
    EXPECT_FALSE(c.is_moe_layer(2));  // (2 + 1) % 2 != 0: dense
    EXPECT_TRUE(c.is_moe_layer(3));
    EXPECT_EQ(c.first_moe_layer(), 1);
    EXPECT_EQ(c.n_ff_shared_expert, 64);
    EXPECT_EQ(c.n_expert_shared, 0);
    EXPECT_TRUE(weights(m).layers[1].moe.weights.gate_inp_shexp.empty());  // ungated
    EXPECT_FALSE(weights(m).layers[1].moe.weights.gate_shexp.empty());
    EXPECT_EQ(m->moe_expert_bytes(2), 0u);
  }
  {
    auto m = load("bailingmoe2-tiny");
    const ModelConfig& c = m->config();
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(weights(m).layers[0].wqkv.empty());
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_EQ(c.n_expert_group, 2);
  }
  {
    auto m = load("hunyuan-moe-tiny");
    const ModelConfig& c = m->config();
    EXPECT_TRUE(c.qk_norm);
    EXPECT_TRUE(c.qk_norm_after_rope);
    EXPECT_EQ(c.n_ff_expert, 32);
    EXPECT_EQ(c.n_ff_shared_expert, 64);
    EXPECT_TRUE(c.expert_weights_norm);
    EXPECT_TRUE(c.is_moe_layer(0));
  }
  {
    auto m = load("qwen3vlmoe-tiny");
    const ModelConfig& c = m->config();
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(c.rope_still_pairs.empty());
    EXPECT_TRUE(c.expert_weights_norm);
  }
}

TEST(MoEArchitectures, DeepseekStyleFamiliesRefuseIncompleteFiles) {
  auto expect_error = [](const SynthSpec& s, const std::string& file, const std::string& needle) {
    const std::string path = write(s, file);
    try {
      Model::load(path);
      ADD_FAILURE() << file << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  SynthSpec s = synth_spec("dots1-tiny");
  s.expert_gating = 0;  // dots1 and bailingmoe2 need the key (llama.cpp aborts without it)
  expect_error(s, "dots1_nogating.gguf", "dots1.expert_gating_func");
  s = synth_spec("glm4moe-tiny");
  s.exp_probs_bias = false;  // required for glm4moe
  expect_error(s, "glm4moe_nobias.gguf", "exp_probs_b.bias");
}

TEST(MoEArchitectures, Deepseek2ReadsMlaDenseLeadAndSharedExperts) {
  const std::string path = write_preset("deepseek2-tiny", DType::F32, "deepseek2_cfg.gguf");
  auto m = Model::load(path);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Deepseek2);
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.q_lora_rank, 32);
  EXPECT_EQ(c.kv_lora_rank, 32);
  EXPECT_EQ(c.head_dim, 48);
  EXPECT_EQ(c.rope_dims, 16);
  EXPECT_EQ(c.mla_qk_nope(), 32);
  EXPECT_EQ(c.mla_v_head_dim, 32);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.n_expert_shared, 2);
  EXPECT_EQ(c.n_ff_shared_expert, 64);
  EXPECT_EQ(c.n_expert_group, 4);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.5f);
  EXPECT_FALSE(c.expert_weights_norm);
  EXPECT_EQ(m->moe_expert_bytes(0), 0u);
  EXPECT_EQ(m->moe_expert_bytes(1), size_t{3} * 64 * 32 * 4);
  // YaRN's magnitude moves into the scores: (1 + 0.1 * 0.707 ln 4)^2 / sqrt(48).
  const double ms = 1.0 + 0.1 * (0.0707f / 0.1f) * std::log(4.0);
  EXPECT_NEAR(c.attention_scale(), ms * ms / std::sqrt(48.0), 1e-6);
  EXPECT_NEAR(c.rope_at(2).attn_factor, 1.0, 1e-6);  // and none stays on cos / sin
  // The compressed cache: kv_lora_rank + rope dims per token and layer, no values.
  KVCache kv = m->new_cache(16);
  for (int l = 0; l < c.n_layer; ++l) {
    EXPECT_EQ(kv.layout(l).k_width, 48);
    EXPECT_EQ(kv.layout(l).v_width, 0);
  }
  EXPECT_EQ(c.kv_bytes_per_token(), int64_t{3} * 48 * 4);
  // Dense layer 0 carries no routing; the MoE layers route every token.
  const ForwardResult f = m->forward(kIds, kv);
  EXPECT_EQ(f.stats.moe[0].n_tokens, 0);
  EXPECT_EQ(f.stats.distinct_experts(0), -1);
  EXPECT_EQ(f.stats.moe[2].n_tokens, static_cast<int>(kIds.size()));
}

TEST(MoEArchitectures, Deepseek2DecodesAsItPrefillsThroughTheLatentCache) {
  // The absorbed attention reads only the cached latents: one token at a time, a tree, and a
  // truncated and re-run step give the batch's logits bit for bit.
  auto m = Model::load(write_preset("deepseek2-tiny", DType::F32, "deepseek2_steps.gguf"));
  const int V = m->config().n_vocab;
  KVCache a = m->new_cache(32), b = m->new_cache(32);
  std::vector<float> batched, l, single;
  m->forward(kIds, a).logits.to_host(batched);
  for (size_t i = 0; i < kIds.size(); ++i) {
    m->forward(std::span<const int32_t>(kIds).subspan(i, 1), b).logits.to_host(l);
    single.insert(single.end(), l.begin(), l.end());
  }
  EXPECT_TRUE(same_bits(batched, 0, single, 0, batched.size()));
  EXPECT_EQ(a.read_layer(1), b.read_layer(1));

  // A tree after 6 tokens: r -> {c1, c2}, c2 -> g; the path r, c2, g as a chain.
  const std::vector<int32_t> prefix(kIds.begin(), kIds.begin() + 6);
  const std::vector<int32_t> tree = {90, 3, 17, 44};
  const std::vector<int32_t> parents = {-1, 0, 0, 2};
  KVCache t = m->new_cache(32), s = m->new_cache(32);
  std::vector<float> tree_logits, path_logits;
  m->forward(prefix, t).logits.to_host(l);
  m->forward(prefix, s).logits.to_host(l);
  Batch tb;
  tb.tokens = tree;
  tb.parents = parents;
  m->forward(tb, t).logits.to_host(tree_logits);
  const std::vector<int32_t> chain = {90, 17, 44};
  m->forward(chain, s).logits.to_host(path_logits);
  EXPECT_TRUE(same_bits(tree_logits, 2 * V, path_logits, 1 * V, V));  // c2
  EXPECT_TRUE(same_bits(tree_logits, 3 * V, path_logits, 2 * V, V));  // g
  EXPECT_FALSE(same_bits(tree_logits, 1 * V, tree_logits, 2 * V, V));
}

TEST(MoEArchitectures, ExpertStatisticsOfTheNewRouters) {
  // U(T) per layer from the model's routing for the group-limited softmax router, against the
  // reference's experts; the dense leading layer is not counted.
  const std::string path = write_preset("deepseek2-tiny", DType::F32, "deepseek2_stats.gguf");
  auto m = Model::load(path);
  KVCache kv = m->new_cache(32);
  const ForwardResult f = m->forward(kIds, kv);
  specmoe::testing::MoEReferenceForward ref(path, m->moe_k());
  ref.set_context(32);
  ref.run(kIds);
  for (int l = 1; l < m->config().n_layer; ++l) {
    moe::ExpertStats st(m->config().n_expert, m->moe_k(), l);
    st.record_forward(f.stats.moe[l], m->moe_expert_bytes(l));
    std::set<int> touched;
    for (const auto& e : ref.routing[l]) touched.insert(e.begin(), e.end());
    EXPECT_EQ(f.stats.distinct_experts(l), static_cast<int>(touched.size()));
    EXPECT_EQ(st.by_size().at({static_cast<int>(kIds.size()), 2}).sum_distinct, static_cast<int64_t>(touched.size()));
    // Group-limited: every token's two experts lie in its two kept groups of 2, so U(T) <= E.
    EXPECT_LE(touched.size(), 8u);
    EXPECT_EQ(st.expert_bytes(), touched.size() * m->moe_expert_bytes(l));
  }
}
