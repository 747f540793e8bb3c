// AVX-512 + VNNI integer matmul kernels for Q4_0 and the K-quants (Q4_K, Q5_K, Q6_K): the AVX2
// kernels' arithmetic (matmul_quant_avx2.cpp) laid out for 512-bit registers, weight-stationary over up
// to 8 tokens. Bit-identical to the AVX2 kernels (simd_avx512.h says why that matters):
//
//   AVX2, per super-block and token: 8 lanes of int32, lane l summing, over the 32-element
//   groups of the block, scale x (products of bytes 4l..4l+3 of the group); then
//   acc = fma(d * dx, float(lanes), acc) (+ the mins / offset term), hsum at the end.
//   Here a 512-bit register holds two 32-element groups, so vpmaddubsw + vpdpwssd leave group A's
//   lane l in lane l and group B's in lane 8 + l; adding the two 256-bit halves gives exactly the
//   AVX2 lanes (integer sums: their order does not matter), and the float steps are the same
//   256-bit operations in the same order.
//
// Compiled for AVX2 like the other *_avx2-level files; the functions below get AVX-512 through
// the target pragma (so nothing from the included headers is compiled for AVX-512: an inline
// function the linker might share with an AVX2 file stays AVX2), and run only after the runtime
// check in matmul.cpp.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
// GCC 12's own _mm512_zextsi256_si512 / _mm512_inserti64x4 start from a self-initialised value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace specmoe::kernels::cpu::avx512 {

using avx2::ActQ8x256;

namespace {

// Tokens sharing one unpacked weight block: G ymm accumulators next to the block's 8 zmm of codes
// and scales and 3 of constants fit the 32 registers up to 16; a verify batch of up to 16 tokens
// then unpacks each block once.
constexpr int kMaxGroup = 16;
// Tokens per tile: a tile's activations (64 x n_in bytes and their scales) stay in L2 while a
// thread's chunk of rows passes over them; T <= 64 (decode, verification) is one tile, so every
// weight row is read from memory once.
constexpr int64_t kTokenTile = 64;
// Rows ahead whose bytes are prefetched while a row is computed (as the AVX2 kernels).
constexpr int64_t kPrefetchRows = 4;

inline float hsum(__m256 v) {  // the AVX2 kernels' order: (l, l+4), then (0+4, 2+6), (1+5, 3+7)
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Lanes 0..7 + lanes 8..15: the AVX2 kernels' eight int32 lanes.
inline __m256i fold(__m512i s) {
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// [lo_c | hi_c] for the chunks c of a 64-byte load (lo: low nibbles, hi: high nibbles): the
// elements of sub-blocks 2c and 2c + 1 of a Q4_K / Q5_K super-block in activation order.
inline void split_nibbles(__m512i raw, __m512i& first, __m512i& second) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i lo = _mm512_and_si512(raw, m4);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
  first = _mm512_shuffle_i64x2(lo, hi, 0x44);   // 128-bit lanes lo0 lo1 hi0 hi1
  second = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // lo2 lo3 hi2 hi3
}

// The 6-bit scales and mins of a Q4_K / Q5_K super-block (layout in quant.cpp), as bytes.
inline void k_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const uint32_t sc03 = u[0] & lo6, mn03 = u[1] & lo6;
  const uint32_t sc47 = (u[2] & lo4) | (((u[0] >> 6) & lo2) << 4);
  const uint32_t mn47 = ((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4);
  std::memcpy(sc, &sc03, 4);
  std::memcpy(sc + 4, &sc47, 4);
  std::memcpy(mn, &mn03, 4);
  std::memcpy(mn + 4, &mn47, 4);
}

// 32 int16 lanes: lanes 16h .. 16h + 15 hold scale 2c + h of the 8 in `sc16` (int16 lanes 0..7).
inline __m512i pair_scales(__m512i sc16, int c) {
  const __m512i lo = _mm512_set1_epi16(static_cast<short>(2 * c));
  const __m512i hi = _mm512_set1_epi16(static_cast<short>(2 * c + 1));
  return _mm512_permutexvar_epi16(_mm512_inserti64x4(lo, _mm512_castsi512_si256(hi), 1), sc16);
}

// out[g] = ws * xd[g] for the G tokens of a group (the products the AVX2 kernels form per token
// as a scalar; one vector multiply here), for the fmas to broadcast from memory.
template <int G>
inline void token_scales(const float* xd, float ws, float* out) {
  const __mmask16 m = static_cast<__mmask16>((1u << G) - 1u);
  _mm512_store_ps(out, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xd), _mm512_set1_ps(ws)));
}

