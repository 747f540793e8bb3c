// MoE models on the CUDA backend (core/backend_cuda.cpp, kernels/cuda/moe.cu) against the CPU:
// Mixtral-style llama and qwen2moe synth models (F32, F16, Q8_0 experts), qwen3moe, olmoe and
// deepseek2 (latent attention, a dense first layer, shared experts, softmax group routing; F32 and
// F16), batched = one-token forwards for T = 1, 3, 9, expert counts and routing equal to the
// CPU's, k overrides; DeepSeek-V3-style sigmoid + bias + group-limited routing and Switch
// capacity dropping (T = 1, 3, 17) equal to the CPU's, with the routing kernels checked one by one
// against moe:: (moe_group_topk with sigmoid and softmax scores, moe_apply_capacity,
// grouping/gather/combine of dropped slots); and the argmax of logits rows where they live
// (core::Rows::argmax) on the CPU and the GPU, with greedy speculative decoding equal to
// autoregressive decoding on the GPU. GPU tests skip without a device (GTEST_SKIP); the CPU tests
// of the argmax run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "core/environment.h"
#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/sampling.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/ngram_drafter.h"
#include "moe/expert_stats.h"
#include "moe/router.h"
#include "moe/group_router.h"
#include "require_cuda.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/moe_metrics.h"
#include "verify/speculative_decoder.h"

#ifdef SPECMOE_HAVE_CUDA
#include "kernels/cuda/device.h"
#include "kernels/cuda/moe_ops.h"
#endif

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::scratch_dir;

namespace {

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

std::string write_spec(SynthSpec s, const std::string& file, DType type = DType::F32, uint64_t seed = 42) {
  s.type = type;
  const std::string path = scratch(file);
  synth_write(s, path, seed);
  return path;
}

std::string write_preset(const std::string& preset, const std::string& file, DType type = DType::F32) {
  return write_spec(synth_spec(preset), file, type);
}

std::unique_ptr<Model> load(const std::string& path, const std::string& device, double capacity_factor = 0.0) {
  LoadOptions o;
  o.n_threads = 2;
  o.device = device;
  o.moe_capacity_factor = capacity_factor;
  o.cache_types = {DType::F32, DType::F32};  // the tolerances are about summation orders, not KV rounding
  return Model::load(path, o);
}

const std::vector<int32_t> kIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
const std::vector<int32_t> kIds17 = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17, 64, 129, 11, 301, 58, 260};

// DeepSeek-V3-style routing on the synth Mixtral layout (llama.cpp's metadata keys): 8 experts
// in 4 groups of 2, 2 groups kept, k = 3; sigmoid scores (expert_gating_func 2) with a per-layer
// selection bias exp_probs_b.bias [8] when `with_bias`, renormalised and scaled by 2.5. The bias
// (+-0.3) is large against the spread of the synth router's sigmoid scores, so it changes the
// selection (checked by SigmoidFixtureBiasAndGroupsShapeTheRouting).
std::string write_deepseek_style(const std::string& file, DType type = DType::F32, bool with_bias = true) {
  SynthSpec s = synth_spec("moe-tiny");
  s.n_expert = 8;
  s.n_expert_used = 3;
  const std::string base = write_spec(s, "base_" + file, type);
  auto f = GGUFFile::open(base);
  GGUFWriter w;
  for (const auto& [key, value] : f->metadata())
    if (key != "general.alignment") w.set_value(key, value);
  w.set_u32("llama.expert_gating_func", 2);
  w.set_u32("llama.expert_group_count", 4);
  w.set_u32("llama.expert_group_used_count", 2);
  w.set_f32("llama.expert_weights_scale", 2.5f);
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  if (with_bias)
    for (int l = 0; l < s.n_layer; ++l) {
      std::vector<float> bias(8);
      for (int e = 0; e < 8; ++e) bias[e] = 0.15f * static_cast<float>((e * 3 + l) % 5 - 2);
      w.add_tensor_f32("blk." + std::to_string(l) + ".exp_probs_b.bias", DType::F32, {8}, bias);
    }
  const std::string path = scratch(file);
  w.write(path);
  return path;
}

// max |got - want| <= rel * max |want|, finite values, non-trivial reference (as cuda_model_test).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": entry " << i << " = " << got[i];
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  ASSERT_GT(max_ref, 0.5) << what << ": reference logits are trivially small";
  EXPECT_LE(max_diff, rel * max_ref) << what << ": max |diff| " << max_diff << ", max |ref| " << max_ref;
}

// Tolerances of CUDA against CPU logits, relative to the largest |logit| (reasons as in
// cuda_model_test.cpp): F32 weights 1e-4 (summation order only); F16 weights, and Q8_0 for more
// than 8 tokens, 1e-2 (activations rounded to F16 before the tensor-core GEMM). The routing is
// compared exactly: the synth routers' top-k margins are far above these logit differences (a
// flipped expert would show as an O(1) logit change too).
constexpr double kRelF32 = 1e-4;
constexpr double kRelF16 = 1e-2;

