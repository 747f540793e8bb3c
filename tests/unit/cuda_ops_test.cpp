// Differential tests of the CUDA ops (kernels/cuda/ops.h) against small CPU reference loops
// written here (in double where it matters), on random inputs of awkward sizes (1, 3, 17, 4097).
// Every GPU test GTEST_SKIP()s when no CUDA device is present; the error-path and device-query
// tests run on any machine where the CUDA backend is built. Built without CUDA, one test skips.
//
// Tolerances are |gpu - ref| <= atol + rtol * |ref| unless stated, chosen per op next to the test.
#include <gtest/gtest.h>

#ifdef SPECMOE_HAVE_CUDA


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

#include "cuda_device_array.h"
#include "quant_reference.h"

namespace specmoe::kernels::cuda {
namespace {

using specmoe::testing::DeviceArray;

// ---------------------------------------------------------------------------------------------
// Host helpers: half/bfloat16 conversion (round to nearest even), comparisons (device arrays:
// tests/cuda_device_array.h).

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (ax < 0x38800000u) {                                               // half subnormal or zero
    float v;
    std::memcpy(&v, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  }
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e - 15 + 127) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool has_device() { return cuda_device_count() > 0; }

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Element-wise |a - b| <= atol + rtol |b|, all finite, and a non-zero guard on the reference
// (so that a kernel writing nothing cannot pass against an all-zero reference).
void expect_close(const std::vector<float>& gpu, const std::vector<double>& ref, double atol, double rtol,
                  const std::string& what, double min_max_ref = 1e-3) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  double max_ref = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    ASSERT_TRUE(std::isfinite(gpu[i])) << what << ": element " << i << " is " << gpu[i];
    if (std::fabs(gpu[i] - ref[i]) > atol + rtol * std::fabs(ref[i]) && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << gpu[i] << " ref " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
  EXPECT_GT(max_ref, min_max_ref) << what << ": reference is all (near) zero; the test would be vacuous";
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ---------------------------------------------------------------------------------------------
// Quantized blocks: random payload bytes (every byte pattern is a valid block) with fp16 scales
// set to ranges that keep values O(1); and the CPU dequantization, written as ggml's
// dequantize_row_* loops (a different formulation from the kernels' 32-element chunks).

struct QuantSpec {
  DType type;
  int block_elems, block_bytes;
};
const QuantSpec kQuantTypes[] = {{DType::Q8_0, 32, 34},   {DType::Q4_0, 32, 18},   {DType::Q4_1, 32, 20},
                                 {DType::Q4_K, 256, 144}, {DType::Q5_K, 256, 176}, {DType::Q6_K, 256, 210},
                                 {DType::Q5_0, 32, 22},   {DType::Q5_1, 32, 24},   {DType::IQ4_NL, 32, 18},
                                 {DType::Q2_K, 256, 84},  {DType::Q3_K, 256, 110}, {DType::IQ4_XS, 256, 136}};

// Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, IQ4_XS: blocks and decoder shared with the CPU tests
// (tests/quant_reference.h, an element-by-element decoder written from ggml's block definitions).
bool is_new_quant_type(DType t) {
  for (DType n : specmoe::testing::kNewQuantTypes)
    if (n == t) return true;
  return false;
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}
float get_half(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

std::vector<uint8_t> random_blocks(std::mt19937& rng, const QuantSpec& q, int64_t n_blocks) {
  if (is_new_quant_type(q.type)) return specmoe::testing::ref_random_blocks(q.type, rng, n_blocks);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * q.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> u(0.5f, 1.0f), sign(-1.0f, 1.0f);
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = bytes.data() + i * q.block_bytes;
    const float s = sign(rng) < 0 ? -1.0f : 1.0f;
    switch (q.type) {
      case DType::Q8_0: put_half(b, s * u(rng) * 0.02f); break;                       // |q| <= 127
      case DType::Q4_0: put_half(b, s * u(rng) * 0.2f); break;                        // |q - 8| <= 8
      case DType::Q4_1: put_half(b, u(rng) * 0.1f); put_half(b + 2, -u(rng)); break;  // q <= 15
      case DType::Q4_K: put_half(b, u(rng) * 0.004f); put_half(b + 2, u(rng) * 0.004f); break;  // sc, m <= 63
      case DType::Q5_K: put_half(b, u(rng) * 0.002f); put_half(b + 2, u(rng) * 0.004f); break;  // q <= 31
      case DType::Q6_K: put_half(b + 208, s * u(rng) * 0.001f); break;  // |sc| <= 128, |q| <= 32
      default: break;
    }
  }
  return bytes;
}

void ref_scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// n elements of `type` at src -> y (ggml's loops).
void ref_dequantize(DType type, const uint8_t* src, float* y, int64_t n) {
  if (is_new_quant_type(type)) {
    specmoe::testing::ref_dequantize_new(type, src, y, n);
    return;
  }
  switch (type) {
    case DType::F32: std::memcpy(y, src, static_cast<size_t>(n) * 4); return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
        y[i] = type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case DType::Q8_0:
      for (int64_t i = 0; i < n / 32; ++i, src += 34) {
        const float d = get_half(src);
        for (int j = 0; j < 32; ++j) *y++ = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
      }
      return;
    case DType::Q4_0:
    case DType::Q4_1: {
      const bool has_min = type == DType::Q4_1;
      const int bytes = has_min ? 20 : 18;
      for (int64_t i = 0; i < n / 32; ++i, src += bytes, y += 32) {
        const float d = get_half(src), m = has_min ? get_half(src + 2) : 0.0f;
        const uint8_t* qs = src + (has_min ? 4 : 2);
        for (int j = 0; j < 16; ++j) {
          if (has_min) {
            y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
            y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
          } else {
            y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
            y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
          }
        }
      }
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool q5 = type == DType::Q5_K;
      for (int64_t i = 0; i < n / 256; ++i, src += q5 ? 176 : 144) {
        const float d = get_half(src), dmin = get_half(src + 2);
        const uint8_t* scales = src + 4;
        const uint8_t* qh = src + 16;
        const uint8_t* ql = src + (q5 ? 48 : 16);
        int is = 0;
        uint8_t u1 = 1, u2 = 2, sc, m;
        for (int j = 0; j < 256; j += 64) {
          ref_scale_min_k4(is + 0, scales, sc, m);
          const float d1 = d * sc, m1 = dmin * m;
          ref_scale_min_k4(is + 1, scales, sc, m);
          const float d2 = d * sc, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (q5 && (qh[l] & u1) ? 16 : 0)) - m1;
          for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (q5 && (qh[l] & u2) ? 16 : 0)) - m2;
          ql += 32;
          is += 2;
          u1 = static_cast<uint8_t>(u1 << 2);
          u2 = static_cast<uint8_t>(u2 << 2);
        }
      }
      return;
    }
    case DType::Q6_K:
      for (int64_t i = 0; i < n / 256; ++i, src += 210) {
        const float d = get_half(src + 208);
        const uint8_t* ql = src;
        const uint8_t* qh = src + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
        for (int part = 0; part < 256; part += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
            y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
            y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
            y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
          }
          y += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
      }
      return;
    default: break;
  }
  FAIL() << "ref_dequantize: unknown type";
}

// A random weight matrix of `type` [n_out, n_in] with rows row_bytes apart (>= dense size).
struct HostMatrix {
  DType type;
  int64_t n_in, n_out;
  size_t row_bytes;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized [n_out, n_in]
};

HostMatrix random_matrix(std::mt19937& rng, DType type, int64_t n_in, int64_t n_out, size_t pad_bytes = 0) {
  HostMatrix m{type, n_in, n_out, row_bytes_of(type, n_in) + pad_bytes, {}, {}};
  m.bytes.assign(m.row_bytes * static_cast<size_t>(n_out), 0);
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = m.bytes.data() + r * m.row_bytes;
    std::vector<uint8_t> dense;
    bool quant = false;
    for (const QuantSpec& q : kQuantTypes) {
      if (q.type == type) {
        dense = random_blocks(rng, q, n_in / q.block_elems);
        quant = true;
      }
    }
    if (!quant) {
      const std::vector<float> v = random_floats(rng, static_cast<size_t>(n_in), -1.0f, 1.0f);
      for (int64_t i = 0; i < n_in; ++i) {
        if (type == DType::F32) {
          dense.resize(static_cast<size_t>(n_in) * 4);
          std::memcpy(dense.data() + 4 * i, &v[i], 4);
        } else {
          dense.resize(static_cast<size_t>(n_in) * 2);
          const uint16_t h = type == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
          dense[2 * i] = static_cast<uint8_t>(h & 0xff);
          dense[2 * i + 1] = static_cast<uint8_t>(h >> 8);
        }
      }
    }
    std::memcpy(row, dense.data(), dense.size());
  }
  m.values.resize(static_cast<size_t>(n_in * n_out));
  for (int64_t r = 0; r < n_out; ++r) ref_dequantize(type, m.bytes.data() + r * m.row_bytes, &m.values[r * n_in], n_in);
  return m;
}

