// The transformer forward on the CUDA backend (core/backend_cuda.cpp) against the CPU backend: the
// published stories260K greedy output, CPU-vs-CUDA logits on synthetic llama / qwen2 / gpt2
// models (F32, F16, Q8_0), f16 and q8_0 KV caches, batched = sequential, truncate + recompute,
// tree masks and keep(), cache copies, early exit. GPU tests skip without a device (GTEST_SKIP), so the suite passes on
// CPU-only machines; the device-selection errors are tested everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "core/environment.h"
#include "base/error.h"
#include "core/backend_profile.h"
#ifdef SPECMOE_HAVE_CUDA
#include "core/backend_cuda.h"
#endif
#include "core/model.h"
#include "base/device.h"
#include "core/synth.h"
#include "require_cuda.h"
#include "draft/dflash_drafter.h"
#include "draft/eagle3_drafter.h"
#include "draft/mtp_drafter.h"
#include "verify/autoregressive.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::data_path;
using specmoe::testing::scratch_dir;

namespace {

const char* kStories = "models/stories260K.gguf";

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<int32_t> read_ids(const std::filesystem::path& p) {
  std::istringstream in(read_text(p));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

int32_t argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// F32 caches unless asked: the tolerances below are about summation orders, which rounding keys
// and values to f16 / q8_0 would blur (the typed caches have their own test).
std::unique_ptr<Model> load(const std::string& path, const std::string& device,
                            KVCacheTypes types = {DType::F32, DType::F32}) {
  LoadOptions o;
  o.n_threads = 2;
  o.device = device;
  o.cache_types = types;
  return Model::load(path, o);
}

// max |got - want| <= rel * max |want| over all entries, with finite values and a non-trivial
// reference (max |want| > 0.5, so the bound cannot pass on all-zero logits).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0, max_diff = 0, err2 = 0, ref2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": entry " << i << " = " << got[i];
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    const double d = static_cast<double>(got[i]) - want[i];
    max_diff = std::max(max_diff, std::fabs(d));
    err2 += d * d;
    ref2 += static_cast<double>(want[i]) * want[i];
  }
  ASSERT_GT(max_ref, 0.5) << what << ": reference logits are trivially small";
  EXPECT_LE(max_diff, rel * max_ref) << what << ": max |diff| " << max_diff << ", max |ref| " << max_ref
                                     << ", normalized MSE " << err2 / ref2;
}

