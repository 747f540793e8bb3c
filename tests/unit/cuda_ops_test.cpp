// The CUDA ops (kernels/cuda/ops.h) beyond what the differential harness covers
// (tests/unit/backend_ops_test.cpp runs every Backend op, CUDA included, against kernels/cpu's
// references): the device query and the error macros (no device needed), dequantization to F32 and
// F16 against kernels::cpu::dequantize_row, the NaN row of an out-of-range get_rows id, the ops
// outside the Backend interface (softmax_rows, silu) against kernels/cpu, the repetition
// penalty's once-per-distinct-token rule, the inverse-CDF draw, two contexts side by side, and bad
// arguments. GPU tests GTEST_SKIP() without a device; built without CUDA, one test skips.
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
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

#include "backend_ops.h"
#include "cuda_device_array.h"

namespace specmoe::kernels::cuda {
namespace {

using specmoe::testing::DeviceArray;
using specmoe::testing::ops::Fill;
using specmoe::testing::ops::HostMatrix;
using specmoe::testing::ops::make_matrix;
using specmoe::testing::ops::Output;

bool has_device() { return cuda_device_count() > 0; }

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The harness's one check (tests/backend_ops.h): nMSE within bound, finite, not all zeros.
void expect_matches(const std::vector<float>& got, const std::vector<float>& ref, double bound, const std::string& what) {
  const specmoe::testing::ops::Verdict v = specmoe::testing::ops::check(Output{"out", ref}, Output{"out", got}, bound);
  EXPECT_TRUE(v.ok) << what << ": " << v.message;
}

const DType kQuantTypes[] = {DType::Q8_0,  DType::Q4_0,    DType::Q4_1,   DType::Q5_0,  DType::Q5_1,
                             DType::IQ4_NL, DType::Q2_K,   DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                             DType::Q6_K,  DType::IQ4_XS,  DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                             DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,  DType::IQ1_M, DType::TQ1_0,
                             DType::TQ2_0};

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

// Dequantization against kernels::cpu::dequantize_row on random codes (every payload byte
// pattern): F32 output within FMA contraction of the CPU's rounding (|d| <= 1e-6 |ref| + 1e-30);
// F16 output = the F32 value rounded to half: within half an ulp, 2^-11 |ref| (plus 2^-25 for
// subnormal halves).
TEST_F(CudaOps, DequantizeF32AndF16MatchTheCpu) {
  for (DType type : kQuantTypes) {
    for (int64_t blocks : {1, 3, 17}) {
      const int64_t n = blocks * dtype_info(type).block_size;
      const HostMatrix m = make_matrix(type, n, 1, 7 + blocks, Fill::RandomCodes);
      std::vector<float> ref(static_cast<size_t>(n));
      cpu::dequantize_row(type, m.bytes.data(), ref.data(), n);
      DeviceArray<uint8_t> src(ctx(), m.bytes);
      DeviceArray<float> out32(ctx(), static_cast<size_t>(n));
      DeviceArray<uint16_t> out16(ctx(), static_cast<size_t>(n));
      dequantize_f32(ctx(), type, src.ptr(), n, out32.ptr());
      dequantize_f16(ctx(), type, src.ptr(), n, out16.ptr());
      const std::vector<float> got32 = out32.get(ctx());
      const std::vector<uint16_t> got16 = out16.get(ctx());
      const std::string what = std::string(dtype_name(type)) + " n=" + std::to_string(n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(got32[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-30) << what << " f32 [" << i << "]";
        ASSERT_NEAR(fp16_to_fp32(got16[i]), ref[i], std::ldexp(std::fabs(ref[i]), -11) + std::ldexp(1.0, -25))
            << what << " f16 [" << i << "]";
      }
      expect_matches(got32, ref, 1e-12, what);
    }
  }
}

// An id outside the table cannot be reported from the device: its row comes back NaN.
TEST_F(CudaOps, GetRowsOutOfRangeIdGivesNanRow) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::IQ4_XS}) {
    const int64_t n_in = dtype_info(type).block_size == 1 ? 17 : dtype_info(type).block_size;
    const HostMatrix m = make_matrix(type, n_in, 37, 3);
    DeviceArray<uint8_t> table(ctx(), m.bytes);
    DeviceArray<int32_t> bad(ctx(), std::vector<int32_t>{37, -1});
    DeviceArray<float> out(ctx(), static_cast<size_t>(2 * n_in));
    get_rows(ctx(), MatrixView{type, table.ptr(), n_in, 37, m.view.row_bytes}, bad.ptr(), 2, out.ptr());
    for (float v : out.get(ctx())) ASSERT_TRUE(std::isnan(v)) << dtype_name(type) << ": out-of-range id must give NaN";
  }
}

