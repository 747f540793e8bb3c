// specmoe quantize (core/quantize.h): its files against llama-quantize's (hashes of llama.cpp's
// own output in tests/golden/quantize_llamacpp.json, made by scripts/quantize-conformance.py),
// ggml's reference rounding, which tensors are quantized, and the errors.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli_runner.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/quantize.h"
#include "core/synth.h"
#include "experiments/config_hash.h"
#include "kernels/cpu/quant.h"
#include "test_data.h"

namespace specmoe {
namespace {

namespace fs = std::filesystem;
using core::QuantizeOptions;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// quantize_model(src -> scratch/out) throws an Error whose message holds every one of `parts`.
void expect_quantize_error(const fs::path& src, const std::string& out, const QuantizeOptions& o,
                           const std::vector<std::string>& parts) {
  try {
    core::quantize_model(src.string(), (testing::scratch_dir() / out).string(), o);
    ADD_FAILURE() << "expected an error quantizing " << src;
  } catch (const Error& e) {
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

fs::path synth_model(const std::string& preset) {
  const fs::path p = testing::scratch_dir() / ("quantize-src-" + preset + ".gguf");
  core::synth_write(preset, p.string(), 1);
  return p;
}

// Every golden case: the same synthetic model quantized by specmoe gives llama-quantize's file,
// byte for byte (its size and FNV-1a hash).
TEST(Quantize, FilesEqualLlamaQuantizes) {
  const nlohmann::json g = nlohmann::json::parse(slurp(fs::path(SPECMOE_SOURCE_DIR) / "tests/golden/quantize_llamacpp.json"));
  ASSERT_GE(g["cases"].size(), 20u);
  for (const auto& c : g["cases"]) {
    const std::string preset = c["preset"], type = c["type"];
    QuantizeOptions o;
    o.type = *core::quantize_type_from_name(type);
    o.allow_requantize = true;
    o.threads = 2;
    const std::vector<std::string> args = c["args"];
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--pure") o.pure = true;
      else if (args[i] == "--output-tensor-type") o.output_tensor_type = *dtype_from_name(args[++i]);
      else if (args[i] == "--token-embedding-type") o.token_embedding_type = *dtype_from_name(args[++i]);
      else FAIL() << "unknown option in the golden file: " << args[i];
    }
    const fs::path out = testing::scratch_dir() / ("quantize-out-" + preset + "-" + type + ".gguf");
    core::quantize_model(synth_model(preset).string(), out.string(), o);
    const std::string bytes = slurp(out);
    SCOPED_TRACE(preset + " -> " + type + " " + c["args"].dump());
    EXPECT_EQ(bytes.size(), c["bytes"].get<size_t>());
    EXPECT_EQ(exp::fnv1a64_hex(bytes), c["fnv1a64"].get<std::string>())
        << "differs from llama-quantize's file (if the synth presets changed on purpose, regenerate the goldens with "
           "scripts/quantize-conformance.py --goldens tests/golden/quantize_llamacpp.json)";
  }
}

// ggml's rounding, where it differs from quantize_row's: Q8_0 rounds halves away from zero
// (roundf), Q4_0 truncates x * id + 8.5 after the float addition.
TEST(Quantize, GgmlReferenceRounding) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 0.5f, x[2] = 1.5f, x[3] = 2.5f, x[4] = -0.5f, x[5] = -2.5f;
  std::vector<uint8_t> ggml(34), own(34);
  kernels::cpu::quantize_row_ggml(DType::Q8_0, x.data(), ggml.data(), 32);
  kernels::cpu::quantize_row(DType::Q8_0, x.data(), own.data(), 32);
  const auto* g = reinterpret_cast<const int8_t*>(ggml.data() + 2);
  const auto* s = reinterpret_cast<const int8_t*>(own.data() + 2);
  EXPECT_EQ(g[0], 127);
  EXPECT_EQ(g[1], 1);
  EXPECT_EQ(g[2], 2);
  EXPECT_EQ(g[3], 3);
  EXPECT_EQ(g[4], -1);
  EXPECT_EQ(g[5], -3);
  EXPECT_EQ(s[1], 0);  // half to even
  EXPECT_EQ(s[3], 2);

  std::vector<float> y(32, 0.0f);
  y[0] = -8.0f;  // d = 1, id = 1
  y[1] = 0.5f;   // 9.0 -> code 9 (value 1); half to even gives 8 (value 0)
  y[2] = -0.5f;  // 8.0 -> code 8
  y[3] = 7.4f;   // 15.9 -> 15
  std::vector<uint8_t> q4(18), q4own(18);
  kernels::cpu::quantize_row_ggml(DType::Q4_0, y.data(), q4.data(), 32);
  kernels::cpu::quantize_row(DType::Q4_0, y.data(), q4own.data(), 32);
  EXPECT_EQ(q4[2] & 0xF, 0);
  EXPECT_EQ(q4[3] & 0xF, 9);
  EXPECT_EQ(q4[4] & 0xF, 8);
  EXPECT_EQ(q4[5] & 0xF, 15);
  EXPECT_EQ(q4own[3] & 0xF, 8);

  // Subnormal weights: 1 / d overflows to infinity and every code is what x86's truncating
  // conversion makes of it in ggml (0), without undefined behaviour here.
  std::vector<float> tiny(32, 1e-44f);
  tiny[0] = -2e-44f;
  kernels::cpu::quantize_row_ggml(DType::Q4_0, tiny.data(), q4.data(), 32);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q4[2 + j], 0) << j;
}

TEST(Quantize, WhichTensorsAreQuantized) {
  using core::tensor_is_quantizable;
  EXPECT_TRUE(tensor_is_quantizable("blk.0.attn_q.weight", {64, 64}));
  EXPECT_TRUE(tensor_is_quantizable("token_embd.weight", {64, 320}));
  EXPECT_TRUE(tensor_is_quantizable("blk.1.ffn_up_exps.weight", {64, 96, 4}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_norm.weight", {64}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q_norm.weight", {32, 1}));  // trailing 1s do not count
  EXPECT_FALSE(tensor_is_quantizable("blk.0.ffn_gate_inp.weight", {64, 8}));  // the MoE router
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q.bias", {64, 2}));
  EXPECT_FALSE(tensor_is_quantizable("position_embd.weight", {64, 128}));
  EXPECT_FALSE(tensor_is_quantizable("rope_freqs.weight", {16}));
}

TEST(Quantize, TypesAndMetadataFollowTheRules) {
  const fs::path out = testing::scratch_dir() / "quantize-rules.gguf";
  QuantizeOptions o;
  o.type = DType::Q4_0;
  const core::QuantizeSummary s = core::quantize_model(synth_model("tiny-256").string(), out.string(), o);
  EXPECT_EQ(s.file_type, 2u);
  const auto f = core::GGUFFile::open(out.string());
  EXPECT_EQ(f->get_int("general.file_type"), 2);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  EXPECT_EQ(f->metadata().back().first, "general.file_type");
  EXPECT_EQ(f->tensor("output.weight").type, DType::Q6_K);  // untied head, rows of 256
  EXPECT_EQ(f->tensor("token_embd.weight").type, DType::Q4_0);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, DType::Q4_0);
  EXPECT_EQ(f->tensor("blk.0.attn_norm.weight").type, DType::F32);
  // Non-layer tensors first, then layer by layer, by name within each.
  EXPECT_EQ(f->tensors().front().name, "output.weight");
  EXPECT_EQ(f->tensors().back().name.rfind("blk.3.", 0), 0u);
}

