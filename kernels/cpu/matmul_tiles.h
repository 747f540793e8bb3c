// Internal to the row-major integer kernels (matmul_quant_avx2.cpp, matmul_iq_avx2.cpp; include
// only from *_avx2.cpp files): batches of 16 weight rows at once, for the 256-element formats that
// are not packed (Q2_K, Q3_K, IQ4_XS, the i-quants and ternary formats).
//
// One row per 32-bit lane, so that a weight vector serves every token of a group from a register
// and no token needs a horizontal sum. A tile of 16 rows is decoded once per matmul call
// into signed values v and per-16-element scales (TileBlock: each 64-byte vector holds 4
// consecutive values of each row, after a 16 x 16 transpose), and the activations are made
// unsigned (x + 128, a flip of the top bit: biased_codes) for vpdpbusd's unsigned x signed form:
//   sum (x + 128) v = sum x v + 128 sum v,
// where the second sum, times the scales, is the row's own constant (corr). Per scale group (16 or
// 32 elements; none for the ternary formats) the group's int32 sums are multiplied by the rows'
// scales (vpmulld). Q2_K's mins go through the activations' sums of 16 (bsums) with vpdpwssd.
// Without AVX-512 (tile_dot_avx2) 8 rows per 256-bit vector: vpmaddubsw of the codes plus 128
// with the values (pairs of at most 2 x 255 x 62 < 2^15, so formats with larger values, IQ4_XS,
// stay row by row there: kMaxValue), then vpmaddwd with the rows' scales as int16 pairs.
//
// A Stage decodes one 256-element block of one row:
//   kBytes, kScaleSpan (16, 32 or 0), kMins (Q2_K), kMaxValue (the largest |value|),
//   decode(block, int8_t v[256], int32_t scale[16] (per 16 elements), int16_t mins[16], float& d,
//          float& dmin)
// and the float steps per block are add_block's (matmul_quant_avx2.h) in every lane: a token's
// result is the same bits here as from the row-by-row kernels, alone or in any batch.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul_quant_avx2.h"

namespace specmoe::kernels::cpu::avx2::tiles {

using quant::hsum_i32;
inline uint32_t u32_at(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct alignas(64) TileBlock {
  int8_t w[64][64];        // [4-element group k of the block][row r's 4 values at 4 r]
  int32_t scale[16][16];   // [16-element half][row]
  int32_t mins[8][16];     // Q2_K: [pair i][row] the mins of halves 2 i, 2 i + 1 as two int16
  int32_t corr[16];        // per row: 128 x sum over halves of scale x (sum of the half's values)
  float d[16];             // per row: the block scale
  float neg_dmin[16];      // Q2_K: per row, -dmin
};
constexpr int kRows = 16;
// Batches from this many tokens take the tiles; smaller ones run row by row (the tile's
// transposition costs more than it saves on a few tokens: 1536 x 8960 IQ2_XXS from memory, one
// thread, tiles against rows at T = 2 / 4 / 8 / 16 about 1.5 / 1.25 / 0.9 / 0.7).
constexpr int64_t kMinTokens = 6;
constexpr int64_t kMinTokensAvx2 = 16;  // the same on AVX2 (the rows' passes keep up to ~16 there)
constexpr int kTokens = 8;      // tokens per pass over a tile (accumulators in 32 vector registers)
constexpr int kTokensAvx2 = 4;  // the same in 16 registers, 8 rows at a time

#define SPECMOE_TILE_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

// Block b of rows j .. j + n - 1 (n <= 16; the rest zero): values row-major into vals, the rest
// into out.
template <class Stage>
void stage_block(const MatrixView& w, int64_t j, int n, int64_t b, int8_t (*vals)[256], TileBlock& out) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int r = 0; r < kRows; ++r) {
    if (r >= n) {
      std::memset(vals[r], 0, 256);
      for (auto& s : out.scale) s[r] = 0;
      for (auto& m : out.mins) m[r] = 0;
      out.corr[r] = 0;
      out.d[r] = out.neg_dmin[r] = 0.0f;
      continue;
    }
    alignas(32) int32_t scale[16];
    int16_t mins[16] = {};
    float d = 0.0f, dmin = 0.0f;
    Stage::decode(w.row(j + r) + b * Stage::kBytes, vals[r], scale, mins, d, dmin);
    __m256i c = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i) {
      // Sums of 4 values, lanes 0-3 in half 2 i and 4-7 in half 2 i + 1, times the halves' scales.
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals[r] + 32 * i));
      const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16);
      const __m256i sc = _mm256_set_m128i(_mm_set1_epi32(scale[2 * i + 1]), _mm_set1_epi32(scale[2 * i]));
      c = _mm256_add_epi32(c, _mm256_mullo_epi32(s4, sc));
    }
    for (int h = 0; h < 16; ++h) out.scale[h][r] = scale[h];
    if constexpr (Stage::kMins)
      for (int i = 0; i < 8; ++i)
        out.mins[i][r] = static_cast<int32_t>(static_cast<uint16_t>(mins[2 * i]) |
                                              (static_cast<uint32_t>(static_cast<uint16_t>(mins[2 * i + 1])) << 16));
    out.corr[r] = 128 * hsum_i32(c);
    out.d[r] = d;
    out.neg_dmin[r] = -dmin;
  }
}

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // the masked stores' unused sources
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// vals (16 rows x 64 groups of 4 bytes) -> out.w (64 groups x 16 rows): four 16 x 16 transposes
// of 32-bit elements (pairs, then quads within 128-bit lanes, then the lanes; no gathers, which
// are slow where the microcode guards them).
SPECMOE_TILE_AVX512 inline void transpose_block(const int8_t (*vals)[256], TileBlock& out) {
  for (int q = 0; q < 4; ++q) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(vals[i] + 64 * q);
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // r[4 g + c], 128-bit lane L: column 4 L + c of rows 4 g .. 4 g + 3.
    for (int g = 0; g < 4; ++g) {
      r[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
      r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
      r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
      r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int c = 0; c < 4; ++c) {
      t[c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);           // columns c, 8 + c of rows 0-7
      t[4 + c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xDD);       // columns 4 + c, 12 + c of rows 0-7
      t[8 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);  // the same of rows 8-15
      t[12 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xDD);
    }
    int8_t(*w)[64] = out.w + 16 * q;
    for (int c = 0; c < 4; ++c) {
      _mm512_store_si512(w[c], _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88));
      _mm512_store_si512(w[8 + c], _mm512_shuffle_i32x4(t[c], t[8 + c], 0xDD));
      _mm512_store_si512(w[4 + c], _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0x88));
      _mm512_store_si512(w[12 + c], _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0xDD));
    }
  }
}

