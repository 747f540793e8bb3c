// AMX-INT8 kernels over packed weights (layout: packed_layout.h) for batches of tokens: the
// integer products of a block for up to 16 tokens and the 16 rows of a group are one tile
// multiply, C[token][row] += sum_k A[token][k] * B[k][row], where A holds the tokens' activation
// bytes (one row per token, straight from the quantized activations) and B the block's codes. A
// packed k-group (64 bytes: 4 codes of each of the 16 rows, row r in bytes 4r .. 4r + 3) is
// exactly one row of a B tile, so a block's B tile is its k-groups in order: Q8_0's are loaded
// from the packed copy as they are, the narrower codes are unpacked into a 64-byte aligned
// buffer first. The tile unit then does the multiply-adds that the AVX-512 kernels spend a
// vpdpbusd per token and k-group on (matmul_packed_avx512.cpp), and what is left per token is the
// block's float steps.
//
// Exactness: C's int32 sums are exact (the tile unit neither saturates nor rounds; a block's sums
// stay below 2^27), and they are the integers quant_dot_ref defines, taken per block (Q8_0/Q4_x/
// Q5_x), per 32-element sub-block then scaled by its 6-bit scale (Q4_K, Q5_K) or per 16-element
// sub-block and its 8-bit scale (Q6_K). Signed codes (Q8_0; Q4_0's code - 8, Q5_0's - 16, Q6_K's
// - 32, subtracted while unpacking) go through TDPBSSD, unsigned ones (Q4_1, Q5_1, Q4_K, Q5_K)
// through TDPBSUD. The float steps per token and block are quant_dot_ref's, in its order, one lane
// per row, so every result equals the AVX2 and AVX-512 kernels' bit for bit.
//
// Tiles: 0-3 hold C of four consecutive blocks (or sub-blocks; Q4_K / Q5_K: see below), 4-5 the
// A tiles and 6-7 the B tiles of alternate blocks, so loads of the next block overlap the
// multiply of this one. The configuration (rows = tokens, K = 64, 32 or Q6_K's 16) is per thread
// and loaded only when it changes. Linux gives a process the AMX tile state only after
// arch_prctl(ARCH_REQ_XCOMP_PERM), which matmul.cpp requests before it reports Isa::Amx.
//
// Cost (2 Sapphire Rapids cores): a tile multiply with its 1 KB B tile loaded takes ~4.4 ns
// whatever the token count, a C tile store ~4.3 ns, and unpacked codes go through memory (tiles
// load only from memory), so a block has a fixed cost that the AVX-512 kernels, whose codes stay
// in registers, do not; AMX pays from about 32 tokens (K-quants) or 16 (the rest): min_tokens.
//
// Compiled for AVX2 like the other *_avx2-level files; the functions below get AVX-512 and AMX
// through the target pragma and run only after the runtime check in matmul.cpp.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_rows.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/simd_avx2.h"

#if defined(__clang__)
#pragma clang attribute push(                                                                                  \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC's own `__m512i __Y = __Y;` in its intrinsics
#endif

#include "kernels/cpu/packed_avx512_inl.h"  // inside the target region: its helpers get AVX-512

