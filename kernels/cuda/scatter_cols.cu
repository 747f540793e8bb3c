// The column scatter (kernels/cpu/ops.h scatter_cols_ref is the definition): an EAGLE-3 head's
// logits over its draft vocabulary moved into the target's. Two grid-stride kernels on the
// context's stream, which runs them in order: the fill of every dst element, then one thread per
// source element writing it to its column. Plain copies: the same bits as the CPU.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

__global__ void scatter_cols_fill_kernel(float* y, float value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = value;
}

// An id outside [0, n_dst) cannot be reported from the device; it is skipped (nothing written
// out of bounds, the fill stays), the CPU op throws on it.
__global__ void scatter_cols_kernel(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                                    int64_t n_dst) {
  const int64_t n = rows * n_src;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n_src, j = i - r * n_src;
    const int32_t c = cols[j];
    if (c >= 0 && c < n_dst) dst[r * n_dst + c] = src[i];
  }
}

}  // namespace detail

void scatter_cols(Context& ctx, const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                  int64_t n_dst, float fill) {
  detail::require(rows >= 0 && n_src >= 0 && n_dst >= 0, "scatter_cols", "negative size");
  detail::require(n_src <= n_dst, "scatter_cols", "more source columns than destination columns");
  if (rows == 0 || n_dst == 0) return;
  detail::require_ptr(dst, "scatter_cols", "dst");
  if (n_src > 0) {
    detail::require_ptr(src, "scatter_cols", "src");
    detail::require_ptr(cols, "scatter_cols", "cols");
  }
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 256;
  const int64_t n_fill = rows * n_dst, n_scatter = rows * n_src;
  detail::scatter_cols_fill_kernel<<<detail::grid_for(n_fill, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
      dst, fill, n_fill);
  SPECMOE_CUDA_CHECK_LAUNCH();
  if (n_scatter == 0) return;
  detail::scatter_cols_kernel<<<detail::grid_for(n_scatter, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
      src, rows, n_src, cols, dst, n_dst);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
