// AVX-512 + VNNI kernels over packed weights (layout: packed_layout.h): lane r of a 512-bit
// register is row r of a 16-row group. Float weights (F32, F16, BF16) at the end of the file. One vpdpbusd multiplies 4 codes of each of the 16 rows
// (unsigned, in the register) by 4 activation bytes of one token (signed, broadcast from memory)
// and adds the four products to each row's int32 lane; a block's codes are unpacked once into
// registers and used by up to 16 tokens. Per block and token the integer sum is exact and the
// float steps are quant_dot_ref's (kernels/cpu/packed.h), one lane per row, so every result
// equals the reference bit for bit whatever the batch, the group or the thread.
//
// Offsets of signed values go through the activations' sums: Q4_0's code - 8 is
// sum(code * x) - 8 * sum(x), Q5_0's - 16 likewise, Q8_0's signed code c is stored as c + 128
// (an xor of the sign bit) and corrected by - 128 * sum(x), Q6_K's - 32 per sub-block of 16
// through the 16-element sums. vpdpbusd does not saturate: a lane's sum of 4 products is at most
// 4 * 255 * 127 (Q8_0), and a block's int32 sums stay below 2^27.
//
// Compiled for AVX2 like the other *_avx2-level files; the functions below get AVX-512 through
// the target pragma and run only after the runtime check in matmul.cpp.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_rows.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // _mm512_undefined_ps in GCC 12's shuffle intrinsics
#endif

#include "kernels/cpu/packed_avx512_inl.h"  // inside the target region: its helpers get AVX-512

namespace specmoe::kernels::cpu::avx512 {

using avx2::ActQ8x256;
using avx2::ActQ8x32;
using namespace packed;
using namespace packed512;

namespace {

// Tokens one kernel call multiplies with a group's unpacked codes.
constexpr int kMaxGroup = 16;

inline __m512i dp(__m512i acc, __m512i w, const int8_t* x) { return _mm512_dpbusd_epi32(acc, w, bcast4(x)); }
// The exact int32 dot of 8 k-groups (32 codes per row) with one token's 32 activation bytes:
// two chains of four, for the latency.
// dot32_halves leaves the two chains apart: s0 sums the k-groups 0, 2, 4, 6 and s1 the odd ones,
// 16 codes of each row apiece.
inline void dot32_halves(const __m512i* w, const int8_t* x, __m512i& s0, __m512i& s1) {
  s0 = dp(_mm512_setzero_si512(), w[0], x), s1 = dp(_mm512_setzero_si512(), w[1], x + 4);
  s0 = dp(s0, w[2], x + 8), s1 = dp(s1, w[3], x + 12);
  s0 = dp(s0, w[4], x + 16), s1 = dp(s1, w[5], x + 20);
  s0 = dp(s0, w[6], x + 24), s1 = dp(s1, w[7], x + 28);
}
inline __m512i dot32(const __m512i* w, const int8_t* x) {
  __m512i s0, s1;
  dot32_halves(w, x, s0, s1);
  return _mm512_add_epi32(s0, s1);
}
// Batches of 2+ tokens are compute bound, and their weight blocks must already be in L2 when a
// block is unpacked: the hardware prefetchers alone left a 9-token forward waiting on memory
// (1536 x 8960 Q4_K, one thread: 1.36 ms without, 0.79 ms with these prefetches; into L1
// instead: no gain). A one-token step is bound by reading memory; on Zen 5 it streamed as fast
// without prefetches, on Sapphire Rapids (2 cores, `specmoe bench -n 64 -p 0 --max-batch 1`)
// prefetching 4 KB ahead (at least the next block) raised decode of the models whose rows are
// short and whose products are small: SmolLM2-135M Q4_1 207 -> 323 tokens/s, the
// Qwen2.5-Coder-0.5B draft Q4_K_M 54 -> 64 (requantized to Q4_0: 77 -> 94), gemma-3-270m 95 ->
// 108, and left Qwen2.5-Coder-1.5B Q4_K_M as it was (23.2 / 22.3 in two rounds; 16 KB ahead
// slowed it to 21.5): the cores' prefetchers need a while to pick up each chunk of rows. On Zen 4
// the same prefetches slowed decode (7-19%), so one-token products prefetch only where
// decode_prefetch() says so (ops.h: Intel CPUs).
constexpr size_t kPrefetchAhead = 16 << 10;    // bytes ahead of the block being computed, 2+ tokens
constexpr size_t kPrefetchAheadOne = 4 << 10;  // the same for one token
template <int G, size_t kBytes>
constexpr size_t prefetch_blocks() {
  constexpr size_t kBlocks = (G > 1 ? kPrefetchAhead : kPrefetchAheadOne) / kBytes;
  return kBlocks > 0 ? kBlocks : 1;
}
template <int G, size_t kBytes>
inline void prefetch_ahead(const uint8_t* block, const uint8_t* end) {
  prefetch_l2(block + prefetch_blocks<G, kBytes>() * kBytes, end, kBytes);
}
// The same prefetch in kParts slices, slice `part` (0 .. kParts - 1) at a time, for the kernels
// whose blocks are large (the K-quants, 2.3-3.4 KB per group block): one slice per sub-block keeps
// a few lines in flight all the time instead of a burst of 36-53 prefetches that waits for line
// fill buffers while the block's arithmetic waits behind it. Measured on 2 Sapphire Rapids cores
// (`SPECMOE_THREADS=2 bench_matmul --benchmark_filter='BM_Matmul/dtype:(12|14)/T:(1|5|9)/shape:(3|4)'`,
// two alternating rounds, weights from memory): Q4_K T = 9 0.84-0.90 -> 0.62-0.75 ms, Q6_K T = 1
// 0.71-0.76 -> 0.60-0.66, T = 9 1.18-1.32 -> 0.98-1.05; the 1.5B Q4_K_M target decodes at
// 15.5-15.9 -> 17.5-17.6 tokens/s and its 9-token forward takes 108-130 -> 94-97 ms (`specmoe
// bench -n 32 -p 0 -r 3 --max-batch 9`, 3 alternating rounds, a slow phase of the machine).
// Slice `part` of the block at p (the block to prefetch itself).
template <size_t kBytes, int kParts>
inline void prefetch_part(const uint8_t* p, const uint8_t* end, int part) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p + kBytes * part / kParts);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(p + kBytes * (part + 1) / kParts);
  if (lo >= reinterpret_cast<uintptr_t>(end)) return;  // the slice is past the caller's rows
  const uintptr_t first = lo & ~uintptr_t{63};  // the slice's lines, from the one holding its first byte
  prefetch_l2(reinterpret_cast<const uint8_t*>(first), end, hi - first);
}
template <int G, size_t kBytes, int kParts>
inline void prefetch_slice(const uint8_t* block, const uint8_t* end, int part) {
  prefetch_part<kBytes, kParts>(block + prefetch_blocks<G, kBytes>() * kBytes, end, part);
}

