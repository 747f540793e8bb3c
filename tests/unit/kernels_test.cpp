// CPU kernels: the thread pool; the matmul and attention fast paths against the scalar reference
// with per-element bounds (the portable Scalar path included), determinism across thread counts
// and batch sizes; the references of norms, RoPE and activations against their definitions, the
// column scatter and its argument checks, and a few hand-computed values. The op harness (tests/unit/backend_ops_test.cpp) judges every fast
// path through the CPU backend against these references as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

namespace cpu = specmoe::kernels::cpu;
using specmoe::DType;

namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

bool any_nonzero(const std::vector<float>& v) {
  for (float x : v)
    if (x != 0.0f) return true;
  return false;
}

// A weight matrix quantized from random floats, with its bytes kept alive.
struct TestMatrix {
  std::vector<float> values;  // [n_out, n_in] the float weights before quantization
  std::vector<uint8_t> bytes;
  cpu::MatrixView view;
};

TestMatrix make_matrix(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  TestMatrix m;
  m.values = random_vec(static_cast<size_t>(n_in * n_out), seed, 0.5f);
  const size_t rb = specmoe::dtype_row_bytes(type, n_in);
  m.bytes.resize(rb * n_out);
  for (int64_t j = 0; j < n_out; ++j) cpu::quantize_row(type, m.values.data() + j * n_in, m.bytes.data() + j * rb, n_in);
  m.view = cpu::MatrixView::make(type, m.bytes.data(), n_in, n_out);
  return m;
}

// Bound on the difference between two float summations of the same n products in different
// orders: each partial sum is rounded at most n times, so |a - b| <= 2 n eps sum|x_i w_i|.
// (Wilkinson's bound for recursive summation, applied to both orders.)
float sum_order_tolerance(const float* x, const std::vector<float>& w_row, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(x[i]) * w_row[i]);
  return static_cast<float>(2.0 * (n + 1) * FLT_EPSILON * s) + 1e-30f;
}

// The AVX2 path multiplies block-quantized weights with 8-bit activations (llama.cpp's scheme):
// token x is quantized per block of B elements (32 for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL, 256 for
// the K-quants and IQ4_XS) as
// q = round(x / d), d = amax / 127, so |x - d q| <= d / 2 per element. Returns B, or 0 for the
// types and paths that multiply in float.
int64_t act_block(DType type, cpu::Isa isa) {
  if (cpu::usable_isa(isa) == cpu::Isa::Scalar) return 0;
  switch (type) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL:
    case DType::MXFP4:
      return 32;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS:
      return 256;
    default: return 0;
  }
}

// Tolerance of one output against matmul_ref: the float summation-order bound, plus (where the
// activations are quantized) the exact bound on what activation rounding can change,
// sum over blocks of d_B / 2 * sum_{i in B} |w_i|; the 1.01 and the doubled order bound cover
// the float rounding of d, 1/d and the block scales. Blocks of 32 store d rounded to fp16 (and
// Q4_1/Q5_1 the fp16 s = d * sum(q), times the block's min), as llama.cpp's block_q8_0/q8_1 do:
// a relative error of at most 2^-11 on d * sum |q_i w_i| <= amax * sum |w_i| and on
// |m| * d * |sum q| <= max |w_i| * amax * 32.
float matmul_tolerance(DType type, cpu::Isa isa, const float* x, const std::vector<float>& w_row, int64_t n) {
  const float order = sum_order_tolerance(x, w_row, n);
  const int64_t B = act_block(type, isa);
  if (B == 0) return order;
  double act = 0.0;
  for (int64_t b = 0; b < n; b += B) {
    double amax = 0.0, wsum = 0.0, wmax = 0.0;
    for (int64_t i = b; i < b + B; ++i) {
      amax = std::max(amax, static_cast<double>(std::fabs(x[i])));
      wsum += std::fabs(w_row[i]);
      wmax = std::max(wmax, static_cast<double>(std::fabs(w_row[i])));
    }
    act += amax / 127.0 / 2.0 * wsum;
    if (B == 32) act += std::ldexp(1.0, -11) * amax * (wsum + 32.0 * wmax);
  }
  return static_cast<float>(1.01 * act) + 2.0f * order;
}

struct DtypeCase {
  DType type;
  int64_t block;        // n_in must be a multiple of it
  double max_nmse;      // quantization error of y vs the float weights' product, normalized MSE
};

// Normalized MSE budget per type (weights ~ N(0, 0.5^2), x ~ N(0, 1)): round-off for F32; half
// precision has 11 (F16) / 8 (BF16) significant bits, relative error^2 ~ 2^-22 / 2^-16; block
// quantizers with b bits have a step of about range/2^b, error variance step^2/12 relative to
// a weight variance of (range/4.4)^2, i.e. ~1.6/4^b: 8 bits 2.5e-5, 6 bits 4e-4, 5 bits 1.6e-3,
// 4 bits 6e-3. Budgets are 2-5x those estimates (K-quant scales are 6-bit and the scale search
// is simple), and still far below what a wrong layout gives (nMSE ~ 1). On AVX2 the quantized
// types also round the activations to 8 bits per block (~3e-5 for x ~ N(0, 1) in blocks of 32,
// ~5e-5 in blocks of 256), which the budgets absorb (Q8_0 measured 5.7e-5 of its 1e-4).
const DtypeCase kDtypes[] = {
    {DType::F32, 1, 1e-10},  {DType::F16, 1, 2e-6},    {DType::BF16, 1, 5e-5},
    {DType::Q8_0, 32, 1e-4}, {DType::Q4_0, 32, 2.5e-2}, {DType::Q4_1, 32, 2.5e-2},
    {DType::Q4_K, 256, 2.5e-2}, {DType::Q5_K, 256, 8e-3}, {DType::Q6_K, 256, 2e-3},
    {DType::Q5_0, 32, 8e-3},    {DType::Q5_1, 32, 8e-3},   {DType::IQ4_NL, 32, 2.5e-2},
    {DType::Q2_K, 256, 0.25},   {DType::Q3_K, 256, 8e-2},  {DType::IQ4_XS, 256, 2.5e-2},
    {DType::MXFP4, 32, 6e-2},  // E2M1 codes under a power-of-two scale: the coarsest 4-bit grid
};

}  // namespace

// ------------------------------------------------------------------------------------------
// Thread pool