// The routing a model's forwards returned: the last forward's, and the per-layer load of all of
// them (the model keeps none itself).
struct RoutingLog {
  ForwardStats last;
  verify::MoEMetrics all;
  void add(const Model& m, ForwardStats s) {
    all.record_load(s, m);
    last = std::move(s);
  }
};

// A forward whose logits go to `out` and whose routing goes to `log`.
void forward(Model& m, RoutingLog& log, std::span<const int32_t> ids, KVCache& kv, std::vector<float>& out,
             const ForwardOptions& o = {}) {
  ForwardResult f = m.forward(ids, kv, o);
  f.logits.to_host(out);
  log.add(m, std::move(f.stats));
}

// Every MoE layer's last routing (experts exactly, weights within weight_tol) and accumulated
// tokens per expert agree.
void expect_same_routing(const RoutingLog& gpu, const RoutingLog& cpu, int n_layer, const std::string& what,
                         double weight_tol) {
  for (int l = 0; l < n_layer; ++l) {
    const moe::Routing* rc = &cpu.last.moe.at(l);
    const moe::Routing* rg = &gpu.last.moe.at(l);
    EXPECT_EQ(rg->n_tokens, rc->n_tokens) << what << " layer " << l;
    EXPECT_EQ(rg->k, rc->k) << what << " layer " << l;
    EXPECT_EQ(rg->expert, rc->expert) << what << " layer " << l;
    ASSERT_EQ(rg->weight.size(), rc->weight.size());
    for (size_t i = 0; i < rc->weight.size(); ++i)
      EXPECT_NEAR(rg->weight[i], rc->weight[i], weight_tol) << what << " layer " << l << " slot " << i;
    EXPECT_EQ(gpu.last.distinct_experts(l), cpu.last.distinct_experts(l)) << what << " layer " << l;
    const moe::ExpertStats &sg = gpu.all.layers.at(l), &sc = cpu.all.layers.at(l);
    EXPECT_EQ(sg.expert_tokens(), sc.expert_tokens()) << what << " layer " << l;
    EXPECT_EQ(sg.n_forwards(), sc.n_forwards()) << what << " layer " << l;
    EXPECT_EQ(sg.n_tokens(), sc.n_tokens()) << what << " layer " << l;
  }
}

