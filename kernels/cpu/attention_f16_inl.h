// Internal to kernels/cpu: the steps of the f16 attention kernels that the AVX2 and AVX-512 forms
// share (attention_avx2.cpp, attention_avx512.cpp), so both finish every dot and every column in
// one order and give the same bits. Include only where AVX2 + FMA + F16C are enabled (an *_avx2
// file, or inside an AVX-512 file's target region); the unnamed namespace gives each file its own
// copy, compiled with its own target.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace specmoe::kernels::cpu::f16_attention {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }  // exact, as fp16_to_fp32

// The end of dot(q, k) over n elements once elements [0, i) (i a multiple of 16) are in the two
// partial sums a0 (elements 16m + l) and a1 (16m + 8 + l): one more 8-element step into a0 when it
// fits, a0 + a1 summed across lanes, the last elements one fma each.
inline float finish_dot(__m256 a0, __m256 a1, const float* q, const uint16_t* k, int64_t i, int64_t n) {
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), a0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s = std::fma(half(k[i]), q[i], s);
  return s;
}

// The head-group kernels are written for a fixed number of heads G (a template argument): with a
// loop bound read at run time GCC kept their accumulators in memory, a load and a store around
// every fma (2.9 -> 2.4-2.5 ms of attention in a 9-token forward of Qwen2.5-Coder-1.5B, 2 Zen 4
// cores, `specmoe bench --profile 1,9`). with_heads<F>(G, args...) calls F<G>::run(args...) for
// G = 1..8.
template <template <int> class F, class... Args>
inline void with_heads(int G, Args... args) {
  switch (G) {
    case 1: F<1>::run(args...); return;
    case 2: F<2>::run(args...); return;
    case 3: F<3>::run(args...); return;
    case 4: F<4>::run(args...); return;
    case 5: F<5>::run(args...); return;
    case 6: F<6>::run(args...); return;
    case 7: F<7>::run(args...); return;
    default: F<8>::run(args...); return;
  }
}

// out[g][c] = sum over rows r in order of w[g * rows + r] * v_r[c], from 0, for columns
// c in [c0, n): eight at a time, then one by one.
template <int G>
inline void weighted_sum_columns(const float* w, const uint16_t* const* v, int64_t rows, int64_t c0, int64_t n,
                                 float* const* out) {
  int64_t c = c0;
  for (; c + 8 <= n; c += 8) {
    __m256 acc[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const __m256 x = load_f16(v[r] + c);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(w[g * rows + r]), x, acc[g]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out[g] + c, acc[g]);
  }
  for (; c < n; ++c)
    for (int g = 0; g < G; ++g) {
      float y = 0.0f;
      for (int64_t r = 0; r < rows; ++r) y = std::fma(w[g * rows + r], half(v[r][c]), y);
      out[g][c] = y;
    }
}

}  // namespace
}  // namespace specmoe::kernels::cpu::f16_attention
