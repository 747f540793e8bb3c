// lfm2's short causal convolution (kernels/cpu/ops.h short_conv is the definition): one thread per
// (token, channel), the taps summed in the CPU's order, oldest first, with the same skipped zero
// rows. n_taps is small (3 for LFM2), so a thread reads its channel of n_taps rows directly;
// consecutive threads read consecutive channels (coalesced).
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

__global__ void short_conv_kernel(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                                  int n_taps, const float* taps, float* out) {
  const int P = n_taps - 1;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < T * width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, c = i % width;
    float sum = 0.0f;
    for (int k = 0; k < n_taps; ++k) {
      const int64_t r = k < P ? prev[t * P + k] : row0 + t;
      if (r < 0) continue;
      sum = __fadd_rn(sum, __fmul_rn(rows[r * width + c], taps[c * n_taps + k]));  // no FMA: the CPU's roundings
    }
    out[i] = sum;
  }
}

}  // namespace detail

void short_conv(Context& ctx, const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                int n_taps, const float* taps, float* out) {
  detail::require(T >= 0 && width >= 0 && row0 >= 0, "short_conv", "negative size");
  detail::require(n_taps >= 1, "short_conv", "n_taps < 1");
  if (T == 0 || width == 0) return;
  detail::require_ptr(rows, "short_conv", "rows");
  detail::require_ptr(taps, "short_conv", "taps");
  detail::require_ptr(out, "short_conv", "out");
  detail::require(n_taps == 1 || prev != nullptr, "short_conv", "prev is null");
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 256;
  detail::short_conv_kernel<<<detail::grid_for(T * width, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
      rows, prev, T, row0, width, n_taps, taps, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
