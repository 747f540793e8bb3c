// Q2_K and Q3_K super-blocks (256 elements, 16 sub-blocks of 16), bit for bit as ggml lays them
// out (ggml-common.h):
//   Q2_K {u8 scales[16]; u8 qs[64]; fp16 d, dmin}   x = d * (sc & 15) * q - dmin * (sc >> 4), q in [0, 3]
//   Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}   x = d * (ls - 32) * (q - 4), q in [0, 7]
// Element e = 128 h + 32 j + l (h < 2, j < 4, l < 32) is in sub-block s = e / 16 = 8 h + 2 j + l / 16;
// its low 2 bits are bits 2j..2j+1 of qs[32 h + l]; Q3_K's third bit is bit 4h + j of hmask[l],
// and a clear bit means q - 4 (ggml: "(hm & m) ? 0 : 4"). Q2_K's scales[s] holds sub-block s's
// 4-bit scale (low nibble) and min (high nibble). Q3_K's 16 6-bit scales are packed in 12 bytes:
// the low 4 bits of scale s are the low (s < 8) or high (s >= 8) nibble of byte s % 8, the top 2
// bits are bits 2(s/4)..2(s/4)+1 of byte 8 + s % 4.
// Dequantization follows ggml's dequantize_row_q2_K / q3_K term by term; the quantizers fit each
// sub-block by least squares and round the 4/6-bit scales to nearest (valid blocks, not
// llama.cpp's exact choices).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/quant_internal.h"
#include "kernels/dtype.h"

namespace specmoe::kernels::cpu::detail {
namespace {

constexpr int kSub = 16;  // elements per sub-block

// Q3_K's 6-bit scale s (0..15) from the 12-byte field.
inline int q3_scale(const uint8_t* sc, int s) {
  const int low = s < 8 ? (sc[s] & 0xF) : (sc[s - 8] >> 4);
  const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

inline void q3_set_scales(const int ls[16], uint8_t* sc) {
  std::memset(sc, 0, 12);
  for (int s = 0; s < 16; ++s) {
    sc[s % 8] |= static_cast<uint8_t>((ls[s] & 0xF) << (s < 8 ? 0 : 4));
    sc[8 + s % 4] |= static_cast<uint8_t>((ls[s] >> 4) << (2 * (s / 4)));
  }
}

// Least-squares affine fit x ~ s * q - m over n elements, q = clamp(round((x + m) / s), 0, qmax),
// s >= 0 and m >= 0 (the formats store unsigned scales and mins, so the lowest representable
// value -m is <= 0). Steps from the sub-block's range / qmax down to about 0.6 of it are tried
// (finer steps clip the extremes but fit the bulk better), each refined twice by solving the 2x2
// normal equations for its codes.
void fit_affine(const float* x, int n, int qmax, float& s_out, float& m_out) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  s_out = 0.0f;
  m_out = -lo;
  if (!(hi > lo)) return;  // all zero, or all equal and negative: x = -m exactly
  auto codes_error = [&](float s, float m, int* q) {
    const float is = 1.0f / s;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      q[i] = std::clamp(nearest((x[i] + m) * is), 0, qmax);
      const float e = s * static_cast<float>(q[i]) - m - x[i];
      err += e * e;
    }
    return err;
  };
  int q[QK_K];
  float best = std::numeric_limits<float>::infinity();
  for (int k = 0; k < 8; ++k) {
    float s = (hi - lo) / (static_cast<float>(qmax) + 0.25f * static_cast<float>(k)), m = -lo;
    float err = codes_error(s, m, q);
    for (int it = 0; it < 2; ++it) {
      double sq = 0, sqq = 0, sx = 0, sqx = 0;
      for (int i = 0; i < n; ++i) sq += q[i], sqq += q[i] * q[i], sx += x[i], sqx += static_cast<double>(q[i]) * x[i];
      const double det = n * sqq - sq * sq;
      if (det <= 0) break;
      double s2 = (n * sqx - sq * sx) / det, m2 = (sq * s2 - sx) / n;
      if (m2 < 0) m2 = 0, s2 = sqx / sqq;
      if (!(s2 > 0)) break;
      const float e2 = codes_error(static_cast<float>(s2), static_cast<float>(m2), q);
      if (!(e2 < err)) break;
      s = static_cast<float>(s2), m = static_cast<float>(m2), err = e2;
    }
    if (err < best) best = err, s_out = s, m_out = m;
  }
}

// Least-squares fit x ~ s * q over n elements with q = clamp(round(x / s), qmin, qmax) and a
// signed s: the largest-magnitude element is mapped near qmin (the longer side) or near qmax, and
// each candidate is refined once by least squares for its codes.
float fit_signed(const float* x, int n, int qmin, int qmax) {
  float amax = 0.0f, vmax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax == 0.0f) return 0.0f;
  auto error_for = [&](float s, double& sxq, double& sqq) {
    const float is = 1.0f / s;
    float err = 0.0f;
    sxq = sqq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest(x[i] * is), qmin, qmax);
      const float e = s * static_cast<float>(q) - x[i];
      err += e * e;
      sxq += static_cast<double>(x[i]) * q;
      sqq += q * q;
    }
    return err;
  };
  float best_s = vmax / static_cast<float>(qmin), best = std::numeric_limits<float>::infinity();
  for (int side = 0; side < 2; ++side)
    for (int t = -2; t <= 4; ++t) {
      const float end = side == 0 ? static_cast<float>(qmin) - 0.25f * t : static_cast<float>(qmax) + 0.25f * t;
      float s = vmax / end;
      double sxq, sqq;
      float err = error_for(s, sxq, sqq);
      if (err < best) best = err, best_s = s;
      if (sqq > 0 && sxq != 0) {
        s = static_cast<float>(sxq / sqq);
        err = error_for(s, sxq, sqq);
        if (err < best) best = err, best_s = s;
      }
    }
  return best_s;
}

}  // namespace