// ------------------------------------------------------------------ Q4_K and Q5_K
// x = d * sc * q - dmin * mn per sub-block of 32 (the 5th bit of Q5_K from qh).

template <int G, bool kFiveBit>
void dot_q45_K(const uint8_t* w, const ActQ8x256* const* a, const float* xd, int64_t ld, int64_t nb, float* out) {
  constexpr size_t kBlockBytes = kFiveBit ? 176 : 144;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  alignas(64) float dd[16], dm[16];  // d * dx and -dmin * dx of the G tokens
  for (int64_t b = 0; b < nb; ++b, w += kBlockBytes) {
    token_scales<G>(xd + b * ld, load_half(w), dd);
    token_scales<G>(xd + b * ld, -load_half(w + 2), dm);
    uint8_t sc[8], mn[8];
    k_scales(w + 4, sc, mn);
    const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    const __m512i s0 = pair_scales(sc16, 0), s1 = pair_scales(sc16, 1), s2 = pair_scales(sc16, 2),
                  s3 = pair_scales(sc16, 3);
    const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));  // [mn0, mn0, mn1, mn1, ...]
    const uint8_t* qs = w + (kFiveBit ? 48 : 16);
    __m512i q0, q1, q2, q3;
    split_nibbles(load512(qs), q0, q1);
    split_nibbles(load512(qs + 64), q2, q3);
    if constexpr (kFiveBit) {
      // Element e of chunk c has its 5th bit at bit 2c (first half) or 2c + 1 (second half) of
      // qh[e % 32]: in [lo_c | hi_c] order, byte i takes bit 2c + i / 32 of qh[i % 32].
      const __m256i qh = load256(w + 16);
      const __m512i h = _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 1), 1);
      const __m512i one = _mm512_set1_epi8(1);
      q0 = _mm512_or_si512(q0, _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
      q1 = _mm512_or_si512(q1, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), one), 4));
      q2 = _mm512_or_si512(q2, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 4), one), 4));
      q3 = _mm512_or_si512(q3, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 6), one), 4));
    }
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(q0, load512(x.qs)), s0);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q1, load512(x.qs + 64)), s1);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q2, load512(x.qs + 128)), s2);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q3, load512(x.qs + 192)), s3);
      const __m256i msum = _mm256_madd_epi16(load256(x.bsums), mins);
      acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[g]), _mm256_cvtepi32_ps(fold(s)), acc[g]);
      acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dm[g]), _mm256_cvtepi32_ps(msum), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// ------------------------------------------------------------------ Q6_K
// x = d * sc * (q - 32) over sub-blocks of 16; the -32 goes through the activation sums.

// 32 int16 lanes: lanes 8k .. 8k + 7 hold scale s + k of the 16 in `sc16` (int16 lanes 0..15).
inline __m512i quad_scales(__m512i sc16, int s) {
  const __m128i a = _mm_set1_epi16(static_cast<short>(s)), b = _mm_set1_epi16(static_cast<short>(s + 1));
  const __m128i c = _mm_set1_epi16(static_cast<short>(s + 2)), e = _mm_set1_epi16(static_cast<short>(s + 3));
  const __m512i idx = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set_m128i(b, a)), _mm256_set_m128i(e, c), 1);
  return _mm512_permutexvar_epi16(idx, sc16);
}

template <int G>
void dot_q6_K(const uint8_t* w, const ActQ8x256* const* a, const float* xd, int64_t ld, int64_t nb, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  alignas(64) float dd[16];  // d * dx of the G tokens
  for (int64_t b = 0; b < nb; ++b, w += 210) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 192));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m512i scz = _mm512_zextsi256_si512(sc16);
    token_scales<G>(xd + b * ld, load_half(w + 208), dd);
    // q[2h + k2]: elements 128h + 64 k2 .. + 64 (groups k = 2 k2, 2 k2 + 1 of half h).
    __m512i q[4], sv[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(w + 64 * h);
      const __m256i qh = load256(w + 128 + 32 * h);
      const __m512i top = _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      const __m512i nib01 = _mm512_and_si512(ql, m4), nib23 = _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
      const __m512i top01 = _mm512_and_si512(top, m2), top23 = _mm512_and_si512(_mm512_srli_epi16(top, 4), m2);
      q[2 * h] = _mm512_or_si512(nib01, _mm512_slli_epi16(top01, 4));
      q[2 * h + 1] = _mm512_or_si512(nib23, _mm512_slli_epi16(top23, 4));
      sv[2 * h] = quad_scales(scz, 8 * h);
      sv[2 * h + 1] = quad_scales(scz, 8 * h + 4);
    }
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], load512(x.qs)), sv[0]);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[1], load512(x.qs + 64)), sv[1]);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[2], load512(x.qs + 128)), sv[2]);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[3], load512(x.qs + 192)), sv[3]);
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(x.bsums), sc16), 5);
      const __m256i total = _mm256_sub_epi32(fold(s), offset);
      acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[g]), _mm256_cvtepi32_ps(total), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// ------------------------------------------------------------------ Q4_0