const char* name_of(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::IQ4_NL: return "IQ4_NL";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::IQ4_XS: return "IQ4_XS";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Tests that run on any machine with the CUDA backend built (no device needed).

TEST(CudaDevice, QueryReportsNoDeviceCleanly) {
  CudaInfo info;
  ASSERT_NO_THROW(info = query_cuda());
  EXPECT_EQ(static_cast<int>(info.devices.size()), cuda_device_count());
  EXPECT_GT(info.runtime_version, 0);
  if (info.available()) {
    EXPECT_EQ(info.status, "ok");
    EXPECT_FALSE(info.devices[0].name.empty());
    EXPECT_GT(info.devices[0].total_bytes, 0u);
  } else {
    EXPECT_EQ(info.status.rfind("no device", 0), 0u) << info.status;
    EXPECT_THROW(Context ctx(0), Error);
  }
  EXPECT_FALSE(describe(info).empty());
}

TEST(CudaCheck, ThrowsRuntimeErrorWithStatementFileAndName) {
  try {
    SPECMOE_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;  // statement and name
    EXPECT_NE(msg.find("cuda_ops_test.cpp:"), std::string::npos) << msg;
  }
  try {
    SPECMOE_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("cuBLAS error"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(SPECMOE_CUDA_CHECK(cudaSuccess));
}

TEST(CudaCheck, RowBytesRejectsPartialBlocks) {
  EXPECT_EQ(row_bytes_of(DType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes_of(DType::Q8_0, 32 * 17), 34u * 17);
  EXPECT_EQ(row_bytes_of(DType::F16, 17), 34u);
  EXPECT_THROW(row_bytes_of(DType::Q6_K, 100), Error);
}

// ---------------------------------------------------------------------------------------------
// GPU tests.

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_device()) GTEST_SKIP() << query_cuda().status;
    ctx_ = std::make_unique<Context>(0);
  }
  Context& ctx() { return *ctx_; }
  std::unique_ptr<Context> ctx_;
  std::mt19937 rng_{20240611};
};

// Dequantization is exact arithmetic up to FMA contraction on the device (one rounding of the
// product d*q dropped): atol 1e-6 (values are O(1)), rtol 1e-6. F16 output: one half ulp of
// difference may appear when that changes the rounding: rtol 2^-10.
TEST_F(CudaOps, DequantizeMatchesGgmlLoops) {
  for (const QuantSpec& q : kQuantTypes) {
    for (int64_t blocks : {1, 3, 17}) {
      const int64_t n = blocks * q.block_elems;
      const std::vector<uint8_t> bytes = random_blocks(rng_, q, blocks);
      std::vector<float> ref(static_cast<size_t>(n));
      ref_dequantize(q.type, bytes.data(), ref.data(), n);
      DeviceArray<uint8_t> src(ctx(), bytes);
      DeviceArray<float> out32(ctx(), static_cast<size_t>(n));
      DeviceArray<uint16_t> out16(ctx(), static_cast<size_t>(n));
      dequantize_f32(ctx(), q.type, src.ptr(), n, out32.ptr());
      dequantize_f16(ctx(), q.type, src.ptr(), n, out16.ptr());
      const std::string what = std::string(name_of(q.type)) + " n=" + std::to_string(n);
      expect_close(out32.get(ctx()), to_double(ref), 1e-6, 1e-6, what + " f32");
      std::vector<float> got16;
      for (uint16_t h : out16.get(ctx())) got16.push_back(f16_to_f32(h));
      expect_close(got16, to_double(ref), 1e-6, 1.0 / 1024, what + " f16");
    }
  }
}

// Embedding lookup: exact copies of dequantized rows (same tolerance as above); an out-of-range
// id yields a NaN row.
TEST_F(CudaOps, GetRowsQuantizedAndFloatTables) {
  for (DType type : {DType::Q4_K, DType::Q8_0, DType::F16, DType::F32, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                     DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
    const int64_t block = specmoe::dtype_info(type).block_size;
    const int64_t n_in = block == 256 ? 512 : (block == 32 ? 96 : 17);
    const HostMatrix m = random_matrix(rng_, type, n_in, 37, 8);  // padded rows
    DeviceArray<uint8_t> table(ctx(), m.bytes);
    const std::vector<int32_t> ids = {36, 0, 17, 17, 3};
    DeviceArray<int32_t> d_ids(ctx(), ids);
    DeviceArray<float> out(ctx(), ids.size() * static_cast<size_t>(n_in));
    get_rows(ctx(), MatrixView{type, table.ptr(), n_in, 37, m.row_bytes}, d_ids.ptr(), 5, out.ptr());
    std::vector<double> ref;
    for (int32_t id : ids) ref.insert(ref.end(), m.values.begin() + id * n_in, m.values.begin() + (id + 1) * n_in);
    expect_close(out.get(ctx()), ref, 1e-6, 1e-6, std::string("get_rows ") + name_of(type));

    DeviceArray<int32_t> bad(ctx(), std::vector<int32_t>{37});
    DeviceArray<float> out_bad(ctx(), static_cast<size_t>(n_in));
    get_rows(ctx(), MatrixView{type, table.ptr(), n_in, 37, m.row_bytes}, bad.ptr(), 1, out_bad.ptr());
    for (float v : out_bad.get(ctx())) ASSERT_TRUE(std::isnan(v)) << "out-of-range id must give NaN";
  }
}

// Matmul against a double-precision reference on the dequantized weights. The bound scales with
// S = sum_k |w_k x_k| of each output (the size of the rounding errors):
//   F32 (cuBLAS fp32), quantized matvec (fp32 accumulation, same products): 1e-4 S
//     (worst-case fp32 summation error over 4097 terms is ~2.4e-4 S; typical ~4e-6 S);
//   F16 (x rounded to half, 2^-11 relative) and quantized T > 8 (weights and x rounded to half):
//     4e-3 S;  BF16 (x rounded to bfloat16, 2^-8 relative): 1.6e-2 S.
// A wrong element mapping fails the normalized-MSE check by orders of magnitude.
TEST_F(CudaOps, MatmulAllTypesAndBatchSizes) {
  struct Case { DType type; int64_t n_in, n_out; size_t pad; };
  const Case cases[] = {
      {DType::F32, 1, 3, 0},      {DType::F32, 4097, 17, 0},  {DType::F16, 17, 33, 0},   {DType::F16, 4097, 3, 6},
      {DType::BF16, 3, 17, 0},    {DType::BF16, 4097, 5, 0},  {DType::Q8_0, 32, 1, 0},   {DType::Q8_0, 32 * 17, 33, 2},
      {DType::Q4_0, 32 * 3, 17, 0}, {DType::Q4_1, 32 * 17, 5, 0}, {DType::Q4_K, 256, 3, 0}, {DType::Q4_K, 256 * 17, 33, 8},
      {DType::Q5_K, 256 * 3, 17, 0}, {DType::Q6_K, 256 * 3, 17, 4}, {DType::Q6_K, 256, 1, 0},
      {DType::Q5_0, 32, 1, 0},      {DType::Q5_0, 32 * 17, 33, 2}, {DType::Q5_1, 32 * 3, 17, 0},
      {DType::IQ4_NL, 32 * 17, 5, 0}, {DType::IQ4_NL, 32, 3, 0},   {DType::Q2_K, 256, 3, 0},
      {DType::Q2_K, 256 * 17, 17, 8}, {DType::Q3_K, 256 * 3, 17, 0}, {DType::Q3_K, 256, 1, 2},
      {DType::IQ4_XS, 256 * 3, 17, 4}, {DType::IQ4_XS, 256, 1, 0}};
  for (const Case& c : cases) {
    const HostMatrix m = random_matrix(rng_, c.type, c.n_in, c.n_out, c.pad);
    DeviceArray<uint8_t> w(ctx(), m.bytes);
    for (int64_t T : {1, 3, 8, 17}) {
      const std::vector<float> x = random_floats(rng_, static_cast<size_t>(T * c.n_in), -1.0f, 1.0f);
      DeviceArray<float> dx(ctx(), x);
      DeviceArray<float> dy(ctx(), static_cast<size_t>(T * c.n_out));
      matmul(ctx(), dx.ptr(), T, MatrixView{c.type, w.ptr(), c.n_in, c.n_out, m.row_bytes}, dy.ptr());
      const std::vector<float> y = dy.get(ctx());
      const bool quant = c.type != DType::F32 && c.type != DType::F16 && c.type != DType::BF16;
      double rel = 1e-4;
      if (c.type == DType::F16 || (quant && T > kMatvecMaxTokens)) rel = 4e-3;
      if (c.type == DType::BF16) rel = 1.6e-2;
      const std::string what = std::string(name_of(c.type)) + " n_in=" + std::to_string(c.n_in) +
                               " n_out=" + std::to_string(c.n_out) + " T=" + std::to_string(T);
      double err2 = 0, ref2 = 0, max_ref = 0;
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t o = 0; o < c.n_out; ++o) {
          double ref = 0, s = 0;
          for (int64_t k = 0; k < c.n_in; ++k) {
            const double p = static_cast<double>(m.values[o * c.n_in + k]) * x[t * c.n_in + k];
            ref += p;
            s += std::fabs(p);
          }
          const float got = y[t * c.n_out + o];
          ASSERT_TRUE(std::isfinite(got)) << what;
          EXPECT_LE(std::fabs(got - ref), 1e-6 + rel * s) << what << " t=" << t << " o=" << o << " ref " << ref;
          err2 += (got - ref) * (got - ref);
          ref2 += ref * ref;
          max_ref = std::max(max_ref, std::fabs(ref));
        }
      }
      EXPECT_GT(max_ref, 1e-3) << what << ": vacuous reference";
      EXPECT_LE(err2, (rel * rel) * ref2 + 1e-12) << what << ": normalized MSE too large";
    }
  }
}