TEST(ThreadPool, CoversEveryItemOnce) {
  for (int threads : {1, 2, 3, 5}) {
    cpu::ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {1, 3, 17, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

// Many back-to-back small jobs (the forward's pattern): workers that wake late or join the
// next job must neither lose nor repeat an item. Also the std::function overload.
TEST(ThreadPool, ManySmallJobsBackToBack) {
  for (int threads : {2, 3}) {
    cpu::ThreadPool pool(threads);
    std::vector<int64_t> hits(64);
    for (int job = 0; job < 5000; ++job) {
      const int64_t n = 1 + job % 64;
      pool.parallel_for(n, 1 + job % 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;  // items are disjoint: no race
      });
    }
    int64_t total = 0;
    for (int64_t h : hits) total += h;
    int64_t expected = 0;
    for (int job = 0; job < 5000; ++job) expected += 1 + job % 64;
    EXPECT_EQ(total, expected);
    EXPECT_EQ(hits[0], 5000);
    std::atomic<int64_t> sum{0};
    const std::function<void(int64_t, int64_t)> f = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    };
    pool.parallel_for(1000, 10, f);
    EXPECT_EQ(sum.load(), 499500);
  }
}

TEST(ThreadPool, RethrowsAndStaysUsable) {
  cpu::ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(100, 1, [](int64_t b, int64_t) {
    if (b == 57) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, NestedCallRunsSerially) {
  cpu::ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.parallel_for(4, 1, [&](int64_t, int64_t) {
    pool.parallel_for(5, 1, [&](int64_t b, int64_t e) { count += static_cast<int>(e - b); });
  });
  EXPECT_EQ(count.load(), 20);
}

// ------------------------------------------------------------------------------------------
// Matmul

TEST(Matmul, FastPathsMatchReferenceForEveryDtype) {
  cpu::ThreadPool pool(3);
  for (const DtypeCase& dc : kDtypes) {
    std::vector<int64_t> n_ins;
    if (dc.block == 1)
      n_ins = {1, 3, 17, 33, 257};
    else
      n_ins = {dc.block, 3 * dc.block};
    for (int64_t n_in : n_ins)
      for (int64_t n_out : {1, 3, 17, 33})
        for (int64_t T : {1, 3, 8, 16, 17}) {
          SCOPED_TRACE(testing::Message() << specmoe::dtype_name(dc.type) << " n_in=" << n_in << " n_out=" << n_out
                                          << " T=" << T);
          TestMatrix m = make_matrix(dc.type, n_in, n_out, static_cast<uint32_t>(n_in * 131 + n_out));
          const std::vector<float> x = random_vec(static_cast<size_t>(T * n_in), static_cast<uint32_t>(T + 7));
          std::vector<float> y_ref(T * n_out), y_fast(T * n_out, NAN), y_scalar(T * n_out, NAN);
          cpu::matmul_ref(x.data(), T, m.view, y_ref.data());
          cpu::matmul(pool, x.data(), T, m.view, y_fast.data());
          cpu::matmul(pool, x.data(), T, m.view, y_scalar.data(), cpu::Isa::Scalar);
          ASSERT_TRUE(any_nonzero(y_ref));
          // Dequantized weights (for the per-element tolerance, which uses |w|).
          std::vector<float> w_deq(n_in);
          for (int64_t j = 0; j < n_out; ++j) {
            cpu::dequantize_row(dc.type, m.view.row(j), w_deq.data(), n_in);
            for (int64_t t = 0; t < T; ++t) {
              const float* xt = x.data() + t * n_in;
              const float tol_fast = matmul_tolerance(dc.type, cpu::best_isa(), xt, w_deq, n_in);
              const float tol_scalar = matmul_tolerance(dc.type, cpu::Isa::Scalar, xt, w_deq, n_in);
              const float r = y_ref[t * n_out + j];
              ASSERT_NEAR(y_fast[t * n_out + j], r, tol_fast) << "j=" << j << " t=" << t;
              ASSERT_NEAR(y_scalar[t * n_out + j], r, tol_scalar) << "j=" << j << " t=" << t;
            }
          }
        }
  }
}

// The product with quantized weights stays close to the product with the original float
// weights (normalized MSE over 64 x 16 = 1024 outputs, so one near-zero output cannot dominate).
TEST(Matmul, QuantizedProductCloseToFloatProduct) {
  cpu::ThreadPool pool(2);
  for (const DtypeCase& dc : kDtypes) {
    SCOPED_TRACE(specmoe::dtype_name(dc.type));
    const int64_t n_in = std::max<int64_t>(256, dc.block), n_out = 64, T = 16;
    TestMatrix m = make_matrix(dc.type, n_in, n_out, 7);
    const std::vector<float> x = random_vec(T * n_in, 8);
    std::vector<float> y(T * n_out);
    cpu::matmul(pool, x.data(), T, m.view, y.data());
    double err = 0.0, energy = 0.0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < n_out; ++j) {
        double exact = 0.0;
        for (int64_t i = 0; i < n_in; ++i) exact += static_cast<double>(x[t * n_in + i]) * m.values[j * n_in + i];
        err += (y[t * n_out + j] - exact) * (y[t * n_out + j] - exact);
        energy += exact * exact;
      }
    const double nmse = err / energy;
    EXPECT_LE(nmse, dc.max_nmse);
    std::printf("%-5s nMSE %.3g (budget %.3g)\n", specmoe::dtype_name(dc.type), nmse, dc.max_nmse);
  }
}

TEST(Matmul, BitIdenticalAcrossThreadCountsAndBatchSizes) {
  for (const DtypeCase& dc : kDtypes) {
    SCOPED_TRACE(specmoe::dtype_name(dc.type));
    const int64_t n_in = dc.block == 1 ? 257 : 2 * dc.block, n_out = 67, T = 11;
    TestMatrix m = make_matrix(dc.type, n_in, n_out, 99);
    const std::vector<float> x = random_vec(T * n_in, 5);
    std::vector<std::vector<float>> ys;
    for (int threads : {1, 2, 3}) {
      cpu::ThreadPool pool(threads);
      ys.emplace_back(T * n_out);
      cpu::matmul(pool, x.data(), T, m.view, ys.back().data());
    }
    ASSERT_TRUE(any_nonzero(ys[0]));
    EXPECT_EQ(std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4), 0);
    EXPECT_EQ(std::memcmp(ys[0].data(), ys[2].data(), ys[0].size() * 4), 0);
    // Token t alone gives exactly its row of the batched result.
    cpu::ThreadPool pool(2);
    std::vector<float> y1(n_out);
    for (int64_t t = 0; t < T; ++t) {
      cpu::matmul(pool, x.data() + t * n_in, 1, m.view, y1.data());
      ASSERT_EQ(std::memcmp(y1.data(), ys[0].data() + t * n_out, n_out * 4), 0) << "t=" << t;
    }
  }
}

// Prefill-sized batches (T > 16 takes tokens in tiles) and every remainder of the 4-token and
// 2/4-row register blocks: each token's outputs equal its one-token call bit for bit.
TEST(Matmul, LongBatchesMatchOneTokenCalls) {
  cpu::ThreadPool pool(2);
  for (DType type : {DType::F16, DType::BF16, DType::F32, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q5_0,
                     DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::MXFP4}) {
    SCOPED_TRACE(specmoe::dtype_name(type));
    const int64_t block = specmoe::dtype_info(type).block_size;
    const int64_t n_in = block == 1 ? 67 : block, n_out = 37, T = 37;
    TestMatrix m = make_matrix(type, n_in, n_out, 3);
    const std::vector<float> x = random_vec(T * n_in, 11);
    std::vector<float> y(T * n_out), y1(n_out);
    cpu::matmul(pool, x.data(), T, m.view, y.data());
    ASSERT_TRUE(any_nonzero(y));
    for (int64_t t = 0; t < T; ++t) {
      cpu::matmul(pool, x.data() + t * n_in, 1, m.view, y1.data());
      ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * n_out, n_out * 4), 0) << "t=" << t;
    }
  }
}

