// The i-quant and ternary block formats (256 elements per block), bit for bit as ggml lays them out
// (ggml-common.h), decoded only: llama-quantize makes these files (the 1- and 2-bit ones only with
// an importance matrix), specmoe reads and multiplies them.
//   IQ2_XXS {fp16 d; u16 qs[32]}                            66 B, 2.06 bits per weight
//   IQ2_XS  {fp16 d; u16 qs[32]; u8 scales[8]}              74 B
//   IQ2_S   {fp16 d; u8 qs[64]; u8 qh[8]; u8 scales[8]}     82 B
//   IQ3_XXS {fp16 d; u8 qs[64]; u32 scales_signs[8]}        98 B
//   IQ3_S   {fp16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]}  110 B
//   IQ1_S   {fp16 d; u8 qs[32]; u16 qh[8]}                  50 B
//   IQ1_M   {u8 qs[32]; u8 qh[16]; u16 scales[4]}           56 B (fp16 d in the scales' top nibbles)
//   TQ1_0   {u8 qs[48]; u8 qh[4]; fp16 d}                   54 B (5 base-3 digits per byte)
//   TQ2_0   {u8 qs[64]; fp16 d}                             66 B (2 bits per element)
// Each 32-element sub-block of an IQ type is four groups of 8: a grid entry (kernels/iq_grids.h)
// gives the 8 magnitudes of a group (two entries of 4 for the IQ3 types), 8 sign bits flip them
// (IQ1: a shift of +-1/8 instead of signs), and a 3- or 4-bit scale per 32 or 16 elements
// multiplies the fp16 d. Dequantization follows ggml's dequantize_row_* operation by operation, so
// values are the same floats.
#include <cstring>

#include "kernels/cpu/quant_internal.h"
#include "kernels/iq_grids.h"

namespace specmoe::kernels::cpu::detail {
namespace {

// Byte k of a grid entry.
inline int grid_byte(uint64_t entry, int k) { return static_cast<int>((entry >> (8 * k)) & 0xFF); }
inline float sign_of(uint32_t signs, int k) { return (signs >> k) & 1 ? -1.0f : 1.0f; }
constexpr float kIq1Delta = 0.125f;  // IQ1_S / IQ1_M: a group's values are grid +- 1/8

// A group of 8 from one 8-byte grid entry (IQ2_*), or from two 4-byte entries (IQ3_*), under
// scale db and sign bits s: db * magnitude * sign, ggml's order.
inline void put_group(float* y, float db, uint64_t g, uint32_t s) {
  for (int k = 0; k < 8; ++k) y[k] = db * static_cast<float>(grid_byte(g, k)) * sign_of(s, k);
}
inline void put_group(float* y, float db, uint32_t g1, uint32_t g2, uint32_t s) {
  put_group(y, db, static_cast<uint64_t>(g1) | (static_cast<uint64_t>(g2) << 32), s);
}

}  // namespace

void dequant_iq2_xxs(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 66) {
    const float d = half_to_float(load_u16(src));
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t idx = load_u32(src + 2 + 8 * ib), aux = load_u32(src + 6 + 8 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        put_group(y, db, iq::kIq2xxsGrid[(idx >> (8 * l)) & 0xFF], iq::sign_byte(aux >> (7 * l)));
      }
    }
  }
}

void dequant_iq2_xs(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 74) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* scales = src + 66;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(scales[ib] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = load_u16(src + 2 + 2 * (4 * ib + l));
        put_group(y, db[l / 2], iq::kIq2xsGrid[q & 511], iq::sign_byte(q >> 9));
      }
    }
  }
}

void dequant_iq2_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 82) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* signs = src + 34;
    const uint8_t* qh = src + 66;
    const uint8_t* scales = src + 74;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(scales[ib] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        put_group(y, db[l / 2], iq::kIq2sGrid[qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300)], signs[4 * ib + l]);
      }
    }
  }
}

