// AVX2 integer matmul kernels for the read-only 256-element formats of quant_iq.cpp (IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0) against Q8_K-style activations
// (ActQ8x256), the pairing of llama.cpp's ggml_vec_dot_*_q8_K. Each 32-element sub-block is
// decoded into 32 magnitudes u, 32 signs s (bytes of +-1, or the values themselves where they can
// be 0) and an int16 scale per half, so that
//   value = block scale * (scale of the half) * v,   v = u * sign(s)
// exactly: IQ2_* v = +-grid, scale 2 ls + 1, block scale d / 8; IQ3_XXS the same with d / 4;
// IQ3_S v = +-grid, scale 2 ls + 1, d; IQ1_* v = 8 grid +- 1, scale 2 ls + 1, d / 8; TQ* v = q - 1,
// scale 1, d. The dot of a sub-block with a token is then exact in integers (maddubs of u with the
// activations signed by s: pairs of at most 2 * 62 * 127 < 2^15; times a scale <= 31 and summed
// over a block, below 2^26), and every path adds a block's integer to the token's float sum the
// same way (add_block).
//
// Decoding (grid lookups, sign tables) costs several times the dot itself. One token decodes and
// multiplies in one pass; a small batch decodes each row once into a buffer that stays in L1 and
// multiplies every token from it; from tiles::kMinTokens tokens on AVX-512 VNNI machines (long
// verify batches, prompts) 16 rows at once go through the tiles of matmul_tiles.h. The
// results are the same whichever path runs, bit for bit.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/matmul_quant_avx2.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_internal.h"
#include "kernels/iq_grids.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

using namespace quant;
using cpu::detail::load_u16;
using cpu::detail::load_u32;

constexpr std::array<uint8_t, 128> kSigns = [] {
  std::array<uint8_t, 128> t{};
  for (uint32_t i = 0; i < 128; ++i) t[i] = iq::sign_byte(i);
  return t;
}();