// Norms: fp32 reductions over <= 4097 terms: atol 1e-5, rtol 1e-4.
TEST_F(CudaOps, RmsNormAndLayerNorm) {
  for (int64_t T : {1, 3, 17}) {
    for (int64_t n : {1, 17, 4097}) {
      const std::vector<float> x = random_floats(rng_, static_cast<size_t>(T * n), -2.0f, 2.0f);
      const std::vector<float> w = random_floats(rng_, static_cast<size_t>(n), 0.5f, 1.5f);
      const std::vector<float> b = random_floats(rng_, static_cast<size_t>(n), -0.5f, 0.5f);
      DeviceArray<float> dx(ctx(), x), dw(ctx(), w), db(ctx(), b), out(ctx(), x.size());
      const float eps = 1e-5f;
      std::vector<double> ref_rms(x.size()), ref_ln(x.size());
      for (int64_t t = 0; t < T; ++t) {
        const float* r = &x[t * n];
        double ss = 0, mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) { ss += double(r[i]) * r[i]; mean += r[i]; }
        mean /= n;
        for (int64_t i = 0; i < n; ++i) var += (r[i] - mean) * (r[i] - mean);
        var /= n;
        for (int64_t i = 0; i < n; ++i) {
          ref_rms[t * n + i] = r[i] / std::sqrt(ss / n + eps) * w[i];
          ref_ln[t * n + i] = (r[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
        }
      }
      const std::string what = " T=" + std::to_string(T) + " n=" + std::to_string(n);
      rms_norm(ctx(), dx.ptr(), dw.ptr(), out.ptr(), T, n, eps);
      expect_close(out.get(ctx()), ref_rms, 1e-5, 1e-4, "rms_norm" + what);
      if (n > 1) {  // n = 1: x - mean = 0 exactly, the output is b
        layer_norm(ctx(), dx.ptr(), dw.ptr(), db.ptr(), out.ptr(), T, n, eps);
        expect_close(out.get(ctx()), ref_ln, 1e-5, 1e-4, "layer_norm" + what);
      }
      rms_norm(ctx(), dx.ptr(), dw.ptr(), dx.ptr(), T, n, eps);  // in place
      expect_close(dx.get(ctx()), ref_rms, 1e-5, 1e-4, "rms_norm in place" + what);
    }
  }
}

// RoPE: the angle pos * scale * base^(-2i/d) is computed in fp32 on the device (powf is within
// 4 ulp); for positions up to 2048 its absolute error is <= ~1.1e-3 rad, so atol 3e-3 on |x| <= 1
// inputs (a wrong pairing or frequency gives errors of order 1). Dimensions at
// or beyond rope_dims must come back bit-identical.
TEST_F(CudaOps, RopeBothPairingsPartialDims) {
  struct Case { int n_head, head_dim, rope_dims; float base, scale; RopePairing pairing; };
  const Case cases[] = {{3, 64, 64, 10000.0f, 1.0f, RopePairing::Adjacent},
                        {3, 64, 64, 1000000.0f, 1.0f, RopePairing::SplitHalves},
                        {2, 80, 32, 10000.0f, 0.5f, RopePairing::Adjacent},
                        {5, 18, 12, 500000.0f, 0.25f, RopePairing::SplitHalves}};
  for (const Case& c : cases) {
    for (int64_t T : {1, 17}) {
      const std::vector<float> x = random_floats(rng_, static_cast<size_t>(T * c.n_head * c.head_dim), -1.0f, 1.0f);
      std::vector<int32_t> pos(static_cast<size_t>(T));
      std::uniform_int_distribution<int32_t> pd(0, 2048);
      for (int32_t& p : pos) p = pd(rng_);
      pos[0] = 0;
      std::vector<double> ref(x.begin(), x.end());
      const int half = c.rope_dims / 2;
      for (int64_t t = 0; t < T; ++t) {
        for (int h = 0; h < c.n_head; ++h) {
          double* v = &ref[(t * c.n_head + h) * c.head_dim];
          for (int i = 0; i < half; ++i) {
            const double angle = pos[t] * double(c.scale) * std::pow(double(c.base), -2.0 * i / c.rope_dims);
            const int a = c.pairing == RopePairing::Adjacent ? 2 * i : i;
            const int b = c.pairing == RopePairing::Adjacent ? 2 * i + 1 : i + half;
            const double x0 = v[a], x1 = v[b];
            v[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
            v[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
          }
        }
      }
      DeviceArray<float> dx(ctx(), x);
      DeviceArray<int32_t> dpos(ctx(), pos);
      rope(ctx(), dx.ptr(), T, dpos.ptr(), RopeParams{c.n_head, c.head_dim, c.rope_dims, c.base, c.scale, c.pairing});
      const std::vector<float> got = dx.get(ctx());
      expect_close(got, ref, 3e-3, 0.0, "rope head_dim=" + std::to_string(c.head_dim) + " T=" + std::to_string(T));
      for (size_t i = 0; i < got.size(); ++i) {
        if (static_cast<int>(i % c.head_dim) >= c.rope_dims) {
          ASSERT_EQ(got[i], x[i]) << "dim beyond rope_dims changed";
        }
      }
    }
  }
}

// RoPE with llama3 frequency factors, YaRN's ramp and a cos/sin magnitude (RopeParams): against
// the definition in double. Angles up to ~2048 rad in fp32 (powf, sincosf of a float angle):
// atol 3e-3 as above.
TEST_F(CudaOps, RopeFrequencyFactorsAndYarn) {
  for (RopePairing pairing : {RopePairing::Adjacent, RopePairing::SplitHalves})
    for (bool yarn : {false, true}) {
      const int n_head = 3, head_dim = 36, rope_dims = 32, half = 16;
      const int64_t T = 9;
      const std::vector<float> x = random_floats(rng_, static_cast<size_t>(T * n_head * head_dim), -1.0f, 1.0f);
      const std::vector<float> factors = random_floats(rng_, half, 1.0f, 8.0f);
      std::vector<int32_t> pos(static_cast<size_t>(T));
      std::uniform_int_distribution<int32_t> pd(0, 2048);
      for (int32_t& p : pos) p = pd(rng_);
      RopeParams p{n_head, head_dim, rope_dims, 500000.0f, 0.25f, pairing};
      p.attn_factor = 1.1386f;
      if (yarn) {
        p.ext_factor = 1.0f;
        p.corr_low = 3.0f;
        p.corr_high = 9.0f;
      }
      std::vector<double> ref(x.begin(), x.end());
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < n_head; ++h) {
          double* v = &ref[(t * n_head + h) * head_dim];
          for (int i = 0; i < half; ++i) {
            const double extrap = pos[t] * std::pow(500000.0, -2.0 * i / rope_dims) / factors[i];
            const double keep = yarn ? 1.0 - std::clamp((i - 3.0) / 6.0, 0.0, 1.0) : 0.0;
            const double angle = extrap * 0.25 * (1 - keep) + extrap * keep;
            const int a = pairing == RopePairing::Adjacent ? 2 * i : i;
            const int b = pairing == RopePairing::Adjacent ? 2 * i + 1 : i + half;
            const double x0 = v[a], x1 = v[b];
            v[a] = 1.1386 * (x0 * std::cos(angle) - x1 * std::sin(angle));
            v[b] = 1.1386 * (x0 * std::sin(angle) + x1 * std::cos(angle));
          }
        }
      DeviceArray<float> dx(ctx(), x), dfactors(ctx(), factors);
      DeviceArray<int32_t> dpos(ctx(), pos);
      p.freq_factors = dfactors.ptr();
      rope(ctx(), dx.ptr(), T, dpos.ptr(), p);
      expect_close(dx.get(ctx()), ref, 3e-3, 0.0, std::string("rope factors") + (yarn ? " yarn" : ""));
    }
}

// Attention: fp32 dot products over head_dim and a softmax over <= 320 keys: atol 2e-5, rtol 1e-4.
TEST_F(CudaOps, AttentionCausalTreeMaskAndGqa) {
  // window > 0: a sliding window over positions; the new tokens sit two per position (a tree's
  // siblings share one), so the window is not a count of rows.
  struct Case { int n_head, n_head_kv, head_dim; int64_t n_past, T, pad; bool tree; int window = 0; };
  const Case cases[] = {{4, 2, 64, 0, 1, 0, false},  {4, 4, 17, 0, 3, 0, false}, {4, 1, 17, 37, 3, 5, false},
                        {6, 3, 128, 300, 17, 0, true}, {2, 2, 33, 1, 1, 3, false}, {3, 1, 64, 0, 17, 0, true},
                        {4, 2, 64, 40, 1, 0, false, 16}, {6, 3, 128, 300, 17, 0, true, 7},
                        {3, 1, 64, 0, 17, 0, false, 3}};
  for (const Case& c : cases) {
    const int64_t kv_dim = int64_t{c.n_head_kv} * c.head_dim, stride = kv_dim + c.pad, n_kv = c.n_past + c.T;
    const std::vector<float> q = random_floats(rng_, static_cast<size_t>(c.T * c.n_head * c.head_dim), -1.0f, 1.0f);
    const std::vector<float> k = random_floats(rng_, static_cast<size_t>(n_kv * stride), -1.0f, 1.0f);
    const std::vector<float> v = random_floats(rng_, static_cast<size_t>(n_kv * stride), -1.0f, 1.0f);
    std::vector<uint8_t> mask(static_cast<size_t>(c.T * c.T), 0);
    for (int64_t i = 0; i < c.T; ++i) {
      for (int64_t j = 0; j < c.T; ++j) mask[i * c.T + j] = c.tree ? (j == i || (j < i && rng_() % 2)) : (j <= i);
    }
    if (c.tree && c.n_past == 0) mask[(c.T - 1) * c.T + (c.T - 1)] = 0;  // a token that sees nothing
    std::vector<int32_t> positions(static_cast<size_t>(n_kv));
    for (int64_t r = 0; r < n_kv; ++r)
      positions[r] = static_cast<int32_t>(r < c.n_past ? r : c.n_past + (r - c.n_past) / 2);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<double> ref(q.size(), 0.0);
    const int group = c.n_head / c.n_head_kv;
    for (int64_t t = 0; t < c.T; ++t) {
      for (int h = 0; h < c.n_head; ++h) {
        const int g = h / group;
        std::vector<double> s;
        std::vector<int64_t> rows;
        for (int64_t r = 0; r < n_kv; ++r) {
          if (r >= c.n_past && !mask[t * c.T + (r - c.n_past)]) continue;
          if (c.window > 0 && positions[c.n_past + t] - positions[r] >= c.window) continue;
          double dot = 0;
          for (int d = 0; d < c.head_dim; ++d)
            dot += double(q[(t * c.n_head + h) * c.head_dim + d]) * k[r * stride + g * c.head_dim + d];
          s.push_back(dot * scale);
          rows.push_back(r);
        }
        if (s.empty()) continue;  // sees nothing: zero output
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          for (size_t j = 0; j < s.size(); ++j) acc += s[j] * v[rows[j] * stride + g * c.head_dim + d];
          ref[(t * c.n_head + h) * c.head_dim + d] = acc / sum;
        }
      }
    }
    DeviceArray<float> dq(ctx(), q), dk(ctx(), k), dv(ctx(), v), out(ctx(), q.size());
    DeviceArray<uint8_t> dmask(ctx(), mask);
    DeviceArray<int32_t> dpositions(ctx(), positions);
    attention(ctx(), dq.ptr(), c.T, KVView{dk.ptr(), dv.ptr(), stride, c.n_past, dpositions.ptr()},
              c.tree ? dmask.ptr() : nullptr, AttentionParams{c.n_head, c.n_head_kv, c.head_dim, scale, c.window},
              out.ptr());
    expect_close(out.get(ctx()), ref, 2e-5, 1e-4,
                 "attention heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
                     " n_past=" + std::to_string(c.n_past) + " T=" + std::to_string(c.T) + (c.tree ? " tree" : " causal") +
                     " window=" + std::to_string(c.window));
  }
}

// Softmax: expf (<= 2 ulp) and an fp32 sum over <= 50257 terms: atol 1e-7, rtol 1e-4.
TEST_F(CudaOps, SoftmaxRowsAndArgmax) {
  for (int64_t n : {1, 3, 17, 4097, 50257}) {
    const int64_t rows = 3;
    const std::vector<float> x = random_floats(rng_, static_cast<size_t>(rows * n), -10.0f, 10.0f);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = &x[r * n];
      const double mx = *std::max_element(xr, xr + n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
      for (int64_t i = 0; i < n; ++i) ref[r * n + i] = std::exp(xr[i] - mx) / sum;
    }
    DeviceArray<float> dx(ctx(), x), dy(ctx(), x.size());
    softmax_rows(ctx(), dx.ptr(), dy.ptr(), rows, n);
    // Guard 1e-5: with 50257 logits in [-10, 10] the largest probability is only ~4e-4.
    expect_close(dy.get(ctx()), ref, 1e-7, 1e-4, "softmax n=" + std::to_string(n), 1e-5);
    softmax_rows(ctx(), dx.ptr(), dx.ptr(), rows, n);
    expect_close(dx.get(ctx()), ref, 1e-7, 1e-4, "softmax in place n=" + std::to_string(n), 1e-5);
  }
  // Argmax: exact ids; ties go to the lowest id; NaN never wins.
  for (int64_t n : {1, 3, 4097}) {
    std::vector<float> x = random_floats(rng_, static_cast<size_t>(3 * n), -1.0f, 1.0f);
    std::vector<int32_t> want(3);
    for (int r = 0; r < 3; ++r) {
      want[r] = static_cast<int32_t>(std::max_element(&x[r * n], &x[r * n] + n) - &x[r * n]);
    }
    if (n > 2) {
      x[1 * n + n - 1] = 5.0f;  // row 1: tie between ids 1 and n-1
      x[1 * n + 1] = 5.0f;
      want[1] = 1;
      x[2 * n + 0] = NAN;  // row 2: NaN at 0 and a clear maximum
      x[2 * n + 2] = 7.0f;
      want[2] = 2;
    }
    DeviceArray<float> dx(ctx(), x);
    DeviceArray<int32_t> out(ctx(), size_t{3});
    argmax_rows(ctx(), dx.ptr(), 3, n, out.ptr());
    EXPECT_EQ(out.get(ctx()), want) << "argmax n=" << n;
  }
}

// Activations: expf / tanhf are within a few ulp: atol 2e-6 (GELU's 1 + tanh cancels for x < 0),
// rtol 1e-5 on inputs in [-8, 8]; add, mul and scale are one correctly rounded fp32 operation:
// rtol 1e-7; softcap 5 tanh(x / 5): atol 1e-5 (2 ulp of tanhf times 5).
TEST_F(CudaOps, ActivationsAndElementwise) {
  for (int64_t n : {1, 17, 3 * 4097}) {
    const std::vector<float> a = random_floats(rng_, static_cast<size_t>(n), -8.0f, 8.0f);
    const std::vector<float> b = random_floats(rng_, static_cast<size_t>(n), -2.0f, 2.0f);
    DeviceArray<float> da(ctx(), a), db(ctx(), b), out(ctx(), a.size());
    std::vector<double> r_silu(a.size()), r_swiglu(a.size()), r_gelu(a.size()), r_add(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = a[i];
      r_silu[i] = x / (1.0 + std::exp(-x));
      r_swiglu[i] = r_silu[i] * b[i];
      r_gelu[i] = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      r_add[i] = double(a[i]) + b[i];
    }
    const std::string what = " n=" + std::to_string(n);
    silu(ctx(), da.ptr(), out.ptr(), n);
    expect_close(out.get(ctx()), r_silu, 2e-6, 1e-5, "silu" + what);
    swiglu(ctx(), da.ptr(), db.ptr(), out.ptr(), n);
    expect_close(out.get(ctx()), r_swiglu, 2e-6, 1e-5, "swiglu" + what);
    gelu(ctx(), da.ptr(), out.ptr(), n);
    expect_close(out.get(ctx()), r_gelu, 2e-6, 1e-5, "gelu" + what);
    add(ctx(), da.ptr(), db.ptr(), out.ptr(), n);
    expect_close(out.get(ctx()), r_add, 0.0, 1e-7, "add" + what);
    // mul and scale: one correctly rounded fp32 product; softcap: tanhf, atol 2e-6 * cap.
    std::vector<double> r_mul(a.size()), r_scale(a.size()), r_cap(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      r_mul[i] = double(a[i]) * b[i];
      r_scale[i] = double(a[i]) * 0.125;
      r_cap[i] = 5.0 * std::tanh(a[i] / 5.0);
    }
    mul(ctx(), da.ptr(), db.ptr(), out.ptr(), n);
    expect_close(out.get(ctx()), r_mul, 0.0, 1e-7, "mul" + what);
    scale(ctx(), da.ptr(), 0.125f, out.ptr(), n);
    expect_close(out.get(ctx()), r_scale, 0.0, 1e-7, "scale" + what);
    softcap(ctx(), da.ptr(), 5.0f, out.ptr(), n);
    expect_close(out.get(ctx()), r_cap, 1e-5, 1e-5, "softcap" + what);
  }
  const int64_t T = 3, n = 17;
  const std::vector<float> y = random_floats(rng_, T * n, -1.0f, 1.0f), bias = random_floats(rng_, n, -1.0f, 1.0f);
  DeviceArray<float> dy(ctx(), y), dbias(ctx(), bias);
  add_bias(ctx(), dy.ptr(), dbias.ptr(), T, n);
  std::vector<double> ref(y.size());
  for (int64_t i = 0; i < T * n; ++i) ref[i] = double(y[i]) + bias[i % n];
  expect_close(dy.get(ctx()), ref, 0.0, 1e-7, "add_bias");
}

// CPU reference of the sampling chain (the order and definitions of ops.h / core::SamplerChain).
std::vector<double> ref_distribution(const float* logits, int64_t n, const SamplingConfig& c) {
  std::vector<double> p(static_cast<size_t>(n), 0.0);
  if (c.temperature <= 0.0f) {
    p[std::max_element(logits, logits + n) - logits] = 1.0;
    return p;
  }
  std::vector<float> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[i] = logits[i] / c.temperature;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] > keys[b]; });
  const int64_t k = (c.top_k <= 0 || c.top_k >= n) ? n : c.top_k;
  std::vector<double> e(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += (e[i] = std::exp(double(keys[order[i]]) - keys[order[0]]));
  int64_t m = 1;
  double before = e[0];
  for (int64_t i = 1; i < k; ++i) {
    const bool keep_p = c.top_p >= 1.0f || before < c.top_p * total;
    const bool keep_min = c.min_p <= 0.0f || e[i] >= c.min_p;
    if (!(keep_p && keep_min)) break;
    m = i + 1;
    before += e[i];
  }
  double kept = 0;
  for (int64_t i = 0; i < m; ++i) kept += e[i];
  for (int64_t i = 0; i < m; ++i) p[order[i]] = e[i] / kept;
  return p;
}