// 11 tokens, then three decode steps (T = 1: the quantized matvec path), then an early exit.
// Routing weights are softmax values in [0, 1] of router logits that move by about `rel` of
// their range, so they are compared within 10 * rel (1e-3 for F32, 0.1 for F16-rounded paths).
void compare_moe_with_cpu(const std::string& path, double rel) {
  const double weight_tol = 10 * rel;
  auto cpu = load(path, "cpu");
  auto gpu = load(path, "cuda:0");
  ASSERT_TRUE(gpu->config().is_moe());
  const int L = cpu->config().n_layer;
  RoutingLog lc, lg;
  KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
  std::vector<float> a, b;
  forward(*cpu, lc, kIds, kc, a);
  forward(*gpu, lg, kIds, kg, b);
  expect_close(b, a, rel, path + " all logits");
  expect_same_routing(lg, lc, L, path + " prefill", weight_tol);
  for (int32_t next : {65, 66, 300}) {
    const int32_t one[1] = {next};
    forward(*cpu, lc, one, kc, a);
    forward(*gpu, lg, one, kg, b);
    expect_close(b, a, rel, path + " decode step");
  }
  expect_same_routing(lg, lc, L, path + " decode", weight_tol);
  ForwardOptions o;
  o.exit_layer = 1;
  o.logits_all = false;
  const int32_t one[1] = {301};
  forward(*cpu, lc, one, kc, a, o);
  forward(*gpu, lg, one, kg, b, o);
  expect_close(b, a, rel, path + " early exit");
  EXPECT_EQ(lg.last.distinct_experts(1), -1);  // not run by the early exit
  // Leading dense layers (deepseek2) route nothing.
  const core::ModelConfig& c = gpu->config();
  EXPECT_EQ(lg.all.layers.at(0).n_forwards(), c.is_moe_layer(0) ? 5 : 0);
  EXPECT_EQ(lg.all.layers.at(1).n_forwards(), c.is_moe_layer(1) ? 4 : 0);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The argmax path on the CPU (runs everywhere): bit-identical to the argmax of forward's logits.

TEST(LogitsArgmax, CpuEqualsArgmaxOfTheLogits) {
  for (const char* preset : {"tiny", "moe-tiny"}) {
    const std::string path = write_preset(preset, std::string("argmax_") + preset + ".gguf");
    auto m = load(path, "cpu");
    const int V = m->config().n_vocab;
    for (size_t T : {size_t{1}, size_t{3}, size_t{9}}) {
      const std::span<const int32_t> ids = std::span<const int32_t>(kIds).first(T);
      for (bool all : {true, false}) {
        ForwardOptions o;
        o.logits_all = all;
        KVCache a = m->new_cache(32);
        std::vector<float> logits;
        const ForwardResult f = m->forward(ids, a, o);
        f.logits.to_host(logits);
        const std::vector<int32_t> got = f.logits.argmax();  // where the logits live
        const size_t rows = all ? T : 1;
        ASSERT_EQ(got.size(), rows) << preset << " T " << T;
        EXPECT_EQ(a.size(), static_cast<int>(T));
        for (size_t r = 0; r < rows; ++r)
          EXPECT_EQ(got[r], argmax(std::span<const float>(logits.data() + r * V, V))) << preset << " row " << r;
        if (m->config().is_moe()) {
          EXPECT_EQ(f.stats.moe.at(0).n_tokens, static_cast<int>(T));
        }
      }
    }
  }
}

TEST(LogitsArgmax, CpuGreedyDecodingMatchesTheLogitsPath) {
  // generate_autoregressive at temperature 0: the tokens equal a hand-rolled forward + argmax
  // loop.
  const std::string path = write_preset("tiny", "argmax_ar.gguf");
  auto m = load(path, "cpu");
  const std::vector<int32_t> prompt = m->tokenizer().encode("Once upon a time", true);
  SamplingParams sp;
  sp.temperature = 0.0f;
  verify::DecodeOptions o;
  o.max_tokens = 24;
  o.stop_at_eog = false;
  const verify::GenerationResult r = verify::generate_autoregressive(*m, prompt, sp, o, 0);
  KVCache kv = m->new_cache(64);
  std::vector<float> logits;
  std::vector<int32_t> want;
  ForwardOptions last;
  last.logits_all = false;
  m->forward(prompt, kv, last).logits.to_host(logits);
  while (static_cast<int>(want.size()) < o.max_tokens) {
    want.push_back(argmax(logits));
    const int32_t t[1] = {want.back()};
    if (static_cast<int>(want.size()) < o.max_tokens) m->forward(t, kv, last).logits.to_host(logits);
  }
  EXPECT_EQ(r.tokens, want);
}

TEST(SigmoidFixture, BiasAndGroupsShapeTheRouting) {
  // The DeepSeek-style file the GPU tests compare exercises what it claims (runs everywhere):
  // every token's k = 3 experts come from at most 2 of the 4 groups, the weights sum to the
  // scale 2.5, and the bias changes some selection against the same weights without it.
  auto with = load(write_deepseek_style("sigmoid_fixture.gguf"), "cpu");
  auto without = load(write_deepseek_style("sigmoid_fixture_nobias.gguf", DType::F32, false), "cpu");
  KVCache ka = with->new_cache(32), kb = without->new_cache(32);
  std::vector<float> a, b;
  const ForwardResult fa = with->forward(kIds, ka), fb = without->forward(kIds, kb);
  int differing = 0;
  for (int l = 0; l < with->config().n_layer; ++l) {
    const moe::Routing& r = fa.stats.moe.at(l);
    ASSERT_EQ(r.k, 3);
    for (int t = 0; t < r.n_tokens; ++t) {
      std::vector<int> groups;
      float sum = 0;
      for (int j = 0; j < 3; ++j) {
        groups.push_back(r.expert_at(t, j) / 2);
        sum += r.weight_at(t, j);
      }
      std::sort(groups.begin(), groups.end());
      EXPECT_LE(std::unique(groups.begin(), groups.end()) - groups.begin(), 2) << "layer " << l << " token " << t;
      EXPECT_NEAR(sum, 2.5f, 1e-5f) << "layer " << l << " token " << t;
    }
    differing += r.expert != fb.stats.moe.at(l).expert;
  }
  EXPECT_GT(differing, 0) << "the bias never changed the selection: the fixture would not test it";
}

// ------------------------------------------------------------------------------------------
// On a device.

TEST(CudaMoE, MixtralStyleF32MatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  compare_moe_with_cpu(write_preset("moe-tiny", "cuda_moe_f32.gguf"), kRelF32);
}

TEST(CudaMoE, QwenMoEStyleWithSharedExpertMatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  compare_moe_with_cpu(write_preset("qwen2moe-tiny", "cuda_qwen2moe_f32.gguf"), kRelF32);
}

TEST(CudaMoE, F16AndQ8ExpertsMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  compare_moe_with_cpu(write_preset("moe-tiny", "cuda_moe_f16.gguf", DType::F16), kRelF16);
  compare_moe_with_cpu(write_preset("moe-tiny", "cuda_moe_q8.gguf", DType::Q8_0), kRelF16);
  compare_moe_with_cpu(write_preset("qwen2moe-tiny", "cuda_qwen2moe_q8.gguf", DType::Q8_0), kRelF16);
}

TEST(CudaMoE, Qwen3MoeOlmoeAndDeepseek2MatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // QK-norm per head and over the whole projections; deepseek2's latent attention (the absorbed
  // form over the compressed cache, kernels/cuda/mla_attention.cu), dense first layer, shared
  // experts and the softmax group router with its scale, with a q LoRA and without.
  // Then the DeepSeek-style families (sigmoid and softmax routers with a selection bias, ungated
  // shared experts, ernie4_5-moe's dense layers between MoE ones) and qwen3vlmoe's M-RoPE.
  for (const char* preset : {"qwen3moe-tiny", "olmoe-tiny", "deepseek2-tiny", "deepseek2-lite-tiny", "qwen3vlmoe-tiny",
                             "deepseek-tiny", "dots1-tiny", "glm4moe-tiny", "ernie4_5-moe-tiny", "bailingmoe2-tiny",
                             "hunyuan-moe-tiny", "minimax-m2-tiny", "dbrx-tiny", "phimoe-tiny", "exaone-moe-tiny",
                             "lfm2moe-tiny", "smallthinker-tiny", "smallthinker-swa-tiny", "qwen35moe-tiny", "qwen3next-tiny", "qwen3next-legacy-tiny", "mellum-tiny", "bailingmoe-tiny",
                             "granitehybrid-moe-tiny", "llama4-tiny", "llama4-128e-tiny", "mistral4-tiny",
                             "nemotron_h_moe-tiny", "afmoe-tiny", "maple-tiny"}) {
    compare_moe_with_cpu(write_preset(preset, std::string("cuda_") + preset + ".gguf"), kRelF32);
    compare_moe_with_cpu(write_preset(preset, std::string("cuda_") + preset + "_f16.gguf", DType::F16), kRelF16);
  }
}

TEST(CudaMoE, GptOssMatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // gpt-oss: attention sinks, windows, the router's and the experts' biases and the clamped SwiGLU
  // on the device, every token routed as on the CPU.
  compare_moe_with_cpu(write_preset("gpt-oss-tiny", "cuda_gpt_oss.gguf"), kRelF32);
  compare_moe_with_cpu(write_preset("gpt-oss-tiny", "cuda_gpt_oss_f16.gguf", DType::F16), kRelF16);
}

TEST(CudaMoE, BatchedForwardEqualsOneTokenForwards) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny"}) {
    auto m = load(write_preset(preset, std::string("cuda_batch_") + preset + ".gguf"), "cuda");
    const int V = m->config().n_vocab;
    for (size_t T : {size_t{1}, size_t{3}, size_t{9}}) {
      const std::span<const int32_t> ids = std::span<const int32_t>(kIds).first(T);
      KVCache a = m->new_cache(32), b = m->new_cache(32);
      std::vector<float> batched, one, seq;
      RoutingLog log;
      forward(*m, log, ids, a, batched);
      std::vector<std::vector<int32_t>> batched_experts;
      for (int l = 0; l < m->config().n_layer; ++l) batched_experts.push_back(log.last.moe.at(l).expert);
      std::vector<int32_t> seq_experts0;
      for (size_t i = 0; i < T; ++i) {
        forward(*m, log, ids.subspan(i, 1), b, one);
        seq.insert(seq.end(), one.begin(), one.end());
        const auto& e = log.last.moe.at(0).expert;
        seq_experts0.insert(seq_experts0.end(), e.begin(), e.end());
      }
      ASSERT_EQ(batched.size(), T * V);
      // Not bit-exact: cuBLAS picks different GEMM kernels for different row counts.
      expect_close(batched, seq, kRelF32, std::string(preset) + " T " + std::to_string(T));
      EXPECT_EQ(batched_experts[0], seq_experts0) << preset << " T " << T;
    }
  }
}