// The 8 signs of a sign byte as bytes of -1 (bit set) or +1: kSignsPm for a whole byte,
// kSigns7Pm for a 7-bit index (its eighth sign by the parity rule).
constexpr std::array<uint64_t, 256> kSignsPm = [] {
  std::array<uint64_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i)
    for (int k = 0; k < 8; ++k) t[i] |= static_cast<uint64_t>((i >> k) & 1 ? 0xFF : 0x01) << (8 * k);
  return t;
}();
constexpr std::array<uint64_t, 128> kSigns7Pm = [] {
  std::array<uint64_t, 128> t{};
  for (uint32_t i = 0; i < 128; ++i) t[i] = kSignsPm[kSigns[i]];
  return t;
}();
inline __m256i signs4(const std::array<uint64_t, 256>& t, uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
  return _mm256_set_epi64x(static_cast<int64_t>(t[b3]), static_cast<int64_t>(t[b2]), static_cast<int64_t>(t[b1]),
                           static_cast<int64_t>(t[b0]));
}
// The four 7-bit sign fields of aux (bits 0-27).
inline __m256i seven_bit_signs(uint32_t aux) {
  return _mm256_set_epi64x(static_cast<int64_t>(kSigns7Pm[(aux >> 21) & 127]),
                           static_cast<int64_t>(kSigns7Pm[(aux >> 14) & 127]),
                           static_cast<int64_t>(kSigns7Pm[(aux >> 7) & 127]), static_cast<int64_t>(kSigns7Pm[aux & 127]));
}
inline __m256i signs_of_bytes(uint32_t four) {
  return signs4(kSignsPm, four & 255, (four >> 8) & 255, (four >> 16) & 255, four >> 24);
}
template <size_t N>
inline __m256i grid64(const iq::Grid<uint64_t, N>& g, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_set_epi64x(static_cast<int64_t>(g[i3]), static_cast<int64_t>(g[i2]), static_cast<int64_t>(g[i1]),
                           static_cast<int64_t>(g[i0]));
}
// Two int16 scales: s0 for elements 0..15 of the sub-block, s1 for 16..31.
inline __m256i halves16(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s1)), _mm_set1_epi16(static_cast<short>(s0)));
}
inline float half_at(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// One format: Fmt(block) reads the block's fields, d() is its block scale, sub(ib, u, s, sv)
// decodes sub-block ib (0..7).
struct Iq2xxs {
  static constexpr int kBytes = 66;
  static constexpr int kScaleSpan = 32;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 43;  // the largest |value|
  const uint8_t* b;
  explicit Iq2xxs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& u, __m256i& s, __m256i& sv) const {
    const uint32_t idx = load_u32(b + 2 + 8 * ib), aux = load_u32(b + 6 + 8 * ib);
    u = grid64(iq::kIq2xxsGrid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24);
    s = seven_bit_signs(aux);
    sv = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};
struct Iq2xs {
  static constexpr int kBytes = 74;
  static constexpr int kScaleSpan = 16;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 43;  // the largest |value|
  const uint8_t* b;
  explicit Iq2xs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& u, __m256i& s, __m256i& sv) const {
    uint16_t q[4];
    std::memcpy(q, b + 2 + 8 * ib, 8);
    u = grid64(iq::kIq2xsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    s = _mm256_set_epi64x(static_cast<int64_t>(kSigns7Pm[q[3] >> 9]), static_cast<int64_t>(kSigns7Pm[q[2] >> 9]),
                          static_cast<int64_t>(kSigns7Pm[q[1] >> 9]), static_cast<int64_t>(kSigns7Pm[q[0] >> 9]));
    const int sc = b[66 + ib];
    sv = halves16(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
  }
};
struct Iq2s {
  static constexpr int kBytes = 82;
  static constexpr int kScaleSpan = 16;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 43;  // the largest |value|
  const uint8_t* b;
  explicit Iq2s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& u, __m256i& s, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 4 * ib;
    const uint32_t qh = b[66 + ib];
    u = grid64(iq::kIq2sGrid, qs[0] | ((qh << 8) & 0x300), qs[1] | ((qh << 6) & 0x300), qs[2] | ((qh << 4) & 0x300),
               qs[3] | ((qh << 2) & 0x300));
    s = signs_of_bytes(load_u32(b + 34 + 4 * ib));
    const int sc = b[74 + ib];
    sv = halves16(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
  }
};
template <size_t N>
inline __m256i grid32(const iq::Grid<uint32_t, N>& g, const uint32_t (&i)[8]) {
  return _mm256_setr_epi32(static_cast<int>(g[i[0]]), static_cast<int>(g[i[1]]), static_cast<int>(g[i[2]]),
                           static_cast<int>(g[i[3]]), static_cast<int>(g[i[4]]), static_cast<int>(g[i[5]]),
                           static_cast<int>(g[i[6]]), static_cast<int>(g[i[7]]));
}
struct Iq3xxs {
  static constexpr int kBytes = 98;
  static constexpr int kScaleSpan = 32;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 62;  // the largest |value|
  const uint8_t* b;
  explicit Iq3xxs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.25f; }
  void sub(int ib, __m256i& u, __m256i& s, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t aux = load_u32(b + 66 + 4 * ib);
    const uint32_t idx[8] = {qs[0], qs[1], qs[2], qs[3], qs[4], qs[5], qs[6], qs[7]};
    u = grid32(iq::kIq3xxsGrid, idx);
    s = seven_bit_signs(aux);
    sv = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};
struct Iq3s {
  static constexpr int kBytes = 110;
  static constexpr int kScaleSpan = 32;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 15;  // the largest |value|
  const uint8_t* b;
  explicit Iq3s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b); }
  void sub(int ib, __m256i& u, __m256i& s, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t qh = b[66 + ib];
    uint32_t idx[8];
    for (int k = 0; k < 8; ++k) idx[k] = qs[k] | (((qh >> k) & 1) << 8);
    u = grid32(iq::kIq3sGrid, idx);
    s = signs_of_bytes(load_u32(b + 74 + 4 * ib));
    const int sc = ib % 2 == 0 ? (b[106 + ib / 2] & 15) : (b[106 + ib / 2] >> 4);
    sv = _mm256_set1_epi16(static_cast<short>(2 * sc + 1));
  }
};
// IQ1: 8 * grid (bytes -1, 0, 1) + shift (+-1 per group of 8, given as 4 bytes of +-1).
inline __m256i iq1_values(__m256i g, __m256i shift) {
  const __m256i g2 = _mm256_add_epi8(g, g), g4 = _mm256_add_epi8(g2, g2);
  return _mm256_add_epi8(_mm256_add_epi8(g4, g4), shift);
}
constexpr int64_t kPlusOnes = 0x0101010101010101ll, kMinusOnes = -1ll;
struct Iq1s {
  static constexpr int kBytes = 50;
  static constexpr int kScaleSpan = 32;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 9;  // the largest |value|
  const uint8_t* b;
  explicit Iq1s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& u, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 4 * ib;
    const uint32_t qh = load_u16(b + 34 + 2 * ib);
    const __m256i g = grid64(iq::kIq1sGrid, qs[0] | ((qh & 7) << 8), qs[1] | (((qh >> 3) & 7) << 8),
                             qs[2] | (((qh >> 6) & 7) << 8), qs[3] | (((qh >> 9) & 7) << 8));
    v = iq1_values(g, _mm256_set1_epi64x(qh & 0x8000 ? kMinusOnes : kPlusOnes));
    u = _mm256_sign_epi8(v, v);
    sv = _mm256_set1_epi16(static_cast<short>(2 * ((qh >> 12) & 7) + 1));
  }
};
struct Iq1m {
  static constexpr int kBytes = 56;
  static constexpr int kScaleSpan = 16;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 9;  // the largest |value|
  const uint8_t* b;
  float scale;
  explicit Iq1m(const uint8_t* p) : b(p), scale(cpu::detail::iq1_m_scale(p) * 0.125f) {}
  float d() const { return scale; }
  void sub(int ib, __m256i& u, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 4 * ib;
    const uint32_t h0 = b[32 + 2 * ib], h1 = b[33 + 2 * ib];
    const __m256i g = grid64(iq::kIq1sGrid, qs[0] | ((h0 & 7) << 8), qs[1] | (((h0 >> 4) & 7) << 8),
                             qs[2] | ((h1 & 7) << 8), qs[3] | (((h1 >> 4) & 7) << 8));
    auto shift = [](uint32_t nib) { return nib & 8 ? kMinusOnes : kPlusOnes; };
    v = iq1_values(g, _mm256_set_epi64x(shift(h1 >> 4), shift(h1), shift(h0 >> 4), shift(h0)));
    u = _mm256_sign_epi8(v, v);
    const uint32_t sc = load_u16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
    sv = halves16(2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1);
  }
};
struct Tq2 {
  static constexpr int kBytes = 66;
  static constexpr int kScaleSpan = 0;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 1;  // the largest |value|
  const uint8_t* b;
  explicit Tq2(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b + 64); }
  void sub(int ib, __m256i& u, __m256i& v, __m256i& sv) const {
    const __m256i raw = loadu256(b + 32 * (ib / 4));
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * (ib % 4)), _mm256_set1_epi8(3));
    v = _mm256_sub_epi8(q, _mm256_set1_epi8(1));
    u = _mm256_sign_epi8(v, v);
    sv = _mm256_set1_epi16(1);
  }
};
// TQ1_0: the block is decoded once into 256 values. A byte holds 5 (qs) or 4 (qh) base-3 digits;
// digit n is the top "trit" of byte * 3^n (mod 256), i.e. 0, 1 or 2 as that product is below 86,
// below 171 or above (ggml's ((q * 3) >> 8)); times 3 mod 256 is three byte additions.
struct Tq1 {
  static constexpr int kBytes = 54;
  static constexpr int kScaleSpan = 0;  // elements per scale (tile_dot)
  static constexpr int kMaxValue = 1;  // the largest |value|
  const uint8_t* b;
  alignas(32) int8_t vals[256];
  static __m256i minus_one_plus_digit(__m256i q) {
    const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(86)), q);
    const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(static_cast<char>(171))), q);
    return _mm256_sub_epi8(_mm256_sub_epi8(_mm256_set1_epi8(-1), ge86), ge171);  // masks are -1
  }
  static __m256i times3(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
  explicit Tq1(const uint8_t* p) : b(p) {
    auto put = [&](int at, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(vals + at), v); };
    __m256i q = loadu256(p);  // qs[0..31]: elements 32 n + m
    for (int n = 0; n < 5; ++n, q = times3(q)) put(32 * n, minus_one_plus_digit(q));
    // qs[32..47]: elements 160 + 16 n + m, in both halves so that digits n and n + 1 blend.
    __m256i r = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    __m256i d[5];
    for (int n = 0; n < 5; ++n, r = times3(r)) d[n] = minus_one_plus_digit(r);
    put(160, _mm256_blend_epi32(d[0], d[1], 0xF0));
    put(192, _mm256_blend_epi32(d[2], d[3], 0xF0));
    // qh[0..3]: elements 240 + 4 n + j, digit n of qh[j].
    alignas(16) uint8_t h[16];
    for (int j = 0; j < 4; ++j)
      for (int n = 0, m = 1; n < 4; ++n, m *= 3) h[4 * n + j] = static_cast<uint8_t>(p[48 + j] * m);
    const __m256i hd = minus_one_plus_digit(_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
    put(224, _mm256_blend_epi32(d[4], hd, 0xF0));
  }
  float d() const { return half_at(b + 52); }
  void sub(int ib, __m256i& u, __m256i& v, __m256i& sv) const {
    v = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals + 32 * ib));
    u = _mm256_sign_epi8(v, v);
    sv = _mm256_set1_epi16(1);
  }
};