// The processed distribution: exp in fp32 and CUB's fp32 scan: atol 1e-6, rtol 1e-4; the kept set
// must match exactly (random logits leave no token within rounding of a cut-off).
TEST_F(CudaOps, SamplingDistributionMatchesChain) {
  const SamplingConfig configs[] = {{0.8f, 40, 0.95f, 0.05f}, {1.0f, 0, 1.0f, 0.0f}, {0.7f, 5, 1.0f, 0.0f},
                                    {1.3f, 0, 0.5f, 0.0f},    {1.0f, 0, 1.0f, 0.2f}, {0.0f, 40, 0.95f, 0.05f}};
  for (int64_t n : {1, 3, 17, 4097, 32000}) {
    const int64_t rows = 2;
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(rows * n));
    for (float& l : logits) l = nd(rng_);
    DeviceArray<float> dl(ctx(), logits), dp(ctx(), logits.size());
    for (const SamplingConfig& c : configs) {
      sampling_distribution(ctx(), dl.ptr(), dp.ptr(), rows, n, c);
      const std::vector<float> got = dp.get(ctx());
      std::vector<double> ref;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<double> rr = ref_distribution(&logits[r * n], n, c);
        ref.insert(ref.end(), rr.begin(), rr.end());
      }
      const std::string what = "sampling n=" + std::to_string(n) + " T=" + std::to_string(c.temperature) +
                               " k=" + std::to_string(c.top_k) + " p=" + std::to_string(c.top_p) +
                               " min_p=" + std::to_string(c.min_p);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i] > 0.0f, ref[i] > 0.0) << what << ": kept set differs at " << i;
      }
      expect_close(got, ref, 1e-6, 1e-4, what);
      for (int64_t r = 0; r < rows; ++r) {
        const double sum = std::accumulate(got.begin() + r * n, got.begin() + (r + 1) * n, 0.0);
        EXPECT_NEAR(sum, 1.0, 1e-5) << what;
      }
    }
  }
}