TEST(CudaMoE, KOverrideOneAndAllExpertsMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  const std::string path = write_preset("moe-tiny", "cuda_moe_k.gguf");
  auto cpu = load(path, "cpu");
  auto gpu = load(path, "cuda");
  for (int k : {1, cpu->config().n_expert, 2}) {
    ForwardOptions o;
    o.moe_k = k;
    KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
    std::vector<float> a, b;
    RoutingLog lc, lg;
    forward(*cpu, lc, kIds, kc, a, o);
    forward(*gpu, lg, kIds, kg, b, o);
    expect_close(b, a, kRelF32, "k = " + std::to_string(k));
    EXPECT_EQ(lg.last.moe.at(0).k, k);
    EXPECT_EQ(lg.last.moe.at(0).expert, lc.last.moe.at(0).expert) << "k = " << k;
  }
}

TEST(CudaMoE, CapacityFactorAndSigmoidGatingRunOnTheDevice) {
  // Both were refused (Error(Unsupported)) before the device router and capacity kernels.
  SPECMOE_REQUIRE_CUDA();
  const std::string path = write_preset("moe-tiny", "cuda_moe_options.gguf");
  EXPECT_NO_THROW(load(path, "cuda", 1.25));
  EXPECT_THROW(load(path, "cuda", std::nan("")), Error);  // still checked, as on the CPU
  LoadOptions o;
  o.device = "cuda";
  o.moe_capacity_factor = 1.0;
  EXPECT_NO_THROW(Model::load(path, o));

  const std::string sig = write_deepseek_style("cuda_moe_sigmoid.gguf");
  auto m = load(sig, "cuda");
  EXPECT_EQ(m->config().expert_gating, ExpertGating::Sigmoid);
  KVCache kv = m->new_cache(32);
  std::vector<float> logits;
  EXPECT_NO_THROW(m->forward(kIds, kv).logits.to_host(logits));
  // k beyond the experts of the kept groups (2 groups of 2) is refused by the router.
  ForwardOptions k5;
  k5.moe_k = 5;
  EXPECT_THROW(m->forward(kIds, kv, k5), Error);
}

