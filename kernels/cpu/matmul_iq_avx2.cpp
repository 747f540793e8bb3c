// AVX2 integer matmul kernels for the read-only 256-element formats of quant_iq.cpp (IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0) against Q8_K-style activations
// (ActQ8x256), the pairing of llama.cpp's ggml_vec_dot_*_q8_K. Each 32-element sub-block is
// decoded once per row block into 32 signed int8 values v and an int16 scale per half, so that
//   value = block scale * (scale of the half) * v
// exactly: IQ2_* v = +-grid, scale 2 ls + 1, block scale d / 8; IQ3_XXS the same with d / 4;
// IQ3_S v = +-grid, scale 2 ls + 1, d; IQ1_* v = 8 grid +- 1, scale 2 ls + 1, d / 8; TQ* v = q - 1,
// scale 1, d. The dot of a sub-block with a token is then exact in integers (maddubs of |v| with the
// activations signed by v: pairs of at most 2 * 62 * 127 < 2^15; times a scale <= 31 and summed
// over a block, below 2^25) and one fmadd per block adds it to the token's accumulator. The AVX-512
// machines run these same kernels.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/matmul_quant_avx2.h"
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

// 0xFF in byte k of the result where bit k of `bits` is set (k = 0..31).
inline __m256i bit_mask(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, select), select);
}
// g negated where the sign bit of its byte is set.
inline __m256i apply_signs(__m256i g, uint32_t bits) {
  const __m256i m = bit_mask(bits);
  return _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
}
inline uint32_t seven_bit_signs(uint32_t aux) {
  return kSigns[aux & 127] | (kSigns[(aux >> 7) & 127] << 8) | (kSigns[(aux >> 14) & 127] << 16) |
         (static_cast<uint32_t>(kSigns[(aux >> 21) & 127]) << 24);
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

// One format: Fmt(block) reads the block's fields, d() is its block scale, sub(ib, v, sv) decodes
// sub-block ib (0..7).
struct Iq2xxs {
  static constexpr int kBytes = 66;
  const uint8_t* b;
  explicit Iq2xxs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint32_t idx = load_u32(b + 2 + 8 * ib), aux = load_u32(b + 6 + 8 * ib);
    v = apply_signs(grid64(iq::kIq2xxsGrid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24),
                    seven_bit_signs(aux));
    sv = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};
struct Iq2xs {
  static constexpr int kBytes = 74;
  const uint8_t* b;
  explicit Iq2xs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    uint16_t q[4];
    std::memcpy(q, b + 2 + 8 * ib, 8);
    const uint32_t signs = kSigns[q[0] >> 9] | (kSigns[q[1] >> 9] << 8) | (kSigns[q[2] >> 9] << 16) |
                           (static_cast<uint32_t>(kSigns[q[3] >> 9]) << 24);
    v = apply_signs(grid64(iq::kIq2xsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511), signs);
    const int sc = b[66 + ib];
    sv = halves16(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
  }
};
struct Iq2s {
  static constexpr int kBytes = 82;
  const uint8_t* b;
  explicit Iq2s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 4 * ib;
    const uint32_t qh = b[66 + ib];
    v = apply_signs(grid64(iq::kIq2sGrid, qs[0] | ((qh << 8) & 0x300), qs[1] | ((qh << 6) & 0x300),
                           qs[2] | ((qh << 4) & 0x300), qs[3] | ((qh << 2) & 0x300)),
                    load_u32(b + 34 + 4 * ib));
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
  const uint8_t* b;
  explicit Iq3xxs(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.25f; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t aux = load_u32(b + 66 + 4 * ib);
    const uint32_t idx[8] = {qs[0], qs[1], qs[2], qs[3], qs[4], qs[5], qs[6], qs[7]};
    v = apply_signs(grid32(iq::kIq3xxsGrid, idx), seven_bit_signs(aux));
    sv = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};
struct Iq3s {
  static constexpr int kBytes = 110;
  const uint8_t* b;
  explicit Iq3s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b); }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t qh = b[66 + ib];
    uint32_t idx[8];
    for (int k = 0; k < 8; ++k) idx[k] = qs[k] | (((qh >> k) & 1) << 8);
    v = apply_signs(grid32(iq::kIq3sGrid, idx), load_u32(b + 74 + 4 * ib));
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
  const uint8_t* b;
  explicit Iq1s(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b) * 0.125f; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 2 + 4 * ib;
    const uint32_t qh = load_u16(b + 34 + 2 * ib);
    const __m256i g = grid64(iq::kIq1sGrid, qs[0] | ((qh & 7) << 8), qs[1] | (((qh >> 3) & 7) << 8),
                             qs[2] | (((qh >> 6) & 7) << 8), qs[3] | (((qh >> 9) & 7) << 8));
    v = iq1_values(g, _mm256_set1_epi64x(qh & 0x8000 ? kMinusOnes : kPlusOnes));
    sv = _mm256_set1_epi16(static_cast<short>(2 * ((qh >> 12) & 7) + 1));
  }
};
struct Iq1m {
  static constexpr int kBytes = 56;
  const uint8_t* b;
  float scale;
  explicit Iq1m(const uint8_t* p) : b(p), scale(cpu::detail::iq1_m_scale(p) * 0.125f) {}
  float d() const { return scale; }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const uint8_t* qs = b + 4 * ib;
    const uint32_t h0 = b[32 + 2 * ib], h1 = b[33 + 2 * ib];
    const __m256i g = grid64(iq::kIq1sGrid, qs[0] | ((h0 & 7) << 8), qs[1] | (((h0 >> 4) & 7) << 8),
                             qs[2] | ((h1 & 7) << 8), qs[3] | (((h1 >> 4) & 7) << 8));
    auto shift = [](uint32_t nib) { return nib & 8 ? kMinusOnes : kPlusOnes; };
    v = iq1_values(g, _mm256_set_epi64x(shift(h1 >> 4), shift(h1), shift(h0 >> 4), shift(h0)));
    const uint32_t sc = load_u16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
    sv = halves16(2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1);
  }
};
struct Tq2 {
  static constexpr int kBytes = 66;
  const uint8_t* b;
  explicit Tq2(const uint8_t* p) : b(p) {}
  float d() const { return half_at(b + 64); }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    const __m256i raw = loadu256(b + 32 * (ib / 4));
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * (ib % 4)), _mm256_set1_epi8(3));
    v = _mm256_sub_epi8(q, _mm256_set1_epi8(1));
    sv = _mm256_set1_epi16(1);
  }
};
// TQ1_0's base-3 digits do not vectorise as simply; the block is decoded once into 256 values.
struct Tq1 {
  static constexpr int kBytes = 54;
  const uint8_t* b;
  alignas(32) int8_t vals[256];
  explicit Tq1(const uint8_t* p) : b(p) {
    int8_t* y = vals;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = static_cast<int8_t>(cpu::detail::tq1_digit(p[m], n) - 1);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = static_cast<int8_t>(cpu::detail::tq1_digit(p[32 + m], n) - 1);
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) *y++ = static_cast<int8_t>(cpu::detail::tq1_digit(p[48 + j], n) - 1);
  }
  float d() const { return half_at(b + 52); }
  void sub(int ib, __m256i& v, __m256i& sv) const {
    v = _mm256_load_si256(reinterpret_cast<const __m256i*>(vals + 32 * ib));
    sv = _mm256_set1_epi16(1);
  }
};

