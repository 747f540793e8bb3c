// AVX2 kernels over packed weights (layout: packed_layout.h): the AVX-512 kernels' scheme
// (matmul_packed_avx512.cpp) with 8 rows per 256-bit register, a 16-row group being two halves
// (bytes 0-31 of a 64-byte k-group field hold rows 0-7, bytes 32-63 rows 8-15). Without VNNI a
// lane's 4 products are vpmaddubsw (u8 x i8 -> two i16 pair sums) and vpmaddwd by ones (-> i32):
// the same exact integers, and the same float steps per lane, so both give quant_dot_ref's bits.
//
// vpmaddubsw saturates at +-32767 per pair: codes are at most 63 (Q6_K), 2 * 63 * 127 < 32767;
// Q8_0's signed codes go in as |c| with the activation's sign flipped where c < 0 (vpsignb), at
// most 2 * 128 * 127 = 32512.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_rows.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu::avx2 {

using namespace packed;

namespace {

// Tokens per kernel call (16 ymm registers: codes, sums and accumulators of up to 4 tokens).
constexpr int kMaxGroup = 4;
// The K-quants' kernels keep one or two int16 sums per token in registers and the int32 sums
// in memory: up to 9 tokens per call, so that a 9-token verify batch reads each group once.
constexpr int kMaxGroupK = 9;

// As the AVX-512 kernels: batches of 2+ tokens prefetch each group block 16 KB ahead into L2.
constexpr size_t kPrefetchAhead = 16 << 10;
inline void prefetch_l2(const uint8_t* p, const uint8_t* end, size_t bytes) {
  if (p >= end) return;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
}
template <int G, size_t kBytes>
inline void prefetch_ahead(const uint8_t* block, const uint8_t* end) {
  if constexpr (G > 1) prefetch_l2(block + (kPrefetchAhead / kBytes) * kBytes, end, kBytes);
}
// The same in kParts slices, one per sub-block of the K-quants (as the AVX-512 kernels do: a
// few lines in flight all the time rather than a burst of 36-53 prefetches per block).
template <int G, size_t kBytes, int kParts>
inline void prefetch_slice(const uint8_t* block, const uint8_t* end, int part) {
  if constexpr (G > 1) {
    const uint8_t* p = block + (kPrefetchAhead / kBytes) * kBytes;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p + kBytes * part / kParts);
    const uintptr_t hi = reinterpret_cast<uintptr_t>(p + kBytes * (part + 1) / kParts);
    if (lo >= reinterpret_cast<uintptr_t>(end)) return;  // the slice is past the caller's rows
    const uintptr_t first = lo & ~uintptr_t{63};  // the slice's lines, from the one holding its first byte
    prefetch_l2(reinterpret_cast<const uint8_t*>(first), end, hi - first);
  }
}
inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// An empty asm that "changes" v: GCC reassociates chains of integer adds into trees, which
// computes every product of a sub-block first and spills them (16 registers); pinning each
// partial sum keeps one accumulator per token live and the products consumed as they come.
inline void keep(__m256i& v) { asm("" : "+x"(v)); }
// 8 fp16 fields (rows of one half) as floats.
inline __m256 halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// Per lane: the sum of the code x activation products of n k-groups of 4 elements (what n
// vpdpbusd of the AVX-512 kernels add), codes at most kMaxCode. vpmaddubsw gives each lane two int16 pair sums
// of at most 2 * kMaxCode * 128 in magnitude; the pair sums of as many k-groups as an int16 holds
// without wrapping (8 for 4-bit codes, 4 for 5-bit, 2 for Q6_K's 6-bit) are added as int16 before
// one vpmaddwd by ones widens them to int32: the same exact sums with fewer operations of the
// multiply pipes (4-bit codes: 9 instead of 16 per 32 elements; Zen 3 has two such pipes).
template <int kMaxCode, int n>
inline __m256i dot_kgroups(const __m256i* w, const int8_t* x) {
  constexpr int kFit = 32767 / (2 * kMaxCode * 128);
  constexpr int kRun = kFit >= 8 ? 8 : kFit >= 4 ? 4 : kFit >= 2 ? 2 : 1;
  constexpr int kStep = kRun < n ? kRun : n;
  static_assert(kFit >= 1 && n % kStep == 0);
  __m256i total = _mm256_setzero_si256();
  for (int i0 = 0; i0 < n; i0 += kStep) {
    __m256i p = _mm256_maddubs_epi16(w[i0], bcast4(x + 4 * i0));
    for (int i = i0 + 1; i < i0 + kStep; ++i) {
      p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[i], bcast4(x + 4 * i)));
      keep(p);
    }
    total = i0 == 0 ? _mm256_madd_epi16(p, _mm256_set1_epi16(1))
                    : _mm256_add_epi32(total, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  return total;
}
template <int kMaxCode>
inline __m256i dot32(const __m256i* w, const int8_t* x) {
  return dot_kgroups<kMaxCode, 8>(w, x);
}
inline void nibbles(const uint8_t* p, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), raw = load(p);
  lo = _mm256_and_si256(raw, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
}
inline __m256i fifth_bit(__m256i code, __m256i plane, int i) {
  const __m256i bit = i <= 4 ? _mm256_slli_epi16(plane, 4 - i) : _mm256_srli_epi16(plane, i - 4);
  return _mm256_or_si256(code, _mm256_and_si256(bit, _mm256_set1_epi8(0x10)));
}