TEST(CudaMoE, DeepSeekStyleSigmoidRoutingMatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  compare_moe_with_cpu(write_deepseek_style("cuda_deepseek_f32.gguf"), kRelF32);
  compare_moe_with_cpu(write_deepseek_style("cuda_deepseek_nobias.gguf", DType::F32, false), kRelF32);
}

TEST(CudaMoE, CapacityDroppingMatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // Capacity ceil(cf * T * k / E) per expert; at T = 17 and cf 0.5 both models must drop
  // (moe-tiny: 34 assignments, 4 x 5 kept at most; DeepSeek-style: 51, 8 x 4 at most).
  const std::string paths[] = {write_preset("moe-tiny", "cuda_cap_mixtral.gguf"),
                               write_preset("qwen2moe-tiny", "cuda_cap_qwen.gguf"),
                               write_deepseek_style("cuda_cap_deepseek.gguf")};
  for (const std::string& path : paths)
    for (double cf : {0.5, 1.0})
      for (size_t T : {size_t{1}, size_t{3}, size_t{17}}) {
        const std::string what = path + " cf " + std::to_string(cf) + " T " + std::to_string(T);
        auto cpu = load(path, "cpu", cf);
        auto gpu = load(path, "cuda", cf);
        const std::span<const int32_t> ids = std::span<const int32_t>(kIds17).first(T);
        KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
        std::vector<float> a, b;
        RoutingLog lc, lg;
        forward(*cpu, lc, ids, kc, a);
        forward(*gpu, lg, ids, kg, b);
        expect_close(b, a, kRelF32, what);
        int64_t cpu_drops = 0;
        for (int l = 0; l < cpu->config().n_layer; ++l) {
          const moe::Routing* rc = &lc.last.moe.at(l);
          const moe::Routing* rg = &lg.last.moe.at(l);
          EXPECT_EQ(rg->expert, rc->expert) << what << " layer " << l;  // kDropped slots included
          ASSERT_EQ(rg->weight.size(), rc->weight.size());
          for (size_t i = 0; i < rc->weight.size(); ++i)
            EXPECT_NEAR(rg->weight[i], rc->weight[i], 10 * kRelF32) << what << " layer " << l << " slot " << i;
          EXPECT_EQ(rg->n_dropped_assignments, rc->n_dropped_assignments) << what << " layer " << l;
          EXPECT_EQ(rg->n_dropped_tokens, rc->n_dropped_tokens) << what << " layer " << l;
          const moe::ExpertStats& sc = lc.all.layers.at(l);
          const moe::ExpertStats& sg = lg.all.layers.at(l);
          EXPECT_EQ(sg.expert_tokens(), sc.expert_tokens()) << what << " layer " << l;
          EXPECT_EQ(sg.dropped_assignments(), sc.dropped_assignments()) << what << " layer " << l;
          EXPECT_EQ(sg.dropped_tokens(), sc.dropped_tokens()) << what << " layer " << l;
          EXPECT_EQ(lg.last.distinct_experts(l), lc.last.distinct_experts(l)) << what << " layer " << l;
          cpu_drops += sc.dropped_assignments();
        }
        if (cf == 0.5 && T == 17) {
          EXPECT_GT(cpu_drops, 0) << what << ": the test should drop";
        }
        // A decode step after the dropping prefill still agrees (capacity at T = 1).
        const int32_t one[1] = {66};
        cpu->forward(one, kc).logits.to_host(a);
        gpu->forward(one, kg).logits.to_host(b);
        expect_close(b, a, kRelF32, what + " decode");
      }
}

TEST(CudaGreedy, LogitsArgmaxEqualsArgmaxOfTheLogits) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"tiny", "moe-tiny"}) {
    auto m = load(write_preset(preset, std::string("cuda_argmax_") + preset + ".gguf"), "cuda");
    const int V = m->config().n_vocab;
    for (bool all : {true, false}) {
      ForwardOptions o;
      o.logits_all = all;
      KVCache a = m->new_cache(32);
      std::vector<float> logits;
      const ForwardResult f = m->forward(kIds, a, o);
      f.logits.to_host(logits);
      const std::vector<int32_t> got = f.logits.argmax();  // on the device: rows ids come back
      const size_t rows = all ? kIds.size() : 1;
      ASSERT_EQ(got.size(), rows);
      for (size_t r = 0; r < rows; ++r)
        EXPECT_EQ(got[r], argmax(std::span<const float>(logits.data() + r * V, V))) << preset << " row " << r;
    }
  }
}