// Penalty: the same IEEE division / multiplication as the reference: exact.
TEST_F(CudaOps, RepeatPenaltyOncePerDistinctToken) {
  const int64_t n = 17;
  const std::vector<float> logits = random_floats(rng_, n, -3.0f, 3.0f);
  const std::vector<int32_t> tokens = {3, 5, 3, 16, -1, 17, 0, 5, 3};  // duplicates and bad ids
  DeviceArray<float> dl(ctx(), logits);
  DeviceArray<int32_t> dt(ctx(), tokens);
  repeat_penalty(ctx(), dl.ptr(), n, dt.ptr(), static_cast<int64_t>(tokens.size()), 1.3f);
  std::vector<float> ref = logits;
  for (int32_t id : {0, 3, 5, 16}) ref[id] = ref[id] > 0 ? ref[id] / 1.3f : ref[id] * 1.3f;
  EXPECT_EQ(dl.get(ctx()), ref);
}

// Draws: exact ids on a hand-made distribution; on a real one, the drawn token's CDF interval
// must contain u (within 1e-5 for the scan's rounding).
TEST_F(CudaOps, SampleInverseCdf) {
  DeviceArray<float> probs(ctx(), std::vector<float>{0.0f, 0.25f, 0.0f, 0.75f, 0.0f});
  DeviceArray<int32_t> token(ctx(), size_t{1});
  const std::pair<double, int32_t> expect[] = {{0.0, 1}, {0.2, 1}, {0.25, 3}, {0.3, 3}, {0.9999, 3}};
  for (const auto& [u, id] : expect) {
    sample_from_probs(ctx(), probs.ptr(), 5, u, token.ptr());
    EXPECT_EQ(token.get(ctx())[0], id) << "u=" << u;
  }

  const int64_t n = 4097;
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(n);
  for (float& l : logits) l = nd(rng_);
  DeviceArray<float> dl(ctx(), logits), dp(ctx(), static_cast<size_t>(n));
  sampling_distribution(ctx(), dl.ptr(), dp.ptr(), 1, n, SamplingConfig{1.0f, 0, 0.9f, 0.0f});
  const std::vector<float> p = dp.get(ctx());
  std::vector<double> cum(n);
  std::partial_sum(p.begin(), p.end(), cum.begin());
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  for (int i = 0; i < 200; ++i) {
    const double u = std::min(ud(rng_), 0.99999);
    sample_from_probs(ctx(), dp.ptr(), n, u, token.ptr());
    const int32_t id = token.get(ctx())[0];
    ASSERT_TRUE(id >= 0 && id < n);
    ASSERT_GT(p[id], 0.0f) << "drew a zero-probability token";
    const double target = u * cum[n - 1], lo = id > 0 ? cum[id - 1] : 0.0;
    EXPECT_LE(lo, target + 1e-5) << "u=" << u;
    EXPECT_GT(cum[id], target - 1e-5) << "u=" << u;
  }

}