// One token: decode and multiply in one pass.
template <class Fmt>
float dot_iq_one(const uint8_t* w, const ActQ8x256* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b, w += Fmt::kBytes) {
    const Fmt blk(w);
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      __m256i u, s, sv;
      blk.sub(ib, u, s, sv);
      const __m256i p = _mm256_maddubs_epi16(u, _mm256_sign_epi8(loadu256(a[b].qs + 32 * ib), s));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sv));
    }
    acc = add_block(acc, blk.d(), a[b].d, hsum_i32(sumi));
  }
  return acc;
}

// A decoded row: per sub-block its magnitudes, signs and scales, per block its scale.
struct DecodedSub {
  __m256i u, s, sv;
};
struct DecodedRow {
  std::vector<DecodedSub> subs;  // over-aligned: C++17's allocator aligns it
  std::vector<float> d;
};
template <class Fmt>
void decode_row(const uint8_t* w, int64_t nb, DecodedRow& out) {
  out.subs.resize(static_cast<size_t>(nb) * 8);
  out.d.resize(static_cast<size_t>(nb));
  DecodedSub* sub = out.subs.data();
  for (int64_t b = 0; b < nb; ++b, w += Fmt::kBytes) {
    const Fmt blk(w);
    for (int ib = 0; ib < 8; ++ib, ++sub) blk.sub(ib, sub->u, sub->s, sub->sv);
    out.d[b] = blk.d();
  }
}
// G tokens against a decoded row, the same operations as dot_iq_one per token.
template <int G>
void dot_decoded(const DecodedRow& row, const ActQ8x256* const* a, int64_t nb, float* out) {
  float acc[G] = {};
  const DecodedSub* sub = row.subs.data();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib, ++sub) {
      for (int g = 0; g < G; ++g) {
        const __m256i p = _mm256_maddubs_epi16(sub->u, _mm256_sign_epi8(loadu256(a[g][b].qs + 32 * ib), sub->s));
        sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sub->sv));
      }
    }
    for (int g = 0; g < G; ++g) acc[g] = add_block(acc[g], row.d[b], a[g][b].d, hsum_i32(sumi[g]));
  }
  for (int g = 0; g < G; ++g) out[g] = acc[g];
}