enum class Small { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 };

template <Small kType>
constexpr size_t small_bytes() {
  switch (kType) {
    case Small::Q8_0: return kQ8_0Bytes;
    case Small::Q4_0: return kQ4_0Bytes;
    case Small::Q4_1: return kQ4_1Bytes;
    case Small::Q5_0: return kQ5_0Bytes;
    default: return kQ5_1Bytes;
  }
}

// out[16 g + 8 h + r] for half h, rows r of the half; a[g] = token g's activation blocks.
template <Small kType, int G>
void half_small(const uint8_t* gb, int64_t nb, const ActQ8x32* const* a, int h, float* out, const uint8_t* end) {
  constexpr size_t kBytes = small_bytes<kType>();
  constexpr bool kMin = kType == Small::Q4_1 || kType == Small::Q5_1;
  constexpr bool kFive = kType == Small::Q5_0 || kType == Small::Q5_1;
  constexpr int kOffset = kType == Small::Q4_0 ? 8 : kType == Small::Q5_0 ? 16 : 0;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, gb += kBytes) {
    if (h == 0) prefetch_ahead<G, kBytes>(gb, end);
    const uint8_t* codes = gb + (kMin ? 64 : 32) + 32 * h;
    __m256i w[8];
    __m256i isum[G];
    if constexpr (kType == Small::Q8_0) {
      for (int i = 0; i < 8; ++i) w[i] = load(codes + 64 * i);
      for (int g = 0; g < G; ++g) {
        const int8_t* x = a[g][b].qs;
        __m256i s = _mm256_setzero_si256();
        for (int i = 0; i < 8; ++i)
          s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w[i], w[i]),
                                                                         _mm256_sign_epi8(bcast4(x + 4 * i), w[i])),
                                                    _mm256_set1_epi16(1)));
        isum[g] = s;
      }
    } else {
      for (int c = 0; c < 4; ++c) nibbles(codes + 64 * c, w[2 * c], w[2 * c + 1]);
      if constexpr (kFive) {
        const __m256i plane = load(gb + (kMin ? 320 : 288) + 32 * h);
        for (int i = 0; i < 8; ++i) w[i] = fifth_bit(w[i], plane, i);
      }
      for (int g = 0; g < G; ++g) {
        isum[g] = dot32<kFive ? 31 : 15>(w, a[g][b].qs);
        if constexpr (kOffset != 0) isum[g] = _mm256_sub_epi32(isum[g], _mm256_set1_epi32(kOffset * a[g][b].sum));
      }
    }
    const __m256 dw = halves(gb + 16 * h);
    const __m256 mw = kMin ? halves(gb + 32 + 16 * h) : _mm256_setzero_ps();
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[g]), _mm256_mul_ps(dw, _mm256_set1_ps(x.d)), acc[g]);
      if constexpr (kMin) acc[g] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.s), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 16 * g + 8 * h, acc[g]);
}

