// The random-weight models that scripts/conformance-models.py writes with the gguf Python package
// in llama.cpp's layout (an independent writer: not specmoe's synth) against the double-precision
// reference forwards: for qwen3moe, olmoe, deepseek2 and its Lite form, granitemoe, qwen3vlmoe, deepseek,
// dots1, glm4moe, ernie4_5-moe, bailingmoe2 and hunyuan-moe, every token
// of every MoE layer routed to the reference's experts for F32 and F16 weights, and the logits
// close; phi3 at both LongRoPE contexts, gemma2, granite, olmo2, smollm3, stablelm, starcoder2,
// gemma, gptneox and phi2 likewise for their logits. Perplexity against llama.cpp on the
// same files is scripts/conformance.sh's (README, Architectures).
//
// Needs the models: SPECMOE_CONFORMANCE_DIR=DIR after
//   PY=/path/to/venv/bin/python; $PY scripts/conformance-models.py DIR; $PY scripts/conformance-models.py DIR --f32
// and skips without them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/model.h"
#include "moe_reference_forward.h"
#include "reference_forward.h"

namespace fs = std::filesystem;
using namespace specmoe;
using specmoe::testing::check_moe_against_reference;
using specmoe::testing::ReferenceForward;

namespace {

// n tokens of the byte vocabulary (BOS, then the bytes <0xNN> = 3 + NN of a text, repeated): 81
// by default, more than gemma2's window of 64, so its local layers drop the oldest positions.
std::vector<int32_t> ids(int n = 81) {
  std::vector<int32_t> v = {1};
  const std::string text = "The cat sat on the mat; the dog, on the rug. Both slept until noon, then ate. 123";
  for (int i = 0; i + 1 < n; ++i) v.push_back(3 + static_cast<unsigned char>(text[i % text.size()]));
  return v;
}

std::string model_file(const std::string& arch, const char* type) {
  const char* dir = std::getenv("SPECMOE_CONFORMANCE_DIR");
  if (!dir || !*dir) return {};
  const fs::path p = fs::path(dir) / fmt::format("{}-{}.gguf", arch, type);
  return fs::exists(p) ? p.string() : std::string();
}

#define REQUIRE_MODEL(var, arch, type)                                                                   \
  const std::string var = model_file(arch, type);                                                        \
  if (var.empty())                                                                                        \
    GTEST_SKIP() << arch << "-" << type << ".gguf not found: set SPECMOE_CONFORMANCE_DIR to the output of " \
                 << "scripts/conformance-models.py DIR [--f32]";

// Tolerance on max |logit - reference| over the largest reference logit. Float32 activations
// through 4 layers of dot products over up to 1024 terms against double: ~1e-6 measured
// (SPECMOE_PRINT_REL=1); F16 files are read as the same half values by both, so the same bound.
// 1e-4 leaves room, while a wrong op moves logits by O(1) of their range.
constexpr double kTol = 1e-4;

void check_dense(const std::string& path, int n_ctx, int n_tokens = 81) {
  core::LoadOptions o;
  o.n_threads = 2;
  o.cache_types = {DType::F32, DType::F32};  // the reference keeps unrounded keys and values
  auto m = core::Model::load(path, o);
  core::KVCache kv = m->new_cache(n_ctx);
  std::vector<float> got;
  m->forward(ids(n_tokens), kv).logits.to_host(got);
  ReferenceForward ref(path);
  ref.set_context(n_ctx);
  const auto want = ref.run(ids(n_tokens));
  const int V = m->config().n_vocab;
  double max_ref = 0, max_diff = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (int j = 0; j < V; ++j) {
      ASSERT_TRUE(std::isfinite(got[t * V + j]));
      max_ref = std::max(max_ref, std::fabs(want[t][j]));
      max_diff = std::max(max_diff, std::fabs(want[t][j] - got[t * V + j]));
    }
  EXPECT_GT(max_ref, 1.0);
  EXPECT_LE(max_diff, kTol * max_ref) << path << " context " << n_ctx;
  if (std::getenv("SPECMOE_PRINT_REL")) std::fprintf(stderr, "REL %s ctx=%d %.3g\n", path.c_str(), n_ctx, max_diff / max_ref);
}

class ConformanceMoE : public ::testing::TestWithParam<std::tuple<std::string, const char*>> {};

}  // namespace

