// exp_shifted with AVX-512 (kernels/cpu/exp.h): exp_avx2.cpp's operations on 8 doubles per
// register, with the 32-entry table read by two two-register permutes (vpermt2pd) and a blend
// instead of a gather: on Intel CPUs with the Gather Data Sampling mitigation in their microcode
// (Skylake to Ice Lake) a gather takes tens of cycles, and the softmax of one token's attention
// over 512 rows (6 heads of Qwen2.5-Coder-1.5B) spent a quarter of its time in exp_shifted
// (`perf record bench_attention --benchmark_filter=T:1/ctx:512/isa:2`, Ice Lake). Each lane's
// operations are exp_f32's, so every lane gets its bits (`ExpF32` tests).
//
// Compiled like the other AVX2-level files; the function gets AVX-512 through the target pragma
// and runs only after the runtime check in exp.cpp.
#include <immintrin.h>

#include "kernels/cpu/exp.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq,avx512vl")
#endif

namespace specmoe::kernels::cpu::avx512 {

namespace {

using namespace expf_detail;

struct Table {
  __m512i t[4];  // entries 8i .. 8i + 7
};

inline __m512d exp8(__m512d xd, const Table& tab) {
  const __m512d inv = _mm512_set1_pd(kInvLn2N), shift = _mm512_set1_pd(kShift);
  const __m512d z = _mm512_mul_pd(inv, xd);
  __m512d kd = _mm512_add_pd(z, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, shift);
  const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
  // Entry ki mod 32: vpermt2q reads bits 0-3 of the index (entries 0-15 of a register pair);
  // bit 4 picks the pair.
  const __m512i lo = _mm512_permutex2var_epi64(tab.t[0], ki, tab.t[1]);
  const __m512i hi = _mm512_permutex2var_epi64(tab.t[2], ki, tab.t[3]);
  const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
  const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi), _mm512_slli_epi64(ki, 47));
  const __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(kC2), r, _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(p, r2, y);
  return _mm512_mul_pd(y, _mm512_castsi512_pd(t));
}

inline __m512 exp16(__m512 x, const Table& tab) {
  const __m256 lo = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), tab));
  const __m256 hi = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)), tab));
  __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kOverflow), _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kUnderflow), _CMP_LT_OQ), _mm512_setzero_ps());
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_add_ps(x, x));
}

}  // namespace

void exp_shifted(float* x, int64_t n, float shift) {
  Table tab;
  for (int i = 0; i < 4; ++i) tab.t[i] = _mm512_loadu_si512(kTable + 8 * i);
  const __m512 s = _mm512_set1_ps(shift);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s), tab));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s), tab));
  }
}

}  // namespace specmoe::kernels::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