// ------------------------------------------------------------------ 32-element blocks
// out[16 g + r] = row r's value for token g; a[g] = token g's activation blocks.

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

template <Small kType, int G>
void group_small(const uint8_t* gb, int64_t nb, const ActQ8x32* const* a, float* out, const uint8_t* end) {
  constexpr size_t kBytes = small_bytes<kType>();
  constexpr bool kMin = kType == Small::Q4_1 || kType == Small::Q5_1;
  constexpr bool kFive = kType == Small::Q5_0 || kType == Small::Q5_1;
  // -offset * sum(x): Q8_0 +128 (codes stored + 128), Q4_0 8, Q5_0 16, as an int16 pair for
  // vpdpwssd with the token's int32 sum (|sum| <= 32 * 127 fits the low half; the high half
  // multiplies 0).
  constexpr int kOffset = kType == Small::Q8_0 ? 128 : kType == Small::Q4_0 ? 8 : kType == Small::Q5_0 ? 16 : 0;
  const __m512i neg_offset = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint16_t>(-kOffset)));
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, gb += kBytes) {
    prefetch_ahead<G, kBytes>(gb, end);
    __m512i w[8];
    const uint8_t* codes = gb + (kMin ? 64 : 32);
    if constexpr (kType == Small::Q8_0) {
      const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int i = 0; i < 8; ++i) w[i] = _mm512_xor_si512(load(codes + 64 * i), sign);
    } else {
      for (int c = 0; c < 4; ++c) nibbles(codes + 64 * c, w[2 * c], w[2 * c + 1]);
      if constexpr (kFive) {
        const __m512i plane = load(gb + (kMin ? 320 : 288));
        for (int i = 0; i < 8; ++i) w[i] = fifth_bit(w[i], plane, i);
      }
    }
    const __m512 dw = halves(gb);
    const __m512 mw = kMin ? halves(gb + 32) : _mm512_setzero_ps();
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      __m512i isum = dot32(w, x.qs);
      if constexpr (kOffset != 0) isum = _mm512_dpwssd_epi32(isum, bcast4(&x.sum), neg_offset);
      acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(x.d)), acc[g]);
      if constexpr (kMin) acc[g] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x.s), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) _mm512_store_ps(out + 16 * g, acc[g]);
}