// Weight rows of random bytes (every code value, including Q8_0's -128 and all-ones nibbles)
// with sane scale fields, against activations of +-1 (every activation code is +-127): the
// integer kernels' pair sums are at their largest here, so a saturating maddubs would show.
TEST(Matmul, ExtremeCodesMatchReference) {
  cpu::ThreadPool pool(1);
  struct HalfField { DType type; std::vector<size_t> offsets; };  // fp16 fields inside a block
  const HalfField cases[] = {{DType::Q8_0, {0}}, {DType::Q4_0, {0}},    {DType::Q4_1, {0, 2}},
                             {DType::Q4_K, {0, 2}}, {DType::Q5_K, {0, 2}}, {DType::Q6_K, {208}},
                             {DType::Q5_0, {0}},    {DType::Q5_1, {0, 2}},    {DType::IQ4_NL, {0}},
                             {DType::Q2_K, {80, 82}}, {DType::Q3_K, {108}},  {DType::IQ4_XS, {0}}};
  std::mt19937 rng(17);
  for (const HalfField& c : cases) {
    SCOPED_TRACE(specmoe::dtype_name(c.type));
    const auto& info = specmoe::dtype_info(c.type);
    const int64_t n_in = 2 * info.block_size, n_out = 5, T = 3;
    const size_t rb = specmoe::dtype_row_bytes(c.type, n_in);
    std::vector<uint8_t> bytes(rb * n_out);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scale(0.01f, 0.1f);
    for (size_t blk = 0; blk < bytes.size() / info.block_bytes; ++blk)
      for (size_t off : c.offsets) {
        const uint16_t h = specmoe::fp32_to_fp16(scale(rng));
        std::memcpy(&bytes[blk * info.block_bytes + off], &h, 2);
      }
    const auto view = cpu::MatrixView::make(c.type, bytes.data(), n_in, n_out);
    std::vector<float> x(T * n_in);
    for (auto& v : x) v = (rng() & 1) ? 1.0f : -1.0f;
    std::vector<float> y_ref(T * n_out), y(T * n_out);
    cpu::matmul_ref(x.data(), T, view, y_ref.data());
    cpu::matmul(pool, x.data(), T, view, y.data());
    ASSERT_TRUE(any_nonzero(y_ref));
    std::vector<float> w_deq(n_in);
    for (int64_t j = 0; j < n_out; ++j) {
      cpu::dequantize_row(c.type, view.row(j), w_deq.data(), n_in);
      for (int64_t t = 0; t < T; ++t) {
        const float tol = matmul_tolerance(c.type, cpu::best_isa(), x.data() + t * n_in, w_deq, n_in);
        ASSERT_NEAR(y[t * n_out + j], y_ref[t * n_out + j], tol) << "j=" << j << " t=" << t;
      }
    }
  }
}

TEST(Matmul, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(cpu::MatrixView::make(DType::Q4_K, bytes.data(), 100, 1), specmoe::Error);
}

TEST(Dot, MatchesReference) {
  for (int64_t n : {1, 3, 17, 33, 257}) {
    const auto a = random_vec(n, 1), b = random_vec(n, 2);
    double exact = 0.0, abs_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      abs_sum += std::fabs(a[i] * b[i]);
    }
    const double tol = 2.0 * (n + 1) * FLT_EPSILON * abs_sum;  // summation-order bound
    EXPECT_NEAR(cpu::dot_f32(a.data(), b.data(), n), exact, tol) << n;
    EXPECT_NEAR(cpu::dot_f32(a.data(), b.data(), n, cpu::Isa::Scalar), exact, tol) << n;
  }
}

// ------------------------------------------------------------------------------------------
// Norms

// The fast paths against these references: tests/unit/backend_ops_test.cpp (the op harness).
// F16 rows as quantize_row writes them (the KV cache's, a model file's): the vector conversion
// (F16C where the CPU has AVX2) gives fp32_to_fp16's half for every input: a sample of all 2^32
// bit patterns, the halfway points of every exponent (ties to even, into subnormals and to Inf),
// NaNs with payloads, and every tail length.
TEST(Fp16, RowConversionMatchesTheScalarOne) {
  std::vector<float> x;
  auto push_bits = [&](uint32_t b) { x.push_back(std::bit_cast<float>(b)); };
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) push_bits(static_cast<uint32_t>(b));
  std::mt19937 rng(11);
  for (uint32_t e = 0; e < 256; ++e)
    for (int k = 0; k < 64; ++k)
      for (uint32_t low : {0x0fffu, 0x1000u, 0x1001u, 0u, 0x1fffu}) {
        const uint32_t b = (e << 23) | ((rng() << 13) & 0x7fffffu) | low;
        push_bits(b), push_bits(b | 0x80000000u);
      }
  for (uint32_t b : {0x7f800001u, 0x7fc00000u, 0xffbfffffu, 0x7f802000u, 0x477ff000u, 0x477fefffu, 0x33000000u,
                     0x33000001u, 0x387fe000u, 0x387ff000u})
    push_bits(b);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> row(static_cast<size_t>(2 * n));
  cpu::quantize_row(DType::F16, x.data(), row.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = static_cast<uint16_t>(row[2 * i] | (row[2 * i + 1] << 8));
    ASSERT_EQ(h, specmoe::fp32_to_fp16(x[i])) << "bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
  }
  for (int64_t len = 1; len <= 17; ++len) {
    std::vector<uint8_t> part(static_cast<size_t>(2 * len));
    cpu::quantize_row(DType::F16, x.data() + 5, part.data(), len);
    ASSERT_EQ(std::memcmp(part.data(), row.data() + 10, part.size()), 0) << len;
  }
}

TEST(Norms, RmsNormReferenceMatchesDefinition) {
  for (int64_t n : {1, 3, 17, 257})
    for (int64_t T : {1, 3, 8}) {
      const auto x = random_vec(T * n, 3), w = random_vec(n, 4);
      std::vector<float> ref(T * n);
      cpu::rms_norm_ref(x.data(), w.data(), ref.data(), T, n, 1e-5f);
      ASSERT_TRUE(any_nonzero(ref));
      for (int64_t t = 0; t < T; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[t * n + i]) * x[t * n + i];
        const double s = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(ref[t * n + i], x[t * n + i] * s * w[i], 1e-5 * (1 + std::fabs(x[t * n + i] * s * w[i])));
      }
    }
}

