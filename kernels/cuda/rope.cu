// Rotary position embedding (Su et al. 2021), in place: one thread per rotated pair.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

// x: [T, n_head, head_dim]; pair index g covers (token, head, i) with i < rope_dims / 2.
__global__ void rope_kernel(float* x, int64_t T, const int32_t* positions, int n_head, int head_dim, int rope_dims,
                            float freq_base, float freq_scale, bool split_halves) {
  const int half = rope_dims / 2;
  const int64_t total = T * n_head * half;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(g % half);
    const int64_t th = g / half;  // token * n_head + head
    const int64_t t = th / n_head;
    float* v = x + th * head_dim;
    // angle = pos * freq_scale * base^(-2i/rope_dims) (ggml's rope: theta_scale^i, linear scaling).
    const float inv_freq = powf(freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(rope_dims));
    const float angle = static_cast<float>(positions[t]) * freq_scale * inv_freq;
    float s, c;
    sincosf(angle, &s, &c);
    const int a = split_halves ? i : 2 * i;
    const int b = split_halves ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace detail

void rope(Context& ctx, float* x, int64_t T, const int32_t* positions, const RopeParams& p) {
  using detail::require;
  require(T >= 0, "rope", "T < 0");
  require(p.n_head > 0 && p.head_dim > 0, "rope", "n_head and head_dim must be positive");
  require(p.rope_dims >= 0 && p.rope_dims <= p.head_dim && p.rope_dims % 2 == 0, "rope",
          "rope_dims = " + std::to_string(p.rope_dims) + " must be even and in [0, head_dim = " +
              std::to_string(p.head_dim) + "]");
  require(p.freq_base > 0.0f, "rope", "freq_base must be positive");
  if (T == 0 || p.rope_dims == 0) return;
  detail::require_ptr(x, "rope", "x");
  detail::require_ptr(positions, "rope", "positions");
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 256;
  const int64_t pairs = T * p.n_head * (p.rope_dims / 2);
  detail::rope_kernel<<<detail::grid_for(pairs, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
      x, T, positions, p.n_head, p.head_dim, p.rope_dims, p.freq_base, p.freq_scale,
      p.pairing == RopePairing::SplitHalves);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