// ------------------------------------------------------------------ Q4_K and Q5_K

// The float steps of a Q4_K / Q5_K group block (quant_dot_ref's order): per token,
// acc += isum * (d * dx) - (sum_j mn_j * bsums_j) * (dmin * dx).
template <int G>
inline void k_block_floats(const uint8_t* blk, const KScales& ks, const ActQ8x256* const* a, int64_t b,
                           const __m512i* isum, __m512* acc) {
  __m512i mp[4];
  k_min_pairs(ks, mp);
  const __m512 d = halves(blk), dmin = halves(blk + 32);
  for (int g = 0; g < G; ++g) {
    const ActQ8x256& x = a[g][b];
    const __m512i msum = k_min_sum(mp, x.bsums32);
    const __m512 dx = _mm512_set1_ps(x.d);
    acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[g]), _mm512_mul_ps(d, dx), acc[g]);
    acc[g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc[g]);
  }
}

template <bool kFive, int G>
void group_q45_K(const uint8_t* gb, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  constexpr size_t kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, gb += kBytes) {
    const KScales ks = k_scales(gb);
    __m512i isum[G];
    for (int g = 0; g < G; ++g) isum[g] = _mm512_setzero_si512();
    auto sub_block = [&](int j) __attribute__((always_inline)) {
      prefetch_slice<G, kBytes, 8>(gb, end, j);
      const uint8_t* chunks = gb + kQ4_KCodes + 256 * j;
      __m512i w[8];
      for (int c = 0; c < 4; ++c) nibbles(chunks + 64 * c, w[2 * c], w[2 * c + 1]);
      if constexpr (kFive) {
        const __m512i plane = load(gb + kQ5_KPlanes + 64 * j);
        for (int i = 0; i < 8; ++i) w[i] = fifth_bit(w[i], plane, i);
      }
      const __m512i sc = k_scale(ks, j);
      if constexpr (kFive) {
        for (int g = 0; g < G; ++g)
          isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(dot32(w, a[g][b].qs + 32 * j), sc));
      } else if constexpr (G == 1) {
        // Q4_K: each half of the sub-block's dot (16 elements: 16 * 15 * 128 < 2^15) fits an
        // int16, and sc (0..63) sits in the low half of its lane with 0 above, so vpdpwssd's
        // lo16 * lo16 + hi16 * hi16 is that half times the scale, added to isum exactly: two
        // multiply-adds of the VNNI unit in place of vpmulld (two uops, 10 cycles) and two adds.
        __m512i s0, s1;
        dot32_halves(w, a[0][b].qs + 32 * j, s0, s1);
        isum[0] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum[0], s0, sc), s1, sc);
      } else {
        // A batch is bound by the VNNI unit (one 512-bit vpdpbusd, vpdpwssd, vpmulld, FMA or
        // vpternlogd per cycle on Zen 4), so the two halves share one lane as an int16 pair (s0
        // low, s1 high: a shift and a masked move, which issue beside it) and one vpdpwssd with
        // the scale in both halves adds s0 * sc + s1 * sc: 9 of its operations per token and
        // sub-block instead of 10. Zen 4, one thread, 1536 x 8960 (`bench_matmul
        // --benchmark_filter='BM_Matmul/dtype:12/T:(5|9|16)/shape:3'`, 2 alternating rounds):
        // 300-313 -> 326-333 GFLOP/s at T = 5, 313-317 -> 321-323 at 9, 315-317 -> 332-344 at 16.
        // (One token keeps the two vpdpwssd: the pairing slowed it by 5% with its weights in L2.)
        const __m512i sc2 = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16));
        for (int g = 0; g < G; ++g) {
          __m512i s0, s1;
          dot32_halves(w, a[g][b].qs + 32 * j, s0, s1);
          const __m512i pair = _mm512_mask_mov_epi16(s0, 0xAAAAAAAA, _mm512_slli_epi32(s1, 16));
          isum[g] = _mm512_dpwssd_epi32(isum[g], pair, sc2);
        }
      }
    };
    // Q4_K batches unroll the sub-blocks (constant shifts for the scales, one schedule across
    // them): on 2 Sapphire Rapids cores r(5) of the 1.5B Q4_K_M from CPU time 1.47-1.50 ->
    // 1.42-1.46 (`specmoe bench -n 32 -p 0 -r 3 --max-batch 9`, 3 alternating rounds),
    // `BM_MatmulKernel/dtype:12/T:2/isa:2` 84 -> 88-90 G MAC/s. A single token, Q5_K (T:5
    // 88-90 -> 84) and Q6_K (unrolled: T:5 75 -> 67) keep their loops.
    if constexpr (G == 1 || kFive) {
      for (int j = 0; j < 8; ++j) sub_block(j);
    } else {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) sub_block(j);
    }
    k_block_floats<G>(gb, ks, a, b, isum, acc);
  }
  for (int g = 0; g < G; ++g) _mm512_store_ps(out + 16 * g, acc[g]);
}

