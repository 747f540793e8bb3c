// Packed weights (kernels/cpu/packed.h): the 16-row interleaved layout and the kernels that read
// it. Every packed kernel, on every instruction set this CPU has, gives quant_dot_ref's value bit
// for bit (the arithmetic's definition, one row and one token at a time), for every packable
// type, awkward row counts (groups of 16 with 1..15 padding rows), token counts (every token
// group size and the 64-token tiles), codes from quantized floats and from random bytes (every
// code value). The layout round-trips (a packed row dequantizes to the file's row exactly), views
// with and without a packed copy and slices of them give the same bits, and the CPU backend packs
// what it makes resident.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/dtype.h"

namespace cpu = specmoe::kernels::cpu;
using specmoe::DType;

namespace {

const DType kPacked[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                         DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Byte offsets of the fp16 fields in one block of `type`.
std::vector<size_t> half_fields(DType type) {
  switch (type) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: return {0};
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// Rows of `type`: quantized from N(0, 0.5^2) floats, or random bytes with sane fp16 scales (every
// code value occurs; the scale fields of a valid block are copied in).
std::vector<uint8_t> weight_bytes(DType type, int64_t n_in, int64_t n_out, uint32_t seed, bool raw) {
  const size_t rb = specmoe::dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(rb * n_out);
  const std::vector<float> w = random_vec(static_cast<size_t>(n_in * n_out), seed, 0.5f);
  for (int64_t j = 0; j < n_out; ++j) cpu::quantize_row(type, w.data() + j * n_in, bytes.data() + j * rb, n_in);
  if (!raw) return bytes;
  const std::vector<uint8_t> valid = bytes;
  std::mt19937 rng(seed + 1);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t block = specmoe::dtype_info(type).block_bytes;
  for (size_t blk = 0; blk < bytes.size() / block; ++blk)
    for (size_t off : half_fields(type)) std::memcpy(&bytes[blk * block + off], &valid[blk * block + off], 2);
  return bytes;
}

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

std::vector<cpu::Isa> integer_isas() {
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512, cpu::Isa::Amx})
    if (cpu::usable_isa(isa) == isa) isas.push_back(isa);
  return isas;
}

}  // namespace

TEST(Packed, PackableTypes) {
  for (DType t : kPacked) EXPECT_TRUE(cpu::packs(t) && cpu::packs_integer(t)) << specmoe::dtype_name(t);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    EXPECT_TRUE(cpu::packs(t) && !cpu::packs_integer(t)) << specmoe::dtype_name(t);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS}) EXPECT_FALSE(cpu::packs(t)) << specmoe::dtype_name(t);
  const auto view = cpu::MatrixView::make(DType::Q4_K, nullptr, 512, 17);
  EXPECT_EQ(cpu::packed_bytes(view), 32u * specmoe::dtype_row_bytes(DType::Q4_K, 512));  // 2 groups
}

TEST(Packed, RowsDequantizeToTheFileRows) {
  cpu::ThreadPool pool(2);
  std::vector<DType> types(std::begin(kPacked), std::end(kPacked));
  types.insert(types.end(), {DType::F32, DType::F16, DType::BF16});
  for (DType type : types)
    for (bool raw : {false, true}) {
      if (raw && !cpu::packs_integer(type)) continue;
      const int64_t block = specmoe::dtype_info(type).block_size, n_in = block == 1 ? 19 : 3 * block, n_out = 37;
      SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << (raw ? " raw" : ""));
      const std::vector<uint8_t> bytes = weight_bytes(type, n_in, n_out, 11, raw);
      const auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
      std::vector<uint8_t> packed(cpu::packed_bytes(view));
      cpu::pack(pool, view, packed.data());
      std::vector<float> want(n_in), got(n_in);
      for (int64_t j = 0; j < n_out; ++j) {
        cpu::dequantize_row(type, view.row(j), want.data(), n_in);
        cpu::dequantize_packed_row(view, packed.data(), j, got.data());
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "row " << j;
      }
      // The padding rows of the last group are zero.
      for (int64_t j = n_out; j < 48; ++j) {
        cpu::dequantize_packed_row(view, packed.data(), j, got.data());
        for (float v : got) ASSERT_EQ(v, 0.0f);
      }
    }
}

