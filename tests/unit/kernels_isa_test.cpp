// The instruction-set paths of the CPU kernels agree bit for bit: the AVX-512 + VNNI kernels
// reproduce the AVX2 ones exactly (kernels/cpu/simd_avx512.h), so a model gives the same tokens,
// logits and goldens on an AVX2 machine and on an AVX-512 one. Every weight dtype, awkward token
// counts (every remainder of the 8-token groups and of the 64-token tiles) and row counts, codes
// from quantized floats and from random bytes (every code value, the integer kernels' extreme
// pair sums). Skipped where the CPU has no AVX-512 VNNI; the op harness (test_backend_ops) checks
// the same kernels against the references through the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

namespace cpu = specmoe::kernels::cpu;
using specmoe::DType;

namespace {

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,   DType::Q4_1,
                        DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                        DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::MXFP4};

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weight rows of `type`: quantized from N(0, 0.5^2) floats, or (raw) random bytes with every fp16
// scale field set to a sane value, so every code value occurs.
std::vector<uint8_t> weight_bytes(DType type, int64_t n_in, int64_t n_out, uint32_t seed, bool raw) {
  const size_t rb = specmoe::dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(rb * n_out);
  if (!raw) {
    const std::vector<float> w = random_vec(static_cast<size_t>(n_in * n_out), seed, 0.5f);
    for (int64_t j = 0; j < n_out; ++j) cpu::quantize_row(type, w.data() + j * n_in, bytes.data() + j * rb, n_in);
    return bytes;
  }
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  // Re-quantize a random float row's scale fields in: quantize_row writes a valid block; keeping
  // its scale bytes and randomizing the rest gives valid scales with arbitrary codes.
  std::vector<uint8_t> valid(rb);
  const std::vector<float> w = random_vec(static_cast<size_t>(n_in), seed + 1, 0.5f);
  cpu::quantize_row(type, w.data(), valid.data(), n_in);
  const auto& info = specmoe::dtype_info(type);
  std::vector<size_t> halves;  // byte offsets of the fp16 fields inside a block
  switch (type) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: halves = {0}; break;
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: halves = {0, 2}; break;
    case DType::Q6_K: halves = {208}; break;
    case DType::Q2_K: halves = {80, 82}; break;
    case DType::Q3_K: halves = {108}; break;
    case DType::MXFP4:  // one E8M0 scale byte per block, copied from the valid row
      for (size_t blk = 0; blk < bytes.size() / info.block_bytes; ++blk) bytes[blk * info.block_bytes] = valid[0];
      return bytes;
    default: return weight_bytes(type, n_in, n_out, seed, false);  // float types: no codes
  }
  for (size_t blk = 0; blk < bytes.size() / info.block_bytes; ++blk)
    for (size_t off : halves) std::memcpy(&bytes[blk * info.block_bytes + off], &valid[off], 2);
  return bytes;
}

// Every weight dtype on `isa` against AVX2, bit for bit.
void expect_same_as_avx2(cpu::Isa isa) {
  cpu::ThreadPool pool(2);
  for (DType type : kTypes) {
    const int64_t block = specmoe::dtype_info(type).block_size;
    const std::vector<int64_t> n_ins = block == 1 ? std::vector<int64_t>{17, 256} : std::vector<int64_t>{block, 3 * block};
    for (bool raw : {false, true})
      for (int64_t n_in : n_ins)
        for (int64_t n_out : {1, 3, 17, 67})
          for (int64_t T : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 33, 64, 65, 70}) {
            SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << (raw ? " raw" : "") << " n_in=" << n_in
                                            << " n_out=" << n_out << " T=" << T << " " << cpu::isa_name(isa));
            const std::vector<uint8_t> bytes = weight_bytes(type, n_in, n_out, static_cast<uint32_t>(n_in + n_out), raw);
            const auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
            const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(T), 1.0f);
            std::vector<float> y2(T * n_out, NAN), y5(T * n_out, NAN);
            cpu::matmul(pool, x.data(), T, view, y2.data(), cpu::Isa::Avx2);
            cpu::matmul(pool, x.data(), T, view, y5.data(), isa);
            bool nonzero = false;
            for (float v : y2) nonzero = nonzero || v != 0.0f;
            ASSERT_TRUE(nonzero);
            ASSERT_EQ(std::memcmp(y2.data(), y5.data(), y2.size() * sizeof(float)), 0);
          }
  }
}

}  // namespace

TEST(KernelIsa, Avx512MatchesAvx2BitForBit) {
  if (cpu::usable_isa(cpu::Isa::Avx512) != cpu::Isa::Avx512) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expect_same_as_avx2(cpu::Isa::Avx512);
}

// The AMX tile kernels (integer types, 2+ tokens; the rest of the path is AVX-512).
TEST(KernelIsa, AmxMatchesAvx2BitForBit) {
  if (cpu::usable_isa(cpu::Isa::Amx) != cpu::Isa::Amx) GTEST_SKIP() << "no AMX-INT8 on this CPU (or not granted by the OS)";
  expect_same_as_avx2(cpu::Isa::Amx);
}