TEST(Norms, LayerNormReferenceMatchesDefinition) {
  for (int64_t n : {3, 17, 257})
    for (int64_t T : {1, 3}) {
      const auto x = random_vec(T * n, 5, 3.0f), w = random_vec(n, 6), b = random_vec(n, 7);
      std::vector<float> ref(T * n);
      cpu::layer_norm_ref(x.data(), w.data(), b.data(), ref.data(), T, n, 1e-5f);
      for (int64_t t = 0; t < T; ++t) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) mean += x[t * n + i];
        mean /= n;
        for (int64_t i = 0; i < n; ++i) var += (x[t * n + i] - mean) * (x[t * n + i] - mean);
        var /= n;
        for (int64_t i = 0; i < n; ++i) {
          const double want = (x[t * n + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
          ASSERT_NEAR(ref[t * n + i], want, 1e-5 * (1 + std::fabs(want)));
        }
      }
    }
}

// ------------------------------------------------------------------------------------------
// RoPE

// The fast path keeps each position's cos/sin table for the calls that follow: it must follow
// every parameter (bases alternating as local/global layers do, more sets than it keeps, factor
// values changed behind the same pointer, positions past its cached range) bit for bit.
TEST(Rope, CachedTablesFollowEveryParameterBitForBit) {
  cpu::ThreadPool pool(2);
  std::vector<float> factors = {1.0f, 1.5f, 2.0f, 4.0f};
  const std::vector<int32_t> pos = {0, 7, 70000, 300000, 3, 131071};
  const int64_t T = static_cast<int64_t>(pos.size());
  for (int round = 0; round < 3; ++round)
    for (float base : {10000.0f, 1000000.0f, 500.0f, 10000.0f, 77.0f, 1e4f, 3e5f, 1000000.0f}) {
      for (bool with_factors : {false, true}) {
        SCOPED_TRACE(testing::Message() << "round " << round << " base " << base << " factors " << with_factors);
        cpu::RopeParams p;
        p.n_head = 3;
        p.head_dim = 8;
        p.rope_dims = 8;
        p.freq_base = base;
        p.pairing = cpu::RopePairing::SplitHalves;
        p.freq_factors = with_factors ? factors.data() : nullptr;
        if (round == 2) p.attn_factor = 1.1f, p.ext_factor = 0.5f, p.corr_low = 1, p.corr_high = 3;
        const auto x = random_vec(T * 24, 40 + round);
        auto ref = x, fast = x;
        cpu::rope_ref(ref.data(), T, pos, p);
        cpu::rope(pool, fast.data(), T, pos, p);
        ASSERT_EQ(std::memcmp(ref.data(), fast.data(), ref.size() * 4), 0);
      }
      factors[1] += 0.25f;  // the same array, other values
    }
}

TEST(Rope, ReferencePairsAsSpecified) {
  for (auto pairing : {cpu::RopePairing::Adjacent, cpu::RopePairing::SplitHalves})
    for (int rope_dims : {8, 6}) {
      cpu::RopeParams p;
      p.n_head = 3;
      p.head_dim = 8;
      p.rope_dims = rope_dims;
      p.freq_base = 500.0f;
      p.freq_scale = 0.5f;
      p.pairing = pairing;
      const int64_t T = 4;
      const std::vector<int32_t> pos = {0, 1, 7, 300};
      const auto x = random_vec(T * 24, 11);
      auto ref = x;
      cpu::rope_ref(ref.data(), T, pos, p);
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < 3; ++h) {
          const float* in = x.data() + (t * 3 + h) * 8;
          const float* out = ref.data() + (t * 3 + h) * 8;
          const int half = rope_dims / 2;
          for (int i = 0; i < half; ++i) {
            const int a = pairing == cpu::RopePairing::Adjacent ? 2 * i : i;
            const int b = pairing == cpu::RopePairing::Adjacent ? 2 * i + 1 : i + half;
            const double theta = pos[t] * 0.5 * std::pow(500.0, -2.0 * i / rope_dims);
            EXPECT_NEAR(out[a], in[a] * std::cos(theta) - in[b] * std::sin(theta), 1e-5);
            EXPECT_NEAR(out[b], in[a] * std::sin(theta) + in[b] * std::cos(theta), 1e-5);
          }
          for (int i = rope_dims; i < 8; ++i) EXPECT_EQ(out[i], in[i]);  // not rotated
          if (pos[t] == 0) {
            for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], in[i]);  // angle 0
          }
        }
    }
}

TEST(Rope, FrequencyFactorsYarnAndMagnitudeFollowTheDefinition) {
  // Each pair i turns by theta = pos * base^(-2i/d) / f_i, scaled by 1/s where YaRN's ramp says
  // interpolate (i >= corr_high), kept where it says extrapolate (i <= corr_low), linearly mixed
  // in between; cos and sin times attn_factor. Written out in double, per pair.
  cpu::ThreadPool pool(2);
  for (auto pairing : {cpu::RopePairing::Adjacent, cpu::RopePairing::SplitHalves})
    for (bool yarn : {false, true}) {
      SCOPED_TRACE(testing::Message() << "split=" << (pairing == cpu::RopePairing::SplitHalves) << " yarn=" << yarn);
      const int d = 12, half = 6;
      const std::vector<float> factors = {1.0f, 1.0f, 1.7f, 3.1f, 8.0f, 8.0f};
      cpu::RopeParams p;
      p.n_head = 2;
      p.head_dim = 14;  // 2 dims past rope_dims stay as they are
      p.rope_dims = d;
      p.freq_base = 1000.0f;
      p.freq_scale = 0.25f;
      p.pairing = pairing;
      p.freq_factors = factors.data();
      p.attn_factor = 1.25f;
      if (yarn) {
        p.ext_factor = 1.0f;
        p.corr_low = 1.0f;
        p.corr_high = 4.0f;
      }
      const int64_t T = 3;
      const std::vector<int32_t> pos = {0, 5, 1000};
      const auto x = random_vec(T * 28, 12);
      auto ref = x, fast = x;
      cpu::rope_ref(ref.data(), T, pos, p);
      cpu::rope(pool, fast.data(), T, pos, p);
      EXPECT_EQ(std::memcmp(ref.data(), fast.data(), ref.size() * 4), 0);
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < 2; ++h) {
          const float* in = x.data() + (t * 2 + h) * 14;
          const float* out = ref.data() + (t * 2 + h) * 14;
          for (int i = 0; i < half; ++i) {
            const double extrap = pos[t] * std::pow(1000.0, -2.0 * i / d) / factors[i];
            const double interp = extrap * 0.25;
            const double keep = yarn ? 1.0 - std::clamp((i - 1.0) / 3.0, 0.0, 1.0) : 0.0;
            const double th = interp * (1 - keep) + extrap * keep;
            const int a = pairing == cpu::RopePairing::Adjacent ? 2 * i : i;
            const int b = pairing == cpu::RopePairing::Adjacent ? 2 * i + 1 : i + half;
            // |theta| up to ~1000 rad: float cos/sin of a double angle, 2e-5 relative.
            EXPECT_NEAR(out[a], 1.25 * (in[a] * std::cos(th) - in[b] * std::sin(th)), 2e-5) << i;
            EXPECT_NEAR(out[b], 1.25 * (in[a] * std::sin(th) + in[b] * std::cos(th)), 2e-5) << i;
          }
          for (int i = d; i < 14; ++i) EXPECT_EQ(out[i], in[i]);
        }
    }
}