// Q4_K / Q5_K group blocks (shared by the two kernels below).
// vpshufb masks: byte k of each dword to both of its int16 halves (scale k, scale k).
inline void k_scale_spreads(__m256i spread[4]) {
  for (int k = 0; k < 4; ++k)
    spread[k] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(0x80008000u | (k << 16) | k)),
                                 _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004, 0x00080008,
                                                   0x000C000C));
}
// Half h's rows' 6-bit scales of sub-blocks 0-3 (sc[0]) and 4-7 (sc[1]), one per byte of the
// row's lane.
inline void k_scales(const uint8_t* gb, int h, __m256i sc[2]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), lo6 = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
  const __m256i u0 = load(gb + 64 + 32 * h), u2 = load(gb + 192 + 32 * h);
  sc[0] = _mm256_and_si256(u0, lo6);
  sc[1] = _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30));
}
// Adds block b of half h to G tokens' sums acc[g]: d x.d isum - dmin x.d (mins . sub-block sums),
// token g's scaled integer sums at isum + g * isum_stride. The mins go in as int16 pairs
// (mn_2i, mn_2i+1) per row (vpshufb inside each 128-bit lane), times the token's sub-block sums
// (pairs too).
template <int G>
inline void k_block_sums(const uint8_t* gb, int h, const ActQ8x256* const* a, int64_t b, const int32_t* isum,
                         int isum_stride, __m256* acc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), lo6 = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
  const __m256i dword_base =
      _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
  const __m256i pick01 = _mm256_or_si256(_mm256_set1_epi32(static_cast<int32_t>(0x80018000u)), dword_base);
  const __m256i pick23 = _mm256_or_si256(_mm256_set1_epi32(static_cast<int32_t>(0x80038002u)), dword_base);
  const __m256i u1 = load(gb + 128 + 32 * h), u2 = load(gb + 192 + 32 * h);
  const __m256i mn03 = _mm256_and_si256(u1, lo6);
  const __m256i mn47 =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4), _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30));
  const __m256i mp0 = _mm256_shuffle_epi8(mn03, pick01), mp1 = _mm256_shuffle_epi8(mn03, pick23);
  const __m256i mp2 = _mm256_shuffle_epi8(mn47, pick01), mp3 = _mm256_shuffle_epi8(mn47, pick23);
  const __m256 d = halves(gb + 16 * h), dmin = halves(gb + 32 + 16 * h);
  for (int g = 0; g < G; ++g) {
    const ActQ8x256& x = a[g][b];
    const __m256i msum = _mm256_add_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(mp0, bcast4(x.bsums32)), _mm256_madd_epi16(mp1, bcast4(x.bsums32 + 2))),
        _mm256_add_epi32(_mm256_madd_epi16(mp2, bcast4(x.bsums32 + 4)), _mm256_madd_epi16(mp3, bcast4(x.bsums32 + 6))));
    const __m256 dx = _mm256_set1_ps(x.d);
    const __m256i is = _mm256_load_si256(reinterpret_cast<const __m256i*>(isum + g * isum_stride));
    acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, dx), acc[g]);
    acc[g] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[g]);
  }
}
// The kernels' int32 sums live in small stack arrays, zeroed once per block (a "first sub-block"
// flag instead is a compare and branch per token and sub-block: 3-16% slower on Zen 3).
template <size_t kBytes>
inline void zero_sums(void* isum) {
  static_assert(kBytes % 32 == 0);
  for (size_t i = 0; i < kBytes / 32; ++i) _mm256_store_si256(static_cast<__m256i*>(isum) + i, _mm256_setzero_si256());
}
// isum (8 lanes) += v.
inline void add_sums(int32_t* isum, __m256i v) {
  auto* s = reinterpret_cast<__m256i*>(isum);
  _mm256_store_si256(s, _mm256_add_epi32(_mm256_load_si256(s), v));
}