// The kernels against the definition: every output bit for bit, packed copy or not.
TEST(Packed, KernelsMatchQuantDotRefBitForBit) {
  const std::vector<cpu::Isa> isas = integer_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this CPU: matmul multiplies in float";
  cpu::ThreadPool pool(2);
  for (DType type : kPacked) {
    const int64_t block = specmoe::dtype_info(type).block_size;
    for (bool raw : {false, true})
      for (int64_t n_in : {block, 3 * block, 6 * block})  // 6: the AMX kernels' batches of 4 blocks and a rest
        for (int64_t n_out : {1, 15, 16, 17, 33})
          for (int64_t T : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 65}) {  // every group size of every kernel
            SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << (raw ? " raw" : "") << " n_in=" << n_in
                                            << " n_out=" << n_out << " T=" << T);
            const std::vector<uint8_t> bytes =
                weight_bytes(type, n_in, n_out, static_cast<uint32_t>(n_in * 7 + n_out), raw);
            auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
            const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(T), 1.0f);
            std::vector<float> want(static_cast<size_t>(T * n_out));
            for (int64_t t = 0; t < T; ++t)
              for (int64_t j = 0; j < n_out; ++j)
                want[t * n_out + j] = cpu::quant_dot_ref(type, view.row(j), x.data() + t * n_in, n_in);
            bool nonzero = false;
            for (float v : want) nonzero = nonzero || v != 0.0f;
            ASSERT_TRUE(nonzero);
            std::vector<uint8_t> packed(cpu::packed_bytes(view));
            cpu::pack(pool, view, packed.data());
            for (cpu::Isa isa : isas)
              for (bool with_copy : {false, true}) {
                view.packed = with_copy ? packed.data() : nullptr;
                std::vector<float> y(want.size(), -7.0f);
                cpu::matmul(pool, x.data(), T, view, y.data(), isa);
                for (size_t i = 0; i < y.size(); ++i)
                  ASSERT_TRUE(same_bits(y[i], want[i]))
                      << cpu::isa_name(isa) << (with_copy ? " packed" : " packed on the fly") << " output " << i
                      << ": " << y[i] << " vs " << want[i];
              }
          }
  }
}

// Chunks of several groups (matmul hands each thread at least rows / 8 of them): the kernels that
// take two groups per call (AVX-512 Q4_K batches) and the odd group after them, against the
// reference bit for bit. (The shapes above give every thread one group per chunk.)
TEST(Packed, ChunksOfSeveralGroupsMatchQuantDotRefBitForBit) {
  const std::vector<cpu::Isa> isas = integer_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this CPU: matmul multiplies in float";
  cpu::ThreadPool pool(2);
  const int64_t n_in = 512;
  for (DType type : {DType::Q4_K, DType::Q6_K, DType::Q8_0})
    for (int64_t n_out : {300, 512})  // chunks of 3 groups (a pair and one), of 4 (two pairs)
      for (int64_t T : {2, 5, 9, 17}) {
        SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << " n_out=" << n_out << " T=" << T);
        const std::vector<uint8_t> bytes = weight_bytes(type, n_in, n_out, static_cast<uint32_t>(n_out + T), false);
        auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
        const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(3 * T), 1.0f);
        std::vector<float> want(static_cast<size_t>(T * n_out));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t j = 0; j < n_out; ++j)
            want[t * n_out + j] = cpu::quant_dot_ref(type, view.row(j), x.data() + t * n_in, n_in);
        std::vector<uint8_t> packed(cpu::packed_bytes(view));
        cpu::pack(pool, view, packed.data());
        view.packed = packed.data();
        for (cpu::Isa isa : isas) {
          std::vector<float> y(want.size(), -7.0f);
          cpu::matmul(pool, x.data(), T, view, y.data(), isa);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_TRUE(same_bits(y[i], want[i])) << cpu::isa_name(isa) << " output " << i << ": " << y[i] << " vs " << want[i];
        }
      }
}

