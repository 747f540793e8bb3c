// AVX2 integer matmul kernels over row-major weights for the types that are not packed
// (kernels/cpu/packed.h): IQ4_NL (with 32-element activation blocks, the role of llama.cpp's
// Q8_0) and Q2_K, Q3_K, IQ4_XS (with 256-element blocks, Q8_K's role), the pairing llama.cpp's
// ggml_vec_dot_* use for these types. Block layouts: quant_q5_iq4.cpp and quant_q23_k.cpp. Per
// block an exact integer dot, then one fmadd(scale, float(int sum), acc) per block (plus one for a
// min or an offset) into an 8-lane accumulator in block order, then a fixed-order horizontal sum;
// nothing depends on T, the token's place in the batch or the thread. The AVX-512 path runs these
// same kernels.
//
// Signed weight codes (the IQ4 table values) use the sign trick: maddubs(|w|, sign(x, w)).
// Unsigned codes with an offset (Q3_K's q - 4) multiply the unsigned code and subtract offset *
// (the activations' sub-block sums), exactly, in integers. Overflow: maddubs pairs are bounded by
// 2 * 3 * 127 (Q2_K), 2 * 7 * 127 (Q3_K), 2 * 127 * 127 = 32258 (IQ4_NL, IQ4_XS), all below 32767;
// a super-block's int32 lanes stay below 2^24 (IQ4_XS: 8 sub-blocks x 4 products x 127 x 127 x 32).
#include <immintrin.h>

#include <cstring>

#include "base/error.h"
#include "kernels/cpu/matmul_quant_avx2.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_internal.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

using namespace quant;
using cpu::detail::kIq4Values;
using cpu::detail::kMxfp4Values;

// The IQ4 value table in both 128-bit lanes, for _mm256_shuffle_epi8 lookups by nibble.
inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
}

// ------------------------------------------------------------------ 32-element blocks

// The 4-bit lookup formats of 32-element blocks: x = d * table[nibble], the table values looked up
// with a byte shuffle, the nibbles after the block's scale field.
//   IQ4_NL {fp16 d; u8 qs[16]}: ggml's kvalues_iq4nl, values in [-127, 113]
//   MXFP4 {u8 e; u8 qs[16]}: E2M1 doubled (kMxfp4Values, [-12, 12]), d = 2^(e - 128)
struct Iq4NlBlock {
  static constexpr int kBytes = 18, kCodes = 2;
  static const int8_t* table() { return kIq4Values; }
  static float scale(const uint8_t* w) { return load_half(w); }
};
struct Mxfp4Block {
  static constexpr int kBytes = 17, kCodes = 1;
  static const int8_t* table() { return kMxfp4Values; }
  static float scale(const uint8_t* w) { return cpu::detail::mxfp4_scale(w[0]); }
};

template <class Fmt, int G>
void dot_lut4(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* out) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Fmt::table())));
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += Fmt::kBytes) {
    const float dw = Fmt::scale(w);
    const __m256i v = _mm256_shuffle_epi8(table, unpack_nibbles16(w + Fmt::kCodes));
    const __m256i av = _mm256_sign_epi8(v, v);
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      const __m256i p = dot_u8_i8(av, _mm256_sign_epi8(loadu256(x.qs), v));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(p), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// ------------------------------------------------------------------ 256-element super-blocks

// The sixteen sub-block scales of a super-block as int16, split by half: half h holds the
// scales of sub-blocks 8h .. 8h+7 in both 128-bit lanes.
struct HalfScales {
  __m256i half[2];
  explicit HalfScales(__m128i sc16_lo, __m128i sc16_hi)
      : half{_mm256_broadcastsi128_si256(sc16_lo), _mm256_broadcastsi128_si256(sc16_hi)} {}
  // [scale 8h+2j x 8 | scale 8h+2j+1 x 8]: madd with a maddubs result over the 32 elements of
  // group j weights its first 16 (sub-block 8h+2j) and last 16 (sub-block 8h+2j+1).
  __m256i pair(int h, int j) const {
    const __m256i pick = _mm256_setr_epi8(4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
                                          4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
                                          4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2,
                                          4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3,
                                          4 * j + 2, 4 * j + 3);
    return _mm256_shuffle_epi8(half[h], pick);
  }
};

// Q2_K and Q3_K codes: chunk j of half h (elements 128 h + 32 j ..) is bits 2 j .. 2 j + 1 of
// raw = qs[32 h .. 32 h + 31] (16-bit shifts; the mask keeps each byte's own bits), and for Q3_K
// bit 4 h + j of each hmask byte hm as the third bit: codes 0..3 and 0..7.
inline __m256i q2_codes(__m256i raw, int j) {
  return _mm256_and_si256(_mm256_srli_epi16(raw, 2 * j), _mm256_set1_epi8(3));
}
inline __m256i q3_codes(__m256i hm, __m256i raw, int h, int j) {
  const __m256i top = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), _mm256_set1_epi8(1));
  return _mm256_or_si256(q2_codes(raw, j), _mm256_slli_epi16(top, 2));
}

