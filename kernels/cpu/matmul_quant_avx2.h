// Internal to the AVX2 row-major integer matmul kernels (matmul_quant_avx2.cpp; include only from
// *_avx2.cpp files, which are compiled with -mavx2 -mfma -mf16c): the helpers the per-type block
// dot kernels share and the row loop that runs them.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu::avx2 {

namespace quant {

constexpr int kGroup = 4;  // tokens sharing one unpacked weight block
// Rows ahead that rows_with prefetches. Synth target with Q4_K weights, 1 thread, CPU ms (min of
// 8, noisy +-15%): 1 token: same row 15.2, 2 ahead 12.0, 4 ahead 10.4, 8 ahead 12.5.
constexpr int64_t kPrefetchRows = 4;

inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The float steps of the 256-element row-major formats (Q2_K, Q3_K, IQ4_XS, the i-quants), the
// same in every kernel so that a token's result never depends on the batch or the instruction
// set: per block b, the exact integer sum isum_b of scale x value x activation over the block, then
// acc = fma(d_b * d_act_b, float(isum_b), acc) in block order from acc = 0 (Q2_K then adds its
// mins' term the same way, with -dmin_b).
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
inline float add_block(float acc, float dw, float da, int isum) {
  return std::fma(dw * da, static_cast<float>(isum), acc);
}

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes: low nibbles in the low half, high nibbles in the high
// half (the Q4_0/Q4_1 element order: byte j holds elements j and j + 16).
inline __m256i unpack_nibbles16(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
}

// Integer dot of 32 unsigned weight codes with 32 signed activations, as 8 int32 lanes.
inline __m256i dot_u8_i8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// Runs Kernel<G>::run(row, activations of G tokens, blocks per row, out) over rows [j0, j1) and
// all T tokens in groups of up to kGroup, so each weight block is unpacked once per group.
template <class Act, template <int> class Kernel>
void rows_with(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y, int64_t j0,
               int64_t j1, int64_t block) {
  const int64_t nb = w.n_in / block;
  const Act* ap[kGroup];
  float r[kGroup];
  prefetch_rows(w, j0, std::min(j1, j0 + kPrefetchRows));
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = w.row(j);
    // Prefetch the row kPrefetchRows ahead (a quantized row is a few hundred bytes to a few KB):
    // its loads then overlap this row's integer work. Only rows of this chunk: the rows after
    // it are another thread's (prefetching them here would read them from memory twice).
    if (j + kPrefetchRows < j1) prefetch_rows(w, j + kPrefetchRows, j + kPrefetchRows + 1);
    for (int64_t t = 0; t < T; t += kGroup) {
      const int64_t G = std::min<int64_t>(kGroup, T - t);
      for (int64_t g = 0; g < G; ++g) ap[g] = reinterpret_cast<const Act*>(acts + (t + g) * act_stride);
      switch (G) {
        case 4: Kernel<4>::run(row, ap, nb, r); break;
        case 3: Kernel<3>::run(row, ap, nb, r); break;
        case 2: Kernel<2>::run(row, ap, nb, r); break;
        default: Kernel<1>::run(row, ap, nb, r); break;
      }
      for (int64_t g = 0; g < G; ++g) y[(t + g) * w.n_out + j] = r[g];
    }
  }
}

}  // namespace quant
}  // namespace specmoe::kernels::cpu::avx2