namespace specmoe::kernels::cpu::amx {

using avx2::ActQ8x256;
using avx2::ActQ8x32;
using namespace packed;
using namespace packed512;

namespace {

// Tokens per tile multiply (the rows of A and C).
constexpr int kTileTokens = 16;

// The LDTILECFG operand (Intel SDM, "TILECFG"): palette 1, bytes per row and rows of each tile.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tiles for m tokens and blocks of k elements: C (0-3) m x 16 int32, A (4-5) m x k bytes, B (6-7)
// k / 4 rows of 64 bytes.
void configure(int m, int k) {
  thread_local int current_m = 0, current_k = 0;
  if (m == current_m && k == current_k) return;
  TileConfig c;
  for (int i = 0; i < 4; ++i) c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = 64;
  for (int i = 4; i < 6; ++i) c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = static_cast<uint16_t>(k);
  for (int i = 6; i < 8; ++i) c.rows[i] = static_cast<uint8_t>(k / 4), c.colsb[i] = 64;
  _tile_loadconfig(&c);
  current_m = m, current_k = k;
}

// As the AVX-512 kernels: each group block is prefetched 16 KB ahead into L2 (batches are compute
// bound; their weights must be in L2 when a block is unpacked).
constexpr size_t kPrefetchAhead = 16 << 10;
template <size_t kBytes>
inline void prefetch_ahead(const uint8_t* block, const uint8_t* end) {
  prefetch_l2(block + (kPrefetchAhead / kBytes) * kBytes, end, kBytes);
}

// One tile multiply C += A B: TDPBSSD (signed codes) or TDPBSUD (unsigned). A macro, not a
// template: GCC's tile intrinsics paste their tile numbers into inline assembly as text, so they
// must be literal digits.
#define SPECMOE_TILE_DP(kSigned, C, A, B) \
  do {                                    \
    if constexpr (kSigned)                \
      _tile_dpbssd(C, A, B);              \
    else                                  \
      _tile_dpbsud(C, A, B);              \
  } while (0)

// C tiles of up to four blocks: tile 0 = A(a[0]) x B(b[0]), 1 = A(a[1]) x B(b[1]), ... stored to
// c[i] (16 x 16 int32, token t's 16 row sums at c[i] + 16 t). kSigned: TDPBSSD, else TDPBSUD.
template <bool kSigned>
inline void multiply(int n, const uint8_t* const* a, size_t stride, const void* const* b, int32_t (*c)[256]) {
  _tile_zero(0);
  _tile_loadd(4, a[0], stride);
  _tile_loadd(6, b[0], 64);
  SPECMOE_TILE_DP(kSigned, 0, 4, 6);
  if (n > 1) {
    _tile_zero(1);
    _tile_loadd(5, a[1], stride);
    _tile_loadd(7, b[1], 64);
    SPECMOE_TILE_DP(kSigned, 1, 5, 7);
  }
  if (n > 2) {
    _tile_zero(2);
    _tile_loadd(4, a[2], stride);
    _tile_loadd(6, b[2], 64);
    SPECMOE_TILE_DP(kSigned, 2, 4, 6);
  }
  if (n > 3) {
    _tile_zero(3);
    _tile_loadd(5, a[3], stride);
    _tile_loadd(7, b[3], 64);
    SPECMOE_TILE_DP(kSigned, 3, 5, 7);
  }
  _tile_stored(0, c[0], 64);
  if (n > 1) _tile_stored(1, c[1], 64);
  if (n > 2) _tile_stored(2, c[2], 64);
  if (n > 3) _tile_stored(3, c[3], 64);
}
#undef SPECMOE_TILE_DP

// ------------------------------------------------------------------ 32-element blocks
// acc[16 t + r] += row r's value for token t (acc zeroed by the caller); token t's activation
// blocks at acts + t * stride.

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

template <Small kType>
void group_small(const uint8_t* gb, int64_t nb, const uint8_t* acts, size_t stride, int m, float* acc,
                 const uint8_t* end) {
  constexpr size_t kBytes = small_bytes<kType>();
  constexpr bool kMin = kType == Small::Q4_1 || kType == Small::Q5_1;
  constexpr bool kFive = kType == Small::Q5_0 || kType == Small::Q5_1;
  constexpr bool kSigned = !kMin;  // Q8_0, and Q4_0 / Q5_0 with their offsets subtracted
  constexpr int kOffset = kType == Small::Q4_0 ? 8 : kType == Small::Q5_0 ? 16 : 0;
  alignas(64) uint8_t codes[4][8][64];
  alignas(64) int32_t c[4][256];
  const void* b[4];
  const uint8_t* a[4];
  for (int64_t b0 = 0; b0 < nb; b0 += 4) {
    const int n = nb - b0 < 4 ? static_cast<int>(nb - b0) : 4;
    for (int i = 0; i < n; ++i) {
      const uint8_t* blk = gb + (b0 + i) * kBytes;
      prefetch_ahead<kBytes>(blk, end);
      a[i] = acts + (b0 + i) * sizeof(ActQ8x32) + offsetof(ActQ8x32, qs);
      const uint8_t* q = blk + (kMin ? 64 : 32);
      if constexpr (kType == Small::Q8_0) {
        b[i] = q;  // the packed k-groups are the B tile's rows
        continue;
      } else {
        __m512i w[8];
        for (int k = 0; k < 4; ++k) nibbles(q + 64 * k, w[2 * k], w[2 * k + 1]);
        if constexpr (kFive) {
          const __m512i plane = load(blk + (kMin ? 320 : 288));
          for (int k = 0; k < 8; ++k) w[k] = fifth_bit(w[k], plane, k);
        }
        for (int k = 0; k < 8; ++k) {
          if constexpr (kOffset != 0) w[k] = _mm512_sub_epi8(w[k], _mm512_set1_epi8(kOffset));
          _mm512_store_si512(codes[i][k], w[k]);
        }
        b[i] = codes[i];
      }
    }
    multiply<kSigned>(n, a, stride, b, c);
    __m512 dw[4], mw[4];
    for (int i = 0; i < n; ++i) {
      const uint8_t* blk = gb + (b0 + i) * kBytes;
      dw[i] = halves(blk);
      mw[i] = kMin ? halves(blk + 32) : _mm512_setzero_ps();
    }
    for (int t = 0; t < m; ++t) {
      const auto* x = reinterpret_cast<const ActQ8x32*>(acts + t * stride) + b0;
      __m512 s = _mm512_load_ps(acc + 16 * t);
      for (int i = 0; i < n; ++i) {
        const __m512i isum = _mm512_load_si512(c[i] + 16 * t);
        s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw[i], _mm512_set1_ps(x[i].d)), s);
        if constexpr (kMin) s = _mm512_fmadd_ps(mw[i], _mm512_set1_ps(x[i].s), s);
      }
      _mm512_store_ps(acc + 16 * t, s);
    }
  }
}

