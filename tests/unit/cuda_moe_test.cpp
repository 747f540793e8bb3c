// MoE models on a CUDA device (core/cuda_model.cpp, kernels/cuda/moe.cu) against the CPU forward:
// Mixtral-style llama and qwen2moe synth models (F32, F16, Q8_0 experts), batched = one-token
// forwards for T = 1, 3, 9, expert counts and routing equal to the CPU's, k overrides, refused
// router options; and the greedy argmax path (Model::forward_argmax) on the CPU and the GPU,
// with greedy speculative decoding equal to autoregressive decoding on the GPU. GPU tests skip
// without a device (GTEST_SKIP); the CPU tests of forward_argmax run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/environment.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/sampling.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/ngram_drafter.h"
#include "moe/expert_stats.h"
#include "moe/router.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::scratch_dir;

namespace {

#define SPECMOE_REQUIRE_CUDA()                                                                    \
  do {                                                                                            \
    if (::specmoe::core::cuda_device_count() == 0)                                                \
      GTEST_SKIP() << "no CUDA device (" << ::specmoe::core::query_compute_environment().cuda_status \
                   << "): GPU test skipped";                                                      \
  } while (0)

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

std::unique_ptr<Model> load(const std::string& path, const std::string& device) {
  LoadOptions o;
  o.n_threads = 2;
  o.device = device;
  return Model::load(path, o);
}

const std::vector<int32_t> kIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};

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