TEST_P(ConformanceMoE, RoutesEveryTokenAsTheReference) {
  const auto& [arch, type] = GetParam();
  REQUIRE_MODEL(path, arch, type);
  check_moe_against_reference(path, ids(), 0, kTol, 128);
}

INSTANTIATE_TEST_SUITE_P(Models, ConformanceMoE,
                         ::testing::Combine(::testing::Values("qwen3moe", "olmoe", "deepseek2", "deepseek2-lite", "granitemoe",
                                                              "qwen3vlmoe", "deepseek", "dots1", "glm4moe",
                                                              "ernie4_5-moe", "bailingmoe2", "hunyuan-moe",
                                                              "gpt-oss", "minimax-m2", "dbrx", "phimoe", "exaone-moe",
                                                              "lfm2moe", "smallthinker", "smallthinker-swa", "qwen35moe", "qwen3next", "qwen3next-legacy", "mellum", "bailingmoe", "llama4", "mistral4",
                                                              "llama4-maverick", "granitehybrid-moe", "nemotron_h_moe", "afmoe", "maple"),
                                            ::testing::Values("f32", "f16")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(ConformanceDense, Phi3BothRopeFactorSetsMatchTheReference) {
  for (const char* type : {"f32", "f16"}) {
    REQUIRE_MODEL(path, "phi3", type);
    check_dense(path, 128);  // below the original context of 256: the short factors
    check_dense(path, 512);  // above it: the long ones
  }
}

TEST(ConformanceDense, Gemma2MatchesTheReference) {
  for (const char* type : {"f32", "f16"}) {
    REQUIRE_MODEL(path, "gemma2", type);
    check_dense(path, 128);
  }
}

// granite's multipliers, olmo2's post-norms, smollm3's NoPE layers, stablelm's LayerNorm and partial
// RoPE, starcoder2's biases and ungated MLP, gemma's embedding scale and GeGLU, the parallel
// residuals of gptneox and phi2.
class ConformanceDenseArch : public ::testing::TestWithParam<std::tuple<std::string, const char*>> {};

TEST_P(ConformanceDenseArch, MatchesTheReference) {
  const auto& [arch, type] = GetParam();
  REQUIRE_MODEL(path, arch, type);
  check_dense(path, 128);
}

INSTANTIATE_TEST_SUITE_P(Models, ConformanceDenseArch,
                         ::testing::Combine(::testing::Values("granite", "granite-norope", "olmo2", "smollm3", "stablelm", "starcoder2",
                                                              "gemma", "gptneox", "phi2", "ernie4_5", "exaone",
                                                              "exaone4", "mistral3", "command-r", "internlm2",
                                                              "qwen2vl", "seed_oss", "minicpm", "minicpm-defaults",
                                                              "glm4", "glm4-mrope", "hunyuan-dense", "maincoder", "apertus", "nanbeige", "nanbeige-skip", "qwen3vl",
                                                              "arcee", "nemotron", "jais2", "spark2_5", "starcoder", "bloom", "mpt", "refact",
                                                              "jais", "falcon", "falcon40b", "olmo", "baichuan",
                                                              "baichuan13b", "qwen", "xverse", "orion", "codeshell",
                                                              "plamo", "chatglm", "lfm2", "qwen35", "qwen35-mix", "granitehybrid", "mamba2", "nemotron_h"),
                                            ::testing::Values("f32", "f16")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// OLMo 3's, EXAONE 4.0 32B's and cohere2's windows of 128, passed by 160 tokens.
TEST(ConformanceDense, WindowedArchitecturesMatchTheReferencePastTheirWindows) {
  for (const char* arch : {"olmo3", "exaone4-32b", "cohere2"})
    for (const char* type : {"f32", "f16"}) {
      SCOPED_TRACE(std::string(arch) + " " + type);
      REQUIRE_MODEL(path, arch, type);
      check_dense(path, 192, 160);
    }
}
