// ggml's reference quantizers of the 32-element formats and of Q6_K (ggml-quants.c,
// quantize_row_*_ref): what llama-quantize writes for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q6_K (its
// output head of the legacy types) without an importance matrix, reproduced from their
// definition so that `specmoe quantize` writes the same bytes. They differ
// from quantize_row's own quantizers (quant.cpp) in three details, each of which moves a code now
// and then: codes are taken against the unrounded float scale and min (not the stored fp16 ones),
// rounding is the integer conversion of x + 0.5 (x + 8.5 for Q4_0, x + 16.5 for Q5_0), which
// truncates toward zero after a float addition that can itself round, and Q8_0 rounds half away
// from zero (roundf) where quantize_row rounds half to even. quantize_row keeps its own: the
// synthetic models and every result pinned on them are written with it.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_internal.h"

namespace specmoe::kernels::cpu {

using namespace detail;

namespace {

// ggml's (int8_t)(v) / (uint8_t)(v) of a float as x86-64 compilers emit it: a 32-bit truncating
// conversion (whose result for NaN and out-of-range values is INT32_MIN) and its low byte. Written
// out because the C++ conversion is undefined out of range, which a block of subnormal weights
// reaches (its 1 / d overflows to infinity).
inline int32_t trunc32(float v) { return std::fabs(v) < 2147483648.0f ? static_cast<int32_t>(v) : INT32_MIN; }
inline int trunc_i8(float v) { return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(trunc32(v)) & 0xFF)); }
inline int trunc_u8(float v) { return static_cast<int>(static_cast<uint32_t>(trunc32(v)) & 0xFF); }

// The element of largest magnitude (the first of equal ones), signed: ggml's absmax search.
float signed_absmax(const float* x) {
  float amax = 0.0f, vmax = 0.0f;
  for (int j = 0; j < QK; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), vmax = x[j];
  return vmax;
}

// ggml's min / max search of Q4_1 and Q5_1 (from FLT_MAX / -FLT_MAX).
void block_min_max(const float* x, float& mn, float& mx) {
  mn = FLT_MAX, mx = -FLT_MAX;
  for (int j = 0; j < QK; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
}

void ggml_q4_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 18) {
    const float d = signed_absmax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, trunc_i8(x[j] * id + 8.5f));
      const int q1 = std::min(15, trunc_i8(x[j + 16] * id + 8.5f));
      dst[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void ggml_q4_1(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 20) {
    float mn, mx;
    block_min_max(x, mn, mx);
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, trunc_i8((x[j] - mn) * id + 0.5f));
      const int q1 = std::min(15, trunc_i8((x[j + 16] - mn) * id + 0.5f));
      dst[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q5_0 / Q5_1 codes: low nibbles as Q4_0's, the fifth bits of elements 0..31 in a 32-bit qh.
void pack_q5(const int q[QK], uint8_t* qh_dst, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
  }
  store_u32(qh_dst, qh);
}

void ggml_q5_0(const float* x, uint8_t* dst, int64_t nb) {
  int q[QK];
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 22) {
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    for (int j = 0; j < QK; ++j) q[j] = std::min(31, trunc_i8(x[j] * id + 16.5f));
    pack_q5(q, dst + 2, dst + 6);
  }
}

void ggml_q5_1(const float* x, uint8_t* dst, int64_t nb) {
  int q[QK];
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 24) {
    float mn, mx;
    block_min_max(x, mn, mx);
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    for (int j = 0; j < QK; ++j) q[j] = trunc_u8((x[j] - mn) * id + 0.5f);
    pack_q5(q, dst + 4, dst + 8);
  }
}

void ggml_q8_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += QK, dst += 34) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    auto* qs = reinterpret_cast<int8_t*>(dst + 2);
    for (int j = 0; j < QK; ++j) qs[j] = static_cast<int8_t>(trunc_i8(std::roundf(x[j] * id)));
  }
}

// ggml's nearest_int: round half to even through the float adder (|x| < 2^22).
inline int ggml_nearest(float x) {
  const float v = x + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's make_qx_quants for rmse_type 1 without weights (each element weighted by x^2): the scale
// of n signed codes in [-nmax, nmax - 1] (stored as code + nmax in L) minimising the weighted
// squared error over 19 candidate inverse scales around -nmax / max.
float qx_scale(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0.0f, vmax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax < 1e-15f) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto code = [nmax](float v) { return std::max(-nmax, std::min(nmax - 1, ggml_nearest(v))); };
  // The float sums in ggml's order: w * x * l and w * l * l, left to right, w = x * x.
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = code(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  float iscale = static_cast<float>(-nmax) / vmax;
  float sumlx, suml2;
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(code(iscale * x[i]) + nmax);
  sums(iscale, sumlx, suml2);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / vmax;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(code(iscale * x[i]) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q6_K (layout in quant.cpp): 16 sub-block scales from qx_scale, stored as int8 against the one
// of largest magnitude (mapped to -128), codes re-taken against the stored scales.
void ggml_q6_K(const float* x, uint8_t* dst, int64_t nb) {
  constexpr size_t kBytes = 210;
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t b = 0; b < nb; ++b, x += QK_K, dst += kBytes) {
    float max_scale = 0.0f, max_abs = 0.0f;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      scales[ib] = qx_scale(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs) max_abs = std::fabs(scales[ib]), max_scale = scales[ib];
    }
    std::memset(dst, 0, kBytes);
    uint8_t* ql = dst;
    uint8_t* qh = dst + 128;
    auto* sc = reinterpret_cast<int8_t*>(dst + 192);
    if (max_abs < 1e-15f) continue;  // all zero, d = 0
    const float iscale = -128.0f / max_scale;
    const uint16_t dh = fp32_to_fp16(1.0f / iscale);
    store_u16(dst + 208, dh);
    for (int ib = 0; ib < QK_K / 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, ggml_nearest(iscale * scales[ib])));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(dh) * static_cast<float>(sc[j]);
      if (d == 0.0f) continue;  // the sub-block keeps qx_scale's codes
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, ggml_nearest(x[16 * j + i] / d))) + 32);
    }
    for (int h = 0; h < QK_K; h += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[h + l], q2 = L[h + l + 32], q3 = L[h + l + 64], q4 = L[h + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace

bool has_ggml_quantizer(DType type) {
  switch (type) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q6_K:
    case DType::MXFP4: return true;  // quantize_row's quant_mxfp4 rounds as ggml's quantize_row_mxfp4_ref
    default: return false;
  }
}

void quantize_row_ggml(DType type, const float* src, void* dst, int64_t n) {
  dtype_row_bytes(type, n);  // throws unless n is a non-negative multiple of the block size
  auto* d = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::Q4_0: ggml_q4_0(src, d, n / QK); return;
    case DType::Q4_1: ggml_q4_1(src, d, n / QK); return;
    case DType::Q5_0: ggml_q5_0(src, d, n / QK); return;
    case DType::Q5_1: ggml_q5_1(src, d, n / QK); return;
    case DType::Q8_0: ggml_q8_0(src, d, n / QK); return;
    case DType::Q6_K: ggml_q6_K(src, d, n / QK_K); return;
    default: quantize_row(type, src, dst, n); return;
  }
}

}  // namespace specmoe::kernels::cpu