// ------------------------------------------------------------------ Q4_K, two groups at once
// A batch multiplies each broadcast of a token's 4 activation bytes with the codes of two groups
// (32 rows) held side by side in registers, instead of one: one 512-bit broadcast load per two
// vpdpbusd. On Ice Lake vpdpbusd issues twice per cycle from registers but about once per cycle
// with a broadcast operand (standalone loops, one core: 5.2 against 3.0 G per second), and a
// synthetic sub-block loop of 9 tokens went from 1.4-1.6 to 2.1-2.4 G vpdpbusd per second this
// way. In the whole kernel the gain is smaller: the 1.5B Q4_K_M's 9-token forward on 2 Ice Lake
// cores 106-120 -> 91-106 ms (CPU time 195-215 -> 171-200), its 5-token one 67-77 -> 68-74
// (`specmoe bench -n 2 -p 0 -r 5 --max-batch 9`, 5 alternating rounds, a noisy machine).
// Tokens go kPass at a time with their four chains (two halves of each group's sub-block dot)
// interleaved; each half is an exact int16 as in group_q45_K, the scale applied by one vpdpwssd.
// The integer sums and the float steps per block are group_q45_K's: every result keeps its bits.
// (The same pairing for Q6_K, whose vpmulld per token and sub-block stays, measured no faster;
// again with the block's sums in memory, one dot chain per group and token and three tokens per
// pass, in an in-process A/B alternating call by call on 2 Ice Lake threads: 8960 x 1536 at 5
// tokens 0.95x the time, at 9 1.10x, the 1536 x 151936 output head at 9 1.03x. Scaling this
// kernel's two halves by two vpdpwssd instead of the shifted pair, or passes of one or three
// tokens, were no faster there either: the README's Performance section.)
template <int G>
void group2_q4_K(const uint8_t* ga, size_t group_bytes, int64_t nb, const ActQ8x256* const* a, float* out,
                 int64_t out_stride, const uint8_t* end) {
  constexpr int kPass = 2;
  __m512 acc[2][G];
  for (int q = 0; q < 2; ++q)
    for (int g = 0; g < G; ++g) acc[q][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {ga + b * kQ4_KBytes, ga + group_bytes + b * kQ4_KBytes};
    const KScales ks[2] = {k_scales(blk[0]), k_scales(blk[1])};
    // Each group is a stream of its own: prefetch ahead within it, and past its last block into
    // the same group of the next pair (the other group's blocks lie in between).
    const uint8_t* ahead[2];
    for (int q = 0; q < 2; ++q) {
      ahead[q] = blk[q] + prefetch_blocks<2, kQ4_KBytes>() * kQ4_KBytes;
      if (ahead[q] >= ga + (q + 1) * group_bytes) ahead[q] += group_bytes;
    }
    __m512i isum[2][G];
    for (int q = 0; q < 2; ++q)
      for (int g = 0; g < G; ++g) isum[q][g] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      for (int q = 0; q < 2; ++q) prefetch_part<kQ4_KBytes, 8>(ahead[q], end, j);
      __m512i wa[8], wb[8];
      for (int c = 0; c < 4; ++c) {
        nibbles(blk[0] + kQ4_KCodes + 256 * j + 64 * c, wa[2 * c], wa[2 * c + 1]);
        nibbles(blk[1] + kQ4_KCodes + 256 * j + 64 * c, wb[2 * c], wb[2 * c + 1]);
      }
      const __m512i sa = k_scale(ks[0], j), sb = k_scale(ks[1], j);
      const __m512i sa2 = _mm512_or_si512(sa, _mm512_slli_epi32(sa, 16));
      const __m512i sb2 = _mm512_or_si512(sb, _mm512_slli_epi32(sb, 16));
      auto pass = [&](int g0, auto n_tokens) __attribute__((always_inline)) {
        constexpr int n = decltype(n_tokens)::value;
        __m512i a0[n], a1[n], b0[n], b1[n];
        for (int g = 0; g < n; ++g) a0[g] = a1[g] = b0[g] = b1[g] = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i)
          for (int g = 0; g < n; ++g) {
            const int8_t* x = a[g0 + g][b].qs + 32 * j + 8 * i;
            const __m512i x0 = bcast4(x), x1 = bcast4(x + 4);
            a0[g] = _mm512_dpbusd_epi32(a0[g], wa[2 * i], x0);
            b0[g] = _mm512_dpbusd_epi32(b0[g], wb[2 * i], x0);
            a1[g] = _mm512_dpbusd_epi32(a1[g], wa[2 * i + 1], x1);
            b1[g] = _mm512_dpbusd_epi32(b1[g], wb[2 * i + 1], x1);
          }
        for (int g = 0; g < n; ++g) {
          const __m512i pa = _mm512_mask_mov_epi16(a0[g], 0xAAAAAAAA, _mm512_slli_epi32(a1[g], 16));
          const __m512i pb = _mm512_mask_mov_epi16(b0[g], 0xAAAAAAAA, _mm512_slli_epi32(b1[g], 16));
          isum[0][g0 + g] = _mm512_dpwssd_epi32(isum[0][g0 + g], pa, sa2);
          isum[1][g0 + g] = _mm512_dpwssd_epi32(isum[1][g0 + g], pb, sb2);
        }
      };
#pragma GCC unroll 8
      for (int g0 = 0; g0 + kPass <= G; g0 += kPass) pass(g0, std::integral_constant<int, kPass>{});
      if constexpr (G % kPass != 0) pass(G - G % kPass, std::integral_constant<int, G % kPass>{});
    }
    for (int q = 0; q < 2; ++q) k_block_floats<G>(blk[q], ks[q], a, b, isum[q], acc[q]);
  }
  for (int q = 0; q < 2; ++q)
    for (int g = 0; g < G; ++g) _mm512_store_ps(out + q * out_stride + 16 * g, acc[q][g]);
}