// Q2_K: x = d * sc_s * q - dmin * mn_s over sub-blocks s of 16; the mins go through the
// activations' sums of 16 (bsums), as Q4_K's do.
template <int G>
void dot_q2_K(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  float acc[G] = {};
  for (int64_t b = 0; b < nb; ++b, w += 84) {
    const float d = load_half(w + 80), dmin = load_half(w + 82);
    const __m128i sc_bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    const __m128i scales = _mm_and_si128(sc_bytes, _mm_set1_epi8(0x0F));
    const HalfScales hs(_mm_cvtepu8_epi16(scales), _mm_cvtepu8_epi16(_mm_srli_si128(scales, 8)));
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = loadu256(w + 16 + 32 * h);
      for (int j = 0; j < 4; ++j) {
        // Elements 128h + 32j + l: bits 2j..2j+1 of qs[32h + l]; sub-blocks s and s + 1.
        const __m256i q = q2_codes(raw, j);
        const __m256i sv = hs.pair(h, j);
        for (int g = 0; g < G; ++g) {
          const __m256i p = _mm256_maddubs_epi16(q, loadu256(a[g][b].qs + 128 * h + 32 * j));
          sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sv));
        }
      }
    }
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc_bytes, 4), _mm_set1_epi8(0x0F)));
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      const __m256i msum = _mm256_madd_epi16(loadu256(x.bsums), mins);
      acc[g] = add_block(acc[g], d, x.d, hsum_i32(sumi[g]));
      acc[g] = add_block(acc[g], -dmin, x.d, hsum_i32(msum));
    }
  }
  for (int g = 0; g < G; ++g) out[g] = acc[g];
}

// Q3_K's sixteen 6-bit scales minus 32, as int8 (layout in quant_q23_k.cpp).
inline __m128i q3_scales(const uint8_t* p) {
  uint32_t a[3];
  std::memcpy(a, p, 12);
  const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  uint32_t u[4];
  u[0] = (a[0] & m4) | ((a[2] & m2) << 4);
  u[1] = (a[1] & m4) | (((a[2] >> 2) & m2) << 4);
  u[2] = ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4);
  u[3] = ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4);
  const __m128i v = _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]),
                                   static_cast<int>(u[3]));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));  // 0..63 -> -32..31
}

// Q3_K: x = d * sc_s * (q - 4), q = low 2 bits | third bit << 2 in [0, 7]. The -4 goes through
// the activation sums: sum_s sc_s * (sum(q * qx) - 4 * bsum_s).
template <int G>
void dot_q3_K(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  float acc[G] = {};
  for (int64_t b = 0; b < nb; ++b, w += 110) {
    const __m128i sc = q3_scales(w + 96);
    const HalfScales hs(_mm_cvtepi8_epi16(sc), _mm_cvtepi8_epi16(_mm_srli_si128(sc, 8)));
    const float d = load_half(w + 108);
    const __m256i hm = loadu256(w);
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = loadu256(w + 32 + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i q = q3_codes(hm, raw, h, j);
        const __m256i sv = hs.pair(h, j);
        for (int g = 0; g < G; ++g) {
          const __m256i p = _mm256_maddubs_epi16(q, loadu256(a[g][b].qs + 128 * h + 32 * j));
          sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sv));
        }
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(loadu256(x.bsums), sc16), 2);
      acc[g] = add_block(acc[g], d, x.d, hsum_i32(_mm256_sub_epi32(sumi[g], offset)));
    }
  }
  for (int g = 0; g < G; ++g) out[g] = acc[g];
}

// IQ4_XS: x = d * (ls_ib - 32) * table[nibble] over 8 sub-blocks of 32.
template <int G>
void dot_iq4_xs(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  const __m256i table = iq4_table();
  float acc[G] = {};
  for (int64_t b = 0; b < nb; ++b, w += 136) {
    const float d = load_half(w);
    uint16_t sh;
    std::memcpy(&sh, w + 2, 2);
    const uint8_t* sl = w + 4;
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      const __m256i sv = _mm256_set1_epi16(static_cast<short>(ls - 32));
      const __m256i v = _mm256_shuffle_epi8(table, unpack_nibbles16(w + 8 + 16 * ib));
      const __m256i av = _mm256_sign_epi8(v, v);
      for (int g = 0; g < G; ++g) {
        const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(loadu256(a[g][b].qs + 32 * ib), v));
        sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sv));
      }
    }
    for (int g = 0; g < G; ++g) acc[g] = add_block(acc[g], d, a[g][b].d, hsum_i32(sumi[g]));
  }
  for (int g = 0; g < G; ++g) out[g] = acc[g];
}

