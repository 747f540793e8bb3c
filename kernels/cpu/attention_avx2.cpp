// AVX2 dot products and value accumulation against F16 and Q8_0 KV rows (attention_avx2.h).
// Each function sums in a fixed order for a given n, so a token's attention output does not
// depend on the batch it is computed in or on the thread count.
#include "kernels/cpu/attention_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_f16_inl.h"

namespace specmoe::kernels::cpu::avx2 {
namespace {

using namespace f16_attention;

inline float block_scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return half(h);
}

constexpr int64_t kQ8Bytes = 34;  // block_q8_0: fp16 d, int8 qs[32]

}  // namespace

float dot_f16(const float* q, const uint16_t* k, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), a0);
    a1 = _mm256_fmadd_ps(load_f16(k + i + 8), _mm256_loadu_ps(q + i + 8), a1);
  }
  return finish_dot(a0, a1, q, k, i, n);
}

void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_f16(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * half(x[i]);
}

namespace {

// Heads in groups of 4: 8 accumulators and the two widened key vectors fit the 16 registers.
template <int M>
void dot_heads(const float* const* q, const uint16_t* k, int64_t n, float* dots) {
  __m256 a0[M], a1[M];
#pragma GCC unroll 4
  for (int g = 0; g < M; ++g) a0[g] = a1[g] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 k0 = load_f16(k + i), k1 = load_f16(k + i + 8);
#pragma GCC unroll 4
    for (int g = 0; g < M; ++g) {
      a0[g] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(q[g] + i), a0[g]);
      a1[g] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(q[g] + i + 8), a1[g]);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < M; ++g) dots[g] = finish_dot(a0[g], a1[g], q[g], k, i, n);
}
template <int G>
struct Dots {
  static void run(const float* const* q, const uint16_t* k, int64_t n, float* dots) {
    for (int g0 = 0; g0 < G; g0 += 4) {
      if (G - g0 >= 4) {
        dot_heads<4>(q + g0, k, n, dots + g0);
      } else {
        switch (G - g0) {
          case 1: dot_heads<1>(q + g0, k, n, dots + g0); break;
          case 2: dot_heads<2>(q + g0, k, n, dots + g0); break;
          default: dot_heads<3>(q + g0, k, n, dots + g0); break;
        }
      }
    }
  }
};
template <int G>
struct WeightedSum {
  // Eight columns at a time, all rows, all heads in registers (at most 8 accumulators).
  static void run(const float* w, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out) {
    weighted_sum_columns<G>(w, v, rows, 0, n, out);
  }
};

}  // namespace

void dot_f16_heads(const float* const* q, int G, const uint16_t* k, int64_t n, float* dots) {
  with_heads<Dots>(G, q, k, n, dots);
}

void weighted_sum_f16_heads(const float* w, int G, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out) {
  with_heads<WeightedSum>(G, w, v, rows, n, out);
}

void quantize_query_q8(const float* q, int64_t nb, QueryQ8* out) {
  for (int64_t b = 0; b < nb; ++b, q += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(q[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int j = 0; j < 32; ++j)
      out[b].qs[j] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lrintf(q[j] * id)), -127, 127));
  }
}

float dot_q8_0(const QueryQ8* q, const uint8_t* k, int64_t nb) {
  // |qs_q| times qs_k with qs_q's sign: unsigned x signed byte pairs summed to int16 (at most
  // 2 * 127 * 128, no saturation), then pairs of those to int32, then one float FMA per block.
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, k += kQ8Bytes) {
    const __m256i vq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[b].qs));
    const __m256i vk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 2));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(vq, vq), _mm256_sign_epi8(vk, vq));
    const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(q[b].d * block_scale(k)), p, acc);
  }
  return hsum(acc);
}

void axpy_q8_0(float a, const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQ8Bytes, y += 32) {
    const __m256 ad = _mm256_set1_ps(a * block_scale(x));
    for (int g = 0; g < 4; ++g) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 2 + 8 * g));
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      _mm256_storeu_ps(y + 8 * g, _mm256_fmadd_ps(ad, v, _mm256_loadu_ps(y + 8 * g)));
    }
  }
}

}  // namespace specmoe::kernels::cpu::avx2
