// AVX-512 forms of the AVX2 activations (activation_avx2.cpp): SwiGLU's SiLU and GELU's tanh
// through the same Cephes exp, 16 elements per register instead of 8. Each lane runs the AVX2
// kernel's operations in its order (floor as a round-to-minus-infinity, the blends as masked
// moves; every other step the same IEEE operation), so an element gets the same bits on either
// path and the goldens hold on both (`Activations.Avx512MatchesAvx2BitForBit`).
//
// Why: the exp's degree-7 polynomial and the division keep SwiGLU compute bound. On 2 Ice Lake
// cores one 9-token forward of Qwen2.5-Coder-1.5B spent 1.4 ms in it (28 layers x 80640
// elements, `specmoe bench --profile 1,9`), against 0.3 ms for one token: the 9-token share is
// what a verify batch pays on top of a single-token step.
//
// Compiled like the other AVX2-level files; the functions get AVX-512 through the target pragma
// and run only after the runtime check in activation.cpp.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/simd_avx512.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq,avx512vl")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC's own `__m512 __Y = __Y;` in its intrinsics
#endif

namespace specmoe::kernels::cpu::avx512 {

namespace {

// exp256's steps (activation_avx2.cpp), lane for lane.
inline __m512 exp512(__m512 x_in) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-88.3762626647949f);
  const __m512 x = _mm512_min_ps(_mm512_max_ps(x_in, lo), hi);
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x_in, hi, _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x_in, lo, _CMP_LT_OQ), _mm512_setzero_ps());
}

inline __m512 silu512(__m512 x) {
  const __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

inline __m512 gelu512(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
  const __m512 e = exp512(_mm512_add_ps(u, u));
  const __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  const __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// SwiGLU (kGate: silu(x) * up) or GELU over n elements, 16 at a time; the last n % 16 in a register
// whose other lanes are zero (as the AVX2 kernel pads its tail), stored under the same mask.
template <bool kGate>
inline __m512 activate(__m512 x, const float* up, int64_t i, __mmask16 m) {
  if constexpr (kGate) return _mm512_mul_ps(silu512(x), _mm512_maskz_loadu_ps(m, up + i));
  return gelu512(x);
}
template <bool kGate>
inline void activate_all(const float* x, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, activate<kGate>(_mm512_loadu_ps(x + i), up, i, 0xFFFF));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, activate<kGate>(_mm512_maskz_loadu_ps(m, x + i), up, i, m));
  }
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) { activate_all<true>(gate, up, out, n); }

void gelu(const float* x, float* y, int64_t n) { activate_all<false>(x, nullptr, y, n); }

}  // namespace specmoe::kernels::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
