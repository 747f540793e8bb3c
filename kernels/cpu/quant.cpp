// Quantized block formats, bit for bit as ggml lays them out (ggml-common.h, ggml-quants.c):
//   Q4_0 {fp16 d; u8 qs[16]}            x = (nibble - 8) * d; byte j holds elements j (low), j+16 (high)
//   Q4_1 {fp16 d, m; u8 qs[16]}         x = nibble * d + m
//   Q8_0 {fp16 d; i8 qs[32]}            x = q * d
//   Q4_K {fp16 d, dmin; u8 scales[12]; u8 qs[128]}   8 sub-blocks of 32, 6-bit scale sc and min mn:
//        x = d*sc * nibble - dmin*mn; each 64-element chunk uses 32 bytes: low nibbles are its first
//        32 elements, high nibbles its last 32
//   Q5_K {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}  as Q4_K plus a 5th bit: element l of
//        chunk c takes bit 2c (first half) or 2c+1 (second half) of qh[l]
//   Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}  16 sub-blocks of 16, x = d*scale*(q - 32);
//        per 128-element half: ql[l] holds elements l (low) and l+64 (high), ql[l+32] holds l+32 and
//        l+96, qh[l] holds the top 2 bits of l, l+32, l+64, l+96 at bit 0, 2, 4, 6
// Q5_0, Q5_1, IQ4_NL and IQ4_XS are in quant_q5_iq4.cpp, Q2_K and Q3_K in quant_q23_k.cpp.
// The 12-byte K-quant scale field packs eight 6-bit scales and eight 6-bit mins: for j < 4, the
// low 6 bits of bytes j and j+4; for j >= 4, byte j+4 holds the low 4 bits (scale low, min high)
// and the top 2 bits sit in bits 6-7 of bytes j-4 (scale) and j (min).
#include "kernels/cpu/quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/quant_internal.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu {

using namespace detail;

