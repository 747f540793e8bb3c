// Softmax, SwiGLU (Shazeer 2020), GELU (tanh approximation, Hendrycks & Gimpel 2016; the form
// GPT-2 and llama.cpp's ggml_gelu use), logit soft-capping and the elementwise helpers.
// Element-wise ops split the vector into fixed chunks over threads. SwiGLU and GELU run the AVX2
// kernels (a vectorised exp, within a few ulp of the references' libm calls) where the CPU has
// AVX2, their AVX-512 forms (the same bits, twice the lanes) where it has AVX-512; every other element-wise op, and those two on the portable path, computes each element
// exactly as the reference does. Either way an element's value depends only on its inputs.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/exp.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"

namespace specmoe::kernels::cpu {

namespace {
constexpr int64_t kElemGrain = 4096;
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  exp_shifted(x, n, mx);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax_rows(ThreadPool& pool, float* x, int64_t T, int64_t n) {
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) softmax(x + t * n, n);
  });
}

float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void swiglu(ThreadPool& pool, const float* gate, const float* up, float* out, int64_t n, Isa isa) {
  const Isa use = usable_isa(isa);
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) {
    if (use >= Isa::Avx512)
      avx512::swiglu(gate + b, up + b, out + b, e - b);
    else if (use == Isa::Avx2)
      avx2::swiglu(gate + b, up + b, out + b, e - b);
    else
      swiglu_ref(gate + b, up + b, out + b, e - b);
  });
}

double exp_weights_ref(const float* x, float shift, float temperature, float* w, int64_t n) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = std::exp((x[i] - shift) / temperature);
    total += w[i];
  }
  return total;
}

double exp_weights(const float* x, float shift, float temperature, float* w, int64_t n, Isa isa) {
  if (usable_isa(isa) >= Isa::Avx2) return avx2::exp_weights(x, shift, temperature, w, n);
  return exp_weights_ref(x, shift, temperature, w, n);
}

void gelu_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
}

void gelu(ThreadPool& pool, const float* x, float* y, int64_t n, Isa isa) {
  const Isa use = usable_isa(isa);
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) {
    if (use >= Isa::Avx512)
      avx512::gelu(x + b, y + b, e - b);
    else if (use == Isa::Avx2)
      avx2::gelu(x + b, y + b, e - b);
    else
      gelu_ref(x + b, y + b, e - b);
  });
}

void relu_sqr_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    y[i] = r * r;
  }
}

void relu_sqr(ThreadPool& pool, const float* x, float* y, int64_t n) {
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { relu_sqr_ref(x + b, y + b, e - b); });
}

void xielu_ref(const float* x, float* y, int64_t n, const XIeluParams& p) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v > 0.0f ? p.alpha_p * v * v + p.beta * v : (std::expm1(std::fmin(v, p.eps)) - v) * p.alpha_n + p.beta * v;
  }
}

void xielu(ThreadPool& pool, const float* x, float* y, int64_t n, const XIeluParams& p) {
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { xielu_ref(x + b, y + b, e - b, p); });
}

void clamp_ref(const float* x, float limit, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < -limit ? -limit : (x[i] > limit ? limit : x[i]);
}

void clamp(ThreadPool& pool, const float* x, float limit, float* y, int64_t n) {
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { clamp_ref(x + b, limit, y + b, e - b); });
}

void softcap_ref(const float* x, float cap, float* y, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(x[i] * inv);
}

void softcap(ThreadPool& pool, const float* x, float cap, float* y, int64_t n) {
  pool.parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { softcap_ref(x + b, cap, y + b, e - b); });
}

void add_bias(float* y, const float* b, int64_t T, int64_t n) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i) y[t * n + i] += b[i];
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = s * x[i];
}

}  // namespace specmoe::kernels::cpu