TEST(Rope, RejectsOddRopeDims) {
  cpu::RopeParams p;
  p.n_head = 1;
  p.head_dim = 8;
  p.rope_dims = 5;
  std::vector<float> x(8);
  const std::vector<int32_t> pos = {0};
  EXPECT_THROW(cpu::rope_ref(x.data(), 1, pos, p), specmoe::Error);
}

// ------------------------------------------------------------------------------------------
// Attention

namespace {
struct AttnCase {
  int n_head, n_head_kv, head_dim;
  int64_t n_past, T;
};
}  // namespace

TEST(Attention, FastMatchesReferenceWithGqaAndMasks) {
  const AttnCase cases[] = {{1, 1, 1, 0, 1}, {4, 2, 3, 5, 3}, {8, 2, 17, 33, 8}, {6, 3, 33, 1, 16}, {2, 1, 64, 257, 1}};
  for (const auto& c : cases)
    for (bool custom : {false, true}) {
      SCOPED_TRACE(testing::Message() << c.n_head << "/" << c.n_head_kv << " d=" << c.head_dim << " past=" << c.n_past
                                      << " T=" << c.T << " custom=" << custom);
      const int64_t kvd = c.n_head_kv * c.head_dim, qd = c.n_head * c.head_dim, rows = c.n_past + c.T;
      const auto q = random_vec(c.T * qd, 21), k = random_vec(rows * kvd, 22), v = random_vec(rows * kvd, 23);
      std::vector<uint8_t> allowed;
      if (custom) {  // a tree: token i sees itself and every even j < i
        allowed.assign(c.T * c.T, 0);
        for (int64_t i = 0; i < c.T; ++i)
          for (int64_t j = 0; j <= i; ++j) allowed[i * c.T + j] = (j == i || j % 2 == 0);
      }
      const cpu::KVView kv = cpu::KVView::f32(k.data(), v.data(), kvd, c.n_past);
      cpu::AttentionParams p{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      std::vector<float> ref(c.T * qd), fast(c.T * qd);
      const uint8_t* mask = custom ? allowed.data() : nullptr;
      cpu::attention_ref(q.data(), c.T, kv, mask, p, ref.data());
      ASSERT_TRUE(any_nonzero(ref));
      // Outputs are convex combinations of values with |v| ~ 3 at most: summation-order
      // differences in scores and sums stay below 1e-5.
      std::vector<std::vector<float>> outs;
      for (int threads : {1, 2, 3}) {
        cpu::ThreadPool pool(threads);
        cpu::attention(pool, q.data(), c.T, kv, mask, p, fast.data());
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5) << i;
        outs.push_back(fast);
      }
      cpu::ThreadPool pool(2);
      cpu::attention(pool, q.data(), c.T, kv, mask, p, fast.data(), cpu::Isa::Scalar);  // portable path
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5) << i;
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0);
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * 4), 0);
    }
}

TEST(Attention, MaskedTokenIsInvisible) {
  // Two new tokens; token 1 may not see token 0: its output must equal attention over the cache
  // plus itself alone (its key/value moved to row n_past).
  const int n_head = 2, n_head_kv = 1, d = 4;
  const int64_t n_past = 3, kvd = n_head_kv * d;
  const auto q = random_vec(2 * n_head * d, 31), k = random_vec((n_past + 2) * kvd, 32),
             v = random_vec((n_past + 2) * kvd, 33);
  cpu::AttentionParams p{n_head, n_head_kv, d, 0.5f};
  const std::vector<uint8_t> allowed = {1, 0, 0, 1};
  std::vector<float> out(2 * n_head * d);
  cpu::ThreadPool pool(2);
  cpu::attention(pool, q.data(), 2, cpu::KVView::f32(k.data(), v.data(), kvd, n_past), allowed.data(), p, out.data());
  // Without token 0: copy the cache and token 1's row.
  std::vector<float> k2(k.begin(), k.begin() + n_past * kvd), v2(v.begin(), v.begin() + n_past * kvd);
  k2.insert(k2.end(), k.begin() + (n_past + 1) * kvd, k.end());
  v2.insert(v2.end(), v.begin() + (n_past + 1) * kvd, v.end());
  std::vector<float> alone(n_head * d);
  cpu::attention(pool, q.data() + n_head * d, 1, cpu::KVView::f32(k2.data(), v2.data(), kvd, n_past), nullptr, p,
                 alone.data());
  EXPECT_EQ(std::memcmp(alone.data(), out.data() + n_head * d, alone.size() * 4), 0);
}

TEST(Attention, SlidingWindowMatchesReferenceAndHidesFarKeys) {
  // Rows at positions that are not their indices (a tree: siblings share a position), a window
  // of 3 positions: the fast paths equal the reference for any thread count, and each token's
  // output equals attention over exactly the rows it may see, copied out as a cache of their own.
  const int n_head = 4, n_head_kv = 2, d = 17;
  const int64_t n_past = 6, T = 5, kvd = n_head_kv * d, qd = n_head * d, rows = n_past + T;
  const std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 9};  // new: 6, 7, 7', 8, 9
  const std::vector<uint8_t> tree = {1, 0, 0, 0, 0,   //
                                     1, 1, 0, 0, 0,   //
                                     1, 0, 1, 0, 0,   //
                                     1, 0, 1, 1, 0,   //
                                     1, 0, 1, 1, 1};
  const auto q = random_vec(T * qd, 71), k = random_vec(rows * kvd, 72), v = random_vec(rows * kvd, 73);
  const cpu::KVView kv = cpu::KVView::f32(k.data(), v.data(), kvd, n_past, positions.data());
  cpu::AttentionParams p{n_head, n_head_kv, d, 0.3f, 3};
  for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), tree.data()}) {
    std::vector<float> ref(T * qd), fast(T * qd);
    cpu::attention_ref(q.data(), T, kv, mask, p, ref.data());
    ASSERT_TRUE(any_nonzero(ref));
    for (int threads : {1, 3}) {
      cpu::ThreadPool pool(threads);
      cpu::attention(pool, q.data(), T, kv, mask, p, fast.data());
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5) << i;
    }
    for (int64_t i = 0; i < T; ++i) {
      std::vector<float> k2, v2;
      for (int64_t r = 0; r < rows; ++r) {
        const bool seen = r < n_past || (mask ? mask[i * T + (r - n_past)] != 0 : r - n_past <= i);
        if (!seen || positions[n_past + i] - positions[r] >= 3) continue;
        k2.insert(k2.end(), k.begin() + r * kvd, k.begin() + (r + 1) * kvd);
        v2.insert(v2.end(), v.begin() + r * kvd, v.begin() + (r + 1) * kvd);
      }
      ASSERT_LT(k2.size(), static_cast<size_t>((n_past + i + 1) * kvd));  // the window did hide rows
      std::vector<float> alone(qd);
      const int64_t n = static_cast<int64_t>(k2.size()) / kvd;
      cpu::AttentionParams plain{n_head, n_head_kv, d, 0.3f};
      // The visible rows as a cache of n - 1 rows plus the token itself as the one new row.
      cpu::attention_ref(q.data() + i * qd, 1, cpu::KVView::f32(k2.data(), v2.data(), kvd, n - 1), nullptr, plain,
                         alone.data());
      for (int64_t c = 0; c < qd; ++c) ASSERT_NEAR(alone[c], ref[i * qd + c], 1e-6) << i << " " << c;
    }
  }
  cpu::AttentionParams no_positions{n_head, n_head_kv, d, 0.3f, 3};
  std::vector<float> out(T * qd);
  EXPECT_THROW(cpu::attention_ref(q.data(), T, cpu::KVView::f32(k.data(), v.data(), kvd, n_past), nullptr, no_positions,
                                  out.data()),
               specmoe::Error);
}