// ------------------------------------------------------------------ Q4_K and Q5_K
// The sub-block scales go into the codes, so that one tile multiply spans 64 elements (two
// sub-blocks) and a super-block needs no per-sub-block results: with sc_j = lo_j + 8 hi_j (lo, hi
// in 0..7), isum = sum_j sc_j sum code x = C_lo + 8 C_hi where C_lo multiplies the bytes code *
// lo_j and C_hi the bytes code * hi_j (at most 31 * 7 = 217: unsigned bytes, TDPBSUD). Both are
// exact, so isum is quant_dot_ref's. Per super-block: four 64-element steps, each one A tile and
// two B tiles (lo, hi) into two pairs of C tiles (even and odd steps: independent accumulations);
// the tile unit multiplies a super-block while the vector units fold the scales of the next one.

// Scale-folded codes of one super-block: k-group g of the 64 (4 elements of each of 16 rows).
struct alignas(64) ScaledCodes {
  uint8_t lo[64][64];
  uint8_t hi[64][64];
};

template <bool kFive>
inline void fold_scales(const uint8_t* gb, ScaledCodes& out, __m512i* mins) {
  const __m512i seven = _mm512_set1_epi32(7);
  const KScales ks = k_scales(gb);
  k_min_pairs(ks, mins);
  for (int j = 0; j < 8; ++j) {
    const __m512i sc = k_scale(ks, j);
    // Row r's multiplier in both 16-bit halves of lane r: vpmullw then multiplies each byte of a
    // 16-bit pair exactly (the low byte's product is below 256, the high one's below 2^16).
    const __m512i lo = _mm512_and_si512(sc, seven), hi = _mm512_srli_epi32(sc, 3);
    const __m512i mlo = _mm512_or_si512(lo, _mm512_slli_epi32(lo, 16)), mhi = _mm512_or_si512(hi, _mm512_slli_epi32(hi, 16));
    const uint8_t* chunks = gb + kQ4_KCodes + 256 * j;
    __m512i w[8];
    for (int k = 0; k < 4; ++k) nibbles(chunks + 64 * k, w[2 * k], w[2 * k + 1]);
    if constexpr (kFive) {
      const __m512i plane = load(gb + kQ5_KPlanes + 64 * j);
      for (int k = 0; k < 8; ++k) w[k] = fifth_bit(w[k], plane, k);
    }
    for (int k = 0; k < 8; ++k) {
      _mm512_store_si512(out.lo[8 * j + k], _mm512_mullo_epi16(w[k], mlo));
      _mm512_store_si512(out.hi[8 * j + k], _mm512_mullo_epi16(w[k], mhi));
    }
  }
}