// A slice starting on a group keeps the packed copy, one starting inside a group drops it; the
// rows' values are the same either way.
TEST(Packed, SlicesGiveTheSameRows) {
  if (integer_isas().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  cpu::ThreadPool pool(2);
  const int64_t n_in = 512, n_out = 70, T = 5;
  for (DType type : {DType::Q4_K, DType::Q8_0}) {
    const std::vector<uint8_t> bytes = weight_bytes(type, n_in, n_out, 5, false);
    auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
    std::vector<uint8_t> packed(cpu::packed_bytes(view));
    cpu::pack(pool, view, packed.data());
    view.packed = packed.data();
    const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), 9, 1.0f);
    std::vector<float> full(static_cast<size_t>(T * n_out));
    cpu::matmul(pool, x.data(), T, view, full.data());
    for (auto [r0, n] : {std::pair<int64_t, int64_t>{16, 40}, {32, 38}, {3, 20}, {17, 53}}) {
      const cpu::MatrixView s = view.rows(r0, n);
      EXPECT_EQ(s.packed != nullptr, r0 % 16 == 0) << r0;
      std::vector<float> part(static_cast<size_t>(T * n));
      cpu::matmul(pool, x.data(), T, s, part.data());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_TRUE(same_bits(part[t * n + j], full[t * n_out + r0 + j])) << "r0=" << r0 << " t=" << t << " j=" << j;
    }
  }
}

// The CPU backend packs the matrices it makes resident, once per host address, and the packed
// product equals the one over the file's rows.
TEST(Packed, CpuBackendPacksResidentWeights) {
  if (integer_isas().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  auto backend = specmoe::core::make_backend(specmoe::Device{}, 2);
  const int64_t n_in = 256, n_out = 40, T = 3;
  const std::vector<uint8_t> q6 = weight_bytes(DType::Q6_K, n_in, n_out, 3, false);
  const auto host = cpu::MatrixView::make(DType::Q6_K, q6.data(), n_in, n_out);
  const cpu::MatrixView r1 = backend->resident(host), r2 = backend->resident(host);
  ASSERT_NE(r1.packed, nullptr);
  EXPECT_EQ(r1.packed, r2.packed);  // a tied head shares the embedding's copy
  EXPECT_EQ(r1.data, host.data);    // get_rows still reads the file's rows
  const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), 4, 1.0f);
  std::vector<float> a(static_cast<size_t>(T * n_out)), b(a.size());
  backend->matmul(x.data(), T, r1, a.data());
  cpu::ThreadPool pool(1);
  cpu::matmul(pool, x.data(), T, host, b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  // Float weights get a packed copy too; types without packed kernels do not.
  const std::vector<float> f = random_vec(static_cast<size_t>(n_in * 4), 1, 1.0f);
  EXPECT_NE(backend->resident(cpu::MatrixView::make(DType::F32, f.data(), n_in, 4)).packed, nullptr);
  const std::vector<uint8_t> q3 = weight_bytes(DType::Q3_K, n_in, 4, 2, false);
  EXPECT_EQ(backend->resident(cpu::MatrixView::make(DType::Q3_K, q3.data(), n_in, 4)).packed, nullptr);
}

// Float weights: the packed kernels keep the row-major kernel's summation order, so a view with a
// packed copy gives the bits of one without (every tail length n_in % 8, every token group, rows
// longer than one block of 256, and batches from the staging size on, whose F16 / BF16 blocks
// are converted to F32 first).
TEST(Packed, FloatKernelsMatchTheRowMajorOnesBitForBit) {
  const std::vector<cpu::Isa> isas = integer_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  cpu::ThreadPool pool(2);
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (int64_t n_in : {1, 3, 8, 17, 33, 257, 777})  // 777: blocks of 256 elements and a tail
      for (int64_t n_out : {1, 15, 17, 33})
        for (int64_t T : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17, 64, 71}) {
          SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << " n_in=" << n_in << " n_out=" << n_out
                                          << " T=" << T);
          const std::vector<float> values = random_vec(static_cast<size_t>(n_in * n_out), 21, 0.5f);
          const size_t rb = specmoe::dtype_row_bytes(type, n_in);
          std::vector<uint8_t> bytes(rb * n_out);
          for (int64_t j = 0; j < n_out; ++j) cpu::quantize_row(type, values.data() + j * n_in, bytes.data() + j * rb, n_in);
          auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
          std::vector<uint8_t> packed(cpu::packed_bytes(view));
          cpu::pack(pool, view, packed.data());
          const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(T), 1.0f);
          for (cpu::Isa isa : isas) {
            std::vector<float> want(static_cast<size_t>(T * n_out), -7.0f), got(want.size(), -9.0f);
            view.packed = nullptr;
            cpu::matmul(pool, x.data(), T, view, want.data(), isa);
            view.packed = packed.data();
            cpu::matmul(pool, x.data(), T, view, got.data(), isa);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << cpu::isa_name(isa);
          }
        }
}