// Q4_K: both halves of a group in one pass over its blocks, so that each broadcast activation
// word serves 16 rows (two vpmaddubsw), a sub-block's int16 pair sums (8 k-groups of 4-bit codes:
// at most 8 * 2 * 15 * 128 = 30720) take the row's 6-bit scale through one vpmaddwd (scale in
// both int16 halves: the same exact int32 as widening by ones and vpmulld), and every token's
// sub-block sums go to a small array. On Zen 3 this runs the 2-4 token batches 1.3-1.4x faster
// than the half at a time scheme of the other types (fewer broadcasts, no vpmulld).
template <int G>
void q4_K_both_halves(const uint8_t* gb, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  __m256 acc[2][G];
  for (int g = 0; g < G; ++g) acc[0][g] = acc[1][g] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i spread[4];
  k_scale_spreads(spread);
  for (int64_t b = 0; b < nb; ++b, gb += kQ4_KBytes) {
    __m256i sc[2][2];
    for (int h = 0; h < 2; ++h) k_scales(gb, h, sc[h]);
    alignas(32) int32_t isum[G][2][8];
    zero_sums<sizeof(isum)>(isum);
    for (int j = 0; j < 8; ++j) {
      prefetch_slice<G, kQ4_KBytes, 8>(gb, end, j);
      const uint8_t* chunks = gb + kQ4_KCodes + 256 * j;
      __m256i p[G][2];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {  // k-group i: chunk i / 2's low (even i) or high nibbles
        const uint8_t* q = chunks + 64 * (i / 2);
        __m256i w0 = load(q), w1 = load(q + 32);
        if (i % 2) {
          w0 = _mm256_srli_epi16(w0, 4);
          w1 = _mm256_srli_epi16(w1, 4);
        }
        w0 = _mm256_and_si256(w0, m4);
        w1 = _mm256_and_si256(w1, m4);
        for (int g = 0; g < G; ++g) {
          const __m256i x = bcast4(a[g][b].qs + 32 * j + 4 * i);
          const __m256i d0 = _mm256_maddubs_epi16(w0, x), d1 = _mm256_maddubs_epi16(w1, x);
          p[g][0] = i == 0 ? d0 : _mm256_add_epi16(p[g][0], d0);
          p[g][1] = i == 0 ? d1 : _mm256_add_epi16(p[g][1], d1);
          keep(p[g][0]);
          keep(p[g][1]);
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i sc16 = _mm256_shuffle_epi8(sc[h][j / 4], spread[j % 4]);
        for (int g = 0; g < G; ++g) add_sums(isum[g][h], _mm256_madd_epi16(p[g][h], sc16));
      }
    }
    for (int h = 0; h < 2; ++h) k_block_sums<G>(gb, h, a, b, isum[0][h], 16, acc[h]);
  }
  for (int g = 0; g < G; ++g)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + 16 * g + 8 * h, acc[h][g]);
}

// Q4_K for 6-9 tokens and Q5_K for every batch: one half of the group at a time (one int16 sum
// per token: 9 tokens fit the 16 registers), so that a 9-token batch reads each group once (two
// passes over a group in L1/L2 cost more than the broadcasts this repeats for the second half).
// Q5_K's 5-bit codes fill an int16 in 4 k-groups (4 * 2 * 31 * 128 = 31744): its sums take the
// scale twice per sub-block.
template <bool kFive, int G>
void q45_K_by_half(const uint8_t* gb0, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  constexpr size_t kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  constexpr int kRun = kFive ? 4 : 8;  // k-groups per int16 sum
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i spread[4];
  k_scale_spreads(spread);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    const uint8_t* gb = gb0;
    for (int64_t b = 0; b < nb; ++b, gb += kBytes) {
      __m256i sc[2];
      k_scales(gb, h, sc);
      alignas(32) int32_t isum[G][8];
      zero_sums<sizeof(isum)>(isum);
      for (int j = 0; j < 8; ++j) {
        if (h == 0) prefetch_slice<G, kBytes, 8>(gb, end, j);
        const uint8_t* chunks = gb + kQ4_KCodes + 256 * j + 32 * h;
        const __m256i sc16 = _mm256_shuffle_epi8(sc[j / 4], spread[j % 4]);
        const __m256i plane = kFive ? load(gb + kQ5_KPlanes + 64 * j + 32 * h) : _mm256_setzero_si256();
        __m256i p[G];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          __m256i w = load(chunks + 64 * (i / 2));
          if (i % 2) w = _mm256_srli_epi16(w, 4);
          w = _mm256_and_si256(w, m4);
          if constexpr (kFive) w = fifth_bit(w, plane, i);
#pragma GCC unroll 16
          for (int g = 0; g < G; ++g) {
            const __m256i d = _mm256_maddubs_epi16(w, bcast4(a[g][b].qs + 32 * j + 4 * i));
            p[g] = i % kRun == 0 ? d : _mm256_add_epi16(p[g], d);
            keep(p[g]);
          }
          if ((i + 1) % kRun == 0) {
#pragma GCC unroll 16
            for (int g = 0; g < G; ++g) add_sums(isum[g], _mm256_madd_epi16(p[g], sc16));
          }
        }
      }
      k_block_sums<G>(gb, h, a, b, isum[0], 8, acc);
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 16 * g + 8 * h, acc[g]);
  }
}