// Two contexts (a draft and a target model) on one device keep separate state (stream, cuBLAS
// handle, scratch): the same matmul on both agrees (rtol 1e-6: cuBLAS promises bitwise
// reproducibility only per handle/stream configuration).
TEST_F(CudaOps, TwoContextsSideBySide) {
  Context other(0);
  EXPECT_NE(other.stream(), ctx().stream());
  EXPECT_NE(other.blas(), ctx().blas());
  const HostMatrix m = random_matrix(rng_, DType::Q4_K, 256, 9);
  const std::vector<float> x = random_floats(rng_, 256 * 17, -1.0f, 1.0f);
  DeviceArray<uint8_t> w(ctx(), m.bytes);
  DeviceArray<float> dx(ctx(), x), y1(ctx(), 9 * 17), y2(ctx(), 9 * 17);
  const MatrixView dm{DType::Q4_K, w.ptr(), 256, 9, m.row_bytes};
  for (int64_t T : {3, 17}) {  // matvec kernel, then dequantize + cuBLAS with scratch
    matmul(ctx(), dx.ptr(), T, dm, y1.ptr());
    matmul(other, dx.ptr(), T, dm, y2.ptr());
    ctx().synchronize();
    other.synchronize();
    const std::vector<float> a = y1.get(ctx());
    expect_close(y2.get(ctx()), to_double(a), 0.0, 1e-6, "two contexts T=" + std::to_string(T));
  }
}