// x = d * (q - 8) per block of 32. Two blocks fill a 512-bit register, block b in lanes 0..7 and
// block b + 1 in lanes 8..15, for the unpacking and the integer dot; the float steps stay the
// AVX2 kernel's, one 256-bit fma per block in block order (scale dw * dx, the same product), so
// both give the same bits. The AVX2 lanes come from |q| times x signed by q (vpsignb); AVX-512
// has no vpsignb, so x is negated under the mask q < 0 instead (the same bytes: where q is 0
// both products are 0).

using avx2::ActQ8x32;

template <int G>
void dot_q4_0(const uint8_t* w, const ActQ8x32* const* a, const float* /*xd*/, int64_t /*ld*/, int64_t nb,
              float* out) {
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  const __m512i zero = _mm512_setzero_si512(), m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, w += 36) {
    const float dw0 = load_half(w), dw1 = load_half(w + 18);
    const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2));
    const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 20));
    const __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_srli_epi16(r0, 4), r0)),
                                           _mm256_set_m128i(_mm_srli_epi16(r1, 4), r1), 1);
    const __m512i q = _mm512_sub_epi8(_mm512_and_si512(raw, m4), eight);  // [-8, 7], activation order
    const __m512i mag = _mm512_abs_epi8(q);
    const __mmask64 neg = _mm512_movepi8_mask(q);
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x0 = a[g][b];
      const ActQ8x32& x1 = a[g][b + 1];
      const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(load256(x0.qs)), load256(x1.qs), 1);
      const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, mag, _mm512_mask_sub_epi8(x, neg, zero, x)));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * x0.d), _mm512_castps512_ps256(p), acc[g]);
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw1 * x1.d),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)), acc[g]);
    }
  }
  if (b < nb) {  // an odd last block: the AVX2 kernel's steps in 256 bits
    const float dw = load_half(w);
    const __m128i r = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2));
    const __m256i q = _mm256_sub_epi8(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(r, 4), r), _mm256_set1_epi8(0x0F)),
                                      _mm256_set1_epi8(8));
    const __m256i mag = _mm256_abs_epi8(q);
    const __mmask32 neg = _mm256_movepi8_mask(q);
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      const __m256i xq = load256(x.qs);
      const __m256i p =
          _mm256_dpbusd_epi32(_mm256_setzero_si256(), mag, _mm256_mask_sub_epi8(xq, neg, _mm256_setzero_si256(), xq));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(p), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// Kernel<G>::run(row, activations of G tokens, their scales block-major (xd[b * ld + g]), blocks
// per row, out[G]).
template <int G> struct KQ4_0 { static void run(const uint8_t* w, const ActQ8x32* const* a, const float* xd, int64_t ld, int64_t nb, float* o) { dot_q4_0<G>(w, a, xd, ld, nb, o); } };
template <int G> struct KQ4_K { static void run(const uint8_t* w, const ActQ8x256* const* a, const float* xd, int64_t ld, int64_t nb, float* o) { dot_q45_K<G, false>(w, a, xd, ld, nb, o); } };
template <int G> struct KQ5_K { static void run(const uint8_t* w, const ActQ8x256* const* a, const float* xd, int64_t ld, int64_t nb, float* o) { dot_q45_K<G, true>(w, a, xd, ld, nb, o); } };
template <int G> struct KQ6_K { static void run(const uint8_t* w, const ActQ8x256* const* a, const float* xd, int64_t ld, int64_t nb, float* o) { dot_q6_K<G>(w, a, xd, ld, nb, o); } };

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

using avx2::prefetch_rows;