// ---------------------------------------------------------------- dequantization

void dequant_q2_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 84) {
    const uint8_t* sc = src;
    const uint8_t* qs = src + 16;
    const float d = half_to_float(load_u16(src + 80));
    const float dmin = half_to_float(load_u16(src + 82));
    for (int h = 0; h < 2; ++h, qs += 32)
      for (int j = 0; j < 4; ++j)
        for (int half = 0; half < 2; ++half, y += kSub) {
          const int s = 8 * h + 2 * j + half;
          const float dl = d * static_cast<float>(sc[s] & 0xF), ml = dmin * static_cast<float>(sc[s] >> 4);
          const uint8_t* q = qs + kSub * half;
          // dl * q is exact (11 + 4 + 2 significant bits): only the subtraction rounds, as in ggml.
          for (int l = 0; l < kSub; ++l) y[l] = dl * static_cast<float>((q[l] >> (2 * j)) & 3) - ml;
        }
  }
}

void dequant_q3_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 110) {
    const uint8_t* hm = src;
    const uint8_t* qs = src + 32;
    const uint8_t* scales = src + 96;
    const float d = half_to_float(load_u16(src + 108));
    for (int h = 0; h < 2; ++h, qs += 32)
      for (int j = 0; j < 4; ++j)
        for (int half = 0; half < 2; ++half, y += kSub) {
          const int s = 8 * h + 2 * j + half;
          const float dl = d * static_cast<float>(q3_scale(scales, s) - 32);
          const int bit = 4 * h + j, off = kSub * half;
          for (int l = 0; l < kSub; ++l) {
            const int q = ((qs[off + l] >> (2 * j)) & 3) - (((hm[off + l] >> bit) & 1) ? 0 : 4);
            y[l] = dl * static_cast<float>(q);
          }
        }
  }
}

// ---------------------------------------------------------------- quantization

void quant_q2_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 84) {
    float scale[16], minv[16], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 16; ++s) {
      fit_affine(x + kSub * s, kSub, 3, scale[s], minv[s]);
      max_scale = std::max(max_scale, scale[s]);
      max_min = std::max(max_min, minv[s]);
    }
    // 4-bit scales and mins against the super-block's d and dmin (the largest maps to 15).
    const uint16_t dh = fp32_to_fp16(max_scale / 15.0f), mh = fp32_to_fp16(max_min / 15.0f);
    store_u16(dst + 80, dh);
    store_u16(dst + 82, mh);
    const float d = fp16_to_fp32(dh), dmin = fp16_to_fp32(mh);
    uint8_t* sc = dst;
    uint8_t* qs = dst + 16;
    std::memset(qs, 0, 64);
    for (int s = 0; s < 16; ++s) {
      const int ls = d > 0.0f ? std::clamp(nearest(scale[s] / d), 0, 15) : 0;
      const int lm = dmin > 0.0f ? std::clamp(nearest(minv[s] / dmin), 0, 15) : 0;
      sc[s] = static_cast<uint8_t>(ls | (lm << 4));
      // Codes against the stored scale and min.
      const float S = d * static_cast<float>(ls), M = dmin * static_cast<float>(lm);
      const float iS = S > 0.0f ? 1.0f / S : 0.0f;
      const int h = s / 8, j = (s % 8) / 2, off = kSub * (s % 2);
      for (int l = 0; l < kSub; ++l) {
        const int q = std::clamp(nearest((x[kSub * s + l] + M) * iS), 0, 3);
        qs[32 * h + off + l] |= static_cast<uint8_t>(q << (2 * j));
      }
    }
  }
}

void quant_q3_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += 110) {
    float scale[16], smax = 0.0f;
    for (int s = 0; s < 16; ++s) {
      scale[s] = fit_signed(x + kSub * s, kSub, -4, 3);
      if (std::fabs(scale[s]) > std::fabs(smax)) smax = scale[s];
    }
    // 6-bit signed scales (ls - 32 in [-32, 31]) against d: the largest magnitude maps to -32.
    const uint16_t dh = fp32_to_fp16(smax / -32.0f);
    store_u16(dst + 108, dh);
    const float d = fp16_to_fp32(dh);
    int ls[16];
    uint8_t* hm = dst;
    uint8_t* qs = dst + 32;
    std::memset(hm, 0, 32);
    std::memset(qs, 0, 64);
    for (int s = 0; s < 16; ++s) {
      ls[s] = d != 0.0f ? std::clamp(nearest(scale[s] / d), -32, 31) + 32 : 32;
      const float S = d * static_cast<float>(ls[s] - 32);
      const float iS = S != 0.0f ? 1.0f / S : 0.0f;
      const int h = s / 8, j = (s % 8) / 2, off = kSub * (s % 2);
      for (int l = 0; l < kSub; ++l) {
        const int u = std::clamp(nearest(x[kSub * s + l] * iS), -4, 3) + 4;  // stored code in [0, 7]
        qs[32 * h + off + l] |= static_cast<uint8_t>((u & 3) << (2 * j));
        hm[off + l] |= static_cast<uint8_t>((u >> 2) << (4 * h + j));
      }
    }
    q3_set_scales(ls, dst + 96);
  }
}

}  // namespace specmoe::kernels::cpu::detail