// sums[g] += groups k0 .. k0 + N - 1 of a tile block with token g's (x + 128) at xu[g] + at.
template <int G, int N>
SPECMOE_TILE_AVX512 inline __attribute__((always_inline)) void dot_groups(const TileBlock& t, int k0,
                                                                          const uint8_t* const* xu, int64_t at,
                                                                          __m512i* sums) {
#pragma GCC unroll 8
  for (int k = k0; k < k0 + N; ++k) {
    const __m512i wv = _mm512_load_si512(t.w[k]);
    for (int g = 0; g < G; ++g)
      sums[g] = _mm512_dpbusd_epi32(sums[g], _mm512_set1_epi32(static_cast<int>(u32_at(xu[g] + at + 4 * k))), wv);
  }
}

// G tokens against a decoded tile: y[g * y_stride + r] for the rows of mask m. xu[g]: token g's
// activations plus 128 (nb x 256 bytes); kSpan: elements per scale (16, 32; 0 = no scales).
template <int G, int kSpan, bool kMins>
SPECMOE_TILE_AVX512 void tile_dot(const TileBlock* tile, int64_t nb, const uint8_t* const* xu,
                                  const ActQ8x256* const* a, float* y, int64_t y_stride, __mmask16 m) {
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileBlock& t = tile[b];
    __m512i blk[G];
    for (int g = 0; g < G; ++g) blk[g] = _mm512_setzero_si512();
    if constexpr (kSpan == 0) {
      for (int k = 0; k < 64; k += 8) dot_groups<G, 8>(t, k, xu, 256 * b, blk);
    } else {
      constexpr int kHalves = kSpan / 16;
      for (int h = 0; h < 16; h += kHalves) {
        __m512i part[G];
        for (int g = 0; g < G; ++g) part[g] = _mm512_setzero_si512();
        dot_groups<G, 4 * kHalves>(t, 4 * h, xu, 256 * b, part);
        const __m512i s = _mm512_load_si512(t.scale[h]);
        for (int g = 0; g < G; ++g) blk[g] = _mm512_add_epi32(blk[g], _mm512_mullo_epi32(part[g], s));
      }
    }
    const __m512i corr = _mm512_load_si512(t.corr);
    const __m512 d = _mm512_load_ps(t.d);
    for (int g = 0; g < G; ++g)
      acc[g] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[g][b].d)),
                               _mm512_cvtepi32_ps(_mm512_sub_epi32(blk[g], corr)), acc[g]);
    if constexpr (kMins) {
      // sum over halves of min x bsum, two halves per vpdpwssd (|min| <= 15, |bsum| <= 16 x 127).
      const __m512 nd = _mm512_load_ps(t.neg_dmin);
      for (int g = 0; g < G; ++g) {
        __m512i ms = _mm512_setzero_si512();
        for (int i = 0; i < 8; ++i)
          ms = _mm512_dpwssd_epi32(ms, _mm512_load_si512(t.mins[i]),
                                   _mm512_set1_epi32(static_cast<int>(u32_at(a[g][b].bsums + 2 * i))));
        acc[g] = _mm512_fmadd_ps(_mm512_mul_ps(nd, _mm512_set1_ps(a[g][b].d)), _mm512_cvtepi32_ps(ms), acc[g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) _mm512_mask_storeu_ps(y + g * y_stride, m, acc[g]);
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <int kSpan, bool kMins>
SPECMOE_TILE_AVX512 void tile_tokens(const TileBlock* tile, int64_t nb, const uint8_t* xu, size_t xu_stride,
                                     const uint8_t* acts, size_t act_stride, int64_t T, float* y, int64_t n_out,
                                     int n) {
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  const uint8_t* xp[kTokens];
  const ActQ8x256* ap[kTokens];
  for (int64_t t = 0; t < T; t += kTokens) {
    const int64_t G = std::min<int64_t>(kTokens, T - t);
    for (int64_t g = 0; g < G; ++g) {
      xp[g] = xu + (t + g) * xu_stride;
      ap[g] = reinterpret_cast<const ActQ8x256*>(acts + (t + g) * act_stride);
    }
    float* yt = y + t * n_out;
    switch (G) {
      case 8: tile_dot<8, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 7: tile_dot<7, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 6: tile_dot<6, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 5: tile_dot<5, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 4: tile_dot<4, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 3: tile_dot<3, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      case 2: tile_dot<2, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
      default: tile_dot<1, kSpan, kMins>(tile, nb, xp, ap, yt, n_out, m); break;
    }
  }
}

// The AVX2 forms of the above. transpose_block: eight 8 x 8 transposes of 32-bit elements.
inline void transpose_block_avx2(const int8_t (*vals)[256], TileBlock& out) {
  for (int half = 0; half < 2; ++half)
    for (int c = 0; c < 8; ++c) {
      __m256i r[8], t[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals[8 * half + i] + 32 * c));
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
      }
      // r[4 g + e], 128-bit lane L: column 4 L + e of rows 4 g .. 4 g + 3.
      for (int g = 0; g < 2; ++g) {
        r[4 * g + 0] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        r[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
      }
      for (int e = 0; e < 4; ++e) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out.w[8 * c + e] + 32 * half),
                           _mm256_permute2x128_si256(r[e], r[4 + e], 0x20));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out.w[8 * c + 4 + e] + 32 * half),
                           _mm256_permute2x128_si256(r[e], r[4 + e], 0x31));
      }
    }
}