void dequant_iq3_xxs(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 98) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = load_u32(src + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        put_group(y, db, iq::kIq3xxsGrid[qs[8 * ib + 2 * l]], iq::kIq3xxsGrid[qs[8 * ib + 2 * l + 1]],
                  iq::sign_byte(aux >> (7 * l)));
      }
    }
  }
}

void dequant_iq3_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 110) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* qh = src + 66;
    const uint8_t* signs = src + 74;
    const uint8_t* scales = src + 106;
    for (int ib = 0; ib < 8; ++ib) {
      const int sc = ib % 2 == 0 ? (scales[ib / 2] & 0xF) : (scales[ib / 2] >> 4);
      const float db = d * static_cast<float>(1 + 2 * sc);
      for (int l = 0; l < 4; ++l, y += 8) {
        // Bit k of qh[ib] is bit 8 of the k-th grid index of the sub-block.
        const uint32_t g1 = iq::kIq3sGrid[qs[8 * ib + 2 * l] | (((qh[ib] >> (2 * l)) & 1) << 8)];
        const uint32_t g2 = iq::kIq3sGrid[qs[8 * ib + 2 * l + 1] | (((qh[ib] >> (2 * l + 1)) & 1) << 8)];
        put_group(y, db, g1, g2, signs[4 * ib + l]);
      }
    }
  }
}

void dequant_iq1_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 50) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t qh = load_u16(src + 34 + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = iq::kIq1sGrid[qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int k = 0; k < 8; ++k) y[k] = dl * (static_cast<float>(static_cast<int8_t>(grid_byte(g, k))) + delta);
      }
    }
  }
}

float iq1_m_scale(const uint8_t* block) {
  const uint8_t* sc = block + 48;
  const uint16_t bits = static_cast<uint16_t>((load_u16(sc) >> 12) | ((load_u16(sc + 2) >> 8) & 0x00F0) |
                                              ((load_u16(sc + 4) >> 4) & 0x0F00) | (load_u16(sc + 6) & 0xF000));
  return half_to_float(bits);
}

void dequant_iq1_m(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 56) {
    const float d = iq1_m_scale(src);
    const uint8_t* qs = src;
    const uint8_t* qh = src + 32;
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t sc = load_u16(src + 48 + 2 * (ib / 2));
      const float dl[2] = {d * static_cast<float>(2 * ((sc >> (6 * (ib % 2))) & 7) + 1),
                           d * static_cast<float>(2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        // Group l's index: 8 low bits in qs, 3 high bits and the shift's sign in a nibble of qh.
        const uint32_t nib = (qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
        const uint64_t g = iq::kIq1sGrid[qs[4 * ib + l] | ((nib & 7) << 8)];
        const float delta = nib & 8 ? -kIq1Delta : kIq1Delta;
        for (int k = 0; k < 8; ++k)
          y[k] = dl[l / 2] * (static_cast<float>(static_cast<int8_t>(grid_byte(g, k))) + delta);
      }
    }
  }
}

// TQ1_0's element order: byte m of the first 32 qs holds elements m, 32 + m, ..., 128 + m as its
// base-3 digits (most significant first, read as the top "trit" of byte * 3^n); the next 16
// bytes hold elements 160 + 16n + m likewise, and qh's 4 bytes elements 240 + 4n + j (4 digits).
int tq1_digit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return (static_cast<uint16_t>(q) * 3) >> 8;
}

void dequant_tq1_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 54) {
    const float d = half_to_float(load_u16(src + 52));
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(tq1_digit(src[m], n) - 1) * d;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = static_cast<float>(tq1_digit(src[32 + m], n) - 1) * d;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) *y++ = static_cast<float>(tq1_digit(src[48 + j], n) - 1) * d;
  }
}

void dequant_tq2_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 66) {
    const float d = half_to_float(load_u16(src + 64));
    for (int j = 0; j < 64; j += 32)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(((src[j + m] >> (2 * l)) & 3) - 1) * d;
  }
}

}  // namespace specmoe::kernels::cpu::detail
