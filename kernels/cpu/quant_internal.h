// Internal to kernels/cpu: helpers shared by the block-format files (quant.cpp, quant_q5_iq4.cpp,
// quant_q23_k.cpp) and the per-type row functions quant.cpp dispatches to. The public interface
// is quant.h.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace specmoe::kernels::cpu::detail {

constexpr int QK = 32;     // elements per Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL block
constexpr int QK_K = 256;  // elements per K-quant / IQ4_XS super-block

// The doubled E2M1 values an MXFP4 nibble selects (ggml's kvalues_mxfp4): sign bit 3, magnitudes
// 2 x {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The 16 values an IQ4_NL / IQ4_XS index selects (ggml's kvalues_iq4nl), in increasing order: a
// non-uniform grid, denser near zero, where weights are.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Inline half -> float for the hot dequantization loops (same results as fp16_to_fp32), written
// with selects instead of branches so row loops vectorise: shift exponent and mantissa into place
// and rebias; subnormals are renormalised by a float subtraction; exponent 31 is Inf/NaN.
inline float half_to_float(uint16_t h) {
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(em + (113u << 23)) -
                                               std::bit_cast<float>(113u << 23));
  // All-ones masks from the comparisons keep the loop free of branches.
  const uint32_t is_special = 0u - static_cast<uint32_t>(exp == 0x0f800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  uint32_t mag = (normal & ~is_special) | ((em | 0x7f800000u) & is_special);
  mag = (mag & ~is_sub) | (sub & is_sub);
  return std::bit_cast<float>(mag | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

inline int nearest(float x) { return static_cast<int>(std::lrintf(x)); }

// Row functions of the types in quant_q5_iq4.cpp and quant_q23_k.cpp: nb blocks from src to y,
// or from x to dst.
void dequant_q5_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_q5_1(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq4_nl(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_mxfp4(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq4_xs(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_q2_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_q3_K(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
// The read-only formats of quant_iq.cpp.
void dequant_iq2_xxs(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq2_xs(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq2_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq3_xxs(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq3_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq1_s(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_iq1_m(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_tq1_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
void dequant_tq2_0(const uint8_t* __restrict src, float* __restrict y, int64_t nb);
// IQ1_M's fp16 d, spread over the top nibbles of its four scale words.
float iq1_m_scale(const uint8_t* block);
// Base-3 digit n (0..4, most significant first) of a TQ1_0 byte, 0..2.
int tq1_digit(uint8_t byte, int n);
void quant_q5_0(const float* x, uint8_t* dst, int64_t nb);
void quant_q5_1(const float* x, uint8_t* dst, int64_t nb);
void quant_iq4_nl(const float* x, uint8_t* dst, int64_t nb);
void quant_mxfp4(const float* x, uint8_t* dst, int64_t nb);
// MXFP4's E8M0 scale for ggml's doubled values: 2^(e - 128) as float bits, a normal number for
// e >= 2, else the subnormals 2^-128 and 2^-127 (inline: the AVX2 kernel takes one per block).
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
void quant_iq4_xs(const float* x, uint8_t* dst, int64_t nb);
void quant_q2_K(const float* x, uint8_t* dst, int64_t nb);
void quant_q3_K(const float* x, uint8_t* dst, int64_t nb);

}  // namespace specmoe::kernels::cpu::detail
