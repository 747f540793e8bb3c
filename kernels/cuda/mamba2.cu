// The Mamba-2 mixer's recurrence (kernels/op_params.h Mamba2Params is the definition;
// kernels/cpu/mamba2.cpp the CPU op), in the CPU op's three passes: the convolution one thread per
// channel over the tokens in order (a channel's tail is its thread's), the scan one block per head
// and one thread per row of the head's state (a row of each slot is its thread's), the gate and
// the grouped RMS norm one block per (token, group). Sums in the CPU's order without FMA; the
// norm's sum of squares on one thread, in order.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

// Mamba2Params' size helpers are host functions: the sizes from its fields.
struct M2Sizes {
  int64_t di, C, in, F, conv_floats;
  __device__ explicit M2Sizes(const Mamba2Params& p)
      : di(static_cast<int64_t>(p.n_head) * p.head_dim),
        C(di + 2 * static_cast<int64_t>(p.n_group) * p.d_state),
        in(di + C + p.n_head),
        F((p.d_conv - 1) * C + di * p.d_state),
        conv_floats((p.d_conv - 1) * C) {}
};

__device__ __forceinline__ float m2_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

__global__ void mamba2_conv_kernel(const float* zxbcdt, const float* conv_w, const float* conv_b, float* states,
                                   const int32_t* slots, int64_t T, Mamba2Params p, float* xbc) {
  const M2Sizes z(p);
  const int P = p.d_conv - 1;
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= z.C) return;
  const float* w = conv_w + c * p.d_conv;
  for (int64_t t = 0; t < T; ++t) {
    const float* tail_in = slots[2 * t] >= 0 ? states + slots[2 * t] * z.F : nullptr;
    float* tail_out = states + slots[2 * t + 1] * z.F;
    const float xc = zxbcdt[t * z.in + z.di + c];
    float s = 0.0f;
    for (int k = 0; k < P; ++k) s = __fadd_rn(s, __fmul_rn(tail_in ? tail_in[k * z.C + c] : 0.0f, w[k]));
    s = __fadd_rn(s, __fmul_rn(xc, w[P]));
    if (conv_b) s = __fadd_rn(s, conv_b[c]);
    xbc[t * z.C + c] = s / (1.0f + expf(-s));
    for (int k = 0; k + 1 < P; ++k) tail_out[k * z.C + c] = tail_in ? tail_in[(k + 1) * z.C + c] : 0.0f;
    if (P > 0) tail_out[(P - 1) * z.C + c] = xc;
  }
}

__global__ void mamba2_scan_kernel(const float* zxbcdt, const float* dt_bias, const float* a, const float* d,
                                   float* states, const int32_t* slots, int64_t T, Mamba2Params p, const float* xbc,
                                   float* out) {
  const M2Sizes z(p);
  const int64_t h = blockIdx.x, N = p.d_state, hd = p.head_dim;
  const int64_t g = h / (p.n_head / p.n_group);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    const int64_t ii = h * hd + i;
    for (int64_t t = 0; t < T; ++t) {
      const float* s_in = slots[2 * t] >= 0 ? states + slots[2 * t] * z.F + z.conv_floats : nullptr;
      float* s_out = states + slots[2 * t + 1] * z.F + z.conv_floats;
      const float* x = xbc + t * z.C;
      const float* B = x + z.di + g * N;
      const float* Cg = x + z.di + p.n_group * N + g * N;
      const float dt = m2_softplus(zxbcdt[t * z.in + z.di + z.C + h] + dt_bias[h]);
      const float dA = expf(dt * a[h]);
      const float x_dt = __fmul_rn(x[ii], dt);
      const float* src = s_in ? s_in + ii * N : nullptr;
      float* dst = s_out + ii * N;
      float y = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        const float s = __fadd_rn(src ? __fmul_rn(src[n], dA) : 0.0f, __fmul_rn(B[n], x_dt));
        dst[n] = s;
        y = __fadd_rn(y, __fmul_rn(s, Cg[n]));
      }
      out[t * z.di + ii] = __fadd_rn(y, __fmul_rn(x[ii], d[h]));
    }
  }
}

__global__ void mamba2_gate_norm_kernel(const float* zxbcdt, const float* norm_w, Mamba2Params p, float* out) {
  const M2Sizes z(p);
  const int64_t t = blockIdx.x / p.n_group, g = blockIdx.x % p.n_group, w = z.di / p.n_group;
  const float* zz = zxbcdt + t * z.in + g * w;
  float* y = out + t * z.di + g * w;
  for (int64_t i = threadIdx.x; i < w; i += blockDim.x) y[i] = __fmul_rn(y[i], zz[i] / (1.0f + expf(-zz[i])));
  if (!norm_w) return;
  __shared__ float scale;
  __syncthreads();
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (int64_t i = 0; i < w; ++i) ss = __fadd_rn(ss, __fmul_rn(y[i], y[i]));
    scale = 1.0f / sqrtf(ss / static_cast<float>(w) + p.eps);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < w; i += blockDim.x) y[i] = __fmul_rn(__fmul_rn(y[i], scale), norm_w[g * w + i]);
}

}  // namespace detail

void mamba2(Context& ctx, const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
            const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
            const Mamba2Params& p, float* xbc, float* out) {
  detail::require(T >= 0, "mamba2", "negative size");
  detail::require(p.n_head > 0 && p.n_group > 0 && p.n_head % p.n_group == 0, "mamba2",
                  "heads must be a positive multiple of the groups");
  detail::require(p.head_dim > 0 && p.d_state > 0 && p.d_conv >= 1, "mamba2", "empty head, state or convolution");
  if (T == 0) return;
  for (const void* ptr : {static_cast<const void*>(zxbcdt), static_cast<const void*>(conv_w),
                          static_cast<const void*>(dt_bias), static_cast<const void*>(a), static_cast<const void*>(d),
                          static_cast<const void*>(states), static_cast<const void*>(slots),
                          static_cast<const void*>(xbc), static_cast<const void*>(out)})
    detail::require_ptr(ptr, "mamba2", "an argument");
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 128;
  detail::mamba2_conv_kernel<<<detail::grid_for(p.conv_dim(), kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
      zxbcdt, conv_w, conv_b, states, slots, T, p, xbc);
  SPECMOE_CUDA_CHECK_LAUNCH();
  detail::mamba2_scan_kernel<<<p.n_head, kThreads, 0, detail::stream_of(ctx)>>>(zxbcdt, dt_bias, a, d, states, slots,
                                                                                T, p, xbc, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
  detail::mamba2_gate_norm_kernel<<<static_cast<unsigned>(T * p.n_group), kThreads, 0, detail::stream_of(ctx)>>>(
      zxbcdt, norm_w, p, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
