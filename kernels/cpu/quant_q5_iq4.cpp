// Q5_0, Q5_1, IQ4_NL and IQ4_XS blocks, bit for bit as ggml lays them out (ggml-common.h):
//   Q5_0 {fp16 d; u8 qh[4]; u8 qs[16]}       x = (q - 16) * d, q = nibble | fifth bit << 4
//   Q5_1 {fp16 d, m; u8 qh[4]; u8 qs[16]}    x = q * d + m
//        byte j of qs holds elements j (low nibble) and j+16 (high nibble); bit i of the
//        little-endian word qh is the fifth bit of element i
//   IQ4_NL {fp16 d; u8 qs[16]}               x = d * kIq4Values[nibble], nibbles as Q4_0
//   IQ4_XS {fp16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}  8 sub-blocks of 32, each with a
//        6-bit scale ls (low 4 bits: nibble ib%2 of scales_l[ib/2]; high 2 bits: bits 2ib..2ib+1 of
//        scales_h): x = d * (ls - 32) * kIq4Values[nibble]; sub-block ib's 16 bytes at qs[16 ib]
//        hold its elements j (low) and j+16 (high)
// Dequantization follows ggml's dequantize_row_* term by term (the products of an fp16 scale and
// a small integer are exact in float, so only the final operation rounds). The quantizers are
// round-to-nearest with a searched scale: not llama.cpp's choices, but valid blocks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/quant_internal.h"
#include "kernels/dtype.h"

namespace specmoe::kernels::cpu::detail {
namespace {

// ---------------------------------------------------------------- IQ4 scale search

// Index of the table value nearest to t (ties to the lower one).
inline int iq4_index(float t) {
  if (!(t > kIq4Values[0])) return 0;  // also catches NaN
  if (t >= kIq4Values[15]) return 15;
  int a = 0, b = 15;  // kIq4Values[a] <= t < kIq4Values[b]
  while (b - a > 1) {
    const int m = (a + b) / 2;
    if (t < kIq4Values[m]) b = m;
    else a = m;
  }
  return t - static_cast<float>(kIq4Values[a]) <= static_cast<float>(kIq4Values[b]) - t ? a : b;
}

// Squared error of x ~ s * kIq4Values[idx] with idx chosen nearest for scale s; fills idx.
float iq4_assign(const float* x, int n, float s, uint8_t* idx) {
  const float is = s != 0.0f ? 1.0f / s : 0.0f;
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    idx[i] = static_cast<uint8_t>(iq4_index(x[i] * is));
    const float e = x[i] - s * static_cast<float>(kIq4Values[idx[i]]);
    err += e * e;
  }
  return err;
}

// A scale s for x ~ s * kIq4Values[idx] over n elements. The grid is asymmetric (-127 .. 113), so
// both signs are tried: the largest-magnitude element is mapped near -127 or near +113, at the
// grid end or a little beyond it (a finer step for the bulk of the values, clipping the largest),
// and each candidate is refined by least squares for its indices. Returns the scale with the
// smallest squared error.
float iq4_fit(const float* x, int n) {
  float amax = 0.0f, vmax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax == 0.0f) return 0.0f;
  uint8_t idx[QK_K];
  float best_s = vmax / -127.0f, best_err = std::numeric_limits<float>::infinity();
  for (int side = 0; side < 2; ++side)
    for (int t = -1; t <= 6; ++t) {
      const float end = side == 0 ? -127.0f - 4.0f * t : 113.0f + 4.0f * t;
      float s = vmax / end;
      iq4_assign(x, n, s, idx);
      float sxv = 0.0f, svv = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float v = kIq4Values[idx[i]];
        sxv += x[i] * v;
        svv += v * v;
      }
      if (svv > 0.0f && sxv != 0.0f) s = sxv / svv;
      const float err = iq4_assign(x, n, s, idx);
      if (err < best_err) best_err = err, best_s = s;
    }
  return best_s;
}