namespace {

// Scale j (0..7) and min j of a K-quant 12-byte scale field.
inline void get_scale_min(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

inline void set_scale_min(const uint8_t ls[8], const uint8_t lm[8], uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= ls[j] & 63;
      q[j + 4] |= lm[j] & 63;
    } else {
      q[j + 4] |= static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// ---------------------------------------------------------------- dequantization
// __restrict: the source is bytes, which may alias anything, so without it the compiler must
// assume each float store can change the source and will not vectorise.

void dequant_f16(const uint16_t* __restrict h, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(h[i]);
}

void dequant_bf16(const uint16_t* __restrict h, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::bit_cast<float>(static_cast<uint32_t>(h[i]) << 16);
}

void dequant_q4_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, y += QK) {
    const float d = half_to_float(load_u16(src));
    const uint8_t* qs = src + 2;
    // (q - 8) * d as ggml computes it: code 8 under a negative d gives -0.0 (q * d - 8 * d would
    // give +0.0, the same value but not the same bits, which `quantize` to F32 would write).
    for (int j = 0; j < 16; ++j) y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
    for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void dequant_q4_1(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 20, y += QK) {
    const float d = half_to_float(load_u16(src));
    const float m = half_to_float(load_u16(src + 2));
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
    for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

void dequant_q8_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 34, y += QK) {
    const float d = half_to_float(load_u16(src));
    const auto* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < QK; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

void dequant_q4_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 144) {
    const float d = half_to_float(load_u16(src));
    const float dmin = half_to_float(load_u16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    for (int c = 0; c < 4; ++c, q += 32, y += 64) {
      int sc, mn;
      get_scale_min(2 * c, scales, sc, mn);
      const float d1 = d * sc, m1 = dmin * mn;
      get_scale_min(2 * c + 1, scales, sc, mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 176) {
    const float d = half_to_float(load_u16(src));
    const float dmin = half_to_float(load_u16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    for (int c = 0; c < 4; ++c, ql += 32, y += 64) {
      int sc, mn;
      get_scale_min(2 * c, scales, sc, mn);
      const float d1 = d * sc, m1 = dmin * mn;
      get_scale_min(2 * c + 1, scales, sc, mn);
      const float d2 = d * sc, m2 = dmin * mn;
      const int lo_bit = 2 * c, hi_bit = 2 * c + 1;
      for (int l = 0; l < 32; ++l)
        y[l] = d1 * static_cast<float>((ql[l] & 0xF) | (((qh[l] >> lo_bit) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l)
        y[l + 32] = d2 * static_cast<float>((ql[l] >> 4) | (((qh[l] >> hi_bit) & 1) << 4)) - m2;
    }
  }
}

void dequant_q6_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = half_to_float(load_u16(src + 208));
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
      // Four groups of 32: low or high nibble of ql[l] / ql[l+32], bits 2g..2g+1 of qh[l].
      for (int g = 0; g < 4; ++g) {
        const uint8_t* q = ql + 32 * (g & 1);
        const int nib_shift = g < 2 ? 0 : 4, hi_shift = 2 * g;
        const float d0 = d * sc[2 * g], d1 = d * sc[2 * g + 1];  // sub-blocks of 16
        float* yg = y + 32 * g;
        for (int l = 0; l < 32; ++l) {
          const int v = (((q[l] >> nib_shift) & 0xF) | (((qh[l] >> hi_shift) & 3) << 4)) - 32;
          yg[l] = (l < 16 ? d0 : d1) * static_cast<float>(v);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- quantization

void quant_q4_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 18) {
    // As ggml: the element of largest magnitude maps to -8 exactly, so its sign picks d's sign and
    // the full range [-8, 7] is used.
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < QK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), vmax = x[j];
    const float d = vmax / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::clamp(nearest(x[j] * id) + 8, 0, 15);
      const int q1 = std::clamp(nearest(x[j + 16] * id) + 8, 0, 15);
      dst[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quant_q4_1(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 20) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    const float m = fp16_to_fp32(fp32_to_fp16(mn));  // quantize against the stored min
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::clamp(nearest((x[j] - m) * id), 0, 15);
      const int q1 = std::clamp(nearest((x[j + 16] - m) * id), 0, 15);
      dst[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quant_q8_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 34) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    auto* qs = reinterpret_cast<int8_t*>(dst + 2);
    for (int j = 0; j < QK; ++j) qs[j] = static_cast<int8_t>(std::clamp(nearest(x[j] * id), -127, 127));
  }
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with an unsigned code q in [0, qmax] and
// x ~ d*sc*q - dmin*mn. Scale search: each sub-block spans [min(0, lo), hi] (so mn >= 0 as the
// format requires); the 8 scales and mins are then quantized to 6 bits against the largest.
// Codes are computed against the stored (rounded) scales so the rounding error does not add up.
void quant_k_scales(const float* x, int qmax, uint8_t* head, uint8_t L[QK_K]) {
  float scale[8], minv[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + 32 * s;
    float lo = 0.0f, hi = xs[0];
    for (int l = 0; l < 32; ++l) lo = std::min(lo, xs[l]), hi = std::max(hi, xs[l]);
    scale[s] = hi > lo ? (hi - lo) / static_cast<float>(qmax) : 0.0f;
    minv[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, minv[s]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  store_u16(head, fp32_to_fp16(d));
  store_u16(head + 2, fp32_to_fp16(dmin));
  const float d_st = fp16_to_fp32(fp32_to_fp16(d)), dmin_st = fp16_to_fp32(fp32_to_fp16(dmin));
  uint8_t ls[8], lm[8];
  for (int s = 0; s < 8; ++s) {
    // Round the scale up so the sub-block's range still fits in [0, qmax] after 6-bit rounding.
    // Clamped before the conversion: finite weights whose range overflows a float (hi - lo past
    // 3.4e38) make scale and d infinite and the ratio NaN, and a float -> int conversion of NaN is
    // undefined (found by fuzz_model's mutator, which requantizes tensors of fuzzed values).
    const float up = d > 0.0f ? scale[s] / d - 1e-4f : 0.0f;
    ls[s] = static_cast<uint8_t>(!(up > 0.0f) ? 0 : up >= 63.0f ? 63 : static_cast<int>(std::ceil(up)));
    lm[s] = static_cast<uint8_t>(dmin > 0.0f ? std::clamp(nearest(minv[s] / dmin), 0, 63) : 0);
  }
  set_scale_min(ls, lm, head + 4);
  for (int s = 0; s < 8; ++s) {
    const float ds = d_st * ls[s], ms = dmin_st * lm[s];
    const float ids = ds != 0.0f ? 1.0f / ds : 0.0f;
    for (int l = 0; l < 32; ++l)
      L[32 * s + l] = static_cast<uint8_t>(std::clamp(nearest((x[32 * s + l] + ms) * ids), 0, qmax));
  }
}

void quant_q4_K(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 144) {
    quant_k_scales(x, 15, dst, L);
    uint8_t* q = dst + 16;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) q[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quant_q5_K(const float* x, uint8_t* dst, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 176) {
    quant_k_scales(x, 31, dst, L);
    uint8_t* qh = dst + 16;
    uint8_t* ql = dst + 48;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        ql[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
}

void quant_q6_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 210) {
    // Per sub-block of 16 a signed scale mapping the largest-magnitude element to -32 (as Q4_0
    // does with -8); the 16 scales are then quantized to int8 against the largest.
    float scale[16], amax_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float amax = 0.0f, vmax = 0.0f;
      for (int l = 0; l < 16; ++l)
        if (std::fabs(x[16 * s + l]) > amax) amax = std::fabs(x[16 * s + l]), vmax = x[16 * s + l];
      scale[s] = vmax / -32.0f;
      amax_scale = std::max(amax_scale, std::fabs(scale[s]));
    }
    const float d = amax_scale / 127.0f;
    store_u16(dst + 208, fp32_to_fp16(d));
    const float d_st = fp16_to_fp32(fp32_to_fp16(d));
    auto* sc = reinterpret_cast<int8_t*>(dst + 192);
    uint8_t L[QK_K];
    for (int s = 0; s < 16; ++s) {
      sc[s] = static_cast<int8_t>(d > 0.0f ? std::clamp(nearest(scale[s] / d), -127, 127) : 0);
      const float ds = d_st * sc[s];
      const float ids = ds != 0.0f ? 1.0f / ds : 0.0f;
      for (int l = 0; l < 16; ++l)
        L[16 * s + l] = static_cast<uint8_t>(std::clamp(nearest(x[16 * s + l] * ids), -32, 31) + 32);
    }
    uint8_t* ql = dst;
    uint8_t* qh = dst + 128;
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[128 * h + l], q2 = L[128 * h + l + 32], q3 = L[128 * h + l + 64], q4 = L[128 * h + l + 96];
        ql[64 * h + l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[64 * h + l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  dtype_row_bytes(type, n);  // throws unless n is a non-negative multiple of the block size
  const auto* s = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16: dequant_f16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::BF16: dequant_bf16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::Q4_0: dequant_q4_0(s, dst, n / QK); return;
    case DType::Q4_1: dequant_q4_1(s, dst, n / QK); return;
    case DType::Q8_0: dequant_q8_0(s, dst, n / QK); return;
    case DType::Q4_K: dequant_q4_K(s, dst, n / QK_K); return;
    case DType::Q5_K: dequant_q5_K(s, dst, n / QK_K); return;
    case DType::Q6_K: dequant_q6_K(s, dst, n / QK_K); return;
    case DType::Q5_0: dequant_q5_0(s, dst, n / QK); return;
    case DType::Q5_1: dequant_q5_1(s, dst, n / QK); return;
    case DType::IQ4_NL: dequant_iq4_nl(s, dst, n / QK); return;
    case DType::MXFP4: dequant_mxfp4(s, dst, n / QK); return;
    case DType::IQ4_XS: dequant_iq4_xs(s, dst, n / QK_K); return;
    case DType::Q2_K: dequant_q2_K(s, dst, n / QK_K); return;
    case DType::Q3_K: dequant_q3_K(s, dst, n / QK_K); return;
    case DType::IQ2_XXS: dequant_iq2_xxs(s, dst, n / QK_K); return;
    case DType::IQ2_XS: dequant_iq2_xs(s, dst, n / QK_K); return;
    case DType::IQ2_S: dequant_iq2_s(s, dst, n / QK_K); return;
    case DType::IQ3_XXS: dequant_iq3_xxs(s, dst, n / QK_K); return;
    case DType::IQ3_S: dequant_iq3_s(s, dst, n / QK_K); return;
    case DType::IQ1_S: dequant_iq1_s(s, dst, n / QK_K); return;
    case DType::IQ1_M: dequant_iq1_m(s, dst, n / QK_K); return;
    case DType::TQ1_0: dequant_tq1_0(s, dst, n / QK_K); return;
    case DType::TQ2_0: dequant_tq2_0(s, dst, n / QK_K); return;
    case DType::I32:
    case DType::I64:
      throw_error(ErrorKind::InvalidArgument, "dequantize_row: {} holds integers, not float data", dtype_name(type));
  }
  throw_error(ErrorKind::InvalidArgument, "dequantize_row: unknown dtype id {}", static_cast<uint32_t>(type));
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  dtype_row_bytes(type, n);
  auto* d = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16:
      if (usable_isa(best_isa()) >= Isa::Avx2) return avx2::fp32_to_fp16_row(src, d, n);  // the same bits
      for (int64_t i = 0; i < n; ++i) store_u16(d + 2 * i, fp32_to_fp16(src[i]));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) store_u16(d + 2 * i, fp32_to_bf16(src[i]));
      return;
    case DType::Q4_0: quant_q4_0(src, d, n / QK); return;
    case DType::Q4_1: quant_q4_1(src, d, n / QK); return;
    case DType::Q8_0: quant_q8_0(src, d, n / QK); return;
    case DType::Q4_K: quant_q4_K(src, d, n / QK_K); return;
    case DType::Q5_K: quant_q5_K(src, d, n / QK_K); return;
    case DType::Q6_K: quant_q6_K(src, d, n / QK_K); return;
    case DType::Q5_0: quant_q5_0(src, d, n / QK); return;
    case DType::Q5_1: quant_q5_1(src, d, n / QK); return;
    case DType::IQ4_NL: quant_iq4_nl(src, d, n / QK); return;
    case DType::MXFP4: quant_mxfp4(src, d, n / QK); return;
    case DType::IQ4_XS: quant_iq4_xs(src, d, n / QK_K); return;
    case DType::Q2_K: quant_q2_K(src, d, n / QK_K); return;
    case DType::Q3_K: quant_q3_K(src, d, n / QK_K); return;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::TQ1_0: case DType::TQ2_0:
      throw_error(ErrorKind::Unsupported, "quantize_row: specmoe reads {} but does not write it (llama-quantize does)",
                  dtype_name(type));
    case DType::I32:
    case DType::I64: break;
  }
  throw_error(ErrorKind::InvalidArgument, "quantize_row: unknown dtype id {}", static_cast<uint32_t>(type));
}

}  // namespace specmoe::kernels::cpu
