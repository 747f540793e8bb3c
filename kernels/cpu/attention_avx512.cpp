// AVX-512 forms of the f16 attention kernels that serve the default KV cache
// (attention_avx2.h: dot_f16_heads, weighted_sum_f16_heads), bit for bit the AVX2 ones: a zmm
// holds what the AVX2 kernels keep in two ymm. dot_f16_heads' two partial sums per head (elements
// 16m + l and 16m + 8 + l, l < 8) are the low and high halves of one accumulator, updated by the
// same fma per lane, then split and finished with the AVX2 code's steps; weighted_sum_f16_heads'
// lanes are columns, 16 at a time instead of 8, each with the same fma chain over the rows. So
// a token's attention output does not depend on the instruction set, and every head of a GQA
// group (up to 8) shares one pass over a key row instead of groups of 4. scores_f16_heads runs
// dot_f16_heads over all the visible key rows, a few rows by all the heads at a time in registers,
// 8 dots sharing one reduction (reduce8); weighted_sum_f16_heads takes up to 8 blocks of 16
// columns per pass over the rows. With libm's expf replaced by exp_shifted (kernels/cpu/exp.h) and
// the per-head softmax loops unrolled, one layer of Qwen2.5-Coder-1.5B's attention, one thread, 9
// new tokens over 512 cached rows took 597-632 -> 431-442 us, one token 65-68 -> 47-50 us
// (`bench_attention`, BM_Attention/T:9/ctx:512/isa:2, Zen 4), the same bits; with the register
// blocks and exp_shifted's table read without a gather (exp_avx512.cpp), on Ice Lake 813 -> 472-510
// us at 9 tokens, 254 -> 134-151 at 128 rows, one token over 128 rows 28 -> 15-20 us.
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

// The dots of 8 rows as 8 lanes: lane r = finish_dot's sum of acc[r] (no elements left over):
// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)) of v = low half + high half, each add of the
// one-row steps done here for 8 rows at once by shuffles of whole registers.
inline __m256 reduce8(const __m512* acc) {
  __m512 v[4];  // v[p] = [v of row 2p | v of row 2p + 1]
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p)
    v[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // 128-bit lane k of s4[h]: row 4h + k's v[j] + v[j + 4], j < 4.
  __m512 s4[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    s4[h] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * h], v[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(v[2 * h], v[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane k: [t0 + t2, t1 + t3] of row k, then of row 4 + k.
  const __m512 s2 = _mm512_add_ps(_mm512_shuffle_ps(s4[0], s4[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(s4[0], s4[1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane k: [row k, row 4 + k, row k, row 4 + k].
  const __m512 s1 = _mm512_add_ps(_mm512_shuffle_ps(s2, s2, _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_ps(s2, s2, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_castps512_ps256(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), s1));
}

// Key rows per block of scores_heads: G x R accumulators, R widened key slices and a query slice
// in the 32 registers.
template <int G>
constexpr int score_rows() {
  constexpr int kRows[9] = {0, 8, 6, 5, 4, 4, 3, 3, 3};
  return kRows[G];
}

// scores[g * rows + t] = dot_heads<G>(q, k[t], n)[g] * scale for every row t. When n is a
// multiple of 16, R = score_rows<G>() rows at a time: per 16 elements, R key slices widened once
// and G query slices multiply into G x R registers with dot_heads' lanes and order, then one
// shared reduction (reduce8) per 8 of them instead of a horizontal sum each; the other rows
// through dot_heads. The same bits either way. (Before, 8 rows were widened into an L1 buffer
// and each head read them back: a load per fma, and one token of one layer of Qwen2.5-Coder-1.5B
// over 512 rows spent a third of its attention there.)
template <int G>
void scores_heads(const float* const* q, const uint16_t* const* k, int64_t rows, int64_t n, float scale,
                  float* scores) {
  int64_t t = 0;
  if (n % 16 == 0) {
    constexpr int R = score_rows<G>(), kAcc = G * R, kSets = (kAcc + 7) / 8;
    const __m256 sc = _mm256_set1_ps(scale);
    for (; t + R <= rows; t += R) {
      __m512 acc[8 * kSets];  // acc[g * R + r]: head g, row t + r
#pragma GCC unroll 64
      for (int a = 0; a < 8 * kSets; ++a) acc[a] = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += 16) {
        __m512 kv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) kv[r] = load_f16x16(k[t + r] + i);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m512 qv = _mm512_loadu_ps(q[g] + i);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[g * R + r] = _mm512_fmadd_ps(kv[r], qv, acc[g * R + r]);
        }
      }
      for (int set = 0; set < kSets; ++set) {
        alignas(32) float v[8];
        _mm256_store_ps(v, _mm256_mul_ps(reduce8(acc + 8 * set), sc));
        for (int l = 0; l < 8 && 8 * set + l < kAcc; ++l) {
          const int a = 8 * set + l;
          scores[(a / R) * rows + t + a % R] = v[l];
        }
      }
    }
  }
  for (; t < rows; ++t) {
    float dots[8];
    dot_heads<G>(q, k[t], n, dots);
    for (int g = 0; g < G; ++g) scores[g * rows + t] = dots[g] * scale;
  }
}

// Columns (16 each) per pass of weighted_sum_heads: G x C accumulators, C widened value slices
// and a weight broadcast in the 32 registers.
template <int G>
constexpr int sum_columns() {
  constexpr int kCols[9] = {0, 8, 8, 6, 6, 4, 4, 3, 3};
  return kCols[G];
}

// out[g][c] = sum over rows r in order of w[g * rows + r] * v_r[c]: C blocks of 16 columns per
// pass over the rows, so that each weight broadcast serves C fmas; then one block at a time,
// then the AVX2 steps for the columns past the last 16. Each column is one fma chain over the
// rows in order whatever the pass.
template <int G>
void weighted_sum_heads(const float* w, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out) {
  int64_t c = 0;
  constexpr int C = sum_columns<G>();
  for (; c + 16 * C <= n; c += 16 * C) {
    __m512 acc[G][C];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) acc[g][j] = _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      __m512 x[C];
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) x[j] = load_f16x16(v[r] + c + 16 * j);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512 wg = _mm512_set1_ps(w[g * rows + r]);
#pragma GCC unroll 8
        for (int j = 0; j < C; ++j) acc[g][j] = _mm512_fmadd_ps(wg, x[j], acc[g][j]);
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) _mm512_storeu_ps(out[g] + c + 16 * j, acc[g][j]);
  }
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
struct Scores {
  static void run(const float* const* q, const uint16_t* const* k, int64_t rows, int64_t n, float scale,
                  float* scores) {
    scores_heads<G>(q, k, rows, n, scale, scores);
  }
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

void scores_f16_heads(const float* const* q, int G, const uint16_t* const* k, int64_t rows, int64_t n, float scale,
                      float* scores) {
  with_heads<Scores>(G, q, k, rows, n, scale, scores);
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