// The tiles' decoder (matmul_tiles.h): a block's signed values and its scales per 16.
template <class Fmt>
struct IqStage {
  static constexpr int kBytes = Fmt::kBytes, kScaleSpan = Fmt::kScaleSpan, kMaxValue = Fmt::kMaxValue;
  static constexpr bool kMins = false;
  static void decode(const uint8_t* p, int8_t* v, int32_t* scale, int16_t*, float& d, float&) {
    const Fmt blk(p);
    for (int ib = 0; ib < 8; ++ib) {
      __m256i u, s, sv;
      blk.sub(ib, u, s, sv);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v + 32 * ib), _mm256_sign_epi8(u, s));
      scale[2 * ib] = static_cast<int16_t>(_mm256_extract_epi16(sv, 0));
      scale[2 * ib + 1] = static_cast<int16_t>(_mm256_extract_epi16(sv, 8));
    }
    d = blk.d();
  }
};

template <class Fmt>
void iq_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, const uint8_t* biased, int64_t T, float* y,
             int64_t j0, int64_t j1, bool avx512) {
  if (biased != nullptr) {
    tiles::run<IqStage<Fmt>>(w, acts, act_stride, biased, T, y, j0, j1, avx512);
    return;
  }
  const int64_t nb = w.n_in / 256;
  prefetch_rows(w, j0, std::min(j1, j0 + kPrefetchRows));
  auto act = [&](int64_t t) { return reinterpret_cast<const ActQ8x256*>(acts + t * act_stride); };
  thread_local DecodedRow decoded;
  for (int64_t j = j0; j < j1; ++j) {
    if (j + kPrefetchRows < j1) prefetch_rows(w, j + kPrefetchRows, j + kPrefetchRows + 1);
    if (T == 1) {
      y[j] = dot_iq_one<Fmt>(w.row(j), act(0), nb);
      continue;
    }
    decode_row<Fmt>(w.row(j), nb, decoded);
    const ActQ8x256* ap[kGroup];
    float r[kGroup];
    for (int64_t t = 0; t < T; t += kGroup) {
      const int64_t G = std::min<int64_t>(kGroup, T - t);
      for (int64_t g = 0; g < G; ++g) ap[g] = act(t + g);
      switch (G) {
        case 4: dot_decoded<4>(decoded, ap, nb, r); break;
        case 3: dot_decoded<3>(decoded, ap, nb, r); break;
        case 2: dot_decoded<2>(decoded, ap, nb, r); break;
        default: dot_decoded<1>(decoded, ap, nb, r); break;
      }
      for (int64_t g = 0; g < G; ++g) y[(t + g) * w.n_out + j] = r[g];
    }
  }
}
}  // namespace

void matmul_iq_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, const uint8_t* biased, int64_t T,
                    float* y, int64_t j0, int64_t j1, bool avx512) {
  switch (w.type) {
    case DType::IQ2_XXS: iq_rows<Iq2xxs>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ2_XS: iq_rows<Iq2xs>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ2_S: iq_rows<Iq2s>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ3_XXS: iq_rows<Iq3xxs>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ3_S: iq_rows<Iq3s>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ1_S: iq_rows<Iq1s>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::IQ1_M: iq_rows<Iq1m>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::TQ1_0: iq_rows<Tq1>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    case DType::TQ2_0: iq_rows<Tq2>(w, acts, act_stride, biased, T, y, j0, j1, avx512); return;
    default: throw_error(ErrorKind::Runtime, "matmul: no i-quant kernel for {}", dtype_name(w.type));
  }
}

bool iq_tiles(int64_t T, bool avx512) { return tiles::wanted<IqStage<Iq3xxs>>(T, avx512); }  // any i-quant: |value| <= 62

}  // namespace specmoe::kernels::cpu::avx2