// ------------------------------------------------------------------ Q6_K

template <int G>
void group_q6_K(const uint8_t* gb, int64_t nb, const ActQ8x256* const* a, float* out, const uint8_t* end) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  alignas(64) int32_t pairs[8][16];  // (sc_2i, sc_2i+1) of each row as int16 pairs
  for (int64_t b = 0; b < nb; ++b, gb += kQ6_KBytes) {
    const uint8_t* scales = gb + kQ6_KScales;
    __m512i isum[G];
    for (int g = 0; g < G; ++g) isum[g] = _mm512_setzero_si512();
    for (int s = 0; s < 16; ++s) {
      if (s % 2 == 0) prefetch_slice<G, kQ6_KBytes, 8>(gb, end, s / 2);
      const uint8_t* sb = gb + kQ6_KCodes + kQ6_KSubBlock * s;
      __m512i w[4];
      q6_codes(sb, w);
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * s)));
      if (s % 2 == 1) {
        const __m512i prev = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * (s - 1))));
        _mm512_store_si512(pairs[s / 2], _mm512_ternarylogic_epi32(prev, _mm512_slli_epi32(sc, 16), low16, 0xE4));
      }
      for (int g = 0; g < G; ++g) {
        const int8_t* x = a[g][b].qs + 16 * s;
        __m512i s0 = dp(_mm512_setzero_si512(), w[0], x), s1 = dp(_mm512_setzero_si512(), w[1], x + 4);
        s0 = dp(s0, w[2], x + 8), s1 = dp(s1, w[3], x + 12);
        isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
      }
    }
    const __m512 d = halves(gb);
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      // 32 * sum_s sc_s * (sum of x's sub-block s of 16)
      __m512i off = _mm512_setzero_si512();
      for (int i = 0; i < 8; ++i) off = _mm512_dpwssd_epi32(off, _mm512_load_si512(pairs[i]), bcast4(x.bsums + 2 * i));
      const __m512i total = _mm512_sub_epi32(isum[g], _mm512_slli_epi32(off, 5));
      acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, _mm512_set1_ps(x.d)), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) _mm512_store_ps(out + 16 * g, acc[g]);
}