// Forward one token at a time; the logits of each, concatenated [n, n_vocab].
std::vector<float> forward_one_by_one(Model& m, KVCache& kv, std::span<const int32_t> ids) {
  std::vector<float> all, l;
  for (size_t i = 0; i < ids.size(); ++i) {
    m.forward(ids.subspan(i, 1), kv).logits.to_host(l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// Tolerances of CUDA against CPU logits, relative to the largest |logit|:
// - F32 weights: cuBLAS and the CPU kernels sum the same float products in different orders;
//   through a few layers of dot products over <= 192 terms that moves a logit by ~1e-6 of the
//   range (1e-4 leaves 100x margin; a wrong op -- RoPE pairing, a bias, a norm -- moves it O(1)).
// - F16/BF16 weights, and quantized weights for more than kMatvecMaxTokens = 8 tokens: the GPU
//   rounds the activations to F16 before the tensor-core GEMM (relative error 2^-11 ~ 4.9e-4
//   each), which the CPU does not; 1e-2 of the range bounds that with ~10x margin.
constexpr double kRelF32 = 1e-4;
constexpr double kRelF16 = 1e-2;

// The same 11 tokens on the CPU and on cuda:0 (all logits, then early exit after 2 layers).
void compare_with_cpu(const SynthSpec& spec, const std::string& file, double rel) {
  const std::string path = scratch(file);
  synth_write(spec, path, 42);
  auto cpu = load(path, "cpu");
  auto gpu = load(path, "cuda:0");
  EXPECT_EQ(gpu->device().name(), "cuda:0");
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
  ASSERT_EQ(kg.where().name(), "cuda:0");
  std::vector<float> a, b;
  cpu->forward(ids, kc).logits.to_host(a);
  gpu->forward(ids, kg).logits.to_host(b);
  ASSERT_EQ(kg.size(), 11);
  expect_close(b, a, rel, file + " all logits");
  // Decode steps (T = 1: the quantized matvec path) on top of the cache.
  for (int32_t next : {65, 66, 300}) {
    const int32_t one[1] = {next};
    cpu->forward(one, kc).logits.to_host(a);
    gpu->forward(one, kg).logits.to_host(b);
    expect_close(b, a, rel, file + " decode step");
  }
  // Early exit after 2 layers, last token only.
  ForwardOptions o;
  o.exit_layer = 2;
  o.logits_all = false;
  KVCache kc2 = cpu->new_cache(32), kg2 = gpu->new_cache(32);
  cpu->forward(ids, kc2, o).logits.to_host(a);
  gpu->forward(ids, kg2, o).logits.to_host(b);
  ASSERT_EQ(b.size(), static_cast<size_t>(cpu->config().n_vocab));
  expect_close(b, a, rel, file + " early exit");
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Device selection: runs on every machine.

TEST(CudaDeviceSelection, DeviceStringsAreParsedOrRejected) {
  EXPECT_EQ(parse_device("cpu").kind, Device::Kind::Cpu);
  EXPECT_EQ(parse_device("cuda").kind, Device::Kind::Cuda);
  EXPECT_EQ(parse_device("cuda").index, 0);
  EXPECT_EQ(parse_device("cuda:3").index, 3);
  EXPECT_EQ(parse_device("cuda:3").name(), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CUDA", ""}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
  // A mistyped device fails before the file is opened (the file here does not exist).
  try {
    load(scratch("no_such_model.gguf"), "gpu");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
  }
}

TEST(CudaDeviceSelection, AskingForAMissingDeviceGivesAClearError) {
  const std::string path = scratch("cuda_select_tiny.gguf");
  synth_write("tiny", path, 1);
  const ComputeEnvironment env = query_compute_environment();
  // Without the backend any cuda device is refused; with it, one past the last device is.
  const int index = env.cuda_built ? cuda_device_count() : 0;
  const std::string device = "cuda:" + std::to_string(index);
  try {
    load(path, device);
    FAIL() << device << " loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (!env.cuda_built) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << msg;
      EXPECT_NE(msg.find("this build has no CUDA backend (rebuild with -DSPECMOE_CUDA=ON)"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(e.kind(), ErrorKind::Runtime) << msg;
      EXPECT_NE(msg.find(device), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
}

TEST(CudaDeviceSelection, CliRefusesAMissingDeviceWithOneLine) {
  const std::filesystem::path cli = std::filesystem::path(SPECMOE_BINARY_DIR) / "specmoe";
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << cli << " not built";
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: --device cuda would load";
  const std::string path = scratch("cuda_select_cli.gguf");
  synth_write("tiny", path, 1);
  const std::string cmd = cli.string() + " generate -m " + path + " -p hi -n 2 --device cuda 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("specmoe: error:"), std::string::npos) << out;
  EXPECT_NE(out.find("cuda"), std::string::npos) << out;
}

TEST(CudaDeviceSelection, EnvironmentBlockDescribesTheBuildAndDevices) {
  const ComputeEnvironment env = query_compute_environment();
  const auto m = env.to_map();
  EXPECT_EQ(m.at("cuda_built"), env.cuda_built ? "true" : "false");
  EXPECT_EQ(m.at("gpu_count"), std::to_string(env.gpus.size()));
  EXPECT_EQ(static_cast<int>(env.gpus.size()), cuda_device_count());
  EXPECT_FALSE(env.cuda_status.empty());
  if (!env.cuda_built) {
    EXPECT_EQ(env.cuda_status, "not built");
  }
  const nlohmann::json j = env.to_json();
  EXPECT_EQ(j["gpus"].size(), env.gpus.size());
  for (const GpuDeviceInfo& g : env.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.memory_total_bytes, 0u);
    EXPECT_EQ(m.at("gpu" + std::to_string(g.index) + "_name"), g.name);
  }
}

// ------------------------------------------------------------------------------------------
// On a device.

// The op profile (`bench --profile`) on a device: the profiling wrapper synchronizes around each
// op, which changes no result (within 1e-5, should a library pick another algorithm), counts the head's multiply-adds, and leaves the device's own code
// (the CUDA verifier's cuda_context) reaching the CUDA backend beneath it.
TEST(CudaModel, ProfiledForwardMatchesAndCountsOps) {
  SPECMOE_REQUIRE_CUDA();
  const std::string path = scratch("cuda_profile_tiny.gguf");
  synth_write("tiny", path, 3);
  auto plain = load(path, "cuda");
  LoadOptions o;
  o.n_threads = 2;
  o.device = "cuda";
  o.cache_types = {DType::F32, DType::F32};
  o.profile_ops = true;
  auto profiled = Model::load(path, o);
  ProfilingBackend* prof = profiling_backend(profiled->backend());
  ASSERT_NE(prof, nullptr);
  EXPECT_EQ(profiled->device().kind, Device::Kind::Cuda);
  const std::vector<int32_t> ids = {5, 9, 2, 31};
  KVCache a = plain->new_cache(8), b = profiled->new_cache(8);
  std::vector<float> want, got;
  plain->forward(ids, a).logits.to_host(want);
  prof->enable(true);
  profiled->forward(ids, b).logits.to_host(got);
  prof->enable(false);
  expect_close(got, want, 1e-5, "profiled forward");  // the same kernels; only synchronized
  const ModelConfig& c = profiled->config();
  bool head = false;
  for (const OpProfile& op : prof->ops())
    if (op.name.find(fmt::format("{}x{}", c.n_vocab, c.n_embd)) != std::string::npos) {
      head = true;
      EXPECT_DOUBLE_EQ(op.macs, static_cast<double>(ids.size()) * c.n_vocab * c.n_embd);
    }
  EXPECT_TRUE(head);
#ifdef SPECMOE_HAVE_CUDA
  EXPECT_EQ(&cuda_context(profiled->backend()), &cuda_context(prof->inner()));
#endif
}

TEST(CudaModel, Stories260KGreedyReproducesPublishedOutput) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  SPECMOE_REQUIRE_DATA("models/stories260K.expected_greedy_200steps.txt");
  SPECMOE_REQUIRE_DATA("models/stories260K.greedy_200_token_ids.txt");
  auto m = load(data_path(kStories).string(), "cuda");
  const std::vector<int32_t> want = read_ids(data_path("models/stories260K.greedy_200_token_ids.txt"));
  ASSERT_EQ(want.size(), 201u);  // BOS + 200 steps
  KVCache kv = m->new_cache(256);
  std::vector<int32_t> ids = {m->tokenizer().bos()};
  std::vector<float> logits;
  ForwardOptions last;
  last.logits_all = false;
  for (int step = 0; step < 200; ++step) {
    const int32_t tok[1] = {ids.back()};
    m->forward(tok, kv, last).logits.to_host(logits);
    ASSERT_EQ(logits.size(), 512u);
    ids.push_back(argmax(logits.data(), 512));
  }
  EXPECT_EQ(ids, want);  // exact token ids: greedy is robust to float summation order here
  EXPECT_EQ(m->tokenizer().decode(ids), read_text(data_path("models/stories260K.expected_greedy_200steps.txt")));
}

TEST(CudaModel, Stories260KLogitsMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  auto cpu = load(data_path(kStories).string(), "cpu");
  auto gpu = load(data_path(kStories).string(), "cuda:0");
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};
  KVCache kc = cpu->new_cache(64), kg = gpu->new_cache(64);
  std::vector<float> a, b;
  cpu->forward(ids, kc).logits.to_host(a);
  gpu->forward(ids, kg).logits.to_host(b);
  expect_close(b, a, kRelF32, "stories260K");
}

TEST(CudaModel, SynthLlamaF32MatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  compare_with_cpu(synth_spec("tiny"), "cuda_llama_f32.gguf", kRelF32);
}

TEST(CudaModel, SynthLlamaF16MatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  SynthSpec s = synth_spec("tiny");
  s.type = DType::F16;
  compare_with_cpu(s, "cuda_llama_f16.gguf", kRelF16);
}

TEST(CudaModel, SynthLlamaQ8TiedHeadMatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  SynthSpec s = synth_spec("tiny");
  s.type = DType::Q8_0;  // 11 tokens: dequantize + F16 GEMM; decode steps: the quantized matvec
  s.tied_output = true;  // the head shares the embedding's device copy
  compare_with_cpu(s, "cuda_llama_q8.gguf", kRelF16);
}

TEST(CudaModel, SynthQwen2MatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  SynthSpec s = synth_spec("tiny");
  s.arch = "qwen2";  // q/k/v biases, split-halves RoPE
  s.rope_freq_base = 1000000.0f;
  compare_with_cpu(s, "cuda_qwen2.gguf", kRelF32);
}

TEST(CudaModel, SynthGpt2MatchesTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  SynthSpec s = synth_spec("tiny");
  s.arch = "gpt2";  // fused qkv, LayerNorm, GELU, learned positions
  compare_with_cpu(s, "cuda_gpt2_f32.gguf", kRelF32);
  s.type = DType::F16;
  compare_with_cpu(s, "cuda_gpt2_f16.gguf", kRelF16);
}

TEST(CudaModel, SynthQwen3Gemma3AndRopeScalingMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // QK-norm and wide heads; YaRN; llama3 frequency factors (a device copy of rope_freqs); gemma3's
  // embedding scale, post-norms, GeGLU and sliding windows (positions uploaded per forward).
  compare_with_cpu(synth_spec("qwen3-tiny"), "cuda_qwen3.gguf", kRelF32);
  compare_with_cpu(synth_spec("qwen3-yarn-tiny"), "cuda_qwen3_yarn.gguf", kRelF32);
  compare_with_cpu(synth_spec("llama3-tiny"), "cuda_llama3.gguf", kRelF32);
  compare_with_cpu(synth_spec("gemma3-tiny"), "cuda_gemma3.gguf", kRelF32);
  SynthSpec s = synth_spec("gemma3-tiny");
  s.swa_pattern = 3;
  s.final_logit_softcap = 30.0f;
  compare_with_cpu(s, "cuda_gemma3_softcap.gguf", kRelF32);
}

// f16 and q8_0 caches on the GPU against the CPU with the same types: the device converts rows
// to the same bytes as the CPU (convert_rows is bit-exact in the op harness) and attention widens
// them the same way, so only the keys and values before rounding differ (summation order, ~1e-6
// relative), which moves an element across a rounding boundary now and then: one f16 step
// (2^-11 relative) or one q8_0 step (1/127 of its block's maximum) in a few elements, ~1e-4 of
// the logit range at most through these small models; 1e-3 leaves 10x.
TEST(CudaModel, TypedKVCachesMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  for (const char* preset : {"tiny-256", "gemma3-tiny"}) {
    const std::string path = scratch(std::string("cuda_kv_") + preset + ".gguf");
    synth_write(preset, path, 42);
    for (const KVCacheTypes& t : {KVCacheTypes{DType::F16, DType::F16}, KVCacheTypes{DType::Q8_0, DType::Q8_0},
                                  KVCacheTypes{DType::F16, DType::Q8_0}}) {
      const std::string what = fmt::format("{} K {} V {}", preset, kv_cache_type_name(t.k), kv_cache_type_name(t.v));
      auto cpu = load(path, "cpu", t);
      auto gpu = load(path, "cuda:0", t);
      const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17, 64, 129, 11, 301, 58, 260};
      KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
      ASSERT_EQ(kg.layout(0).k_type, t.k);
      std::vector<float> a, b;
      cpu->forward(ids, kc).logits.to_host(a);
      gpu->forward(ids, kg).logits.to_host(b);
      expect_close(b, a, 1e-3, what + " prompt");
      for (int32_t next : {65, 66, 300}) {
        const int32_t one[1] = {next};
        cpu->forward(one, kc).logits.to_host(a);
        gpu->forward(one, kg).logits.to_host(b);
        expect_close(b, a, 1e-3, what + " decode step");
      }
      // The device cache holds rows of the cache's type: a copy moves them bit for bit, and
      // truncate + recompute on the device gives the same logits.
      KVCache copy = kg;
      EXPECT_EQ(copy.read_layer(0), kg.read_layer(0)) << what;
      EXPECT_EQ(kg.read_layer(0).size(), kg.size() * (kg.k_row_bytes(0) + kg.v_row_bytes(0))) << what;
      kg.truncate(17);
      const int32_t one[1] = {65};
      gpu->forward(one, kg).logits.to_host(a);
      copy.truncate(17);
      gpu->forward(one, copy).logits.to_host(b);
      EXPECT_TRUE(same_bits(a, b)) << what;
    }
  }
}

TEST(CudaModel, SynthPhi3AndGemma2MatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // phi3's fused attn_qkv and [gate | up] ffn_up with LongRoPE factors; gemma2's attention and
  // final soft-capping over sliding-window layers.
  compare_with_cpu(synth_spec("phi3-tiny"), "cuda_phi3.gguf", kRelF32);
  compare_with_cpu(synth_spec("gemma2-tiny"), "cuda_gemma2.gguf", kRelF32);
}

TEST(CudaModel, SynthDenseArchitecturesOfWave2MatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // The same transformer over the backend seam: granite's multipliers (and its MoE form),
  // olmo2's post-norms only, smollm3's NoPE layer, LayerNorm with biases and partial RoPE
  // (stablelm), biases and the ungated MLP (starcoder2), gemma's scaled embedding and GeGLU, the
  // parallel residuals of gptneox and phi2, OLMo 3's windows with unscaled local RoPE, EXAONE 4.0
  // 32B's and cohere2's windows and NoPE global layers, command-r's bias-free LayerNorm, lfm2's
  // short convolutions beside windowed attention, qwen35's gated DeltaNet (its recurrent state in the
  // cache's ring) beside gated attention, granitehybrid's Mamba-2 layers beside granite's attention.
  for (const char* preset : {"granite-tiny", "granitemoe-tiny", "olmo2-tiny", "smollm3-tiny", "stablelm-tiny",
                             "gemma-tiny", "starcoder2-tiny", "gptneox-tiny", "phi2-tiny", "ernie4_5-tiny",
                             "exaone-tiny", "exaone4-tiny", "olmo3-tiny", "exaone4-32b-tiny", "command-r-tiny",
                             "cohere2-tiny", "internlm2-tiny", "qwen2vl-tiny", "seed_oss-tiny",
                             "minicpm-tiny", "glm4-tiny", "hunyuan-dense-tiny", "maincoder-tiny", "apertus-tiny", "nanbeige-tiny", "qwen3vl-tiny", "arcee-tiny",
                             "nemotron-tiny", "jais2-tiny", "spark2_5-tiny", "starcoder-tiny", "bloom-tiny", "mpt-tiny", "refact-tiny", "jais-tiny",
                             "falcon-tiny", "falcon40b-tiny", "olmo-tiny", "baichuan-tiny", "baichuan13b-tiny",
                             "qwen-tiny", "xverse-tiny", "orion-tiny", "codeshell-tiny", "plamo-tiny", "chatglm-tiny",
                             "mistral3-tiny", "lfm2-tiny", "lfm2-swa-tiny", "qwen35-tiny", "qwen35-mix-tiny",
                             "granitehybrid-tiny", "mamba2-tiny", "nemotron_h-tiny"})
    compare_with_cpu(synth_spec(preset), fmt::format("cuda_{}.gguf", preset), kRelF32);
}

TEST(CudaModel, BatchedForwardEqualsOneTokenForwards) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load(data_path(kStories).string(), "cuda");
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};
  KVCache a = m->new_cache(64), b = m->new_cache(64);
  std::vector<float> batched;
  m->forward(ids, a).logits.to_host(batched);
  const std::vector<float> single = forward_one_by_one(*m, b, ids);
  ASSERT_EQ(batched.size(), ids.size() * 512);
  ASSERT_EQ(a.size(), 17);
  // Not bit-exact on the GPU: cuBLAS picks different GEMM kernels (summation orders) for 17
  // rows and for 1 row. F32 tolerance as against the CPU.
  expect_close(batched, single, kRelF32, "batched vs one by one");
  for (int t = 0; t < 17; ++t) EXPECT_EQ(argmax(batched.data() + t * 512, 512), argmax(single.data() + t * 512, 512));
  EXPECT_NE(argmax(batched.data(), 512), argmax(batched.data() + 512, 512));  // rows differ

  // logits_all = false returns the last row.
  KVCache c = m->new_cache(64);
  std::vector<float> last;
  ForwardOptions o;
  o.logits_all = false;
  m->forward(ids, c, o).logits.to_host(last);
  ASSERT_EQ(last.size(), 512u);
  expect_close(last, std::vector<float>(batched.end() - 512, batched.end()), kRelF32, "last row");
}

TEST(CudaModel, TruncateAndRecomputeGivesTheSameLogits) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load(data_path(kStories).string(), "cuda");
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  const std::span<const int32_t> head = std::span<const int32_t>(ids).first(9), tail = std::span<const int32_t>(ids).subspan(9);
  KVCache kv = m->new_cache(32);
  std::vector<float> first, again, l;
  m->forward(head, kv).logits.to_host(l);
  m->forward(tail, kv).logits.to_host(first);
  // Overwrite rows 9.. with other tokens, then roll back and recompute the original ones.
  kv.truncate(9);
  const std::vector<int32_t> other = {300, 301, 302};
  std::vector<float> other_logits;
  m->forward(other, kv).logits.to_host(other_logits);
  // The other tokens really wrote different rows (their logits differ from the original ones).
  EXPECT_FALSE(same_bits(other_logits, std::vector<float>(first.begin(), first.begin() + 3 * 512)));
  kv.truncate(9);
  m->forward(tail, kv).logits.to_host(again);
  ASSERT_EQ(kv.size(), 16);
  // Exact: the same 7-token batch over the same cache rows runs the same kernels (cuBLAS is
  // bit-reproducible for one shape on one GPU), so only a stale or misplaced row could differ.
  EXPECT_TRUE(same_bits(again, first));
}

TEST(CudaModel, TreeMaskHidesNonAncestorsAndKeepCompacts) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  auto gpu = load(data_path(kStories).string(), "cuda");
  auto cpu = load(data_path(kStories).string(), "cpu");
  const std::vector<int32_t> prefix = {1, 403, 407, 261, 378};
  // Tree after the prefix: r (pos 5) -> {c1, c2} (pos 6); c2 -> g (pos 7). Order r, c1, c2, g.
  const std::vector<int32_t> tree = {432, 383, 286, 261};
  const std::vector<int32_t> pos = {5, 6, 6, 7};
  AttentionMask mask;
  mask.n = 4;
  mask.allowed = {1, 0, 0, 0,  //
                  1, 1, 0, 0,  //
                  1, 0, 1, 0,  //
                  1, 0, 1, 1};
  ForwardOptions o;
  o.mask = &mask;
  std::vector<float> l, tree_gpu, tree_cpu;
  KVCache kg = gpu->new_cache(32), kc = cpu->new_cache(32);
  gpu->forward(prefix, kg).logits.to_host(l);
  cpu->forward(prefix, kc).logits.to_host(l);
  gpu->forward(core::Batch(tree, pos), kg, o).logits.to_host(tree_gpu);
  cpu->forward(core::Batch(tree, pos), kc, o).logits.to_host(tree_cpu);
  ASSERT_EQ(kg.size(), 9);
  expect_close(tree_gpu, tree_cpu, kRelF32, "tree logits vs CPU");

  // Reference on the GPU: the path r, c2, g as a plain sequence.
  KVCache ref = gpu->new_cache(32);
  gpu->forward(prefix, ref).logits.to_host(l);
  const std::vector<int32_t> path = {432, 286, 261};
  std::vector<float> path_logits;
  gpu->forward(path, ref).logits.to_host(path_logits);
  auto row = [](const std::vector<float>& v, int r) { return std::vector<float>(v.begin() + r * 512, v.begin() + (r + 1) * 512); };
  expect_close(row(tree_gpu, 0), row(path_logits, 0), kRelF32, "r");
  expect_close(row(tree_gpu, 2), row(path_logits, 1), kRelF32, "c2");
  expect_close(row(tree_gpu, 3), row(path_logits, 2), kRelF32, "g");
  // c1 is another token at the same place: its logits differ from c2's by far more than the tolerance.
  double d = 0;
  for (int j = 0; j < 512; ++j) d = std::max(d, std::fabs(double(tree_gpu[512 + j]) - tree_gpu[2 * 512 + j]));
  EXPECT_GT(d, 0.1);

  // Accept r, c2, g: compact on the device and continue; the next logits match the sequence's
  // and the CPU cache compacted the same way.
  const std::vector<int> keep = {0, 1, 2, 3, 4, 5, 7, 8};
  kg.keep(keep);
  kc.keep(keep);
  ASSERT_EQ(kg.size(), 8);
  EXPECT_EQ(kg.position(6), 6);
  EXPECT_EQ(kg.position(7), 7);
  const int32_t next[1] = {376};
  std::vector<float> a, b, c;
  gpu->forward(next, kg).logits.to_host(a);
  gpu->forward(next, ref).logits.to_host(b);
  cpu->forward(next, kc).logits.to_host(c);
  expect_close(a, b, kRelF32, "after keep vs sequence");
  expect_close(a, c, kRelF32, "after keep vs CPU");
}

TEST(CudaModel, CopiedCacheIsIndependentAndCachesDoNotMix) {
  SPECMOE_REQUIRE_CUDA();
  SPECMOE_REQUIRE_DATA(kStories);
  auto gpu = load(data_path(kStories).string(), "cuda");
  auto cpu = load(data_path(kStories).string(), "cpu");
  const std::vector<int32_t> prefix = {1, 403, 407, 261, 378};
  KVCache kv = gpu->new_cache(16);
  std::vector<float> l, a, b;
  gpu->forward(prefix, kv).logits.to_host(l);
  KVCache copy = kv;  // deep copy of the device rows
  ASSERT_NE(copy.k_data(0), kv.k_data(0));
  ASSERT_EQ(copy.read_layer(0), kv.read_layer(0));  // the same rows, bit for bit
  const int32_t x[1] = {432}, y[1] = {300};
  gpu->forward(y, kv).logits.to_host(a);  // changes row 5 of kv only
  kv.truncate(5);
  gpu->forward(x, copy).logits.to_host(a);
  gpu->forward(x, kv).logits.to_host(b);
  EXPECT_TRUE(same_bits(a, b));  // same rows, same one-token kernels

  // A host cache on a CUDA model, and a device cache on a CPU model, are refused.
  KVCache host = cpu->new_cache(16);
  EXPECT_THROW(gpu->forward(x, host).logits.to_host(a), Error);
  EXPECT_THROW(cpu->forward(x, kv).logits.to_host(a), Error);
  // As is a device cache of another CUDA model.
  auto other = load(data_path(kStories).string(), "cuda");
  EXPECT_THROW(other->forward(x, kv).logits.to_host(a), Error);
}

TEST(CudaModel, MtpBlockAndDraftingMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // The final hidden rows (ForwardOptions::hidden) and the multi-token-prediction block
  // (Model::forward_mtp) of deepseek2, glm4moe, qwen35 and qwen35moe on the GPU against the CPU,
  // then the mtp drafter through the loop on the GPU: identical to its autoregressive decoding.
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  for (const char* preset : {"qwen35-mtp-tiny", "qwen35moe-mtp-tiny", "glm4moe-mtp-tiny", "deepseek2-mtp-tiny"}) {
    const std::string path = scratch(fmt::format("cuda_{}.gguf", preset));
    synth_write(synth_spec(preset), path, 42);
    auto cpu = load(path, "cpu");
    auto gpu = load(path, "cuda:0");
    ForwardOptions o;
    o.hidden = true;
    KVCache kc = cpu->new_cache(32), kg = gpu->new_cache(32);
    std::vector<float> hc, hg, lc, lg;
    cpu->forward(ids, kc, o).hidden.to_host(hc);
    gpu->forward(ids, kg, o).hidden.to_host(hg);
    expect_close(hg, hc, kRelF32, std::string(preset) + " hidden rows");
    // The block over the CPU's rows (each token with the row of the token before it) on both.
    const int64_t d = cpu->config().n_embd, T = static_cast<int64_t>(ids.size());
    std::vector<float> h(static_cast<size_t>(d), 0.0f);
    h.insert(h.end(), hc.begin(), hc.end() - d);
    RowBuffer bc(cpu->backend()), bg(gpu->backend());
    cpu->backend().upload(bc.reserve(T, d), h.data(), h.size() * sizeof(float));
    gpu->backend().upload(bg.reserve(T, d), h.data(), h.size() * sizeof(float));
    KVCache mc = cpu->new_mtp_cache(32), mg = gpu->new_mtp_cache(32);
    cpu->forward_mtp(ids, bc.view(T, d).data, mc).logits.to_host(lc);
    gpu->forward_mtp(ids, bg.view(T, d).data, mg).logits.to_host(lg);
    expect_close(lg, lc, kRelF32, std::string(preset) + " MTP block");
    // Drafting with it on the GPU, greedy: the GPU's own autoregressive output.
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    verify::DecodeOptions d_o;
    d_o.max_tokens = 24;
    d_o.draft_max = 3;
    d_o.stop_at_eog = false;
    d_o.cost_probe_forwards = 0;
    draft::MtpDrafter drafter(*gpu, 64);
    const auto verifier = verify::make_verifier("greedy", {gpu->device()});
    verify::SpeculativeDecoder dec(*gpu, drafter, *verifier, greedy, d_o);
    EXPECT_EQ(dec.generate(ids, 0).tokens, verify::generate_autoregressive(*gpu, ids, greedy, d_o, 0).tokens) << preset;
  }
}

TEST(CudaModel, Eagle3HeadAndDraftingMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // A target's layer rows (ForwardOptions::hidden_layers), an EAGLE-3 head's fusion and decoder
  // (Model::eagle3_fuse, forward_eagle3; eagle3-d2t-tiny: its own embedding, a head over 160 ids
  // scattered through d2t) on the GPU against the CPU, then the eagle3 drafter through the loop on
  // the GPU: identical to its autoregressive decoding.
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  const std::string tpath = scratch("cuda_tiny_eagle3.gguf");
  synth_write(synth_spec("tiny"), tpath, 42);
  auto tc = load(tpath, "cpu");
  auto tg = load(tpath, "cuda:0");
  for (const char* preset : {"eagle3-tiny", "eagle3-d2t-tiny"}) {
    const std::string hpath = scratch(fmt::format("cuda_{}.gguf", preset));
    synth_write(synth_spec(preset), hpath, 42);
    std::shared_ptr<Model> hc(load(hpath, "cpu")), hg(load(hpath, "cuda:0"));
    hc->bind_target(*tc);
    hg->bind_target(*tg);
    const ModelConfig& c = hc->config();
    ForwardOptions o;
    o.hidden_layers = c.head_target_layers;
    KVCache kc = tc->new_cache(32), kg = tg->new_cache(32);
    std::vector<float> fc, fg, gc, gg, lc, lg;
    tc->forward(ids, kc, o).hidden.to_host(fc);
    tg->forward(ids, kg, o).hidden.to_host(fg);
    expect_close(fg, fc, kRelF32, std::string(preset) + " layer rows");
    const int64_t T = static_cast<int64_t>(ids.size()), F = c.head_feature_width(), d = c.n_embd;
    RowBuffer bc(hc->backend()), bg(hg->backend());
    hc->backend().upload(bc.reserve(T, F), fc.data(), fc.size() * sizeof(float));
    hg->backend().upload(bg.reserve(T, F), fc.data(), fc.size() * sizeof(float));
    hc->eagle3_fuse(bc.view(T, F).data, T).to_host(gc);
    hg->eagle3_fuse(bg.view(T, F).data, T).to_host(gg);
    expect_close(gg, gc, kRelF32, std::string(preset) + " fusion");
    RowBuffer gbc(hc->backend()), gbg(hg->backend());
    hc->backend().upload(gbc.reserve(T, d), gc.data(), gc.size() * sizeof(float));
    hg->backend().upload(gbg.reserve(T, d), gc.data(), gc.size() * sizeof(float));
    KVCache ec = hc->new_cache(32), eg = hg->new_cache(32);
    hc->forward_eagle3(ids, gbc.view(T, d).data, ec).logits.to_host(lc);
    hg->forward_eagle3(ids, gbg.view(T, d).data, eg).logits.to_host(lg);
    for (size_t i = 0; i < lc.size(); ++i)  // the ids outside a draft vocabulary: -inf on both
      if (std::isinf(lc[i])) {
        EXPECT_TRUE(std::isinf(lg[i]) && lg[i] < 0) << preset << " logit " << i;
        lc[i] = lg[i] = 0.0f;
      }
    expect_close(lg, lc, kRelF32, std::string(preset) + " head logits");
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    verify::DecodeOptions d_o;
    d_o.max_tokens = 24;
    d_o.draft_max = 3;
    d_o.stop_at_eog = false;
    d_o.cost_probe_forwards = 0;
    draft::Eagle3Drafter drafter(*tg, hg, 64);
    const auto verifier = verify::make_verifier("greedy", {tg->device()});
    verify::SpeculativeDecoder dec(*tg, drafter, *verifier, greedy, d_o);
    EXPECT_EQ(dec.generate(ids, 0).tokens, verify::generate_autoregressive(*tg, ids, greedy, d_o, 0).tokens) << preset;
  }
}

TEST(CudaModel, DFlashBlockAndDraftingMatchTheCpu) {
  SPECMOE_REQUIRE_CUDA();
  // A DFlash draft's injection of a target's layer rows and its block (Model::dflash_inject,
  // forward_dflash; dflash-tiny: bidirectional, the target's embedding and head, 2 KV heads;
  // dflash-d2t-tiny: causal, its own embedding and a head over 160 ids through d2t) on the GPU
  // against the CPU, then the dflash drafter through the loop on the GPU: identical to its
  // autoregressive decoding.
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  const std::string tpath = scratch("cuda_tiny_dflash.gguf");
  synth_write(synth_spec("tiny"), tpath, 42);
  auto tc = load(tpath, "cpu");
  auto tg = load(tpath, "cuda:0");
  for (const char* preset : {"dflash-tiny", "dflash-d2t-tiny"}) {
    const std::string dpath = scratch(fmt::format("cuda_{}.gguf", preset));
    synth_write(synth_spec(preset), dpath, 42);
    std::shared_ptr<Model> dc(load(dpath, "cpu")), dg(load(dpath, "cuda:0"));
    dc->bind_target(*tc);
    dg->bind_target(*tg);
    const ModelConfig& c = dc->config();
    ForwardOptions o;
    o.hidden_layers = c.head_target_layers;
    KVCache kc = tc->new_cache(32), kg = tg->new_cache(32);
    std::vector<float> fc, lc, lg;
    tc->forward(ids, kc, o).hidden.to_host(fc);
    const int64_t T = static_cast<int64_t>(ids.size()), F = c.head_feature_width();
    RowBuffer bc(dc->backend()), bg(dg->backend());
    dc->backend().upload(bc.reserve(T, F), fc.data(), fc.size() * sizeof(float));
    dg->backend().upload(bg.reserve(T, F), fc.data(), fc.size() * sizeof(float));
    KVCache ec = dc->new_cache(32), eg = dg->new_cache(32);
    dc->dflash_inject(bc.view(T, F).data, T, ec);
    dg->dflash_inject(bg.view(T, F).data, T, eg);
    std::vector<int32_t> block(static_cast<size_t>(c.dflash_block_size), c.mask_token_id);
    block[0] = 72;
    dc->forward_dflash(block, ec).logits.to_host(lc);
    dg->forward_dflash(block, eg).logits.to_host(lg);
    for (size_t i = 0; i < lc.size(); ++i)  // the ids outside a draft vocabulary: -inf on both
      if (std::isinf(lc[i])) {
        EXPECT_TRUE(std::isinf(lg[i]) && lg[i] < 0) << preset << " logit " << i;
        lc[i] = lg[i] = 0.0f;
      }
    expect_close(lg, lc, kRelF32, std::string(preset) + " block logits");
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    verify::DecodeOptions d_o;
    d_o.max_tokens = 24;
    d_o.draft_max = 4;
    d_o.stop_at_eog = false;
    d_o.cost_probe_forwards = 0;
    draft::DFlashDrafter drafter(*tg, dg, 64);
    const auto verifier = verify::make_verifier("greedy", {tg->device()});
    verify::SpeculativeDecoder dec(*tg, drafter, *verifier, greedy, d_o);
    EXPECT_EQ(dec.generate(ids, 0).tokens, verify::generate_autoregressive(*tg, ids, greedy, d_o, 0).tokens) << preset;
  }
}