// softmax_rows (not a Backend op: the device sampling uses it) against kernels::cpu::softmax, out
// of place and in place: expf and an fp32 sum over <= 50257 terms.
TEST_F(CudaOps, SoftmaxRowsMatchesTheCpu) {
  for (int64_t n : {1, 3, 17, 4097, 50257}) {
    const int64_t rows = 3;
    const std::vector<float> x = random_floats(rng_, static_cast<size_t>(rows * n), -10.0f, 10.0f);
    std::vector<float> ref = x;
    for (int64_t r = 0; r < rows; ++r) cpu::softmax(ref.data() + r * n, n);
    DeviceArray<float> dx(ctx(), x), dy(ctx(), x.size());
    softmax_rows(ctx(), dx.ptr(), dy.ptr(), rows, n);
    expect_matches(dy.get(ctx()), ref, 1e-9, "softmax n=" + std::to_string(n));
    softmax_rows(ctx(), dx.ptr(), dx.ptr(), rows, n);
    expect_matches(dx.get(ctx()), ref, 1e-9, "softmax in place n=" + std::to_string(n));
  }
}

// silu (not a Backend op) against kernels::cpu::silu: expf within a few ulp.
TEST_F(CudaOps, SiluMatchesTheCpu) {
  for (int64_t n : {1, 17, 3 * 4097}) {
    const std::vector<float> a = random_floats(rng_, static_cast<size_t>(n), -8.0f, 8.0f);
    std::vector<float> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = cpu::silu(a[i]);
    DeviceArray<float> da(ctx(), a), out(ctx(), a.size());
    silu(ctx(), da.ptr(), out.ptr(), n);
    expect_matches(out.get(ctx()), ref, 1e-10, "silu n=" + std::to_string(n));
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
// handle, scratch): the same matmul on both agrees (nMSE 1e-12, i.e. ~1e-6 relative: cuBLAS
// promises bitwise reproducibility only per handle/stream configuration).
TEST_F(CudaOps, TwoContextsSideBySide) {
  Context other(0);
  EXPECT_NE(other.stream(), ctx().stream());
  EXPECT_NE(other.blas(), ctx().blas());
  const HostMatrix m = make_matrix(DType::Q4_K, 256, 9, 11);
  const std::vector<float> x = random_floats(rng_, 256 * 17, -1.0f, 1.0f);
  DeviceArray<uint8_t> w(ctx(), m.bytes);
  DeviceArray<float> dx(ctx(), x), y1(ctx(), 9 * 17), y2(ctx(), 9 * 17);
  const MatrixView dm{DType::Q4_K, w.ptr(), 256, 9, m.view.row_bytes};
  for (int64_t T : {3, 17}) {  // matvec kernel, then dequantize + cuBLAS with scratch
    matmul(ctx(), dx.ptr(), T, dm, y1.ptr());
    matmul(other, dx.ptr(), T, dm, y2.ptr());
    ctx().synchronize();
    other.synchronize();
    expect_matches(y2.get(ctx()), y1.get(ctx()), 1e-12, "two contexts T=" + std::to_string(T));
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
  EXPECT_THROW(attention(ctx(), buf.ptr(), 1, KVView::f32(buf.ptr(), buf.ptr(), 8, 0), nullptr,
                         AttentionParams{3, 2, 8, 1.0f}, buf.ptr() + 32), Error);
  EXPECT_THROW(sampling_distribution(ctx(), buf.ptr(), buf.ptr() + 32, 1, 8, SamplingConfig{1.0f, 0, 0.0f, 0.0f}),
               Error);
  EXPECT_THROW(scatter_cols(ctx(), buf.ptr(), 1, 4, nullptr, buf.ptr() + 32, 8, 0.0f), Error);  // cols null
  EXPECT_THROW(scatter_cols(ctx(), buf.ptr(), 1, 9, nullptr, buf.ptr() + 32, 8, 0.0f), Error);  // n_src > n_dst
}

}  // namespace
}  // namespace specmoe::kernels::cuda

#else  // !SPECMOE_HAVE_CUDA

TEST(CudaOps, BackendNotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend (SPECMOE_CUDA=OFF or nvcc/cuBLAS not found)";
}

#endif