// The activation blocks every integer kernel reads (kernels/cpu/simd_avx2.h): the codes are
// ggml's Q8_0 / Q8_1 (blocks of 32) and Q8_K (blocks of 256) codes, round(x * 127 / amax) to
// nearest even, and every sum the kernels' offset and min terms use equals the sum of those
// codes, recomputed here one code at a time.
TEST(ActivationBlocks, CodesAndSumsAreGgmlsQ8Blocks) {
  if (cpu::best_isa() == cpu::Isa::Scalar) GTEST_SKIP() << "the activation blocks are made with AVX2";
  const int64_t n = 1024;
  std::vector<float> x = random_vec(static_cast<size_t>(n), 11, 3.0f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = 0.0f;  // an all-zero block
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(96 + i)] = static_cast<float>(i - 16) * 0.25f;  // ties at .5
  x[300] = -40.0f;  // a block whose largest magnitude is negative
  for (DType type : {DType::Q4_1, DType::Q4_K}) {
    const int64_t block = type == DType::Q4_1 ? 32 : 256;
    std::vector<uint8_t> buf(cpu::avx2::act_row_bytes(type, n) + 64);
    uint8_t* a = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
    cpu::avx2::quantize_acts(type, x.data(), n, a);
    for (int64_t b = 0; b < n / block; ++b) {
      const float* xb = x.data() + b * block;
      float amax = 0.0f;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      std::vector<int> q(static_cast<size_t>(block));
      for (int64_t i = 0; i < block; ++i) q[static_cast<size_t>(i)] = static_cast<int>(std::nearbyint(xb[i] * id));
      auto sum = [&](int64_t from, int64_t count) {
        int s = 0;
        for (int64_t i = from; i < from + count; ++i) s += q[static_cast<size_t>(i)];
        return s;
      };
      if (block == 32) {
        const auto& ab = reinterpret_cast<const cpu::avx2::ActQ8x32*>(a)[b];
        for (int i = 0; i < 32; ++i) ASSERT_EQ(ab.qs[i], q[static_cast<size_t>(i)]) << "block " << b << " code " << i;
        EXPECT_EQ(ab.sum, sum(0, 32)) << "block " << b;
        const float d32 = amax / 127.0f;
        EXPECT_EQ(ab.d, specmoe::fp16_to_fp32(specmoe::fp32_to_fp16(d32))) << "block " << b;
        EXPECT_EQ(ab.s, specmoe::fp16_to_fp32(specmoe::fp32_to_fp16(d32 * static_cast<float>(sum(0, 32))))) << "block " << b;
      } else {
        const auto& ab = reinterpret_cast<const cpu::avx2::ActQ8x256*>(a)[b];
        for (int i = 0; i < 256; ++i) ASSERT_EQ(ab.qs[i], q[static_cast<size_t>(i)]) << "block " << b << " code " << i;
        for (int k = 0; k < 16; ++k) EXPECT_EQ(ab.bsums[k], sum(16 * k, 16)) << "block " << b << " half " << k;
        for (int j = 0; j < 8; ++j) EXPECT_EQ(ab.bsums32[j], sum(32 * j, 32)) << "block " << b << " sub-block " << j;
        EXPECT_EQ(ab.d, amax > 0.0f ? 1.0f / id : 0.0f) << "block " << b;
      }
    }
  }
}