TEST(Quantize, QuantizedSourceNeedsAllowRequantize) {
  const fs::path src = synth_model("tiny-q8_0");
  QuantizeOptions o;
  o.type = DType::Q4_0;
  expect_quantize_error(src, "quantize-noreq.gguf", o, {"--allow-requantize", src.string()});
  // A tensor already in the target type is copied: no flag needed.
  o.type = DType::Q8_0;
  EXPECT_NO_THROW(core::quantize_model(src.string(), (testing::scratch_dir() / "quantize-copy.gguf").string(), o));
}

TEST(Quantize, ForcedTypeThatDoesNotFitIsAnError) {
  QuantizeOptions o;
  o.type = DType::Q4_0;
  o.token_embedding_type = DType::Q4_K;  // rows of 64 are not blocks of 256
  expect_quantize_error(synth_model("tiny"), "quantize-fit.gguf", o, {"token_embd.weight", "--token-embedding-type"});
  // Without the override the same rows fall back (Q6_K -> Q8_0 for the head) and are counted.
  o.token_embedding_type.reset();
  o.type = DType::Q6_K;
  const auto s = core::quantize_model(synth_model("tiny").string(), (testing::scratch_dir() / "quantize-fb.gguf").string(), o);
  EXPECT_GT(s.n_fallback, 0);
  const auto f = core::GGUFFile::open((testing::scratch_dir() / "quantize-fb.gguf").string());
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, DType::Q8_0);
}

TEST(Quantize, NonFiniteWeightsAreAnError) {
  core::GGUFWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<float> v(64 * 2, 0.5f);
  v[70] = std::numeric_limits<float>::quiet_NaN();
  w.add_tensor_f32("blk.0.attn_q.weight", DType::F32, {64, 2}, v);
  const fs::path src = testing::scratch_dir() / "quantize-nan.gguf";
  w.write(src.string());
  QuantizeOptions o;
  o.type = DType::Q8_0;
  expect_quantize_error(src, "quantize-nan-out.gguf", o, {"blk.0.attn_q.weight", "row 1"});
  EXPECT_FALSE(fs::exists(testing::scratch_dir() / "quantize-nan-out.gguf"));
}