// ------------------------------------------------------------------ F32, F16, BF16
// The row-major AVX2 kernel's order (matmul_avx2.cpp) for every row and token: 8 partial sums,
// partial l taking elements 8m + l in increasing m, then ((p0 + p4) + (p2 + p6)) + ((p1 + p5) +
// (p3 + p7)), then the elements past the last multiple of 8 with one fma each.
//
// A register holds the 8 partials of two rows (the packed chunks: rows 2p and 2p + 1, 8
// elements each, packed_layout.h) and multiplies a token's 8 elements broadcast to both halves:
// per chunk of 8 elements, 8 weight loads and one load per token feed 8 fmas per token. (The
// layout before had row r in lane r, so each element of each token was a broadcast load of its
// own; Ice Lake issues about one such load-operand fma per cycle, half its fma rate, and one
// thread reached 31 G multiply-adds per second at 16 tokens, `BM_MatmulKernel/dtype:1/T:16`.)
// The partials are reduced once per row and token at the end (reduce_pairs), in the order above.

// Tokens per call: kP x kN accumulators, kN token registers and a weight register fit the 32.
constexpr int kMaxFloatGroup = 6;
// Chunks per block: 16 rows x 256 elements, 16 KB as F32, stay in L1 while every run of a token
// tile passes over them (a whole group of 16 x 1536 F32 weights did not, and 8 tokens then ran
// at the speed of L2).
constexpr int64_t kBlockChunks = 32;
// From three runs of tokens on, F16 and BF16 blocks are converted to F32 once per block and token
// tile (into a per-thread buffer) and the runs read floats: the conversion (two uops of the fma
// ports per 16 weights on Intel) is then paid once for the tile instead of once per run. With two
// runs the copy's stores cost about what they save (`BM_MatmulKernel/dtype:1/T:(8|9)/isa:2`, one
// Ice Lake thread: 40-46 G multiply-adds per second staged, 43-49 not); at 64 tokens staging
// gives 53-60 against 35-39.
constexpr int64_t kStageTokens = 2 * kMaxFloatGroup + 1;

template <DType kType>
constexpr size_t float_bytes() {
  return kType == DType::F32 ? 4 : 2;
}
// 16 consecutive values as floats (a pair of rows in a chunk, or element k of the 16 rows in the tail).
template <DType kType>
inline __m512 float_rows(const uint8_t* p) {
  if constexpr (kType == DType::F32) return _mm512_loadu_ps(p);
  if constexpr (kType == DType::F16) return halves(p);
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

// Adds pairs p0 .. p0 + kP - 1 of nc chunks at `main` times kN tokens (x[t]: the token's elements
// of the first chunk) to acc[(p0 + p) * kN + t], or sets them (first).
template <DType kType, int kP, int kN>
inline void pair_dots(const uint8_t* main, int64_t nc, int p0, const float* const* x, bool first, __m512* acc,
                      const uint8_t* end) {
  constexpr size_t kPair = 16 * float_bytes<kType>(), kChunk = 8 * kPair;
  constexpr size_t kAhead = prefetch_blocks<kN, kChunk>() * kChunk;
  __m512 a[kP][kN];
#pragma GCC unroll 8
  for (int p = 0; p < kP; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < kN; ++t) a[p][t] = first ? _mm512_setzero_ps() : acc[(p0 + p) * kN + t];
  const uint8_t* q = main + kPair * p0;
  for (int64_t c = 0; c < nc; ++c, q += kChunk) {
    prefetch_l2(q + kAhead, end, kP * kPair);
    __m512 xt[kN];
#pragma GCC unroll 8
    for (int t = 0; t < kN; ++t) xt[t] = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[t] + 8 * c));
#pragma GCC unroll 8
    for (int p = 0; p < kP; ++p) {
      const __m512 w = float_rows<kType>(q + kPair * p);
#pragma GCC unroll 8
      for (int t = 0; t < kN; ++t) a[p][t] = _mm512_fmadd_ps(w, xt[t], a[p][t]);
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < kP; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < kN; ++t) acc[(p0 + p) * kN + t] = a[p][t];
}

template <DType kType, int kN>
void group_pairs(const uint8_t* main, int64_t nc, const float* const* x, bool first, __m512* acc, const uint8_t* end) {
  if constexpr (kN <= 3) {
    pair_dots<kType, 8, kN>(main, nc, 0, x, first, acc, end);
  } else {  // the two halves of the rows in turn: 4 x 6 accumulators
    pair_dots<kType, 4, kN>(main, nc, 0, x, first, acc, end);
    pair_dots<kType, 4, kN>(main, nc, 4, x, first, acc, end);
  }
}