// G tokens against rows 8 half .. 8 half + 7 of a decoded tile (mask: the rows to store).
// kSmall (values of at most 16 in magnitude: Q2_K, Q3_K, IQ1, ternary): a half's four vpmaddubsw
// results add up in int16 (at most 4 x 2 x 255 x 16 < 2^15) before one vpmaddwd with the scales.
template <int G, int kSpan, bool kMins, bool kSmall>
void tile_dot_avx2(const TileBlock* tile, int64_t nb, const uint8_t* const* xu, const ActQ8x256* const* a,
                   float* y, int64_t y_stride, int half, __m256i mask) {
  const int off = 32 * half, row0 = 8 * half;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileBlock& t = tile[b];
    __m256i blk[G];
    for (int g = 0; g < G; ++g) blk[g] = _mm256_setzero_si256();
    for (int h = 0; h < 16; ++h) {
      // The rows' scales as int16 pairs (the ternary formats' are 1).
      __m256i s16 = _mm256_set1_epi16(1);
      if constexpr (kSpan != 0) {
        const __m256i s32 = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.scale[h] + row0));
        s16 = _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s32, 16));
      }
      if constexpr (kSmall) {
        __m256i p[G];
        for (int g = 0; g < G; ++g) p[g] = _mm256_setzero_si256();
        for (int k = 4 * h; k < 4 * h + 4; ++k) {
          const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.w[k] + off));
          for (int g = 0; g < G; ++g) {
            const __m256i x = _mm256_set1_epi32(static_cast<int>(u32_at(xu[g] + 256 * b + 4 * k)));
            p[g] = _mm256_add_epi16(p[g], _mm256_maddubs_epi16(x, wv));
          }
        }
        for (int g = 0; g < G; ++g) blk[g] = _mm256_add_epi32(blk[g], _mm256_madd_epi16(p[g], s16));
      } else {
        for (int k = 4 * h; k < 4 * h + 4; ++k) {
          const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.w[k] + off));
          for (int g = 0; g < G; ++g) {
            const __m256i x = _mm256_set1_epi32(static_cast<int>(u32_at(xu[g] + 256 * b + 4 * k)));
            blk[g] = _mm256_add_epi32(blk[g], _mm256_madd_epi16(_mm256_maddubs_epi16(x, wv), s16));
          }
        }
      }
    }
    const __m256i corr = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.corr + row0));
    const __m256 d = _mm256_load_ps(t.d + row0);
    for (int g = 0; g < G; ++g)
      acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[g][b].d)),
                               _mm256_cvtepi32_ps(_mm256_sub_epi32(blk[g], corr)), acc[g]);
    if constexpr (kMins) {
      const __m256 nd = _mm256_load_ps(t.neg_dmin + row0);
      for (int g = 0; g < G; ++g) {
        __m256i ms = _mm256_setzero_si256();
        for (int i = 0; i < 8; ++i)
          ms = _mm256_add_epi32(ms, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(t.mins[i] + row0)),
                                                      _mm256_set1_epi32(static_cast<int>(u32_at(a[g][b].bsums + 2 * i)))));
        acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(nd, _mm256_set1_ps(a[g][b].d)), _mm256_cvtepi32_ps(ms), acc[g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) _mm256_maskstore_ps(y + g * y_stride + row0, mask, acc[g]);
}