template <class Fmt, int G>
void dot_iq(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += Fmt::kBytes) {
    const Fmt blk(w);
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      __m256i v, sv;
      blk.sub(ib, v, sv);
      const __m256i av = _mm256_sign_epi8(v, v);
      for (int g = 0; g < G; ++g) {
        const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(loadu256(a[g][b].qs + 32 * ib), v));
        sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sv));
      }
    }
    const float d = blk.d();
    for (int g = 0; g < G; ++g)
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[g][b].d), _mm256_cvtepi32_ps(sumi[g]), acc[g]);
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

template <class Fmt>
struct K {
  template <int G>
  struct Run {
    static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_iq<Fmt, G>(w, a, nb, o); }
  };
};

}  // namespace

void matmul_iq_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y, int64_t j0,
                    int64_t j1) {
  switch (w.type) {
    case DType::IQ2_XXS: rows_with<ActQ8x256, K<Iq2xxs>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ2_XS: rows_with<ActQ8x256, K<Iq2xs>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ2_S: rows_with<ActQ8x256, K<Iq2s>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ3_XXS: rows_with<ActQ8x256, K<Iq3xxs>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ3_S: rows_with<ActQ8x256, K<Iq3s>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ1_S: rows_with<ActQ8x256, K<Iq1s>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::IQ1_M: rows_with<ActQ8x256, K<Iq1m>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::TQ1_0: rows_with<ActQ8x256, K<Tq1>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::TQ2_0: rows_with<ActQ8x256, K<Tq2>::Run>(w, acts, act_stride, T, y, j0, j1, 256); return;
    default: throw_error(ErrorKind::Runtime, "matmul: no i-quant kernel for {}", dtype_name(w.type));
  }
}

}  // namespace specmoe::kernels::cpu::avx2