template <DType kType>
void run_pairs(int64_t G, const uint8_t* main, int64_t nc, const float* const* x, bool first, __m512* acc,
               const uint8_t* end) {
  switch (G) {
    case 1: return group_pairs<kType, 1>(main, nc, x, first, acc, end);
    case 2: return group_pairs<kType, 2>(main, nc, x, first, acc, end);
    case 3: return group_pairs<kType, 3>(main, nc, x, first, acc, end);
    case 4: return group_pairs<kType, 4>(main, nc, x, first, acc, end);
    case 5: return group_pairs<kType, 5>(main, nc, x, first, acc, end);
    default: return group_pairs<kType, 6>(main, nc, x, first, acc, end);
  }
}

// One token's 16 row sums (lane r = row r) from its 8 pair registers acc[0], acc[stride], ...
// (pair p: row 2p's partials in lanes 0-7, row 2p + 1's in lanes 8-15), in the order above.
inline __m512 reduce_pairs(const __m512* acc, int64_t stride) {
  __m512 s[4];  // s[i], 128-bit lane j: row 4i + j's q_l = p_l + p_l+4, l = 0..3
  for (int i = 0; i < 4; ++i) {
    const __m512 a = acc[2 * i * stride], b = acc[(2 * i + 1) * stride];
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // lane j: (q0 + q2, q1 + q3) of row j (of row 8 + j in w23), then of row 4 + j (12 + j).
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // element 4j + m: row j + 4m
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

// Float weights: rows [j0, j1) for T tokens (acts: their float rows, act_stride bytes apart).
template <DType kType>
void matmul_float_rows(const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride, int64_t T,
                       float* y, int64_t n_out, int64_t j0, int64_t j1) {
  constexpr size_t kE = float_bytes<kType>(), kChunk = 128 * kE;
  const size_t group_bytes = kRows * kE * static_cast<size_t>(n_in);
  const int64_t n8 = n_in / 8;
  const uint8_t* end =
      T == 1 && !decode_prefetch() ? groups : groups + ((j1 + kRows - 1) / kRows - j0 / kRows) * group_bytes;
  const bool stage = kType != DType::F32 && T >= kStageTokens;
  alignas(64) thread_local float staged[128 * kBlockChunks];
  thread_local __m512 acc[8 * kTokenTile];  // run of tokens t .. t + n - 1: 8 n from 8 (t % tile)
  const auto* stage_end = reinterpret_cast<const uint8_t*>(staged);  // no prefetching of the copy
  auto token = [&](int64_t t) { return reinterpret_cast<const float*>(acts + t * act_stride); };
  alignas(64) float out[kMaxFloatGroup * kRows];
  for_each_float_block(
      groups, group_bytes, n8, kBlockChunks, T, kMaxFloatGroup, y, n_out, j0, j1, out,
      [&](const uint8_t* gb, int64_t c0, int64_t nc) -> const uint8_t* {
        const uint8_t* m = gb + c0 * kChunk;
        if (!stage) return m;
        for (int64_t c = 0; c < nc; ++c) {
          prefetch_l2(m + (c + 1) * kChunk + kPrefetchAhead, end, kChunk);
          for (int v = 0; v < 8; ++v)
            _mm512_store_ps(staged + 128 * c + 16 * v, float_rows<kType>(m + c * kChunk + 16 * kE * v));
        }
        return stage_end;
      },
      [&](const uint8_t* main, int64_t c0, int64_t nc, int64_t k, int64_t t, int64_t n) {
        const float* xp[kMaxFloatGroup];
        for (int64_t i = 0; i < n; ++i) xp[i] = token(t + i) + 8 * c0;
        __m512* a = acc + 8 * (t % kTokenTile);
        // Only the first run streams the block in; the others find it in L1.
        if (stage)
          run_pairs<DType::F32>(n, main, nc, xp, c0 == 0, a, stage_end);
        else
          run_pairs<kType>(n, main, nc, xp, c0 == 0, a, k == 0 ? end : main);
      },
      [&](const uint8_t* gb, int64_t, int64_t t, int64_t n, float* o) {
        const uint8_t* tail = gb + n8 * kChunk;
        const __m512* a = acc + 8 * (t % kTokenTile);
        for (int64_t i = 0; i < n; ++i) {
          const float* x = token(t + i);
          __m512 sum = reduce_pairs(a + i, n);
          for (int64_t e = 8 * n8; e < n_in; ++e)
            sum = _mm512_fmadd_ps(float_rows<kType>(tail + (e - 8 * n8) * 16 * kE), _mm512_set1_ps(x[e]), sum);
          _mm512_store_ps(o + 16 * i, sum);
        }
      });
}

// ------------------------------------------------------------------ dispatch

template <int G>
void run_group(DType type, const uint8_t* gb, int64_t nb, const uint8_t* const* a, float* out, const uint8_t* end) {
  auto small = [&](auto tag) {
    group_small<decltype(tag)::value, G>(gb, nb, reinterpret_cast<const ActQ8x32* const*>(a), out, end);
  };
  const auto* k = reinterpret_cast<const ActQ8x256* const*>(a);
  switch (type) {
    case DType::Q8_0: small(std::integral_constant<Small, Small::Q8_0>{}); return;
    case DType::Q4_0: small(std::integral_constant<Small, Small::Q4_0>{}); return;
    case DType::Q4_1: small(std::integral_constant<Small, Small::Q4_1>{}); return;
    case DType::Q5_0: small(std::integral_constant<Small, Small::Q5_0>{}); return;
    case DType::Q5_1: small(std::integral_constant<Small, Small::Q5_1>{}); return;
    case DType::Q4_K: group_q45_K<false, G>(gb, nb, k, out, end); return;
    case DType::Q5_K: group_q45_K<true, G>(gb, nb, k, out, end); return;
    case DType::Q6_K: group_q6_K<G>(gb, nb, k, out, end); return;
    default: return;
  }
}

using GroupFn = void (*)(DType, const uint8_t*, int64_t, const uint8_t* const*, float*, const uint8_t*);
template <int... Gs>
constexpr auto make_table(std::integer_sequence<int, Gs...>) {
  return std::array<GroupFn, sizeof...(Gs)>{&run_group<Gs + 1>...};
}
constexpr auto kGroupFns = make_table(std::make_integer_sequence<int, kMaxGroup>{});

using Group2Fn = void (*)(const uint8_t*, size_t, int64_t, const ActQ8x256* const*, float*, int64_t, const uint8_t*);
template <int... Gs>
constexpr auto make_table2(std::integer_sequence<int, Gs...>) {
  return std::array<Group2Fn, sizeof...(Gs)>{&group2_q4_K<Gs + 1>...};
}
constexpr auto kGroup2Fns = make_table2(std::make_integer_sequence<int, kMaxGroup>{});

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
  // The prefetches stop at `end`, the end of the caller's rows; a one-token product without
  // decode prefetching (ops.h: decode_prefetch) ends them before the first.
  const uint8_t* end =
      T == 1 && !decode_prefetch() ? groups : groups + ((j1 + kRows - 1) / kRows - j0 / kRows) * group_bytes;
  const uint8_t* ap[kMaxGroup];
  // Q4_K batches take two groups per call (group2_q4_K); one token keeps group_q45_K<1>.
  if (type == DType::Q4_K && T > 1) {
    alignas(64) float out2[2 * kMaxGroup * kRows];
    for_each_run_groups(groups, group_bytes, T, kMaxGroup, 2, y, n_out, j0, j1, out2, kMaxGroup * kRows,
                       [&](const uint8_t* gb, int64_t n_groups, int64_t t, int64_t G, float* o) {
                         for (int64_t i = 0; i < G; ++i) ap[i] = acts + (t + i) * act_stride;
                         if (n_groups == 2)
                           kGroup2Fns[G - 1](gb, group_bytes, nb, reinterpret_cast<const ActQ8x256* const*>(ap), o,
                                             kMaxGroup * kRows, end);
                         else
                           kGroupFns[G - 1](type, gb, nb, ap, o, end);
                       });
    return;
  }
  alignas(64) float out[kMaxGroup * kRows];
  for_each_run(groups, group_bytes, T, kMaxGroup, y, n_out, j0, j1, out,
               [&](const uint8_t* gb, int64_t t, int64_t G, float* o) {
                 for (int64_t i = 0; i < G; ++i) ap[i] = acts + (t + i) * act_stride;
                 kGroupFns[G - 1](type, gb, nb, ap, o, end);
               });
}

}  // namespace specmoe::kernels::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
