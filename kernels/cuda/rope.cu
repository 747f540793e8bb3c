// Rotary position embedding (Su et al. 2021), in place: one thread per rotated pair.
#include <cmath>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

// x: [T, n_head, head_dim]; pair index g covers (token, head, i) with i < rope_dims / 2.
// RopeParams is passed by value (plain data; freq_factors a device pointer or null).
__global__ void rope_kernel(float* x, int64_t T, const int32_t* positions, RopeParams p) {
  const int half = p.rope_dims / 2;
  const bool split_halves = p.pairing == RopePairing::SplitHalves;
  const int64_t total = T * p.n_head * half;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(g % half);
    const int64_t th = g / half;  // token * n_head + head
    const int64_t t = th / p.n_head;
    float* v = x + th * p.head_dim;
    // angle = pos * freq_scale * base^(-2i/rope_dims) / factor_i (ggml's rope: theta_scale^i,
    // linear scaling, llama3's frequency factors), mixed by YaRN with the extrapolated angle.
    float inv_freq = powf(p.freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(p.rope_dims));
    if (p.freq_factors != nullptr) inv_freq /= p.freq_factors[i];
    float angle = static_cast<float>(positions[t]) * p.freq_scale * inv_freq;
    if (p.ext_factor != 0.0f) {
      const float extrap = static_cast<float>(positions[t]) * inv_freq;
      const float y = (static_cast<float>(i) - p.corr_low) / fmaxf(0.001f, p.corr_high - p.corr_low);
      const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p.ext_factor;
      angle = angle * (1.0f - mix) + extrap * mix;
    }
    float s, c;
    sincosf(angle, &s, &c);
    s *= p.attn_factor;
    c *= p.attn_factor;
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
  require(std::isfinite(p.attn_factor) && std::isfinite(p.ext_factor), "rope", "attn_factor and ext_factor must be finite");
  if (T == 0 || p.rope_dims == 0) return;
  detail::require_ptr(x, "rope", "x");
  detail::require_ptr(positions, "rope", "positions");
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 256;
  const int64_t pairs = T * p.n_head * (p.rope_dims / 2);
  detail::rope_kernel<<<detail::grid_for(pairs, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(x, T, positions, p);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
