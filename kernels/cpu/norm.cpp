// RMSNorm (Zhang & Sennrich 2019) and LayerNorm (Ba et al. 2016), one row per token. The fast
// path only splits tokens over threads; a row is computed exactly as the reference does.
#include <cmath>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {

void rmsnorm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  // Sum of squares in double: n is at most a few thousand, and this keeps the scale exact
  // enough that the reference and the forward agree to float rounding.
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void layernorm_row(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double var = 0.0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
}

}  // namespace

void rms_norm_ref(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) {
  for (int64_t t = 0; t < T; ++t) rmsnorm_row(x + t * n, w, out + t * n, n, eps);
}

void rms_norm(ThreadPool& pool, const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) {
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) rmsnorm_row(x + t * n, w, out + t * n, n, eps);
  });
}

void layer_norm_ref(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n, float eps) {
  for (int64_t t = 0; t < T; ++t) layernorm_row(x + t * n, w, b, out + t * n, n, eps);
}

void layer_norm(ThreadPool& pool, const float* x, const float* w, const float* b, float* out, int64_t T,
                int64_t n, float eps) {
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) layernorm_row(x + t * n, w, b, out + t * n, n, eps);
  });
}

}  // namespace specmoe::kernels::cpu