// C tiles 0, 1 (lo; even and odd steps) and 2, 3 (hi) of one super-block: A = the tokens'
// activations at q (64 bytes per step, rows stride apart).
inline void multiply_scaled(const uint8_t* q, size_t stride, const ScaledCodes& b) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, q, stride);
  _tile_loadd(6, b.lo[0], 64);
  _tile_dpbsud(0, 4, 6);
  _tile_loadd(7, b.hi[0], 64);
  _tile_dpbsud(2, 4, 7);
  _tile_loadd(5, q + 64, stride);
  _tile_loadd(6, b.lo[16], 64);
  _tile_dpbsud(1, 5, 6);
  _tile_loadd(7, b.hi[16], 64);
  _tile_dpbsud(3, 5, 7);
  _tile_loadd(4, q + 128, stride);
  _tile_loadd(6, b.lo[32], 64);
  _tile_dpbsud(0, 4, 6);
  _tile_loadd(7, b.hi[32], 64);
  _tile_dpbsud(2, 4, 7);
  _tile_loadd(5, q + 192, stride);
  _tile_loadd(6, b.lo[48], 64);
  _tile_dpbsud(1, 5, 6);
  _tile_loadd(7, b.hi[48], 64);
  _tile_dpbsud(3, 5, 7);
}

inline void store_c(int32_t (*c)[256]) {
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
}

template <bool kFive>
void group_q45_K(const uint8_t* gb, int64_t nb, const uint8_t* acts, size_t stride, int m, float* acc,
                 const uint8_t* end) {
  constexpr size_t kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  ScaledCodes codes[2];  // this super-block's and the next one's
  alignas(64) int32_t c[4][256];
  __m512i mins[2][4];  // k_min_pairs of this super-block and the next one
  // Super-block b: its tile multiplies run while the vector units fold the scales of b + 1 (whose
  // stores are then long done when its tiles are loaded), then its results are stored and used.
  fold_scales<kFive>(gb, codes[0], mins[0]);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = gb + b * kBytes;
    multiply_scaled(acts + b * sizeof(ActQ8x256), stride, codes[b & 1]);
    if (b + 1 < nb) {
      prefetch_ahead<kBytes>(blk + kBytes, end);
      fold_scales<kFive>(blk + kBytes, codes[(b + 1) & 1], mins[(b + 1) & 1]);
    }
    store_c(c);
    const __m512i* mp = mins[b & 1];
    const __m512 d = halves(blk), dmin = halves(blk + 32);
    for (int t = 0; t < m; ++t) {
      const ActQ8x256& x = reinterpret_cast<const ActQ8x256*>(acts + t * stride)[b];
      const __m512i lo = _mm512_add_epi32(_mm512_load_si512(c[0] + 16 * t), _mm512_load_si512(c[1] + 16 * t));
      const __m512i hi = _mm512_add_epi32(_mm512_load_si512(c[2] + 16 * t), _mm512_load_si512(c[3] + 16 * t));
      const __m512i isum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 3));
      const __m512i msum = k_min_sum(mp, x.bsums32);
      const __m512 dx = _mm512_set1_ps(x.d);
      __m512 s = _mm512_load_ps(acc + 16 * t);
      s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), s);
      s = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), s);
      _mm512_store_ps(acc + 16 * t, s);
    }
  }
}

// ------------------------------------------------------------------ Q6_K (tiles of K = 16)

void group_q6_K(const uint8_t* gb, int64_t nb, const uint8_t* acts, size_t stride, int m, float* acc,
                const uint8_t* end) {
  const __m512i thirty_two = _mm512_set1_epi8(32);
  alignas(64) uint8_t codes[16][4][64];  // sub-block s's 4 k-groups, code - 32 (signed)
  alignas(64) int32_t c[16][256];
  alignas(64) int32_t sc[16][16];
  for (int64_t b = 0; b < nb; ++b, gb += kQ6_KBytes) {
    prefetch_ahead<kQ6_KBytes>(gb, end);
    for (int s = 0; s < 16; ++s) {
      const uint8_t* sb = gb + kQ6_KCodes + kQ6_KSubBlock * s;
      __m512i w[4];
      q6_codes(sb, w);
      for (int k = 0; k < 4; ++k) _mm512_store_si512(codes[s][k], _mm512_sub_epi8(w[k], thirty_two));
      _mm512_store_si512(sc[s], _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + kQ6_KScales + 16 * s))));
    }
    const uint8_t* q = acts + b * sizeof(ActQ8x256);  // sub-block s's 16 bytes at + 16 s
    for (int s0 = 0; s0 < 16; s0 += 4) {
      const uint8_t* a[4] = {q + 16 * s0, q + 16 * (s0 + 1), q + 16 * (s0 + 2), q + 16 * (s0 + 3)};
      const void* bt[4] = {codes[s0], codes[s0 + 1], codes[s0 + 2], codes[s0 + 3]};
      multiply<true>(4, a, stride, bt, c + s0);
    }
    const __m512 d = halves(gb);
    for (int t = 0; t < m; ++t) {
      const ActQ8x256& x = reinterpret_cast<const ActQ8x256*>(acts + t * stride)[b];
      __m512i isum = _mm512_mullo_epi32(_mm512_load_si512(c[0] + 16 * t), _mm512_load_si512(sc[0]));
      for (int s = 1; s < 16; ++s)
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_load_si512(c[s] + 16 * t), _mm512_load_si512(sc[s])));
      __m512 v = _mm512_load_ps(acc + 16 * t);
      v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(x.d)), v);
      _mm512_store_ps(acc + 16 * t, v);
    }
  }
}