TEST(Quantize, IntegerTensorsAreCopiedAsTheyAre) {
  // An I32 weight-named matrix (EAGLE-3 files carry an I32 d2t map) is indices, not weights: it
  // keeps its type and bytes, and the float tensors beside it are still quantized.
  core::GGUFWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<int32_t> ids(64 * 2);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 7 - 100);
  w.add_tensor("blk.0.ffn_up.weight", DType::I32, {64, 2},
               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * sizeof(int32_t)));
  std::vector<float> v(64 * 2, 0.25f);
  w.add_tensor_f32("blk.0.attn_q.weight", DType::F32, {64, 2}, v);
  const fs::path src = testing::scratch_dir() / "quantize-int.gguf";
  w.write(src.string());
  QuantizeOptions o;
  o.type = DType::Q8_0;
  const fs::path dst = testing::scratch_dir() / "quantize-int-out.gguf";
  quantize_model(src.string(), dst.string(), o);
  const auto f = core::GGUFFile::open(dst.string());
  const auto& t = f->tensor("blk.0.ffn_up.weight");
  ASSERT_EQ(t.type, DType::I32);
  ASSERT_EQ(t.nbytes, ids.size() * sizeof(int32_t));
  EXPECT_EQ(std::memcmp(t.data, ids.data(), t.nbytes), 0);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, DType::Q8_0);
}

TEST(Quantize, Mxfp4MoeAndFallbacks) {
  // MXFP4_MOE: the experts (3-D tensors) in MXFP4, every other quantized tensor in Q8_0, the head
  // too; routers and 1-D tensors copied; general.file_type 38. The file runs.
  const fs::path out = testing::scratch_dir() / "quantize-mxfp4.gguf";
  QuantizeOptions o;
  o.type = *core::quantize_type_from_name("mxfp4_moe");
  EXPECT_EQ(o.type, DType::MXFP4);
  const core::QuantizeSummary s = core::quantize_model(synth_model("gpt-oss-tiny").string(), out.string(), o);
  EXPECT_EQ(s.file_type, 38u);
  const auto f = core::GGUFFile::open(out.string());
  EXPECT_EQ(f->tensor("blk.0.ffn_up_exps.weight").type, DType::MXFP4);
  EXPECT_EQ(f->tensor("blk.1.ffn_down_exps.weight").type, DType::MXFP4);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, DType::Q8_0);
  EXPECT_EQ(f->tensor("token_embd.weight").type, DType::Q8_0);
  EXPECT_EQ(f->tensor("output.weight").type, DType::Q8_0);
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
  EXPECT_EQ(f->tensor("blk.0.ffn_up_exps.bias").type, DType::F32);
  auto m = core::Model::load(out.string());
  core::KVCache kv = m->new_cache(8);
  const std::vector<int32_t> ids = {1, 72, 105};
  std::vector<float> logits;
  m->forward(ids, kv).logits.to_host(logits);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // --pure: MXFP4 everywhere it fits.
  o.pure = true;
  core::quantize_model(synth_model("gpt-oss-tiny").string(), out.string(), o);
  EXPECT_EQ(core::GGUFFile::open(out.string())->tensor("blk.0.attn_q.weight").type, DType::MXFP4);

  // Rows that a 256-element type does not divide fall back as llama-quantize does: Q2_K and Q3_K
  // to Q4_0, Q4_K to Q5_0 (tiny's rows are 64 wide).
  const fs::path fb = testing::scratch_dir() / "quantize-fallback.gguf";
  for (const auto& [type, want] : {std::pair{DType::Q2_K, DType::Q4_0}, std::pair{DType::Q3_K, DType::Q4_0},
                                   std::pair{DType::Q4_K, DType::Q5_0}, std::pair{DType::IQ4_XS, DType::IQ4_NL}}) {
    QuantizeOptions q;
    q.type = type;
    const core::QuantizeSummary r = core::quantize_model(synth_model("tiny").string(), fb.string(), q);
    EXPECT_GT(r.n_fallback, 0);
    EXPECT_EQ(core::GGUFFile::open(fb.string())->tensor("blk.0.attn_q.weight").type, want) << dtype_name(type);
  }
}

TEST(Quantize, CommandLine) {
  SPECMOE_REQUIRE_CLI();
  const fs::path src = synth_model("tiny");
  const fs::path out = testing::scratch_dir() / "quantize-cli.gguf";
  fs::remove(out);
  testing::CliRun r = testing::run_cli({"quantize", src.string(), out.string(), "Q5_1", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("wrote " + out.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("blk.0.attn_q.weight"), std::string::npos) << r.err;
  EXPECT_EQ(core::GGUFFile::open(out.string())->get_int("general.file_type"), 9);

  r = testing::run_cli({"quantize", src.string(), out.string(), "Q4_9"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("'Q4_9' is not a tensor type"), std::string::npos) << r.err;

  r = testing::run_cli({"quantize", (testing::scratch_dir() / "no-such-model.gguf").string(), out.string(), "Q8_0"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("no-such-model.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace specmoe