TEST(CudaGreedy, SpeculativeDecodingEqualsAutoregressive) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"tiny", "moe-tiny"}) {
    const std::string path = write_preset(preset, std::string("cuda_spec_") + preset + ".gguf");
    auto gpu = load(path, "cuda");
    auto cpu = load(path, "cpu");
    SamplingParams sp;
    sp.temperature = 0.0f;
    verify::DecodeOptions o;
    o.max_tokens = 32;
    o.draft_max = 4;
    o.stop_at_eog = false;
    const verify::GreedyVerifier greedy;
    for (const char* text : {"Once upon a time", "abcabcabc", "x = 1; y = 2; x = 1;"}) {
      const std::vector<int32_t> prompt = gpu->tokenizer().encode(text, true);
      const verify::GenerationResult ar = verify::generate_autoregressive(*gpu, prompt, sp, o, 0);
      draft::LayerSkipDrafter skip(*gpu, 1, 128);
      verify::SpeculativeDecoder dec(*gpu, skip, greedy, sp, o);
      const verify::GenerationResult sd = dec.generate(prompt, 0);
      EXPECT_EQ(sd.tokens, ar.tokens) << preset << " '" << text << "' layer-skip";
      draft::NgramDrafter ngram(1, 3);
      verify::SpeculativeDecoder dec2(*gpu, ngram, greedy, sp, o);
      EXPECT_EQ(dec2.generate(prompt, 0).tokens, ar.tokens) << preset << " '" << text << "' n-gram";
      // And the CPU agrees (greedy ids are robust to the summation order on these models).
      EXPECT_EQ(verify::generate_autoregressive(*cpu, prompt, sp, o, 0).tokens, ar.tokens) << preset << " " << text;
      EXPECT_GT(sd.metrics.n_drafted, 0);
    }
  }
}

// ------------------------------------------------------------------------------------------
// The routing kernels one by one against moe:: on the host (exact: same rules, same precision).

#ifdef SPECMOE_HAVE_CUDA
namespace {

namespace cu = specmoe::kernels::cuda;

template <typename E>
cu::DeviceBuffer to_device(cu::Context& ctx, const std::vector<E>& v) {
  cu::DeviceBuffer buf(std::max<size_t>(v.size(), 1) * sizeof(E), ctx.device());
  ctx.upload(buf.data(), v.data(), v.size() * sizeof(E));
  return buf;
}

template <typename E>
std::vector<E> to_host(cu::Context& ctx, const cu::DeviceBuffer& buf, size_t n) {
  std::vector<E> v(n);
  ctx.download(v.data(), buf.data(), n * sizeof(E));
  return v;
}

}  // namespace

