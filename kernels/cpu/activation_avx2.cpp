// AVX2+FMA activations (compiled with -mavx2 -mfma -mf16c; called only after the runtime check in
// activation.cpp): SwiGLU's SiLU and GELU's tanh through a vectorised exp, 8 elements at a time.
// The references call libm's expf / tanhf once per element, which took 8% of a 9-token forward
// of Qwen2.5-Coder-1.5B (2.2 M SiLUs) and ~5% of a one-token step.
//
// exp is Cephes' expf (S. L. Moshier): x = n ln2 + r with ln2 split in two (Cody-Waite), a
// degree-7 polynomial in r, times 2^n; within 2 ulp of the correctly rounded value on [-87, 88].
// Every element goes through the same vector code, the last n % 8 through a padded register, so
// an element's value depends only on its inputs (not on n, the batch or the thread split); the
// AVX-512 path runs these functions too.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

// Above 88.376 +inf, below -88.376 0 (the true values there are beyond 2.4e38 or below 4e-39).
inline __m256 exp256(__m256 x_in) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
  const __m256 x = _mm256_min_ps(_mm256_max_ps(x_in, lo), hi);
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // x - n ln2, ln2 in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // 2^n from the exponent field (n in [-127, 128]; 2^-127 reads as 0, where exp is below 4e-39).
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x_in, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x_in, lo, _CMP_LT_OQ));
}

// x / (1 + exp(-x)); NaN stays NaN.
inline __m256 silu256(__m256 x) {
  const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), tanh(u) = 1 - 2 / (1 + exp(2u)).
inline __m256 gelu256(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  const __m256 e = exp256(_mm256_add_ps(u, u));
  const __m256 t = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// Runs f over n elements of the inputs, 8 at a time, the tail through a zero-padded register.
template <class F>
inline void map8(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) f(i, 8);
  if (i < n) f(i, static_cast<int>(n - i));
}
inline __m256 load_part(const float* p, int m) {
  if (m == 8) return _mm256_loadu_ps(p);
  float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(m) * sizeof(float));
  return _mm256_loadu_ps(tmp);
}
inline void store_part(float* p, __m256 v, int m) {
  if (m == 8) return _mm256_storeu_ps(p, v);
  float tmp[8];
  _mm256_storeu_ps(tmp, v);
  std::memcpy(p, tmp, static_cast<size_t>(m) * sizeof(float));
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  map8(n, [&](int64_t i, int m) {
    store_part(out + i, _mm256_mul_ps(silu256(load_part(gate + i, m)), load_part(up + i, m)), m);
  });
}

void gelu(const float* x, float* y, int64_t n) {
  map8(n, [&](int64_t i, int m) { store_part(y + i, gelu256(load_part(x + i, m)), m); });
}

double exp_weights(const float* x, float shift, float temperature, float* w, int64_t n) {
  // Divided, as the reference does: multiplying by 1 / temperature would be an ulp off the
  // argument, which exp turns into a relative error of up to 1e-5 at |argument| ~ 87.
  const __m256 s = _mm256_set1_ps(shift), t = _mm256_set1_ps(temperature);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  // The padded lanes of the tail hold exp((0 - shift) / t), not zeros: masked out of the sum.
  map8(n, [&](int64_t i, int m) {
    __m256 v = exp256(_mm256_div_ps(_mm256_sub_ps(load_part(x + i, m), s), t));
    if (m < 8) {
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      v = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(m), lane)));
    }
    store_part(w + i, v, m);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  });
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(lo, hi));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

}  // namespace specmoe::kernels::cpu::avx2