// Q6_K: per sub-block, two k-groups of both halves at a time (4 registers of codes; each broadcast
// activation word feeds two vpmaddubsw, as Q4_K's both halves above): the pair's products go
// through the row's int8 scale by vpmaddwd (scale in both int16 halves; two vpmaddubsw per int16
// sum, at most 2 * 2 * 63 * 128 = 32256). 5-10% faster on Zen 3 than a half at a time with all
// four k-groups (half the broadcasts, the same multiply-pipe work). The code offset 32
// is taken once per block: sum_s sc_s (dot_s - 32 bsum_s) = sum_s sc_s dot_s - 32 sum_s sc_s
// bsum_s, the second sum by vpmaddwd of (sc_2k, sc_2k+1) pairs with the token's (bsum_2k,
// bsum_2k+1) (the same exact integers as per sub-block: at most 2^28 in magnitude).
template <int G>
void group_q6_K(const uint8_t* gb, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  __m256 acc[2][G];
  for (int g = 0; g < G; ++g) acc[0][g] = acc[1][g] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b, gb += kQ6_KBytes) {
    const uint8_t* scales = gb + kQ6_KScales;
    alignas(32) int32_t isum[G][2][8];
    zero_sums<sizeof(isum)>(isum);
    for (int s = 0; s < 16; ++s) {
      if (s % 2 == 0) prefetch_slice<G, kQ6_KBytes, 8>(gb, end, s / 2);
      const uint8_t* sb = gb + kQ6_KCodes + kQ6_KSubBlock * s;
      __m256i sc16[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i sc =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 16 * s + 8 * h)));
        sc16[h] = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
      }
#pragma GCC unroll 2
      for (int kp = 0; kp < 2; ++kp) {
        // k-groups 2kp and 2kp + 1 of both halves.
        __m256i w[2][2];
        for (int h = 0; h < 2; ++h) {
          const __m256i lo = load(sb + 32 * h + 64 * kp), top = load(sb + 128 + 32 * h);
          const __m256i t0 = kp == 0 ? _mm256_slli_epi16(top, 4) : top;
          const __m256i t1 = kp == 0 ? _mm256_slli_epi16(top, 2) : _mm256_srli_epi16(top, 2);
          w[h][0] = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(t0, m30));
          w[h][1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_and_si256(t1, m30));
        }
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) {
          const int8_t* x = a[g][b].qs + 16 * s + 8 * kp;
          const __m256i x0 = bcast4(x), x1 = bcast4(x + 4);
          __m256i p0 = _mm256_maddubs_epi16(w[0][0], x0);
          p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[0][1], x1));
          keep(p0);
          __m256i p1 = _mm256_maddubs_epi16(w[1][0], x0);
          p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[1][1], x1));
          keep(p1);
          add_sums(isum[g][0], _mm256_madd_epi16(p0, sc16[0]));
          add_sums(isum[g][1], _mm256_madd_epi16(p1, sc16[1]));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      // (sc_2k, sc_2k+1) of the half's 8 rows as int16 pairs, k = 0..7.
      __m256i scp[8];
      for (int k = 0; k < 8; ++k) {
        const __m128i s0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 32 * k + 8 * h));
        const __m128i s1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 32 * k + 16 + 8 * h));
        scp[k] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s0, s1));
      }
      const __m256 d = halves(gb + 16 * h);
      for (int g = 0; g < G; ++g) {
        const ActQ8x256& x = a[g][b];
        __m256i off = _mm256_madd_epi16(scp[0], bcast4(x.bsums));
        for (int k = 1; k < 8; ++k) off = _mm256_add_epi32(off, _mm256_madd_epi16(scp[k], bcast4(x.bsums + 2 * k)));
        const __m256i is = _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(isum[g][h])),
                                            _mm256_slli_epi32(off, 5));
        acc[h][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, _mm256_set1_ps(x.d)), acc[h][g]);
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + 16 * g + 8 * h, acc[h][g]);
}