TEST_F(CudaOps, BadArgumentsThrowInvalidArgument) {
  DeviceArray<float> buf(ctx(), size_t{64});
  try {
    matmul(ctx(), buf.ptr(), 1, MatrixView{DType::Q4_K, buf.ptr(), 100, 1, 144}, buf.ptr() + 32);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
  }
  EXPECT_THROW(rope(ctx(), buf.ptr(), 1, nullptr, RopeParams{1, 8, 7}), Error);
  EXPECT_THROW(attention(ctx(), buf.ptr(), 1, KVView{buf.ptr(), buf.ptr(), 8, 0}, nullptr,
                         AttentionParams{3, 2, 8, 1.0f}, buf.ptr() + 32), Error);
  EXPECT_THROW(attention(ctx(), buf.ptr(), 1, KVView{buf.ptr(), buf.ptr(), 8, 0}, nullptr,
                         AttentionParams{1, 1, 8, 1.0f, 4}, buf.ptr() + 32), Error);  // a window, no positions
  EXPECT_THROW(softcap(ctx(), buf.ptr(), 0.0f, buf.ptr(), 8), Error);
  EXPECT_THROW(sampling_distribution(ctx(), buf.ptr(), buf.ptr() + 32, 1, 8, SamplingConfig{1.0f, 0, 0.0f, 0.0f}),
               Error);
}

}  // namespace
}  // namespace specmoe::kernels::cuda

#else  // !SPECMOE_HAVE_CUDA

TEST(CudaOps, BackendNotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend (SPECMOE_CUDA=OFF or nvcc/cuBLAS not found)";
}

#endif