// The tiles' decoders (matmul_tiles.h): a block's signed values and its scales per 16
// elements, the same integers as the kernels above.
struct Q2Stage {
  static constexpr int kBytes = 84, kScaleSpan = 16, kMaxValue = 3;
  static constexpr bool kMins = true;
  static void decode(const uint8_t* w, int8_t* v, int32_t* scale, int16_t* mins, float& d, float& dmin) {
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = loadu256(w + 16 + 32 * h);
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(v + 128 * h + 32 * j),
                           q2_codes(raw, j));
    }
    for (int i = 0; i < 16; ++i) scale[i] = w[i] & 15, mins[i] = static_cast<int16_t>(w[i] >> 4);
    d = load_half(w + 80);
    dmin = load_half(w + 82);
  }
};
struct Q3Stage {
  static constexpr int kBytes = 110, kScaleSpan = 16, kMaxValue = 4;
  static constexpr bool kMins = false;
  static void decode(const uint8_t* w, int8_t* v, int32_t* scale, int16_t*, float& d, float&) {
    const __m256i hm = loadu256(w);
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = loadu256(w + 32 + 32 * h);
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(v + 128 * h + 32 * j),
                           _mm256_sub_epi8(q3_codes(hm, raw, h, j), _mm256_set1_epi8(4)));
    }
    alignas(16) int8_t sc[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(sc), q3_scales(w + 96));
    for (int i = 0; i < 16; ++i) scale[i] = sc[i];
    d = load_half(w + 108);
  }
};
struct Iq4XsStage {
  static constexpr int kBytes = 136, kScaleSpan = 32, kMaxValue = 127;
  static constexpr bool kMins = false;
  static void decode(const uint8_t* w, int8_t* v, int32_t* scale, int16_t*, float& d, float&) {
    const __m256i table = iq4_table();
    uint16_t sh;
    std::memcpy(&sh, w + 2, 2);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((w[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      scale[2 * ib] = scale[2 * ib + 1] = ls - 32;
      _mm256_store_si256(reinterpret_cast<__m256i*>(v + 32 * ib),
                         _mm256_shuffle_epi8(table, unpack_nibbles16(w + 8 + 16 * ib)));
    }
    d = load_half(w);
  }
};

template <int G> struct KIQ4_NL { static void run(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* o) { dot_lut4<Iq4NlBlock, G>(w, a, nb, o); } };
template <int G> struct KMXFP4 { static void run(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* o) { dot_lut4<Mxfp4Block, G>(w, a, nb, o); } };
template <int G> struct KQ2_K { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_q2_K<G>(w, a, nb, o); } };
template <int G> struct KQ3_K { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_q3_K<G>(w, a, nb, o); } };
template <int G> struct KIQ4_XS { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_iq4_xs<G>(w, a, nb, o); } };

}  // namespace

void prefetch_rows(const MatrixView& w, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    const char* row = reinterpret_cast<const char*>(w.row(j));
    for (size_t off = 0; off < w.row_bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
  }
}

bool row_tiles(DType type, int64_t T, bool avx512) {
  switch (type) {
    case DType::Q2_K: return tiles::wanted<Q2Stage>(T, avx512);
    case DType::Q3_K: return tiles::wanted<Q3Stage>(T, avx512);
    case DType::IQ4_XS: return tiles::wanted<Iq4XsStage>(T, avx512);
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::TQ1_0: case DType::TQ2_0:
      return iq_tiles(T, avx512);
    default: return false;
  }
}

void biased_codes(const uint8_t* acts, int64_t n_in, uint8_t* dst) {
  const auto* a = reinterpret_cast<const ActQ8x256*>(acts);
  const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n_in / 256; ++b)
    for (int i = 0; i < 256; i += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 256 * b + i), _mm256_xor_si256(loadu256(a[b].qs + i), top));
}

void matmul_quant_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y,
                       int64_t j0, int64_t j1, const uint8_t* biased, bool avx512) {
  if (biased != nullptr) {
    switch (w.type) {
      case DType::Q2_K: tiles::run<Q2Stage>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
      case DType::Q3_K: tiles::run<Q3Stage>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
      case DType::IQ4_XS: tiles::run<Iq4XsStage>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
      default: break;
    }
  }
  switch (w.type) {
    case DType::IQ4_NL: rows_with<ActQ8x32, KIQ4_NL>(w, acts, act_stride, T, y, j0, j1, 32); return;
    case DType::MXFP4: rows_with<ActQ8x32, KMXFP4>(w, acts, act_stride, T, y, j0, j1, 32); return;
    case DType::Q2_K: rows_with<ActQ8x256, KQ2_K>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::Q3_K: rows_with<ActQ8x256, KQ3_K>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ4_XS: rows_with<ActQ8x256, KIQ4_XS>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::TQ1_0: case DType::TQ2_0:
      matmul_iq_rows(w, acts, act_stride, biased, T, y, j0, j1, avx512);
      return;
    default: throw_error(ErrorKind::Runtime, "matmul: no row-major integer kernel for {}", dtype_name(w.type));
  }
}

}  // namespace specmoe::kernels::cpu::avx2