// Every MoE layer's last routing (experts exactly, weights within weight_tol) and accumulated
// tokens per expert agree.
void expect_same_routing(const Model& gpu, const Model& cpu, const std::string& what, double weight_tol) {
  for (int l = 0; l < cpu.config().n_layer; ++l) {
    const moe::Routing* rc = cpu.last_routing(l);
    const moe::Routing* rg = gpu.last_routing(l);
    ASSERT_NE(rc, nullptr) << what;
    ASSERT_NE(rg, nullptr) << what;
    EXPECT_EQ(rg->n_tokens, rc->n_tokens) << what << " layer " << l;
    EXPECT_EQ(rg->k, rc->k) << what << " layer " << l;
    EXPECT_EQ(rg->expert, rc->expert) << what << " layer " << l;
    ASSERT_EQ(rg->weight.size(), rc->weight.size());
    for (size_t i = 0; i < rc->weight.size(); ++i)
      EXPECT_NEAR(rg->weight[i], rc->weight[i], weight_tol) << what << " layer " << l << " slot " << i;
    EXPECT_EQ(gpu.last_distinct_experts()[l], cpu.last_distinct_experts()[l]) << what << " layer " << l;
    EXPECT_EQ(gpu.expert_stats(l)->expert_tokens(), cpu.expert_stats(l)->expert_tokens()) << what << " layer " << l;
    EXPECT_EQ(gpu.expert_stats(l)->n_forwards(), cpu.expert_stats(l)->n_forwards()) << what << " layer " << l;
    EXPECT_EQ(gpu.expert_stats(l)->n_tokens(), cpu.expert_stats(l)->n_tokens()) << what << " layer " << l;
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
  KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
  std::vector<float> a, b;
  cpu->forward(kIds, {}, kc, a);
  gpu->forward(kIds, {}, kg, b);
  expect_close(b, a, rel, path + " all logits");
  expect_same_routing(*gpu, *cpu, path + " prefill", weight_tol);
  for (int32_t next : {65, 66, 300}) {
    const int32_t one[1] = {next};
    cpu->forward(one, {}, kc, a);
    gpu->forward(one, {}, kg, b);
    expect_close(b, a, rel, path + " decode step");
  }
  expect_same_routing(*gpu, *cpu, path + " decode", weight_tol);
  ForwardOptions o;
  o.n_layers = 1;
  o.logits_all = false;
  const int32_t one[1] = {301};
  cpu->forward(one, {}, kc, a, o);
  gpu->forward(one, {}, kg, b, o);
  expect_close(b, a, rel, path + " early exit");
  EXPECT_EQ(gpu->last_distinct_experts()[1], -1);  // not run by the early exit
  EXPECT_EQ(gpu->expert_stats(0)->n_forwards(), 5);
  EXPECT_EQ(gpu->expert_stats(1)->n_forwards(), 4);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The argmax path on the CPU (runs everywhere): bit-identical to the argmax of forward's logits.

TEST(ForwardArgmax, CpuEqualsArgmaxOfTheLogits) {
  for (const char* preset : {"tiny", "moe-tiny"}) {
    const std::string path = write_preset(preset, std::string("argmax_") + preset + ".gguf");
    auto m = load(path, "cpu");
    const int V = m->config().n_vocab;
    for (size_t T : {size_t{1}, size_t{3}, size_t{9}}) {
      const std::span<const int32_t> ids = std::span<const int32_t>(kIds).first(T);
      for (bool all : {true, false}) {
        ForwardOptions o;
        o.logits_all = all;
        KVCache a = m->new_cache(32), b = m->new_cache(32);
        std::vector<float> logits;
        std::vector<int32_t> got;
        m->forward(ids, {}, a, logits, o);
        m->forward_argmax(ids, {}, b, got, o);
        const size_t rows = all ? T : 1;
        ASSERT_EQ(got.size(), rows) << preset << " T " << T;
        EXPECT_EQ(b.size(), static_cast<int>(T));
        for (size_t r = 0; r < rows; ++r)
          EXPECT_EQ(got[r], argmax(std::span<const float>(logits.data() + r * V, V))) << preset << " row " << r;
      }
    }
    if (m->config().is_moe()) {
      EXPECT_NE(m->last_routing(0), nullptr);
      EXPECT_EQ(m->last_routing(0)->n_tokens, 9);  // the last forward_argmax recorded its routing
    }
  }
}

TEST(ForwardArgmax, CpuGreedyDecodingMatchesTheLogitsPath) {
  // generate_autoregressive at temperature 0 now takes its ids from forward_argmax: the tokens
  // equal a hand-rolled forward + argmax loop (what the sampler's greedy path computed before).
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
  m->forward(prompt, {}, kv, logits, last);
  while (static_cast<int>(want.size()) < o.max_tokens) {
    want.push_back(argmax(logits));
    const int32_t t[1] = {want.back()};
    if (static_cast<int>(want.size()) < o.max_tokens) m->forward(t, {}, kv, logits, last);
  }
  EXPECT_EQ(r.tokens, want);
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

TEST(CudaMoE, BatchedForwardEqualsOneTokenForwards) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny"}) {
    auto m = load(write_preset(preset, std::string("cuda_batch_") + preset + ".gguf"), "cuda");
    const int V = m->config().n_vocab;
    for (size_t T : {size_t{1}, size_t{3}, size_t{9}}) {
      const std::span<const int32_t> ids = std::span<const int32_t>(kIds).first(T);
      KVCache a = m->new_cache(32), b = m->new_cache(32);
      std::vector<float> batched, one, seq;
      m->forward(ids, {}, a, batched);
      std::vector<std::vector<int32_t>> batched_experts;
      for (int l = 0; l < m->config().n_layer; ++l) batched_experts.push_back(m->last_routing(l)->expert);
      std::vector<int32_t> seq_experts0;
      for (size_t i = 0; i < T; ++i) {
        m->forward(ids.subspan(i, 1), {}, b, one);
        seq.insert(seq.end(), one.begin(), one.end());
        const auto& e = m->last_routing(0)->expert;
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
    cpu->set_moe_k(k);
    gpu->set_moe_k(k);
    KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
    std::vector<float> a, b;
    cpu->forward(kIds, {}, kc, a);
    gpu->forward(kIds, {}, kg, b);
    expect_close(b, a, kRelF32, "k = " + std::to_string(k));
    EXPECT_EQ(gpu->last_routing(0)->k, k);
    EXPECT_EQ(gpu->last_routing(0)->expert, cpu->last_routing(0)->expert) << "k = " << k;
  }
}

TEST(CudaMoE, UnportedRouterOptionsAreRefusedByName) {
  SPECMOE_REQUIRE_CUDA();
  const std::string path = write_preset("moe-tiny", "cuda_moe_refuse.gguf");
  auto gpu = load(path, "cuda");
  try {
    gpu->set_moe_capacity_factor(1.25);
    FAIL() << "capacity factor accepted on cuda";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("capacity factor"), std::string::npos) << e.what();
  }
  gpu->set_moe_capacity_factor(0.0);  // dropless stays allowed
  LoadOptions o;
  o.device = "cuda";
  o.moe_capacity_factor = 1.0;
  EXPECT_THROW(Model::load(path, o), Error);

  // Sigmoid gating (DeepSeek-V3 style group-limited routing) loads on the CPU, not on cuda.
  auto f = GGUFFile::open(path);
  GGUFWriter w;
  for (const auto& [key, value] : f->metadata())
    if (key != "general.alignment") w.set_value(key, value);
  w.set_u32("llama.expert_gating_func", 2);
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  const std::string sig = scratch("cuda_moe_sigmoid.gguf");
  w.write(sig);
  EXPECT_NO_THROW(load(sig, "cpu"));
  try {
    load(sig, "cuda");
    FAIL() << "sigmoid gating accepted on cuda";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("expert_gating_func"), std::string::npos) << e.what();
  }
}

TEST(CudaGreedy, ForwardArgmaxEqualsArgmaxOfTheLogits) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"tiny", "moe-tiny"}) {
    auto m = load(write_preset(preset, std::string("cuda_argmax_") + preset + ".gguf"), "cuda");
    const int V = m->config().n_vocab;
    for (bool all : {true, false}) {
      ForwardOptions o;
      o.logits_all = all;
      KVCache a = m->new_cache(32), b = m->new_cache(32);
      std::vector<float> logits;
      std::vector<int32_t> got;
      m->forward(kIds, {}, a, logits, o);
      m->forward_argmax(kIds, {}, b, got, o);
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