template <int kSpan, bool kMins, bool kSmall>
void tile_tokens_avx2(const TileBlock* tile, int64_t nb, const uint8_t* xu, size_t xu_stride, const uint8_t* acts,
                      size_t act_stride, int64_t T, float* y, int64_t n_out, int n) {
  const uint8_t* xp[kTokensAvx2];
  const ActQ8x256* ap[kTokensAvx2];
  for (int half = 0; half < 2 && 8 * half < n; ++half) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * half), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t t = 0; t < T; t += kTokensAvx2) {
      const int64_t G = std::min<int64_t>(kTokensAvx2, T - t);
      for (int64_t g = 0; g < G; ++g) {
        xp[g] = xu + (t + g) * xu_stride;
        ap[g] = reinterpret_cast<const ActQ8x256*>(acts + (t + g) * act_stride);
      }
      float* yt = y + t * n_out;
      switch (G) {
        case 4: tile_dot_avx2<4, kSpan, kMins, kSmall>(tile, nb, xp, ap, yt, n_out, half, mask); break;
        case 3: tile_dot_avx2<3, kSpan, kMins, kSmall>(tile, nb, xp, ap, yt, n_out, half, mask); break;
        case 2: tile_dot_avx2<2, kSpan, kMins, kSmall>(tile, nb, xp, ap, yt, n_out, half, mask); break;
        default: tile_dot_avx2<1, kSpan, kMins, kSmall>(tile, nb, xp, ap, yt, n_out, half, mask); break;
      }
    }
  }
}

// Whether a Stage's batches take the tiles on this instruction set.
template <class Stage>
bool wanted(int64_t T, bool avx512) {
  return avx512 ? T >= kMinTokens : Stage::kMaxValue <= 62 && T >= kMinTokensAvx2;
}

// Rows [j0, j1) (j0 a multiple of 16 within the matrix) for T tokens: y[t * w.n_out + j].
// biased: the tokens' codes plus 128, n_in bytes each.
template <class Stage>
void run(const MatrixView& w, const uint8_t* acts, size_t act_stride, const uint8_t* biased, int64_t T, float* y,
         int64_t j0, int64_t j1, bool avx512) {
  const int64_t nb = w.n_in / 256;
  thread_local std::vector<TileBlock> tile;  // over-aligned: C++17's allocator aligns it
  tile.resize(static_cast<size_t>(nb));
  alignas(64) int8_t vals[kRows][256];
  for (int64_t j = j0; j < j1; j += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, j1 - j));
    if (j + kRows < j1) prefetch_rows(w, j + kRows, std::min(j1, j + 2 * kRows));
    for (int64_t b = 0; b < nb; ++b) {
      stage_block<Stage>(w, j, n, b, vals, tile[static_cast<size_t>(b)]);
      if (avx512)
        transpose_block(vals, tile[static_cast<size_t>(b)]);
      else
        transpose_block_avx2(vals, tile[static_cast<size_t>(b)]);
    }
    if (avx512)
      tile_tokens<Stage::kScaleSpan, Stage::kMins>(tile.data(), nb, biased, static_cast<size_t>(w.n_in), acts,
                                                   act_stride, T, y + j, w.n_out, n);
    else
      tile_tokens_avx2<Stage::kScaleSpan, Stage::kMins, Stage::kMaxValue <= 16>(tile.data(), nb, biased, static_cast<size_t>(w.n_in), acts,
                                                        act_stride, T, y + j, w.n_out, n);
  }
}

}  // namespace specmoe::kernels::cpu::avx2::tiles