// F32, F16, BF16: the row-major kernel's order (see matmul_packed_avx512.cpp). A register holds
// one row's 8 partial sums (a row's 8 elements of a packed chunk) and multiplies a token's 8
// elements; the partials are reduced once per row and token at the end (reduce_rows).

// Tokens per call for float weights: 4 rows x 2 tokens of accumulators with their operands fit
// the 16 registers.
constexpr int kMaxFloatGroup = 2;
// As the AVX-512 kernels: blocks of 32 chunks stay in L1 for all runs of a token tile, and from
// 8 tokens F16 and BF16 blocks are converted to F32 once per block and tile.
constexpr int64_t kBlockChunks = 32;
constexpr int64_t kStageTokens = 8;

template <DType kType>
constexpr size_t float_bytes() {
  return kType == DType::F32 ? 4 : 2;
}
template <DType kType>
inline __m256 float_rows(const uint8_t* p) {  // 8 consecutive values as floats
  if constexpr (kType == DType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (kType == DType::F16) return halves(p);
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

// Adds rows r0 .. r0 + kR - 1 of nc chunks at `main` times kN tokens (x[t]: the token's elements
// of the first chunk) to acc[(r0 + r) * kN + t], or sets them (first).
template <DType kType, int kR, int kN>
inline void row_dots(const uint8_t* main, int64_t nc, int r0, const float* const* x, bool first, __m256* acc,
                     const uint8_t* end) {
  constexpr size_t kRow = 8 * float_bytes<kType>(), kChunk = 16 * kRow;
  __m256 a[kR][kN];
  for (int r = 0; r < kR; ++r)
    for (int t = 0; t < kN; ++t) a[r][t] = first ? _mm256_setzero_ps() : acc[(r0 + r) * kN + t];
  const uint8_t* q = main + kRow * r0;
  for (int64_t c = 0; c < nc; ++c, q += kChunk) {
    if constexpr (kN > 1) prefetch_l2(q + (kPrefetchAhead / kChunk) * kChunk, end, kR * kRow);
    __m256 xt[kN];
    for (int t = 0; t < kN; ++t) xt[t] = _mm256_loadu_ps(x[t] + 8 * c);
    for (int r = 0; r < kR; ++r) {
      const __m256 w = float_rows<kType>(q + kRow * r);
      for (int t = 0; t < kN; ++t) a[r][t] = _mm256_fmadd_ps(w, xt[t], a[r][t]);
    }
  }
  for (int r = 0; r < kR; ++r)
    for (int t = 0; t < kN; ++t) acc[(r0 + r) * kN + t] = a[r][t];
}

template <DType kType>
void run_rows(int64_t G, const uint8_t* main, int64_t nc, const float* const* x, bool first, __m256* acc,
              const uint8_t* end) {
  if (G == 1) {
    row_dots<kType, 8, 1>(main, nc, 0, x, first, acc, end);
    row_dots<kType, 8, 1>(main, nc, 8, x, first, acc, end);
  } else {
    for (int r0 = 0; r0 < 16; r0 += 4) row_dots<kType, 4, 2>(main, nc, r0, x, first, acc, end);
  }
}

// One token's sums of 8 rows (lane r = row r) from their partials acc[0], acc[stride], ...:
// ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) per row.
inline __m256 reduce_rows(const __m256* acc, int64_t stride) {
  __m256 s[4];  // s[i]: row 2i's q_l = p_l + p_l+4 (l = 0..3) in lanes 0-3, row 2i + 1's in 4-7
  for (int i = 0; i < 4; ++i) {
    const __m256 a = acc[2 * i * stride], b = acc[(2 * i + 1) * stride];
    s[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  // lanes 0-3: (q0 + q2, q1 + q3) of rows 0 and 2 (4 and 6 in w23); lanes 4-7: rows 1 and 3 (5 and 7)
  const __m256 w01 = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 w23 = _mm256_add_ps(_mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // element 4h + m: row 2m + h
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <DType kType>
void matmul_float_rows(const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride, int64_t T,
                       float* y, int64_t n_out, int64_t j0, int64_t j1) {
  constexpr size_t kE = float_bytes<kType>(), kChunk = 128 * kE;
  const size_t group_bytes = kRows * kE * static_cast<size_t>(n_in);
  const int64_t n8 = n_in / 8;
  const uint8_t* end = groups + ((j1 + kRows - 1) / kRows - j0 / kRows) * group_bytes;
  const bool stage = kType != DType::F32 && T >= kStageTokens;
  alignas(32) thread_local float staged[128 * kBlockChunks];
  thread_local __m256 acc[16 * kTokenTile];  // run of tokens t .. t + n - 1: 16 n from 16 (t % tile)
  const auto* stage_end = reinterpret_cast<const uint8_t*>(staged);
  auto token = [&](int64_t t) { return reinterpret_cast<const float*>(acts + t * act_stride); };
  float out[kMaxFloatGroup * kRows];
  for_each_float_block(
      groups, group_bytes, n8, kBlockChunks, T, kMaxFloatGroup, y, n_out, j0, j1, out,
      [&](const uint8_t* gb, int64_t c0, int64_t nc) -> const uint8_t* {
        const uint8_t* m = gb + c0 * kChunk;
        if (!stage) return m;
        for (int64_t c = 0; c < nc; ++c) {
          prefetch_l2(m + (c + 1) * kChunk + kPrefetchAhead, end, kChunk);
          for (int v = 0; v < 16; ++v)
            _mm256_store_ps(staged + 128 * c + 8 * v, float_rows<kType>(m + c * kChunk + 8 * kE * v));
        }
        return stage_end;
      },
      [&](const uint8_t* main, int64_t c0, int64_t nc, int64_t k, int64_t t, int64_t n) {
        const float* xp[kMaxFloatGroup];
        for (int64_t i = 0; i < n; ++i) xp[i] = token(t + i) + 8 * c0;
        __m256* a = acc + 16 * (t % kTokenTile);
        if (stage)
          run_rows<DType::F32>(n, main, nc, xp, c0 == 0, a, stage_end);
        else
          run_rows<kType>(n, main, nc, xp, c0 == 0, a, k == 0 ? end : main);
      },
      [&](const uint8_t* gb, int64_t, int64_t t, int64_t n, float* o) {
        const uint8_t* tail = gb + n8 * kChunk;
        const __m256* a = acc + 16 * (t % kTokenTile);
        for (int64_t i = 0; i < n; ++i) {
          const float* x = token(t + i);
          for (int h = 0; h < 2; ++h) {
            __m256 sum = reduce_rows(a + 8 * h * n + i, n);
            for (int64_t e = 8 * n8; e < n_in; ++e)
              sum = _mm256_fmadd_ps(float_rows<kType>(tail + ((e - 8 * n8) * 16 + 8 * h) * kE), _mm256_set1_ps(x[e]), sum);
            _mm256_storeu_ps(o + 16 * i + 8 * h, sum);
          }
        }
      });
}

// The 32-element block types, G tokens, a half group at a time.
template <int G>
void run_group(DType type, const uint8_t* gb, int64_t nb, const uint8_t* const* a, float* out, const uint8_t* end) {
  const auto* s = reinterpret_cast<const ActQ8x32* const*>(a);
  for (int h = 0; h < 2; ++h) {
    switch (type) {
      case DType::Q8_0: half_small<Small::Q8_0, G>(gb, nb, s, h, out, end); break;
      case DType::Q4_0: half_small<Small::Q4_0, G>(gb, nb, s, h, out, end); break;
      case DType::Q4_1: half_small<Small::Q4_1, G>(gb, nb, s, h, out, end); break;
      case DType::Q5_0: half_small<Small::Q5_0, G>(gb, nb, s, h, out, end); break;
      case DType::Q5_1: half_small<Small::Q5_1, G>(gb, nb, s, h, out, end); break;
      default: return;
    }
  }
}

// Q4_K, Q5_K and Q6_K, G tokens: up to 5 Q4_K tokens take both halves of a group at once.
template <int G>
void run_k(DType type, const uint8_t* gb, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  if (type == DType::Q6_K) {
    group_q6_K<G>(gb, nb, a, out, end);
  } else if (type == DType::Q5_K) {
    q45_K_by_half<true, G>(gb, nb, a, out, end);
  } else {
    if constexpr (G <= 5)
      q4_K_both_halves<G>(gb, nb, a, out, end);
    else
      q45_K_by_half<false, G>(gb, nb, a, out, end);
  }
}

}  // namespace

void matmul_packed_rows(DType type, const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride,
                        int64_t T, float* y, int64_t n_out, int64_t j0, int64_t j1) {
  switch (type) {
    case DType::F32: return matmul_float_rows<DType::F32>(groups, n_in, acts, act_stride, T, y, n_out, j0, j1);
    case DType::F16: return matmul_float_rows<DType::F16>(groups, n_in, acts, act_stride, T, y, n_out, j0, j1);
    case DType::BF16: return matmul_float_rows<DType::BF16>(groups, n_in, acts, act_stride, T, y, n_out, j0, j1);
    default: break;
  }
  const DTypeInfo& info = dtype_info(type);
  const int64_t nb = n_in / info.block_size;
  const size_t group_bytes = static_cast<size_t>(nb) * kRows * info.block_bytes;
  const uint8_t* end = groups + ((j1 + kRows - 1) / kRows - j0 / kRows) * group_bytes;
  const bool k_quant = type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
  const int64_t max_group = k_quant ? kMaxGroupK : kMaxGroup;
  const uint8_t* ap[kMaxGroupK];
  float out[kMaxGroupK * kRows];
  for_each_run(groups, group_bytes, T, max_group, y, n_out, j0, j1, out,
               [&](const uint8_t* gb, int64_t t, int64_t G, float* o) {
                 for (int64_t i = 0; i < G; ++i) ap[i] = acts + (t + i) * act_stride;
                 if (k_quant) {
                   const auto* k = reinterpret_cast<const ActQ8x256* const*>(ap);
                   switch (G) {
                     case 9: return run_k<9>(type, gb, nb, k, o, end);
                     case 8: return run_k<8>(type, gb, nb, k, o, end);
                     case 7: return run_k<7>(type, gb, nb, k, o, end);
                     case 6: return run_k<6>(type, gb, nb, k, o, end);
                     case 5: return run_k<5>(type, gb, nb, k, o, end);
                     case 4: return run_k<4>(type, gb, nb, k, o, end);
                     case 3: return run_k<3>(type, gb, nb, k, o, end);
                     case 2: return run_k<2>(type, gb, nb, k, o, end);
                     default: return run_k<1>(type, gb, nb, k, o, end);
                   }
                 }
                 switch (G) {
                   case 4: run_group<4>(type, gb, nb, ap, o, end); break;
                   case 3: run_group<3>(type, gb, nb, ap, o, end); break;
                   case 2: run_group<2>(type, gb, nb, ap, o, end); break;
                   default: run_group<1>(type, gb, nb, ap, o, end); break;
                 }
               });
}

}  // namespace specmoe::kernels::cpu::avx2