// ------------------------------------------------------------------ dispatch

void run_group(DType type, const uint8_t* gb, int64_t nb, const uint8_t* acts, size_t stride, int m, float* acc,
               const uint8_t* end) {
  switch (type) {
    case DType::Q8_0: group_small<Small::Q8_0>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q4_0: group_small<Small::Q4_0>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q4_1: group_small<Small::Q4_1>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q5_0: group_small<Small::Q5_0>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q5_1: group_small<Small::Q5_1>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q4_K: group_q45_K<false>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q5_K: group_q45_K<true>(gb, nb, acts, stride, m, acc, end); return;
    case DType::Q6_K: group_q6_K(gb, nb, acts, stride, m, acc, end); return;
    default: return;
  }
}

}  // namespace

namespace {
// SPECMOE_AMX_MIN_TOKENS=N (1..64) overrides the table below for every type, to measure where the
// tiles start to pay on another machine (bench_matmul, specmoe bench); unset or invalid: the table.
int64_t min_tokens_override() {
  static const int64_t n = [] {
    const char* env = std::getenv("SPECMOE_AMX_MIN_TOKENS");
    const long v = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
    return v >= 1 && v <= 64 ? static_cast<int64_t>(v) : int64_t{0};
  }();
  return n;
}
}  // namespace

int64_t min_tokens(DType type) {
  const bool has_kernel = type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 ||
                          type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
  if (has_kernel && min_tokens_override() > 0) return min_tokens_override();
  switch (type) {
    // K-quants: a block's codes are stored to memory and loaded as tiles, a fixed cost that only
    // a wide batch pays back. Measured on 2 Sapphire Rapids cores with Qwen2.5-Coder-1.5B Q4_K_M
    // (Q4_K and Q6_K; `specmoe bench -t 2 -p 0 --max-batch 16`, SPECMOE_AMX_MIN_TOKENS 8 against
    // 64, CPU ms of one forward): 454 against 304 at 8 tokens, 642 against 560 at 16, once the
    // AVX-512 Q4_K kernel multiplied its scales on the VNNI unit; prefill of 32 tokens 68-70
    // against 64-66 tokens/s, of 48 even. Weights in L2 (BM_MatmulKernel) AMX led only Q4_K at
    // 16 tokens (56 against 48 GMAC/s), not Q6_K (40 against 43). So verify batches (up to 16
    // tokens) stay on AVX-512, and prefill takes the tiles.
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return 32;
    // One tile multiply and one stored C tile per 32-element block: Q8_0 33.9 / 26.4 us at 16
    // tokens, 18.4 / 16.8 at 9 (AVX-512 / AMX, weights in L2).
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: return 16;
    default: return 0;
  }
}

void matmul_packed_rows(DType type, const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride,
                        int64_t T, float* y, int64_t n_out, int64_t j0, int64_t j1) {
  const DTypeInfo& info = dtype_info(type);
  const int64_t nb = n_in / info.block_size;
  const size_t group_bytes = static_cast<size_t>(nb) * kRows * info.block_bytes;
  const uint8_t* end = groups + ((j1 + kRows - 1) / kRows - j0 / kRows) * group_bytes;
  // Elements per tile multiply (bytes of a token's activations in an A tile).
  const int k = type == DType::Q6_K ? 16 : (type == DType::Q4_K || type == DType::Q5_K) ? 64 : 32;
  alignas(64) float out[kTileTokens * kRows];
  for_each_run(groups, group_bytes, T, kTileTokens, y, n_out, j0, j1, out,
               [&](const uint8_t* gb, int64_t t, int64_t m, float* o) {
                 configure(static_cast<int>(m), k);
                 std::memset(o, 0, sizeof(float) * kRows * m);
                 run_group(type, gb, nb, acts + t * act_stride, act_stride, static_cast<int>(m), o, end);
               });
}

}  // namespace specmoe::kernels::cpu::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