TEST(Attention, SingleVisibleKeyReturnsItsValue) {
  const auto q = random_vec(4, 41), k = random_vec(4, 42), v = random_vec(4, 43);
  cpu::AttentionParams p{1, 1, 4, 0.5f};
  std::vector<float> out(4);
  cpu::attention_ref(q.data(), 1, cpu::KVView::f32(k.data(), v.data(), 4, 0), nullptr, p, out.data());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], v[i]);
}

TEST(Attention, SinkTakesItsShareOfTheSoftmax) {
  // One visible key with score s = 0.5 q.k and a sink logit z: the value is weighted by
  // e^s / (e^s + e^z); a sink far below leaves the value, one far above takes almost everything.
  const auto q = random_vec(4, 41), k = random_vec(4, 42), v = random_vec(4, 43);
  double s = 0;
  for (int i = 0; i < 4; ++i) s += 0.5 * q[i] * k[i];
  for (float z : {-1e4f, 0.0f, 1.5f, 30.0f}) {
    const std::vector<float> sinks = {z};
    cpu::AttentionParams p{1, 1, 4, 0.5f};
    p.sinks = sinks.data();
    std::vector<float> out(4);
    cpu::attention_ref(q.data(), 1, cpu::KVView::f32(k.data(), v.data(), 4, 0), nullptr, p, out.data());
    const double w = 1.0 / (1.0 + std::exp(z - s));
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], w * v[i], 1e-6) << "sink " << z;
  }
  // No visible key: the output stays 0 whatever the sink.
  cpu::AttentionParams p{1, 1, 4, 0.5f};
  const std::vector<float> sinks = {-3.0f};
  p.sinks = sinks.data();
  const uint8_t blind = 0;
  std::vector<float> out(4, 1.0f);
  cpu::attention_ref(q.data(), 1, cpu::KVView::f32(k.data(), v.data(), 4, 0), &blind, p, out.data());
  for (float o : out) EXPECT_EQ(o, 0.0f);
}

TEST(Attention, AlibiSlopesAreThePapers) {
  // Powers of two: 2^(-8 (h + 1) / n); 12 heads: the 8 of n = 8, then the odd ones of n = 16.
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(specmoe::kernels::alibi_slope(8, 8.0f, h), std::ldexp(1.0f, -(h + 1))) << h;
  for (int h = 0; h < 4; ++h) EXPECT_FLOAT_EQ(specmoe::kernels::alibi_slope(4, 8.0f, h), std::ldexp(1.0f, -2 * (h + 1))) << h;
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(specmoe::kernels::alibi_slope(12, 8.0f, h), std::ldexp(1.0f, -(h + 1))) << h;
  for (int h = 8; h < 12; ++h)
    EXPECT_NEAR(specmoe::kernels::alibi_slope(12, 8.0f, h), std::pow(2.0, -0.5 * (2 * (h - 8) + 1)), 1e-7) << h;
}

TEST(Attention, AlibiWeighsKeysByDistance) {
  // A zero query scores every key 0, so with ALiBi key j at position p_j gets the weight
  // e^(-slope |p - p_j|) / sum: head h of 4 (max bias 8) has slope 4^-(h + 1). Cached rows at
  // positions 0..4, the new token at 7 (a gap, as after a tree step): both paths, F32 and F16 rows.
  const int H = 4, d = 32;
  const int64_t n_past = 5;
  std::vector<float> q(H * d, 0.0f), k = random_vec((n_past + 1) * d, 44), v = random_vec((n_past + 1) * d, 45);
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 7};
  std::vector<float> slopes(H);
  for (int h = 0; h < H; ++h) slopes[h] = specmoe::kernels::alibi_slope(H, 8.0f, h);
  cpu::AttentionParams p{H, 1, d, 0.25f};
  p.alibi_slopes = slopes.data();
  cpu::KVView kv = cpu::KVView::f32(k.data(), v.data(), d, n_past, pos.data());
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) k16[i] = specmoe::fp32_to_fp16(k[i]), v16[i] = specmoe::fp32_to_fp16(v[i]);
  cpu::KVView kv16 = kv;
  kv16.k = k16.data(), kv16.v = v16.data(), kv16.k_type = kv16.v_type = DType::F16;
  kv16.k_row_bytes = kv16.v_row_bytes = d * sizeof(uint16_t);
  cpu::ThreadPool pool(2);
  for (int path = 0; path < 3; ++path) {
    std::vector<float> out(H * d);
    if (path == 0) cpu::attention_ref(q.data(), 1, kv, nullptr, p, out.data());
    if (path == 1) cpu::attention(pool, q.data(), 1, kv, nullptr, p, out.data());
    if (path == 2) cpu::attention(pool, q.data(), 1, kv16, nullptr, p, out.data());
    for (int h = 0; h < H; ++h) {
      std::vector<double> w(n_past + 1);
      double sum = 0;
      for (int64_t j = 0; j <= n_past; ++j) sum += w[j] = std::exp(-std::ldexp(1.0, -2 * (h + 1)) * (7 - pos[j]));
      for (int c = 0; c < d; ++c) {
        double want = 0;
        for (int64_t j = 0; j <= n_past; ++j) {
          const float vj = path == 2 ? specmoe::fp16_to_fp32(v16[j * d + c]) : v[j * d + c];
          want += w[j] / sum * vj;
        }
        ASSERT_NEAR(out[h * d + c], want, 1e-5) << "path " << path << " head " << h << " dim " << c;
      }
    }
  }
  // Without the rows' positions ALiBi cannot tell the distances.
  std::vector<float> out(H * d);
  EXPECT_THROW(cpu::attention_ref(q.data(), 1, cpu::KVView::f32(k.data(), v.data(), d, n_past), nullptr, p, out.data()),
               specmoe::Error);
}

// ------------------------------------------------------------------------------------------
// Softmax and activations

