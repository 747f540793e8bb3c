// A second, plain decoder of the block formats Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL and IQ4_XS, written
// element by element straight from ggml's block definitions (ggml-common.h) rather than as
// kernels/cpu's row loops: element e of a block has an integer code (code_of) and the block's
// scales map each code to a value (value_of). Values are computed exactly in double (every
// product of an fp16 scale and the small integers involved has <= 25 significant bits) and
// rounded to float once, which is what ggml's dequantize_row_* produce, since their float
// products of this kind are exact and only the last operation rounds. Shared by the CPU
// quantization tests and the CUDA op tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/iq_grids.h"

namespace specmoe::testing {

inline constexpr DType kNewQuantTypes[] = {DType::Q5_0, DType::Q5_1, DType::Q2_K,
                                           DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

// MXFP4's E2M1 codes as the numbers they are (sign bit 3; ggml stores them doubled), and the block's
// E8M0 scale byte e meaning 2^(e - 127): value = kRefE2M1[code] * 2^(e - 127).
// Code 8, E2M1's -0, decodes to +0 as in ggml (whose table holds integers).
inline constexpr double kRefE2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6};

// ggml's kvalues_iq4nl.
inline constexpr int kRefIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Writes v as a little-endian fp16 at p (a block's scale field).
inline void ref_put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}
// IQ1_M's fp16 d lives in the top nibbles of its four scale words (bytes 49, 51, 53, 55), lowest
// nibble first; this writes h there and keeps the 3-bit scales below.
inline void ref_set_iq1_m_half(uint8_t* block, uint16_t h) {
  for (int w = 0; w < 4; ++w)
    block[49 + 2 * w] = static_cast<uint8_t>((block[49 + 2 * w] & 0x0F) | (((h >> (4 * w)) & 0xF) << 4));
}

inline double ref_half(const uint8_t* p) { return fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
inline uint32_t ref_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Number of codes an element of `type` can take.
inline int ref_code_count(DType type) {
  switch (type) {
    case DType::Q5_0: case DType::Q5_1: return 32;
    case DType::Q2_K: return 4;
    case DType::Q3_K: return 8;
    case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4: return 16;
    default: throw std::invalid_argument("quant_reference: not one of the new types");
  }
}

// The code of element e (0 <= e < block size) of the block at b.
inline int ref_code_of(DType type, const uint8_t* b, int e) {
  switch (type) {
    case DType::Q5_0:
    case DType::Q5_1: {
      // Byte e % 16 of qs: low nibble for e < 16, high nibble for e >= 16; bit e of qh.
      const uint8_t* qh = b + (type == DType::Q5_0 ? 2 : 4);
      const uint8_t* qs = qh + 4;
      const int nib = e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4);
      return nib + 16 * static_cast<int>((ref_u32(qh) >> e) & 1);
    }
    case DType::Q2_K:
    case DType::Q3_K: {
      // e = 128 h + 32 j + l: bits 2j, 2j+1 of qs[32 h + l]; Q3_K: bit 4h + j of hmask[l] is bit 2.
      const int h = e / 128, j = (e % 128) / 32, l = e % 32;
      const uint8_t* qs = b + (type == DType::Q2_K ? 16 : 32);
      const int low = (qs[32 * h + l] >> (2 * j)) & 3;
      if (type == DType::Q2_K) return low;
      return low | (((b[l] >> (4 * h + j)) & 1) << 2);
    }
    case DType::IQ4_NL: return e < 16 ? (b[2 + e] & 0xF) : (b[2 + e - 16] >> 4);
    case DType::MXFP4: return e < 16 ? (b[1 + e] & 0xF) : (b[1 + e - 16] >> 4);
    case DType::IQ4_XS: {
      const int ib = e / 32, i = e % 32;
      const uint8_t* qs = b + 8 + 16 * ib;
      return i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
    }
    default: throw std::invalid_argument("quant_reference: not one of the new types");
  }
}

// The exact value code c takes at element e of the block at b.
inline double ref_value_of(DType type, const uint8_t* b, int e, int c) {
  switch (type) {
    case DType::Q5_0: return ref_half(b) * (c - 16);
    case DType::Q5_1: return ref_half(b) * c + ref_half(b + 2);
    case DType::Q2_K: {
      const int sc = b[e / 16];  // scale: low nibble, min: high nibble
      return ref_half(b + 80) * (sc & 15) * c - ref_half(b + 82) * (sc >> 4);
    }
    case DType::Q3_K: {
      // Scale s: low 4 bits from byte s (s < 8, low nibble) or s - 8 (high nibble) of the
      // 12-byte field at 96, top 2 bits from byte 8 + s % 4 at bit 2 (s / 4).
      const int s = e / 16;
      const uint8_t* f = b + 96;
      const int low = s < 8 ? (f[s] & 15) : (f[s - 8] >> 4);
      const int ls = low | (((f[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
      return ref_half(b + 108) * (ls - 32) * (c - 4);
    }
    case DType::IQ4_NL: return ref_half(b) * kRefIq4[c];
    case DType::MXFP4: return kRefE2M1[c] * std::ldexp(1.0, static_cast<int>(b[0]) - 127);
    case DType::IQ4_XS: {
      const int ib = e / 32;
      const int low = (b[4 + ib / 2] >> (4 * (ib % 2))) & 15;
      const int high = ((b[2] | (b[3] << 8)) >> (2 * ib)) & 3;
      return ref_half(b) * ((low | (high << 4)) - 32) * kRefIq4[c];
    }
    default: throw std::invalid_argument("quant_reference: not one of the new types");
  }
}

// n elements (a multiple of the block size) of `type` at src -> y.
inline void ref_dequantize_new(DType type, const uint8_t* src, float* y, int64_t n) {
  const DTypeInfo& info = dtype_info(type);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* b = src + (i / info.block_size) * info.block_bytes;
    const int e = static_cast<int>(i % info.block_size);
    y[i] = static_cast<float>(ref_value_of(type, b, e, ref_code_of(type, b, e)));
  }
}

// Random blocks of a new type: every payload byte random (all codes, all scale bits), the fp16
// fields set so values stay O(1): |d * code| <~ 1 (signed where the format allows it).
inline std::vector<uint8_t> ref_random_blocks(DType type, std::mt19937& rng, int64_t n_blocks) {
  const DTypeInfo& info = dtype_info(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks) * info.block_bytes);
  for (auto& v : bytes) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  const auto put = ref_put_half;
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = bytes.data() + i * info.block_bytes;
    const float s = (rng() & 1) ? -1.0f : 1.0f;
    switch (type) {
      case DType::Q5_0: put(b, s * u(rng) * 0.06f); break;                            // |q - 16| <= 16
      case DType::Q5_1: put(b, u(rng) * 0.06f); put(b + 2, -u(rng)); break;           // q <= 31
      case DType::Q2_K: put(b + 80, u(rng) * 0.02f); put(b + 82, u(rng) * 0.02f); break;  // sc, m <= 15, q <= 3
      case DType::Q3_K: put(b + 108, s * u(rng) * 0.008f); break;                     // |ls - 32| <= 32, |q| <= 4
      case DType::IQ4_NL: put(b, s * u(rng) * 0.008f); break;                         // |value| <= 127
      case DType::IQ4_XS: put(b, s * u(rng) * 0.00025f); break;                       // |ls - 32| <= 32
      case DType::MXFP4: b[0] = static_cast<uint8_t>(120 + rng() % 8); break;         // 2^-7 .. 2^0, |code| <= 6
      default: throw std::invalid_argument("quant_reference: not one of the new types");
    }
  }
  return bytes;
}

// ---- The read-only i-quant and ternary formats (IQ2_XXS ... TQ2_0), element by element: the value
// of element e (0..255) of the block at b, in double (exact: an fp16 d times a scale of at most
// 5 bits times a magnitude of at most 6 bits). Written from ggml-common.h's block structs, with
// the sign rule spelled as a loop rather than kernels/iq_grids.h's sign_byte.
inline constexpr DType kReadOnlyQuantTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                                                DType::IQ3_XXS, DType::IQ3_S,  DType::IQ1_S,
                                                DType::IQ1_M,   DType::TQ1_0,  DType::TQ2_0};

inline int ref_u16(const uint8_t* p) { return p[0] | (p[1] << 8); }
// The 8 sign bits of a 7-bit index: the eighth keeps the number of minus signs even.
inline int ref_signs7(int i) {
  int ones = 0;
  for (int k = 0; k < 7; ++k) ones += (i >> k) & 1;
  return (i & 127) | ((ones % 2) << 7);
}
inline double ref_sign(int signs, int k) { return ((signs >> k) & 1) ? -1.0 : 1.0; }
inline int ref_byte(uint64_t entry, int k) { return static_cast<int>((entry >> (8 * k)) & 0xFF); }

inline double ref_iq_value(DType type, const uint8_t* b, int e) {
  const int ib = e / 32, l = (e % 32) / 8, k = e % 8;  // sub-block, group of 8, place in it
  switch (type) {
    case DType::IQ2_XXS: {
      const uint32_t idx = ref_u32(b + 2 + 8 * ib), aux = ref_u32(b + 6 + 8 * ib);
      const double scale = ref_half(b) * (0.5 + (aux >> 28)) / 4;
      const uint64_t g = iq::kIq2xxsGrid[(idx >> (8 * l)) & 255];
      return scale * ref_byte(g, k) * ref_sign(ref_signs7((aux >> (7 * l)) & 127), k);
    }
    case DType::IQ2_XS: {
      const int q = ref_u16(b + 2 + 2 * (4 * ib + l));
      const int ls = l < 2 ? (b[66 + ib] & 15) : (b[66 + ib] >> 4);
      return ref_half(b) * (0.5 + ls) / 4 * ref_byte(iq::kIq2xsGrid[q & 511], k) * ref_sign(ref_signs7(q >> 9), k);
    }
    case DType::IQ2_S: {
      const int idx = b[2 + 4 * ib + l] | (((b[66 + ib] >> (2 * l)) & 3) << 8);
      const int ls = l < 2 ? (b[74 + ib] & 15) : (b[74 + ib] >> 4);
      return ref_half(b) * (0.5 + ls) / 4 * ref_byte(iq::kIq2sGrid[idx], k) * ref_sign(b[34 + 4 * ib + l], k);
    }
    case DType::IQ3_XXS: {
      const uint32_t aux = ref_u32(b + 66 + 4 * ib);
      const int entry = b[2 + 8 * ib + 2 * l + k / 4];  // two grid entries of 4 per group
      const double scale = ref_half(b) * (0.5 + (aux >> 28)) / 2;
      return scale * ref_byte(iq::kIq3xxsGrid[entry], k % 4) * ref_sign(ref_signs7((aux >> (7 * l)) & 127), k);
    }
    case DType::IQ3_S: {
      const int j = 2 * l + k / 4;  // grid entry 0..7 of the sub-block
      const int idx = b[2 + 8 * ib + j] | (((b[66 + ib] >> j) & 1) << 8);
      const int ls = ib % 2 == 0 ? (b[106 + ib / 2] & 15) : (b[106 + ib / 2] >> 4);
      return ref_half(b) * (1 + 2 * ls) * ref_byte(iq::kIq3sGrid[idx], k % 4) * ref_sign(b[74 + 4 * ib + l], k);
    }
    case DType::IQ1_S: {
      const int qh = ref_u16(b + 34 + 2 * ib);
      const int idx = b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      const double delta = (qh & 0x8000) ? -0.125 : 0.125;
      const int v = static_cast<int8_t>(ref_byte(iq::kIq1sGrid[idx], k));
      return ref_half(b) * (2 * ((qh >> 12) & 7) + 1) * (v + delta);
    }
    case DType::IQ1_M: {
      // d: the top nibbles of the four scale words, lowest word first, as one fp16.
      const int h = (ref_u16(b + 48) >> 12) | ((ref_u16(b + 50) >> 12) << 4) | ((ref_u16(b + 52) >> 12) << 8) |
                    ((ref_u16(b + 54) >> 12) << 12);
      const double d = fp16_to_fp32(static_cast<uint16_t>(h));
      const int nib = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 15;
      const int idx = b[4 * ib + l] | ((nib & 7) << 8);
      const int sc = (ref_u16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
      const int v = static_cast<int8_t>(ref_byte(iq::kIq1sGrid[idx], k));
      return d * (2 * sc + 1) * (v + ((nib & 8) ? -0.125 : 0.125));
    }
    case DType::TQ1_0: {
      // Element e's byte and digit place: 5 digits per qs byte (32 bytes, then 16), 4 per qh byte.
      int byte, digit;
      if (e < 160) byte = e % 32, digit = e / 32;
      else if (e < 240) byte = 32 + (e - 160) % 16, digit = (e - 160) / 16;
      else byte = 48 + (e - 240) % 4, digit = (e - 240) / 4;
      // The digit is the top base-3 digit of the byte times 3^digit (mod 256), as ggml decodes any byte.
      int pow3 = 1;
      for (int i = 0; i < digit; ++i) pow3 *= 3;
      const int q = (b[byte] * pow3) & 0xFF;
      return (((q * 3) >> 8) - 1) * ref_half(b + 52);
    }
    case DType::TQ2_0: {
      const int half = e / 128, l2 = (e % 128) / 32, m = e % 32;
      return (((b[32 * half + m] >> (2 * l2)) & 3) - 1) * ref_half(b + 64);
    }
    default: throw std::invalid_argument("quant_reference: not a read-only type");
  }
}

// Random blocks of a read-only type with the scale fields set so values stay within about 0.1.
inline std::vector<uint8_t> ref_random_iq_blocks(DType type, std::mt19937& rng, int64_t n_blocks, float size = 1.0f) {
  const DTypeInfo& info = dtype_info(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks) * info.block_bytes);
  for (auto& v : bytes) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  const auto put = ref_put_half;
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = bytes.data() + i * info.block_bytes;
    const float s = ((rng() & 1) ? -1.0f : 1.0f) * u(rng) * size;
    switch (type) {
      case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: put(b, s * 6e-4f); break;  // <= 31/8 * 43 d
      case DType::IQ3_XXS: case DType::IQ3_S: put(b, s * 2e-4f); break;                      // <= 31/4 * 62 d, 31 * 15 d
      case DType::IQ1_S: put(b, s * 6e-3f); break;                                            // <= 15 * 1.125 d
      case DType::IQ1_M: ref_set_iq1_m_half(b, fp32_to_fp16(s * 6e-3f)); break;
      case DType::TQ1_0: put(b + 52, s * 0.02f); break;  // every value is 0 or +-d
      case DType::TQ2_0: put(b + 64, s * 0.02f); break;
      default: throw std::invalid_argument("quant_reference: not a read-only type");
    }
  }
  return bytes;
}

}  // namespace specmoe::testing