TEST(CudaMoEKernels, GroupTopKEqualsTheCpuRouterForSigmoidAndSoftmaxScores) {
  SPECMOE_REQUIRE_CUDA();
  cu::Context ctx(0);
  struct Case {
    int E, n_group, topk_group, k;
    bool normalize;
    float scale;
    bool bias;
  };
  // DeepSeek-like groups of 2; no groups; groups of 4 with one kept; groups of one expert (the
  // group score is the single score); one expert; k = every eligible expert.
  const Case cases[] = {{8, 4, 2, 3, true, 2.5f, true},  {16, 1, 1, 5, false, 1.0f, false},
                        {12, 3, 1, 4, true, 1.0f, true}, {6, 6, 3, 2, true, 1.5f, true},
                        {1, 1, 1, 1, true, 1.0f, false}, {8, 4, 2, 4, false, 2.0f, true}};
  // Each case with DeepSeek-V3's sigmoid scores and DeepSeek-V2's softmax over the E logits.
  for (const bool softmax : {false, true})
  for (const Case& c : cases) {
    const int T = 17, E = c.E;
    const std::string what = std::string(softmax ? "softmax" : "sigmoid") + " E " + std::to_string(E) + " groups " +
                             std::to_string(c.n_group) + " k " + std::to_string(c.k);
    std::mt19937 gen(static_cast<uint32_t>(E * 131 + c.k));
    std::normal_distribution<float> nd(0.0f, 1.5f);
    std::uniform_real_distribution<float> ud(-0.2f, 0.2f);
    std::vector<float> logits(static_cast<size_t>(T) * E);
    for (float& v : logits) v = nd(gen);
    // Row 3: all equal (ties everywhere: lowest index, lowest group); row 5: NaN at 0 and E-1
    // (NaN ranks last); row 7: values repeated in pairs.
    for (int e = 0; e < E; ++e) logits[3 * E + e] = 0.25f;
    // (Softmax: a NaN logit makes the whole row's scores NaN, a row with no order to compare.)
    if (!softmax) {
      logits[5 * E] = std::nanf("");
      logits[5 * E + E - 1] = std::nanf("");
    }
    for (int e = 1; e < E; e += 2) logits[7 * E + e] = logits[7 * E + e - 1];
    std::vector<float> bias;
    if (c.bias) {
      bias.resize(E);
      for (float& v : bias) v = ud(gen);
      // Equal biased scores in row 3 stay equal only with equal biases: make two equal.
      if (E >= 2) bias[1] = bias[0];
    }

    moe::GroupRouterOptions o;
    o.n_group = c.n_group;
    o.topk_group = c.topk_group;
    o.normalize = c.normalize;
    o.scale = c.scale;
    o.bias = bias;
    o.score = softmax ? moe::GateScore::Softmax : moe::GateScore::Sigmoid;
    moe::GroupRouter router(E, c.k, o);
    moe::Routing want;
    router.route(logits.data(), nullptr, T, want);

    cu::DeviceBuffer d_logits = to_device(ctx, logits), d_bias = to_device(ctx, bias);
    cu::DeviceBuffer d_ex(static_cast<size_t>(T) * c.k * sizeof(int32_t), 0);
    cu::DeviceBuffer d_w(static_cast<size_t>(T) * c.k * sizeof(float), 0);
    cu::GroupRouterParams p;
    p.n_group = c.n_group;
    p.topk_group = c.topk_group;
    p.normalize = c.normalize;
    p.scale = c.scale;
    p.bias = c.bias ? d_bias.as<float>() : nullptr;
    p.softmax = softmax;
    cu::moe_group_topk(ctx, d_logits.as<float>(), T, E, c.k, p, d_ex.as<int32_t>(), d_w.as<float>());
    const auto ex = to_host<int32_t>(ctx, d_ex, static_cast<size_t>(T) * c.k);
    const auto w = to_host<float>(ctx, d_w, static_cast<size_t>(T) * c.k);
    EXPECT_EQ(ex, want.expert) << what;
    // The same operations in the same precision; the device's double exp may differ from the
    // host's by 1 ulp of double, which rarely moves a float score by 1 ulp and the weight built
    // from it by a few: 1e-6 relative.
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isnan(want.weight[i])) {
        EXPECT_TRUE(std::isnan(w[i])) << what << " slot " << i;
        continue;
      }
      EXPECT_NEAR(w[i], want.weight[i], 1e-6 * std::fabs(want.weight[i])) << what << " slot " << i;
    }
  }
  // k beyond the kept groups' experts is refused by name.
  cu::DeviceBuffer buf(64 * sizeof(float), 0);
  cu::GroupRouterParams p;
  p.n_group = 4;
  p.topk_group = 1;
  EXPECT_THROW(cu::moe_group_topk(ctx, buf.as<float>(), 1, 8, 3, p, buf.as<int32_t>(), buf.as<float>()),
               Error);
}

