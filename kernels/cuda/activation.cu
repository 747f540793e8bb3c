// Elementwise ops: SiLU, SwiGLU (and gpt-oss's clamped form, smallthinker's ReLU-gated GLU), GELU (tanh approximation), squared ReLU, clamp, add, mul, scale, softcap, add_bias. Grid-stride loops; each
// thread reads element i before writing element i, so outputs may alias inputs.
#include <initializer_list>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kElemThreads = 256;

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (Hendrycks & Gimpel 2016)
__device__ __forceinline__ float gelu_f(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

#define SPECMOE_GRID_STRIDE(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void silu_kernel(const float* x, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = silu_f(x[i]);
}
__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) out[i] = silu_f(gate[i]) * up[i];
}
__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = gelu_f(x[i]);
}
// moe::swiglu_oai's float math (expf for std::exp).
__global__ void swiglu_oai_kernel(const float* g, const float* u, float* y, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  SPECMOE_GRID_STRIDE(i, n) {
    const float x = g[i] < kLimit ? g[i] : kLimit;
    const float v = u[i] < -kLimit ? -kLimit : (u[i] > kLimit ? kLimit : u[i]);
    y[i] = x / (1.0f + expf(-kAlpha * x)) * (v + 1.0f);
  }
}
// moe::swiglu_clamped's float math (maple).
__global__ void swiglu_clamp_kernel(const float* g, const float* u, float* y, int64_t n, float limit) {
  SPECMOE_GRID_STRIDE(i, n) {
    const float x = g[i] < limit ? g[i] : limit;
    const float v = u[i] < -limit ? -limit : (u[i] > limit ? limit : u[i]);
    y[i] = x / (1.0f + expf(-x)) * v;
  }
}
__global__ void reglu_kernel(const float* g, const float* u, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = (g[i] > 0.0f ? g[i] : 0.0f) * u[i];
}
__global__ void clamp_kernel(const float* x, float limit, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) { y[i] = x[i] < -limit ? -limit : (x[i] > limit ? limit : x[i]); }
}
__global__ void relu_sqr_kernel(const float* x, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    y[i] = r * r;
  }
}
__global__ void xielu_kernel(const float* x, float* y, int64_t n, XIeluParams p) {
  SPECMOE_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = v > 0.0f ? p.alpha_p * v * v + p.beta * v : (expm1f(fminf(v, p.eps)) - v) * p.alpha_n + p.beta * v;
  }
}
__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}
__global__ void add_bias_kernel(float* y, const float* b, int64_t total, int64_t n) {
  SPECMOE_GRID_STRIDE(i, total) y[i] += b[i % n];
}
__global__ void mul_kernel(const float* a, const float* b, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}
__global__ void scale_kernel(const float* x, float s, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = s * x[i];
}
__global__ void softcap_kernel(const float* x, float cap, float inv_cap, float* y, int64_t n) {
  SPECMOE_GRID_STRIDE(i, n) y[i] = cap * tanhf(x[i] * inv_cap);
}

#undef SPECMOE_GRID_STRIDE

void check_elementwise(const char* op, int64_t n, std::initializer_list<const void*> ptrs) {
  require(n >= 0, op, "n < 0");
  if (n == 0) return;
  for (const void* p : ptrs) require_ptr(p, op, "an input or output pointer");
}

}  // namespace detail

void silu(Context& ctx, const float* x, float* y, int64_t n) {
  detail::check_elementwise("silu", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::silu_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      x, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void swiglu(Context& ctx, const float* gate, const float* up, float* out, int64_t n) {
  detail::check_elementwise("swiglu", n, {gate, up, out});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::swiglu_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                          detail::stream_of(ctx)>>>(gate, up, out, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void gelu(Context& ctx, const float* x, float* y, int64_t n) {
  detail::check_elementwise("gelu", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::gelu_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      x, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void relu_sqr(Context& ctx, const float* x, float* y, int64_t n) {
  detail::check_elementwise("relu_sqr", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::relu_sqr_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                            detail::stream_of(ctx)>>>(x, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void xielu(Context& ctx, const float* x, float* y, int64_t n, const XIeluParams& p) {
  detail::check_elementwise("xielu", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::xielu_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      x, y, n, p);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void swiglu_oai(Context& ctx, const float* gate, const float* up, float* out, int64_t n) {
  detail::check_elementwise("swiglu_oai", n, {gate, up, out});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::swiglu_oai_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                              detail::stream_of(ctx)>>>(gate, up, out, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void swiglu_clamp(Context& ctx, const float* gate, const float* up, float* out, int64_t n, float limit) {
  detail::check_elementwise("swiglu_clamp", n, {gate, up, out});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::swiglu_clamp_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                                detail::stream_of(ctx)>>>(gate, up, out, n, limit);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void reglu(Context& ctx, const float* gate, const float* up, float* out, int64_t n) {
  detail::check_elementwise("reglu", n, {gate, up, out});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::reglu_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      gate, up, out, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void clamp(Context& ctx, const float* x, float limit, float* y, int64_t n) {
  detail::check_elementwise("clamp", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::clamp_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      x, limit, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void add(Context& ctx, const float* a, const float* b, float* y, int64_t n) {
  detail::check_elementwise("add", n, {a, b, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::add_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      a, b, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void mul(Context& ctx, const float* a, const float* b, float* y, int64_t n) {
  detail::check_elementwise("mul", n, {a, b, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::mul_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0, detail::stream_of(ctx)>>>(
      a, b, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void scale(Context& ctx, const float* x, float s, float* y, int64_t n) {
  detail::check_elementwise("scale", n, {x, y});
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::scale_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                         detail::stream_of(ctx)>>>(x, s, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void softcap(Context& ctx, const float* x, float cap, float* y, int64_t n) {
  detail::check_elementwise("softcap", n, {x, y});
  detail::require(cap > 0.0f, "softcap", "cap must be positive");
  if (n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::softcap_kernel<<<detail::grid_for(n, detail::kElemThreads), detail::kElemThreads, 0,
                           detail::stream_of(ctx)>>>(x, cap, 1.0f / cap, y, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void add_bias(Context& ctx, float* y, const float* b, int64_t T, int64_t n) {
  detail::require(T >= 0 && n >= 0, "add_bias", "negative size");
  detail::check_elementwise("add_bias", T * n, {y, b});
  if (T == 0 || n == 0) return;
  DeviceGuard guard(ctx.device());
  detail::add_bias_kernel<<<detail::grid_for(T * n, detail::kElemThreads), detail::kElemThreads, 0,
                            detail::stream_of(ctx)>>>(y, b, T * n, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
