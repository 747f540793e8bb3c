// AVX-512 forms of the f16 attention kernels that serve the default KV cache
// (attention_avx2.h: dot_f16_heads, weighted_sum_f16_heads), bit for bit the AVX2 ones: a zmm
// holds what the AVX2 kernels keep in two ymm. dot_f16_heads' two partial sums per head (elements
// 16m + l and 16m + 8 + l, l < 8) are the low and high halves of one accumulator, updated by the
// same fma per lane, then split and finished with the AVX2 code's steps; weighted_sum_f16_heads'
// lanes are columns, 16 at a time instead of 8, each with the same fma chain over the rows. So
// a token's attention output does not depend on the instruction set, and every head of a GQA
// group (up to 8) shares one pass over a key row instead of groups of 4.
//
// Compiled like the other AVX2-level files; the functions get AVX-512 through the target pragma
// and run only after the runtime check in attention.cpp.
#include "kernels/cpu/attention_avx512.h"

#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC's own `__m512i __Y = __Y;` in its intrinsics
#endif

#include "kernels/cpu/attention_f16_inl.h"  // inside the target region: its steps get AVX-512's target

namespace specmoe::kernels::cpu::avx512 {
namespace {

using namespace f16_attention;

inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The kernels for a fixed number of heads G (attention_f16_inl.h: with_heads).
template <int G>
void dot_heads(const float* const* q, const uint16_t* k, int64_t n, float* dots) {
  __m512 acc[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 kv = load_f16x16(k + i);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) acc[g] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q[g] + i), acc[g]);
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
    dots[g] = finish_dot(_mm512_castps512_ps256(acc[g]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[g]), 1)), q[g], k, i, n);
}

template <int G>
void weighted_sum_heads(const float* w, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    __m512 acc[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 x = load_f16x16(v[r] + c);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(w[g * rows + r]), x, acc[g]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(out[g] + c, acc[g]);
  }
  weighted_sum_columns<G>(w, v, rows, c, n, out);  // the columns past the last 16: the AVX2 steps
}

template <int G>
struct Dots {
  static void run(const float* const* q, const uint16_t* k, int64_t n, float* dots) { dot_heads<G>(q, k, n, dots); }
};
template <int G>
struct WeightedSum {
  static void run(const float* w, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out) {
    weighted_sum_heads<G>(w, v, rows, n, out);
  }
};

}  // namespace

void dot_f16_heads(const float* const* q, int G, const uint16_t* k, int64_t n, float* dots) {
  with_heads<Dots>(G, q, k, n, dots);
}

void weighted_sum_f16_heads(const float* w, int G, const uint16_t* const* v, int64_t rows, int64_t n,
                            float* const* out) {
  with_heads<WeightedSum>(G, w, v, rows, n, out);
}

}  // namespace specmoe::kernels::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
