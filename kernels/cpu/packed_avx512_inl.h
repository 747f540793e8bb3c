// Internal to kernels/cpu: the AVX-512 helpers that the packed-weight kernels share
// (matmul_packed_avx512.cpp, matmul_packed_amx.cpp): loading a group block's fields (layout:
// packed_layout.h) into registers, one lane per row. Include only inside those files' target
// pragma region, which gives these functions AVX-512; they are in an unnamed namespace so each
// file keeps its own copy, compiled with its own target.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace specmoe::kernels::cpu::packed512 {
namespace {

inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }
// 4 bytes at p in every 32-bit lane (the compiler folds it into vpdpbusd as an embedded broadcast).
inline __m512i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// 16 fp16 fields (one per row) as floats.
inline __m512 halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
// Two k-groups from a 64-byte nibble chunk.
inline void nibbles(const uint8_t* p, __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), raw = load(p);
  lo = _mm512_and_si512(raw, m4);
  hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
}
// code |= 16 where bit i of the plane byte is set (the 5th bits).
inline __m512i fifth_bit(__m512i code, __m512i plane, int i) {
  const __m512i bit = i <= 4 ? _mm512_slli_epi16(plane, 4 - i) : _mm512_srli_epi16(plane, i - 4);
  return _mm512_ternarylogic_epi32(code, bit, _mm512_set1_epi8(0x10), 0xF8);  // a | (b & c)
}

// Q6_K: the 4 k-groups of a 16-element sub-block at sb (two nibble chunks, then the crumb plane
// of the top 2 bits), codes 0..63.
inline void q6_codes(const uint8_t* sb, __m512i* w) {
  const __m512i m30 = _mm512_set1_epi8(0x30);
  nibbles(sb, w[0], w[1]);
  nibbles(sb + 64, w[2], w[3]);
  const __m512i top = load(sb + 128);  // bits 2i, 2i + 1: top bits of k-group i
  w[0] = _mm512_ternarylogic_epi32(w[0], _mm512_slli_epi16(top, 4), m30, 0xF8);
  w[1] = _mm512_ternarylogic_epi32(w[1], _mm512_slli_epi16(top, 2), m30, 0xF8);
  w[2] = _mm512_ternarylogic_epi32(w[2], top, m30, 0xF8);
  w[3] = _mm512_ternarylogic_epi32(w[3], _mm512_srli_epi16(top, 2), m30, 0xF8);
}

// Q4_K / Q5_K: the 12-byte scale fields of a group block (three 16 x u32 words at 64, 128, 192)
// as bytes per row, the layout of quant.cpp's get_scale_min: scale j of row r is byte j % 4 of
// lane r of sc03 (j < 4) or sc47, min j likewise of mn03 / mn47.
struct KScales {
  __m512i sc03, sc47, mn03, mn47;
};
inline KScales k_scales(const uint8_t* gb) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), lo6 = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
  const __m512i u0 = load(gb + 64), u1 = load(gb + 128), u2 = load(gb + 192);
  KScales s;
  s.sc03 = _mm512_and_si512(u0, lo6);
  s.sc47 = _mm512_or_si512(_mm512_and_si512(u2, m4), _mm512_and_si512(_mm512_srli_epi32(u0, 2), m30));
  s.mn03 = _mm512_and_si512(u1, lo6);
  s.mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4), _mm512_and_si512(_mm512_srli_epi32(u1, 2), m30));
  return s;
}
// Sub-block j's scale of each row as int32 lanes.
inline __m512i k_scale(const KScales& s, int j) {
  return _mm512_and_si512(_mm512_srli_epi32(j < 4 ? s.sc03 : s.sc47, 8 * (j & 3)), _mm512_set1_epi32(0xFF));
}
// The mins as int16 pairs (mn_2i, mn_2i+1) per row, mp[i] for i = 0..3: vpdpwssd with a token's
// sub-block sums (bsums32, pairs too) gives sum_j mn_j * bsums32_j.
inline void k_min_pairs(const KScales& s, __m512i* mp) {
  // vpshufb picks, inside each 128-bit lane, bytes (0, 1) and (2, 3) of every dword as int16 pairs.
  const __m512i dword_base = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
  const __m512i pick01 = _mm512_or_si512(_mm512_set1_epi32(static_cast<int32_t>(0x80018000u)), dword_base);
  const __m512i pick23 = _mm512_or_si512(_mm512_set1_epi32(static_cast<int32_t>(0x80038002u)), dword_base);
  mp[0] = _mm512_shuffle_epi8(s.mn03, pick01), mp[1] = _mm512_shuffle_epi8(s.mn03, pick23);
  mp[2] = _mm512_shuffle_epi8(s.mn47, pick01), mp[3] = _mm512_shuffle_epi8(s.mn47, pick23);
}
// sum_j mn_j * (sum of the token's sub-block j), per row.
inline __m512i k_min_sum(const __m512i* mp, const int16_t* bsums32) {
  __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp[0], bcast4(bsums32));
  m = _mm512_dpwssd_epi32(m, mp[1], bcast4(bsums32 + 2));
  m = _mm512_dpwssd_epi32(m, mp[2], bcast4(bsums32 + 4));
  return _mm512_dpwssd_epi32(m, mp[3], bcast4(bsums32 + 6));
}

// Prefetches `bytes` at p into L2 unless p is at or past `end` (the caller's chunk: the rows
// after it are another thread's). Inline asm: GCC 12 drops _mm_prefetch / __builtin_prefetch in
// functions built through a target pragma (no prefetch instruction was emitted).
inline void prefetch_l2(const uint8_t* p, const uint8_t* end, size_t bytes) {
  if (p >= end) return;
  for (size_t o = 0; o < bytes; o += 64) asm volatile("prefetcht1 %0" : : "m"(*(p + o)));
}

}  // namespace
}  // namespace specmoe::kernels::cpu::packed512
