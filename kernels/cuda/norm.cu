// RMSNorm and LayerNorm: one block per token row, block reductions in float.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kNormThreads = 256;

// x, out: [T, n]; grid = T. Each thread reads and then writes only its own elements (after the
// reduction's barrier), so out may alias x.
__global__ void rms_norm_kernel(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* outr = out + blockIdx.x * n;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] * scale;
    outr[i] = w != nullptr ? v * w[i] : v;
  }
}

__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* outr = out + blockIdx.x * n;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s) / static_cast<float>(n);
  // Second pass over (x - mean)^2: avoids the cancellation of E[x^2] - mean^2.
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = xr[i] - mean;
    sq += d * d;
  }
  const float var = block_sum(sq) / static_cast<float>(n);
  const float inv = 1.0f / sqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = (xr[i] - mean) * inv;
    if (w != nullptr) v *= w[i];
    if (b != nullptr) v += b[i];
    outr[i] = v;
  }
}

void check_rows(const char* op, const float* x, const float* out, int64_t T, int64_t n) {
  require(T >= 0 && n >= 0, op, "negative size");
  require(T <= 0x7fffffffLL, op, "T = " + std::to_string(T) + " exceeds the grid limit");
  if (T > 0 && n > 0) {
    require_ptr(x, op, "x");
    require_ptr(out, op, "out");
  }
}

}  // namespace detail

void rms_norm(Context& ctx, const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) {
  detail::check_rows("rms_norm", x, out, T, n);
  if (T == 0 || n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::rms_norm_kernel<<<static_cast<unsigned>(T), detail::kNormThreads, 0, detail::stream_of(ctx)>>>(x, w, out,
                                                                                                        n, eps);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void layer_norm(Context& ctx, const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                float eps) {
  detail::check_rows("layer_norm", x, out, T, n);
  if (T == 0 || n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::layer_norm_kernel<<<static_cast<unsigned>(T), detail::kNormThreads, 0, detail::stream_of(ctx)>>>(
      x, w, b, out, n, eps);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