inline void pack_nibbles16(const uint8_t* q, uint8_t* qs) {  // q[0..31] -> 16 bytes, Q4_0 order
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

// Q5_0 / Q5_1: 32 codes in [0, 31] -> qh word and 16 nibble bytes.
inline void pack_q5(const uint8_t* q, uint8_t* qh, uint8_t* qs) {
  uint32_t h = 0;
  for (int i = 0; i < QK; ++i) h |= static_cast<uint32_t>(q[i] >> 4) << i;
  store_u32(qh, h);
  pack_nibbles16(q, qs);
}

}  // namespace

// ---------------------------------------------------------------- dequantization

void dequant_q5_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 22, y += QK) {
    const float d = half_to_float(load_u16(src));
    const uint32_t qh = load_u32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
      const int hi = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequant_q5_1(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 24, y += QK) {
    const float d = half_to_float(load_u16(src));
    const float m = half_to_float(load_u16(src + 2));
    const uint32_t qh = load_u32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      // q * d is exact (5 x 11 significant bits), so only the + m rounds, as in ggml.
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequant_iq4_nl(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, y += QK) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
    }
  }
}

void dequant_iq4_xs(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 136) {
    const float d = half_to_float(load_u16(src));
    const uint32_t sh = load_u16(src + 2);
    const uint8_t* sl = src + 4;
    const uint8_t* qs = src + 8;
    for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
      const int ls = static_cast<int>(((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3u) << 4));
      const float dl = d * static_cast<float>(ls - 32);  // exact: 11 x 6 significant bits
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

// ---------------------------------------------------------------- quantization

void quant_q5_0(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t q[QK];
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 22) {
    // As Q4_0: the element of largest magnitude maps to -16 exactly, so the full range [-16, 15]
    // is used; codes are taken against the stored (fp16) scale.
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < QK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), vmax = x[j];
    const uint16_t dh = fp32_to_fp16(vmax / -16.0f);
    store_u16(dst, dh);
    const float d = fp16_to_fp32(dh);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; ++j) q[j] = static_cast<uint8_t>(std::clamp(nearest(x[j] * id) + 16, 0, 31));
    pack_q5(q, dst + 2, dst + 6);
  }
}

void quant_q5_1(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t q[QK];
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 24) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    const float m = fp16_to_fp32(fp32_to_fp16(mn));  // quantize against the stored min
    for (int j = 0; j < QK; ++j) q[j] = static_cast<uint8_t>(std::clamp(nearest((x[j] - m) * id), 0, 31));
    pack_q5(q, dst + 4, dst + 8);
  }
}

void quant_iq4_nl(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t idx[QK];
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 18) {
    const uint16_t dh = fp32_to_fp16(iq4_fit(x, QK));
    store_u16(dst, dh);
    iq4_assign(x, QK, fp16_to_fp32(dh), idx);  // indices for the stored scale
    pack_nibbles16(idx, dst + 2);
  }
}

void quant_iq4_xs(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t idx[32];
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 136) {
    // A scale per sub-block of 32, then the eight quantized to 6 bits against d: the one of
    // largest magnitude maps to ls - 32 = -32 exactly.
    float s[8], smax = 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      s[ib] = iq4_fit(x + 32 * ib, 32);
      if (std::fabs(s[ib]) > std::fabs(smax)) smax = s[ib];
    }
    const uint16_t dh = fp32_to_fp16(smax / -32.0f);
    store_u16(dst, dh);
    const float d = fp16_to_fp32(dh);
    uint32_t sh = 0;
    uint8_t* sl = dst + 4;
    std::memset(sl, 0, 4);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = d != 0.0f ? std::clamp(nearest(s[ib] / d), -32, 31) + 32 : 32;
      sl[ib / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (ib % 2)));
      sh |= static_cast<uint32_t>(ls >> 4) << (2 * ib);
      iq4_assign(x + 32 * ib, 32, d * static_cast<float>(ls - 32), idx);
      pack_nibbles16(idx, dst + 8 + 16 * ib);
    }
    store_u16(dst + 2, static_cast<uint16_t>(sh));
  }
}

}  // namespace specmoe::kernels::cpu::detail