TEST(CudaMoEKernels, CapacityAndTheDroppedSlotsPathEqualTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  cu::Context ctx(0);
  const int d = 3;  // gathered row width
  for (int E : {1, 5, 8})
    for (int k : {1, 3})
      for (int T : {1, 3, 17})
        for (double cf : {0.3, 0.5, 1.0, 2.0}) {
          if (k > E) continue;
          const std::string what = "E " + std::to_string(E) + " k " + std::to_string(k) + " T " + std::to_string(T) +
                                   " cf " + std::to_string(cf);
          const int64_t n = static_cast<int64_t>(T) * k;
          // k distinct experts per token (as routers pick), skewed towards low ids so some
          // experts overflow; weights 1 + a / 100.
          std::mt19937 gen(static_cast<uint32_t>(E * 1000 + k * 100 + T));
          moe::Routing r;
          r.reset(T, k, E);
          for (int t = 0; t < T; ++t) {
            std::vector<int32_t> perm(E);
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), gen);
            if (t % 2 == 0) std::sort(perm.begin(), perm.begin() + std::min(E, k + 1));
            for (int j = 0; j < k; ++j) r.expert[static_cast<size_t>(t) * k + j] = perm[j];
          }
          for (int64_t a = 0; a < n; ++a) r.weight[a] = 1.0f + static_cast<float>(a) / 100.0f;
          moe::Routing want = r;
          moe::apply_capacity(want, cf);

          cu::DeviceBuffer d_ex = to_device(ctx, r.expert), d_w = to_device(ctx, r.weight);
          cu::moe_apply_capacity(ctx, d_ex.as<int32_t>(), d_w.as<float>(), T, k, E,
                                 moe::expert_capacity(cf, T, k, E));
          const auto ex = to_host<int32_t>(ctx, d_ex, n);
          EXPECT_EQ(ex, want.expert) << what;
          EXPECT_EQ(to_host<float>(ctx, d_w, n), want.weight) << what;  // kept untouched, dropped 0

          // Grouping counts only kept assignments; they come first, by expert, in token order.
          cu::DeviceBuffer d_counts(E * sizeof(int32_t), 0), d_off((E + 1) * sizeof(int32_t), 0),
              d_sorted(n * sizeof(int32_t), 0), d_pos(n * sizeof(int32_t), 0);
          cu::moe_group_by_expert(ctx, d_ex.as<int32_t>(), n, E, d_counts.as<int32_t>(), d_off.as<int32_t>(),
                                  d_sorted.as<int32_t>());
          const auto counts = to_host<int32_t>(ctx, d_counts, E);
          const auto offsets = to_host<int32_t>(ctx, d_off, E + 1);
          const auto sorted = to_host<int32_t>(ctx, d_sorted, n);
          const std::vector<int64_t> want_counts = want.tokens_per_expert();
          const int64_t kept = n - want.n_dropped_assignments;
          ASSERT_EQ(offsets[E], kept) << what;
          std::vector<int32_t> want_sorted;
          for (int e = 0; e < E; ++e) {
            EXPECT_EQ(counts[e], want_counts[e]) << what << " expert " << e;
            for (int64_t a = 0; a < n; ++a)
              if (want.expert[a] == e) want_sorted.push_back(static_cast<int32_t>(a));
          }
          EXPECT_EQ(std::vector<int32_t>(sorted.begin(), sorted.begin() + kept), want_sorted) << what;
          for (int64_t p = kept; p < n; ++p) EXPECT_EQ(want.expert[sorted[p]], moe::Routing::kDropped) << what;

          // Gather skips dropped slots (slot_pos -1); combine adds only the kept ones:
          // out[t] = x0[t] + sum_kept w * y[pos], with y = the gathered rows times 2.
          std::vector<float> x(static_cast<size_t>(T) * d);
          for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
          cu::DeviceBuffer d_x = to_device(ctx, x), d_xs(std::max<int64_t>(n, 1) * d * sizeof(float), 0);
          ctx.zero(d_xs.data(), d_xs.bytes());
          cu::moe_gather(ctx, d_x.as<float>(), d, d_sorted.as<int32_t>(), n, k, d_xs.as<float>(), d_pos.as<int32_t>(),
                         d_ex.as<int32_t>());
          const auto pos = to_host<int32_t>(ctx, d_pos, n);
          std::vector<float> xs = to_host<float>(ctx, d_xs, static_cast<size_t>(n) * d);
          for (int64_t a = 0; a < n; ++a) {
            if (want.expert[a] < 0) {
              EXPECT_EQ(pos[a], -1) << what << " assignment " << a;
              continue;
            }
            ASSERT_GE(pos[a], 0);
            ASSERT_LT(pos[a], kept);
            EXPECT_EQ(sorted[pos[a]], a) << what;
            for (int i = 0; i < d; ++i) EXPECT_EQ(xs[pos[a] * d + i], x[(a / k) * d + i]) << what;
          }
          for (float& v : xs) v *= 2.0f;
          // Rows at positions >= kept were never written: poison them, combine must not read them.
          for (int64_t p = kept; p < n; ++p)
            for (int i = 0; i < d; ++i) xs[p * d + i] = std::nanf("");
          cu::DeviceBuffer d_y = to_device(ctx, xs);
          cu::moe_combine(ctx, d_x.as<float>(), T, d, k, d_y.as<float>(), d_pos.as<int32_t>(), d_w.as<float>(),
                          nullptr, nullptr);
          const auto out = to_host<float>(ctx, d_x, x.size());
          for (int t = 0; t < T; ++t)
            for (int i = 0; i < d; ++i) {
              float o = 0.0f;
              for (int j = 0; j < k; ++j) {
                const int64_t a = static_cast<int64_t>(t) * k + j;
                if (want.expert[a] >= 0) o += want.weight[a] * (2.0f * x[t * d + i]);
              }
              // nvcc may fuse w * y into the sum (FMA): a few float ulps of the result.
              const float ref = x[t * d + i] + o;
              EXPECT_NEAR(out[t * d + i], ref, 1e-6f * (1.0f + std::fabs(ref))) << what << " token " << t;
            }
        }
  // Capacity 0 drops everything; a negative capacity is refused.
  cu::DeviceBuffer d_ex = to_device(ctx, std::vector<int32_t>{0, 1, 1});
  cu::DeviceBuffer d_w = to_device(ctx, std::vector<float>{1, 1, 1});
  cu::moe_apply_capacity(ctx, d_ex.as<int32_t>(), d_w.as<float>(), 3, 1, 2, 0);
  EXPECT_EQ(to_host<int32_t>(ctx, d_ex, 3), (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_THROW(cu::moe_apply_capacity(ctx, d_ex.as<int32_t>(), d_w.as<float>(), 3, 1, 2, -1), Error);
}
#endif  // SPECMOE_HAVE_CUDA
