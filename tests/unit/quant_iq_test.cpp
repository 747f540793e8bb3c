// The read-only i-quant and ternary formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
// TQ1_0, TQ2_0): their grids, their decoding against the element-wise reference of
// tests/quant_reference.h (bit for bit), the AVX2 integer kernels against the dequantized weights,
// and whole models with every matrix in each format against the double-precision reference forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/quantize.h"
#include "core/synth.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/iq_grids.h"
#include "quant_reference.h"
#include "reference_forward.h"
#include "test_data.h"

using namespace specmoe;
namespace cpu = specmoe::kernels::cpu;
using specmoe::testing::kReadOnlyQuantTypes;

namespace {

std::string type_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

// FNV-1a over the grid's bytes, entry by entry, lowest byte first.
template <class T, size_t N>
uint64_t fnv(const iq::Grid<T, N>& grid) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (T v : grid)
    for (size_t k = 0; k < sizeof(T); ++k) {
      h ^= (static_cast<uint64_t>(v) >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  return h;
}

}  // namespace

// The grids are the format's: their first, second and last entries and a hash of every byte, as
// ggml-common.h's tables give them (the hashes computed from those tables).
TEST(IqGrids, MatchTheFormatsTables) {
  EXPECT_EQ(iq::kIq2xxsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(iq::kIq2xxsGrid[1], 0x080808080808082bull);
  EXPECT_EQ(iq::kIq2xxsGrid[255], 0x2b2b2b1908081908ull);
  EXPECT_EQ(fnv(iq::kIq2xxsGrid), 0xbb4ee025b5ac6e8eull);
  EXPECT_EQ(iq::kIq2xsGrid[1], 0x080808080808082bull);
  EXPECT_EQ(iq::kIq2xsGrid[511], 0x2b2b2b2b2b2b2b2bull);
  EXPECT_EQ(fnv(iq::kIq2xsGrid), 0xc9b1ee61e79909bdull);
  EXPECT_EQ(iq::kIq2sGrid[1023], 0x2b2b2b2b2b2b2b2bull);
  EXPECT_EQ(fnv(iq::kIq2sGrid), 0x123edd38a3b62b90ull);
  EXPECT_EQ(iq::kIq3xxsGrid[0], 0x04040404u);
  EXPECT_EQ(iq::kIq3xxsGrid[1], 0x04040414u);
  EXPECT_EQ(iq::kIq3xxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(fnv(iq::kIq3xxsGrid), 0xdfa5dc83d6a155d5ull);
  EXPECT_EQ(iq::kIq3sGrid[1], 0x01010103u);
  EXPECT_EQ(iq::kIq3sGrid[511], 0x0f0f0101u);
  EXPECT_EQ(fnv(iq::kIq3sGrid), 0xfa37020c25b44829ull);
  EXPECT_EQ(iq::kIq1sGrid[0], 0xffffffffffffffffull);
  EXPECT_EQ(iq::kIq1sGrid[1], 0xffffffffffffff01ull);
  EXPECT_EQ(iq::kIq1sGrid[2047], 0x0101010101010101ull);
  EXPECT_EQ(fnv(iq::kIq1sGrid), 0x6703ed863501ae2eull);
  // ggml's ksigns_iq2xs: entries 0, 1, 3, 7, 127.
  EXPECT_EQ(iq::sign_byte(0), 0);
  EXPECT_EQ(iq::sign_byte(1), 129);
  EXPECT_EQ(iq::sign_byte(3), 3);
  EXPECT_EQ(iq::sign_byte(7), 135);
  EXPECT_EQ(iq::sign_byte(127), 255);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(iq::sign_byte(i), specmoe::testing::ref_signs7(i)) << i;
}

TEST(IqTypes, AreReadButNeverWritten) {
  const struct { DType t; uint32_t id; const char* name; size_t bytes; } kTable[] = {
      {DType::IQ2_XXS, 16, "IQ2_XXS", 66}, {DType::IQ2_XS, 17, "IQ2_XS", 74}, {DType::IQ3_XXS, 18, "IQ3_XXS", 98},
      {DType::IQ1_S, 19, "IQ1_S", 50},     {DType::IQ3_S, 21, "IQ3_S", 110},  {DType::IQ2_S, 22, "IQ2_S", 82},
      {DType::IQ1_M, 29, "IQ1_M", 56},     {DType::TQ1_0, 34, "TQ1_0", 54},   {DType::TQ2_0, 35, "TQ2_0", 66}};
  for (const auto& c : kTable) {
    SCOPED_TRACE(c.name);
    const auto info = dtype_info(c.id);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->type, c.t);
    EXPECT_STREQ(info->name, c.name);
    EXPECT_EQ(info->block_size, 256);
    EXPECT_EQ(info->block_bytes, c.bytes);
    EXPECT_TRUE(dtype_is_read_only(c.t));
    EXPECT_FALSE(dtype_from_name(c.name).has_value());  // no quantization target, no cache type
    EXPECT_FALSE(core::quantize_type_from_name(c.name).has_value());
    EXPECT_NE(std::string(dtype_readable_names()).find(c.name), std::string::npos);
    std::vector<float> x(256, 0.5f);
    std::vector<uint8_t> out(c.bytes);
    try {
      cpu::quantize_row(c.t, x.data(), out.data(), 256);
      ADD_FAILURE() << "quantize_row wrote a read-only type";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(dtype_is_read_only(DType::Q4_K));
}

class IqFormat : public ::testing::TestWithParam<DType> {};

// Every element of random blocks (every byte random except the scales) decodes to the
// reference's value, bit for bit: ggml's float steps are exact for these formats.
TEST_P(IqFormat, DecodesAsTheReference) {
  const DType t = GetParam();
  std::mt19937 rng(7);
  const int64_t nb = 64;
  const auto blocks = specmoe::testing::ref_random_iq_blocks(t, rng, nb);
  std::vector<float> y(nb * 256);
  cpu::dequantize_row(t, blocks.data(), y.data(), nb * 256);
  int nonzero = 0;
  for (int64_t b = 0; b < nb; ++b)
    for (int e = 0; e < 256; ++e) {
      const double want = specmoe::testing::ref_iq_value(t, blocks.data() + b * dtype_info(t).block_bytes, e);
      ASSERT_EQ(y[b * 256 + e], static_cast<float>(want)) << "block " << b << " element " << e;
      nonzero += want != 0.0;
    }
  EXPECT_GT(nonzero, nb * 256 / 2);  // the blocks are not degenerate
}

// The integer kernels (AVX2, and the AVX-512 machines run the same) against the float product of
// the dequantized weights: what remains is the activations' rounding to 8 bits per 256 (about
// 0.4% of each element), so the error bound is a fraction of sum |w x| per output.
TEST_P(IqFormat, KernelMatchesDequantizedProduct) {
  const DType t = GetParam();
  std::mt19937 rng(11);
  const int64_t n_in = 768, n_out = 37;
  const auto bytes = specmoe::testing::ref_random_iq_blocks(t, rng, n_out * n_in / 256);
  kernels::MatrixView w;
  w.type = t;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = dtype_row_bytes(t, n_in);
  w.data = bytes.data();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  cpu::ThreadPool pool(2);
  for (int64_t T : {1, 2, 3, 5, 9, 17}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    std::vector<float> x(T * n_in), got(T * n_out), want(T * n_out);
    for (float& v : x) v = nd(rng);
    std::vector<float> deq(n_out * n_in);
    cpu::dequantize_row(t, bytes.data(), deq.data(), n_out * n_in);
    std::vector<float> avx2_result;
    for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
      if (cpu::usable_isa(isa) != isa) continue;
      cpu::matmul(pool, x.data(), T, w, got.data(), isa);
      // AVX-512 batches (VNNI over the decoded row) give the AVX2 pass's bits.
      if (isa == cpu::Isa::Avx2) avx2_result = got;
      if (isa == cpu::Isa::Avx512 && !avx2_result.empty()) {
        EXPECT_EQ(std::memcmp(avx2_result.data(), got.data(), got.size() * sizeof(float)), 0);
      }
      for (int64_t tk = 0; tk < T; ++tk)
        for (int64_t j = 0; j < n_out; ++j) {
          double exact = 0, mag = 0;
          for (int64_t i = 0; i < n_in; ++i) {
            exact += static_cast<double>(deq[j * n_in + i]) * x[tk * n_in + i];
            mag += std::fabs(static_cast<double>(deq[j * n_in + i]) * x[tk * n_in + i]);
          }
          const double tol = isa == cpu::Isa::Scalar ? 1e-5 * mag : 1.5e-2 * mag;
          ASSERT_NEAR(got[tk * n_out + j], exact, tol) << cpu::isa_name(isa) << " row " << j << " token " << tk;
        }
      // Each token's result is the same whatever the batch: token 0 alone.
      std::vector<float> one(n_out);
      cpu::matmul(pool, x.data(), 1, w, one.data(), isa);
      EXPECT_EQ(std::memcmp(one.data(), got.data(), n_out * sizeof(float)), 0) << cpu::isa_name(isa);
    }
  }
}

// A synth model (tiny-256: rows of 256 and 512) with every matrix, token embedding and head
// included, rewritten as random blocks of the format: it loads, runs, and matches the double
// reference forward reading the same dequantized weights; the cached path agrees with the batch.
TEST_P(IqFormat, ModelMatchesReferenceForward) {
  const DType t = GetParam();
  const auto dir = specmoe::testing::scratch_dir();
  const std::string f32_path = (dir / "iq_model_f32.gguf").string();
  const std::string path = (dir / (std::string("iq_model_") + dtype_name(t) + ".gguf")).string();
  core::synth_write(core::synth_spec("tiny-256"), f32_path, 42);
  {
    auto in = core::GGUFFile::open(f32_path);
    core::GGUFWriter w;
    for (const auto& [key, value] : in->metadata()) w.set_value(key, value);
    std::mt19937 rng(5);
    int rewritten = 0;
    for (const auto& ti : in->tensors()) {
      if (core::tensor_is_quantizable(ti.name, ti.ne) && ti.ne[0] % 256 == 0) {
        // Scale the random blocks like the F32 weights they replace: their largest magnitude.
        const float* v = reinterpret_cast<const float*>(ti.data);
        float amax = 0;
        for (int64_t i = 0; i < ti.n_elements; ++i) amax = std::max(amax, std::fabs(v[i]));
        const auto bytes = specmoe::testing::ref_random_iq_blocks(t, rng, ti.n_elements / 256, amax / 0.05f);
        w.add_tensor(ti.name, t, ti.ne, bytes);
        ++rewritten;
      } else {
        w.add_tensor(ti.name, ti.type, ti.ne, std::span<const uint8_t>(ti.data, ti.nbytes));
      }
    }
    ASSERT_GE(rewritten, 2 + 7 * 2);  // embedding, head, and the 7 matrices of each layer
    w.write(path);
  }
  core::LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  auto m = core::Model::load(path, o);
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  core::KVCache kv = m->new_cache(32);
  std::vector<float> logits;
  m->forward(ids, kv).logits.to_host(logits);
  const auto ref = specmoe::testing::ReferenceForward(path).run(ids);
  const int V = m->config().n_vocab;
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    for (int j = 0; j < V; ++j) {
      ASSERT_TRUE(std::isfinite(logits[i * V + j]));
      max_ref = std::max(max_ref, std::fabs(ref[i][j]));
      max_diff = std::max(max_diff, std::fabs(ref[i][j] - logits[i * V + j]));
    }
  ASSERT_GT(max_ref, 0.1);
  EXPECT_LE(max_diff, 3e-2 * max_ref) << "max |logit| " << max_ref;
  std::printf("%-8s max error %.3g%% of the logit range %.3g\n", dtype_name(t), 100.0 * max_diff / max_ref, max_ref);
  kv.truncate(static_cast<int>(ids.size()) - 1);
  std::vector<float> last;
  m->forward(std::span<const int32_t>(ids).last(1), kv).logits.to_host(last);
  EXPECT_EQ(std::memcmp(last.data(), logits.data() + (ids.size() - 1) * V, V * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(ReadOnly, IqFormat, ::testing::ValuesIn(kReadOnlyQuantTypes), type_name);