TEST(Activations, SoftmaxMatchesDouble) {
  cpu::ThreadPool pool(2);
  for (int64_t n : {1, 3, 17, 257}) {
    auto x = random_vec(3 * n, 51, 5.0f);
    const auto orig = x;
    cpu::softmax_rows(pool, x.data(), 3, n);
    for (int64_t t = 0; t < 3; ++t) {
      double mx = -1e30, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, orig[t * n + i]);
      for (int64_t i = 0; i < n; ++i) sum += std::exp(orig[t * n + i] - mx);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(x[t * n + i], std::exp(orig[t * n + i] - mx) / sum, 1e-6);
        total += x[t * n + i];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST(Activations, GeluAndSiluKnownValues) {
  // tanh-approximation GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  EXPECT_FLOAT_EQ(cpu::gelu(0.0f), 0.0f);
  EXPECT_NEAR(cpu::gelu(1.0f), 0.8411919906, 1e-6);
  EXPECT_NEAR(cpu::gelu(-1.0f), -0.1588080094, 1e-6);
  EXPECT_NEAR(cpu::gelu(3.0f), 2.9963625, 1e-5);
  EXPECT_NEAR(cpu::silu(1.0f), 0.7310585786, 1e-6);
  EXPECT_NEAR(cpu::silu(-2.0f), -0.2384058440, 1e-6);
}

// The fast SwiGLU and GELU (a vectorised exp where the CPU has AVX2) against the definitions in
// double precision: SiLU within 4e-7 relative (a few ulp; below x = -88.4, where exp(-x) is
// taken as infinite, within 1e-30 of values below 1e-36), GELU within 4e-7 relative plus 1.2e-7 (1 + |x|) absolute
// (1 + tanh cancels for x < 0: one float ulp of tanh near -1 is 6e-8, times x / 2; the float
// reference gelu_ref rounds the same way), over the whole float range the activations see plus the extremes and NaN; and an
// element's value does not depend on where it sits (vector body or tail) or how many there are.
TEST(Activations, FastSwigluAndGeluFollowTheDefinitions) {
  cpu::ThreadPool pool(2);
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 88.0f, -88.0f, 89.0f, -89.0f, 1e10f, -1e10f})
    x.push_back(v);
  const std::vector<float> up = random_vec(x.size(), 93, 1.0f);
  std::vector<float> s(x.size()), g(x.size());
  cpu::swiglu(pool, x.data(), up.data(), s.data(), static_cast<int64_t>(x.size()));
  cpu::gelu(pool, x.data(), g.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double want_s = v / (1.0 + std::exp(-v)) * up[i];
    ASSERT_LE(std::fabs(s[i] - want_s), 4e-7 * std::fabs(want_s) + 1e-30) << "silu x=" << v;  // below -88: < 1e-36
    const double want_g = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    ASSERT_LE(std::fabs(g[i] - want_g), 4e-7 * std::fabs(want_g) + 1.2e-7 * (1.0 + std::fabs(v))) << "gelu x=" << v;
  }
  // NaN and the infinities as the references give them (silu(-inf) = -inf / inf is NaN there too).
  for (float v : {NAN, INFINITY, -INFINITY}) {
    const float one = 1.0f;
    float fast = 0.0f, ref = 0.0f;
    cpu::swiglu(pool, &v, &one, &fast, 1);
    cpu::swiglu_ref(&v, &one, &ref, 1);
    EXPECT_TRUE(std::isnan(fast) ? std::isnan(ref) : fast == ref) << v << ": " << fast << " vs " << ref;
    cpu::gelu(pool, &v, &fast, 1);
    cpu::gelu_ref(&v, &ref, 1);
    EXPECT_TRUE(std::isnan(fast) ? std::isnan(ref) : fast == ref) << v << ": " << fast << " vs " << ref;
  }
  // Every offset and length: the same bits for the same element.
  for (int64_t off : {0, 1, 5, 7})
    for (int64_t n : {1, 3, 8, 9, 17}) {
      std::vector<float> part(static_cast<size_t>(n));
      cpu::swiglu(pool, x.data() + 1000 + off, up.data() + 1000 + off, part.data(), n);
      ASSERT_EQ(std::memcmp(part.data(), s.data() + 1000 + off, static_cast<size_t>(n) * 4), 0) << off << " " << n;
      cpu::gelu(pool, x.data() + 1000 + off, part.data(), n);
      ASSERT_EQ(std::memcmp(part.data(), g.data() + 1000 + off, static_cast<size_t>(n) * 4), 0) << off << " " << n;
    }
}

// The AVX-512 SwiGLU and GELU give the AVX2 kernels' bits for every element (the goldens hold on
// both kinds of machine), body and masked tail alike, NaN and the infinities included.
TEST(Activations, Avx512MatchesAvx2BitForBit) {
  if (cpu::usable_isa(cpu::Isa::Avx512) != cpu::Isa::Avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  cpu::ThreadPool pool(2);
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.37f, -88.37f, 88.38f, -88.38f, 1e10f, -1e10f, NAN, INFINITY,
                  -INFINITY, 1e-45f, -3e38f})
    x.push_back(v);
  const std::vector<float> up = random_vec(x.size(), 97, 2.0f);
  for (int64_t off : {0, 3})
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, static_cast<int64_t>(x.size()) - 3}) {
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      cpu::swiglu(pool, x.data() + off, up.data() + off, a.data(), n, cpu::Isa::Avx2);
      cpu::swiglu(pool, x.data() + off, up.data() + off, b.data(), n, cpu::Isa::Avx512);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "swiglu " << off << " " << n;
      cpu::gelu(pool, x.data() + off, a.data(), n, cpu::Isa::Avx2);
      cpu::gelu(pool, x.data() + off, b.data(), n, cpu::Isa::Avx512);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "gelu " << off << " " << n;
    }
}

// Sampling's softmax weights: the vectorised exp within 4e-7 relative of libm's per element,
// exactly 1 at the shift (the max logit), exactly 0 for a banned (-inf) logit, the same bits for
// an element whatever the offset and length, in place or not; the sum within rounding of the
// reference's, and the scalar path the reference itself.
TEST(Activations, ExpWeightsMatchTheReference) {
  for (int64_t n : {1, 7, 8, 9, 31, 151936}) {
    std::vector<float> x = random_vec(static_cast<size_t>(n), 95, 12.0f);
    for (int64_t i = 3; i < n; i += 11) x[static_cast<size_t>(i)] = -INFINITY;
    const float shift = *std::max_element(x.begin(), x.end());
    for (float temperature : {0.05f, 0.7f, 1.0f, 3.0f}) {
      std::vector<float> ref(x.size()), fast(x.size()), scalar(x.size());
      const double ref_sum = cpu::exp_weights_ref(x.data(), shift, temperature, ref.data(), n);
      const double fast_sum = cpu::exp_weights(x.data(), shift, temperature, fast.data(), n);
      const double scalar_sum = cpu::exp_weights(x.data(), shift, temperature, scalar.data(), n, cpu::Isa::Scalar);
      ASSERT_EQ(std::memcmp(scalar.data(), ref.data(), x.size() * 4), 0);
      ASSERT_EQ(scalar_sum, ref_sum);
      double sum = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] == shift) ASSERT_EQ(fast[i], 1.0f) << i;
        if (x[i] == -INFINITY) ASSERT_EQ(fast[i], 0.0f) << i;
        // Below ~1e-37 the vector exp flushes to 0 where libm still gives a (sub)normal.
        ASSERT_LE(std::fabs(fast[i] - ref[i]), 4e-7 * ref[i] + 1e-36) << "n=" << n << " T=" << temperature << " x=" << x[i];
        sum += fast[i];
      }
      EXPECT_NEAR(fast_sum, sum, 1e-12 * sum) << n;
      EXPECT_NEAR(fast_sum, ref_sum, 1e-6 * ref_sum) << n;
      if (n < 151936) continue;
      for (int64_t off : {0, 1, 5, 7})
        for (int64_t len : {1, 3, 8, 9, 17}) {
          std::vector<float> part(x.begin() + 1000 + off, x.begin() + 1000 + off + len);
          cpu::exp_weights(part.data(), shift, temperature, part.data(), len);  // in place
          ASSERT_EQ(std::memcmp(part.data(), fast.data() + 1000 + off, static_cast<size_t>(len) * 4), 0) << off << " " << len;
        }
    }
  }
}