// The row-major 256-element types take 16-row tiles from a few tokens on (matmul_tiles.h) and go
// row by row below that and for one token: every token of a batch gets the bits it gets alone, on
// each instruction set, for tiles with a tail of rows (17, 67) and of tokens.
TEST(KernelIsa, RowMajorBatchGivesEachTokensOwnBits) {
  cpu::ThreadPool pool(2);
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (cpu::usable_isa(isa) != isa) continue;
    for (DType type : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS})
      for (bool raw : {false, true})
        for (int64_t n_out : {17, 67})
          for (int64_t T : {6, 9, 17, 33}) {
            SCOPED_TRACE(testing::Message() << specmoe::dtype_name(type) << (raw ? " raw" : "") << " n_out=" << n_out
                                            << " T=" << T << " " << cpu::isa_name(isa));
            const int64_t n_in = 512;
            const std::vector<uint8_t> bytes = weight_bytes(type, n_in, n_out, static_cast<uint32_t>(n_out), raw);
            const auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
            const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(T), 1.0f);
            std::vector<float> y(T * n_out, NAN), one(n_out, NAN);
            cpu::matmul(pool, x.data(), T, view, y.data(), isa);
            for (int64_t t = 0; t < T; ++t) {
              cpu::matmul(pool, x.data() + t * n_in, 1, view, one.data(), isa);
              ASSERT_EQ(std::memcmp(one.data(), y.data() + t * n_out, n_out * sizeof(float)), 0) << "token " << t;
            }
          }
  }
}

// Attention over f16 keys and values (the default cache): the AVX-512 head-group kernels against
// the AVX2 ones, bit for bit, for GQA groups of 1..8 heads, head dimensions with every tail of the
// 16- and 8-element steps, causal and tree masks, and visible rows in whole score blocks (3 to 8
// rows, by group size) and with a tail, value columns in passes of 3 to 8 blocks of 16 and without.
TEST(KernelIsa, Avx512AttentionMatchesAvx2BitForBit) {
  if (cpu::usable_isa(cpu::Isa::Avx512) < cpu::Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  cpu::ThreadPool pool(2);
  struct Case {
    int n_head, n_head_kv, head_dim, n_past, T;
  };
  for (const Case c : {Case{6, 1, 128, 40, 5}, Case{12, 2, 128, 133, 9}, Case{8, 1, 64, 7, 3}, Case{3, 3, 24, 19, 4},
                       Case{8, 1, 256, 21, 3}, Case{2, 2, 16, 8, 1}, Case{5, 1, 96, 16, 1},
                       Case{14, 2, 17, 5, 6}, Case{4, 1, 40, 0, 7}, Case{16, 1, 32, 12, 2}, Case{6, 3, 64, 30, 4},
                       Case{9, 3, 48, 25, 5}, Case{8, 2, 80, 11, 3}, Case{7, 1, 512, 9, 2}})
    for (bool tree : {false, true}) {
      SCOPED_TRACE(testing::Message() << c.n_head << "/" << c.n_head_kv << " d=" << c.head_dim << " past=" << c.n_past
                                      << " T=" << c.T << (tree ? " tree" : ""));
      const int64_t kvd = int64_t{c.n_head_kv} * c.head_dim, rows = c.n_past + c.T;
      const std::vector<float> q = random_vec(static_cast<size_t>(c.T * c.n_head * c.head_dim), 31, 1.0f);
      const std::vector<float> kf = random_vec(static_cast<size_t>(rows * kvd), 32, 1.0f);
      const std::vector<float> vf = random_vec(static_cast<size_t>(rows * kvd), 33, 1.0f);
      std::vector<uint8_t> k(specmoe::dtype_row_bytes(DType::F16, kvd) * rows), v(k.size());
      for (int64_t r = 0; r < rows; ++r) {
        cpu::quantize_row(DType::F16, kf.data() + r * kvd, k.data() + r * kvd * 2, kvd);
        cpu::quantize_row(DType::F16, vf.data() + r * kvd, v.data() + r * kvd * 2, kvd);
      }
      cpu::KVView kv;
      kv.k = k.data();
      kv.v = v.data();
      kv.k_row_bytes = kv.v_row_bytes = static_cast<size_t>(kvd) * 2;
      kv.n_past = c.n_past;
      kv.k_type = kv.v_type = DType::F16;
      std::vector<uint8_t> allowed;
      if (tree) {  // token i sees itself and every even j < i
        allowed.assign(static_cast<size_t>(c.T * c.T), 0);
        for (int i = 0; i < c.T; ++i)
          for (int j = 0; j <= i; ++j) allowed[i * c.T + j] = (j == i || j % 2 == 0);
      }
      const cpu::AttentionParams p{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      std::vector<float> o2(q.size(), NAN), o5(q.size(), NAN);
      cpu::attention(pool, q.data(), c.T, kv, tree ? allowed.data() : nullptr, p, o2.data(), cpu::Isa::Avx2);
      cpu::attention(pool, q.data(), c.T, kv, tree ? allowed.data() : nullptr, p, o5.data(), cpu::Isa::Avx512);
      bool nonzero = false;
      for (float x : o2) nonzero = nonzero || x != 0.0f;
      ASSERT_TRUE(nonzero);
      ASSERT_EQ(std::memcmp(o2.data(), o5.data(), o2.size() * sizeof(float)), 0);
    }
}

TEST(KernelIsa, BestIsaIsUsable) {
  const cpu::Isa best = cpu::best_isa();
  EXPECT_EQ(cpu::usable_isa(best), best);
  EXPECT_STRNE(cpu::isa_name(best), "");
  EXPECT_EQ(cpu::usable_isa(cpu::Isa::Scalar), cpu::Isa::Scalar);
}
