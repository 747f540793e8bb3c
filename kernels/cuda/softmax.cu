// Row softmax and row argmax: one block per row, block reductions.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kRowThreads = 1024;

// x, y: [rows, n]; grid = rows. y may alias x: each thread rewrites only elements it read, after
// the reductions' barriers.
__global__ void softmax_kernel(const float* x, float* y, int64_t n) {
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = block_max(m);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - m);
  const float inv = 1.0f / block_sum(s);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}

// (value, index) order for argmax: larger value wins, then the lower index; NaN never wins
// (every comparison with NaN is false) and index -1 means "nothing yet".
__device__ __forceinline__ bool better(float v, int64_t i, float best_v, int64_t best_i) {
  if (best_i < 0) return !isnan(v);
  return v > best_v || (v == best_v && i < best_i);
}

__global__ void argmax_kernel(const float* x, int64_t n, int32_t* out) {
  const float* xr = x + blockIdx.x * n;
  float best_v = -INFINITY;
  int64_t best_i = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (better(xr[i], i, best_v, best_i)) {
      best_v = xr[i];
      best_i = i;
    }
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (oi >= 0 && better(ov, oi, best_v, best_i)) {
      best_v = ov;
      best_i = oi;
    }
  }
  __shared__ float sv[kWarp];
  __shared__ int64_t si[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) {
    sv[warp] = best_v;
    si[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    const int n_warps = blockDim.x / kWarp;
    best_v = lane < n_warps ? sv[lane] : -INFINITY;
    best_i = lane < n_warps ? si[lane] : -1;
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, offset);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (oi >= 0 && better(ov, oi, best_v, best_i)) {
        best_v = ov;
        best_i = oi;
      }
    }
    if (lane == 0) out[blockIdx.x] = static_cast<int32_t>(best_i < 0 ? 0 : best_i);
  }
}

}  // namespace detail

void softmax_rows(Context& ctx, const float* x, float* y, int64_t rows, int64_t n) {
  using detail::require;
  require(rows >= 0 && n >= 0, "softmax_rows", "negative size");
  require(rows <= 0x7fffffffLL, "softmax_rows", "rows exceeds the grid limit");
  if (rows == 0 || n == 0) return;
  detail::require_ptr(x, "softmax_rows", "x");
  detail::require_ptr(y, "softmax_rows", "y");
  DeviceGuard guard(ctx.device());
  detail::softmax_kernel<<<static_cast<unsigned>(rows), detail::kRowThreads, 0, detail::stream_of(ctx)>>>(x, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void argmax_rows(Context& ctx, const float* x, int64_t rows, int64_t n, int32_t* out) {
  using detail::require;
  require(rows >= 0 && n > 0, "argmax_rows", "rows must be >= 0 and n > 0");
  require(rows <= 0x7fffffffLL && n <= 0x7fffffffLL, "argmax_rows", "size exceeds int32 ids / the grid limit");
  if (rows == 0) return;
  detail::require_ptr(x, "argmax_rows", "x");
  detail::require_ptr(out, "argmax_rows", "out");
  DeviceGuard guard(ctx.device());
  detail::argmax_kernel<<<static_cast<unsigned>(rows), detail::kRowThreads, 0, detail::stream_of(ctx)>>>(x, n, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