TEST(Activations, MulScaleAndSoftcap) {
  cpu::ThreadPool pool(3);
  for (int64_t n : {1, 17, 10007}) {
    const auto a = random_vec(n, 81, 40.0f), b = random_vec(n, 82, 2.0f);
    std::vector<float> y(n), ref(n), fast(n);
    cpu::mul(a.data(), b.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] * b[i]);
    cpu::scale(a.data(), 0.125f, y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] * 0.125f);
    cpu::softcap_ref(a.data(), 30.0f, ref.data(), n);
    cpu::softcap(pool, a.data(), 30.0f, fast.data(), n);
    EXPECT_EQ(std::memcmp(ref.data(), fast.data(), n * 4), 0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(ref[i], 30.0 * std::tanh(a[i] / 30.0), 1e-5 * 30.0);
      ASSERT_LE(std::fabs(ref[i]), 30.0f);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Row scatter (an EAGLE-3 head's logits into the target's vocabulary)

TEST(Rows, ScatterColsPlacesEachColumnAndFillsTheRest) {
  const float src[] = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, -6.5f};  // [2, 3]
  const int32_t cols[] = {4, 0, 2};
  std::vector<float> dst(10, 7.0f);
  cpu::scatter_cols_ref(src, 2, 3, cols, dst.data(), 5, -INFINITY);
  const float want[] = {-2.0f, -INFINITY, 3.25f, -INFINITY, 1.5f, 5.0f, -INFINITY, -6.5f, -INFINITY, 4.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(dst[i], want[i]) << i;

  // The threaded op (rows * n_dst past its serial size) gives the reference's bits.
  cpu::ThreadPool pool(3);
  const int64_t rows = 9, n_src = 1000, n_dst = 40009;
  const auto x = random_vec(rows * n_src, 91, 3.0f);
  std::vector<int32_t> ids(n_dst);
  for (int64_t i = 0; i < n_dst; ++i) ids[i] = static_cast<int32_t>(i);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(92));
  std::vector<float> ref(rows * n_dst), fast(rows * n_dst, NAN);
  cpu::scatter_cols_ref(x.data(), rows, n_src, ids.data(), ref.data(), n_dst, 0.0f);
  cpu::scatter_cols(pool, x.data(), rows, n_src, ids.data(), fast.data(), n_dst, 0.0f);
  EXPECT_EQ(std::memcmp(ref.data(), fast.data(), ref.size() * 4), 0);
  EXPECT_EQ(ref[4 * n_dst + ids[17]], x[4 * n_src + 17]);
}

TEST(Rows, ScatterColsRejectsBadArguments) {
  const float src[] = {1.0f, 2.0f};
  std::vector<float> dst(8);
  cpu::ThreadPool pool(2);
  auto throws = [&](const int32_t* cols, int64_t rows, int64_t n_src, int64_t n_dst, float* out) {
    EXPECT_THROW(cpu::scatter_cols_ref(src, rows, n_src, cols, out, n_dst, 0.0f), specmoe::Error);
    EXPECT_THROW(cpu::scatter_cols(pool, src, rows, n_src, cols, out, n_dst, 0.0f), specmoe::Error);
  };
  const int32_t ok[] = {3, 1}, past_end[] = {1, 4}, negative[] = {-1, 2};
  throws(past_end, 1, 2, 4, dst.data());
  throws(negative, 1, 2, 4, dst.data());
  throws(ok, -1, 2, 4, dst.data());
  throws(ok, 1, 2, 1, dst.data());  // more source columns than destination columns
  throws(ok, 1, 2, 4, nullptr);
  throws(nullptr, 1, 2, 4, dst.data());
  EXPECT_NO_THROW(cpu::scatter_cols_ref(nullptr, 0, 2, nullptr, nullptr, 4, 0.0f));  // no rows: nothing to do
}

// The policies of the packed weights' pages: names, the environment override and its error, and
// memory that is 2 MiB aligned and writable whichever way its pages came (the timing that makes
// Auto fall back cannot be forced here; `specmoe generate --huge-pages` on the README's VM shows it).
TEST(HugePages, PoliciesNamesAndEnvironment) {
  for (cpu::HugePages p : {cpu::HugePages::Auto, cpu::HugePages::On, cpu::HugePages::Off}) {
    cpu::HugePages back{};
    ASSERT_TRUE(cpu::parse_huge_pages(cpu::huge_pages_name(p), back));
    EXPECT_EQ(back, p);
  }
  cpu::HugePages p = cpu::HugePages::On;
  EXPECT_FALSE(cpu::parse_huge_pages("yes", p));
  EXPECT_EQ(p, cpu::HugePages::On);
  const size_t n = (size_t{5} << 20) + 123;
  for (cpu::HugePages policy : {cpu::HugePages::Auto, cpu::HugePages::On, cpu::HugePages::Off}) {
    const auto mem = cpu::allocate_huge(n, policy);
    ASSERT_NE(mem, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(mem.get()) % (size_t{2} << 20), 0u);
    auto* bytes = static_cast<unsigned char*>(mem.get());
    std::memset(bytes, 0x5A, n);
    EXPECT_EQ(bytes[0], 0x5A);
    EXPECT_EQ(bytes[n - 1], 0x5A);
  }
  ::setenv("SPECMOE_HUGE_PAGES", "sometimes", 1);
  try {
    cpu::allocate_huge(1);
    ADD_FAILURE() << "SPECMOE_HUGE_PAGES=sometimes was accepted";
  } catch (const specmoe::Error& e) {
    EXPECT_EQ(e.kind(), specmoe::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("SPECMOE_HUGE_PAGES=sometimes"), std::string::npos) << e.what();
  }
  ::setenv("SPECMOE_HUGE_PAGES", "off", 1);
  EXPECT_NE(cpu::allocate_huge(1, cpu::HugePages::On), nullptr);
  ::unsetenv("SPECMOE_HUGE_PAGES");
}
