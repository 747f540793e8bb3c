// exp_shifted with AVX2 + FMA (kernels/cpu/exp.h): exp_f32's operations on 4 doubles per register,
// each one the scalar version's (the table read by a gather), so every lane gets exp_f32's bits.
// The special inputs (NaN, overflow, underflow) are blended in after the main path.
#include <immintrin.h>

#include "kernels/cpu/exp.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

using namespace expf_detail;

inline __m256d exp4(__m256d xd) {
  const __m256d inv = _mm256_set1_pd(kInvLn2N), shift = _mm256_set1_pd(kShift);
  const __m256d z = _mm256_mul_pd(inv, xd);
  __m256d kd = _mm256_add_pd(z, shift);
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, shift);
  const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
  const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), idx, 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(kC0), r, _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(kC2), r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(p, r2, y);
  return _mm256_mul_pd(y, _mm256_castsi256_pd(t));
}

inline __m256 exp8(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  __m256 y = _mm256_set_m128(hi, lo);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(kOverflow), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(kUnderflow), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace

void exp_shifted(float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
  if (i < n) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(x + i, mask, exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), s)));
  }
}

}  // namespace specmoe::kernels::cpu::avx2