// Rows [j0, j1) x tokens [0, T): token tiles of kTokenTile; in a tile, each row runs its tokens
// in ceil(tt / 16) groups of near-equal size (17 = 8 + 9), each group unpacking the row's blocks
// once (from L1 after the first group).
template <class Act, template <int> class Kernel>
void rows_tiled(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y, int64_t j0,
                int64_t j1, int64_t block, float* xd) {
  const int64_t nb = w.n_in / block;
  const Act* ap[kMaxGroup];
  float r[kMaxGroup];
  for (int64_t t0 = 0; t0 < T; t0 += kTokenTile) {
    const int64_t tt = min64(kTokenTile, T - t0);
    const int64_t groups = (tt + kMaxGroup - 1) / kMaxGroup;
    // The tile's activation scales, block-major: xd[b * tt + t - t0].
    for (int64_t t = 0; t < tt; ++t) {
      const Act* at = reinterpret_cast<const Act*>(acts + (t0 + t) * act_stride);
      for (int64_t b = 0; b < nb; ++b) xd[b * tt + t] = at[b].d;
    }
    // The chunk's first rows at once, then one row kPrefetchRows ahead per row, inside the chunk
    // only (the rows after it are another thread's).
    if (t0 == 0) prefetch_rows(w, j0, min64(j1, j0 + kPrefetchRows));
    for (int64_t j = j0; j < j1; ++j) {
      const uint8_t* row = w.row(j);
      if (j + kPrefetchRows < j1) prefetch_rows(w, j + kPrefetchRows, j + kPrefetchRows + 1);
      int64_t t = t0;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t G = (t0 + tt - t) / (groups - g);  // the larger groups come last
        for (int64_t i = 0; i < G; ++i) ap[i] = reinterpret_cast<const Act*>(acts + (t + i) * act_stride);
        const float* gx = xd + (t - t0);
        switch (G) {
          case 16: Kernel<16>::run(row, ap, gx, tt, nb, r); break;
          case 15: Kernel<15>::run(row, ap, gx, tt, nb, r); break;
          case 14: Kernel<14>::run(row, ap, gx, tt, nb, r); break;
          case 13: Kernel<13>::run(row, ap, gx, tt, nb, r); break;
          case 12: Kernel<12>::run(row, ap, gx, tt, nb, r); break;
          case 11: Kernel<11>::run(row, ap, gx, tt, nb, r); break;
          case 10: Kernel<10>::run(row, ap, gx, tt, nb, r); break;
          case 9: Kernel<9>::run(row, ap, gx, tt, nb, r); break;
          case 8: Kernel<8>::run(row, ap, gx, tt, nb, r); break;
          case 7: Kernel<7>::run(row, ap, gx, tt, nb, r); break;
          case 6: Kernel<6>::run(row, ap, gx, tt, nb, r); break;
          case 5: Kernel<5>::run(row, ap, gx, tt, nb, r); break;
          case 4: Kernel<4>::run(row, ap, gx, tt, nb, r); break;
          case 3: Kernel<3>::run(row, ap, gx, tt, nb, r); break;
          case 2: Kernel<2>::run(row, ap, gx, tt, nb, r); break;
          default: Kernel<1>::run(row, ap, gx, tt, nb, r); break;
        }
        for (int64_t i = 0; i < G; ++i) y[(t + i) * w.n_out + j] = r[i];
        t += G;
      }
    }
  }
}

}  // namespace

bool has_quant_kernel(DType type, int64_t T) {
  // Q4_0's single-token step stays on the AVX2 kernel: with nothing to share the unpacking with,
  // the 512-bit one measured no faster there (synth target-q4_0, 2 threads: 351 against 336
  // tokens/s); from 2 tokens on it is (9 tokens 13.9 against 17.3 ms, pp256 682 against 579 t/s).
  if (type == DType::Q4_0) return T >= 2;
  return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
}

void matmul_quant_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y, int64_t j0,
                       int64_t j1, float* scratch) {
  switch (w.type) {
    case DType::Q4_0: rows_tiled<ActQ8x32, KQ4_0>(w, acts, act_stride, T, y, j0, j1, 32, scratch); return;
    case DType::Q4_K: rows_tiled<ActQ8x256, KQ4_K>(w, acts, act_stride, T, y, j0, j1, 256, scratch); return;
    case DType::Q5_K: rows_tiled<ActQ8x256, KQ5_K>(w, acts, act_stride, T, y, j0, j1, 256, scratch); return;
    case DType::Q6_K: rows_tiled<ActQ8x256, KQ6_K>(w, acts, act_stride, T, y, j0, j1, 256, scratch); return;
    default: return;
  }
}

size_t scratch_floats(const MatrixView& w, int64_t T) {
  const int64_t tile = min64(kTokenTile, T);
  return static_cast<size_t>(tile * (w.n_in / 32) + 16);  // blocks of 32 at most; 16 for a masked read
}

}  // namespace specmoe::kernels::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
