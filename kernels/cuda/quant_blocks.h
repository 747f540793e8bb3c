// Device decoding of the GGUF quantized block formats (ggml's block_q8_0, block_q4_0, block_q4_1,
// block_q5_0, block_q5_1, block_iq4_nl, block_q2_K, block_q3_K, block_q4_K, block_q5_K,
// block_q6_K, block_iq4_xs), 32 consecutive elements ("a chunk") at a time: every
// supported format decodes a chunk from a fixed set of bytes, so one thread can own one chunk.
// Byte offsets are spelled out instead of structs so no padding or alignment can creep in; fp16
// scales are read byte by byte because blocks of 34, 18 or 210 bytes leave them 2-byte aligned
// at best. Include from .cu files only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "base/error.h"
#include "kernels/dtype.h"
#include "kernels/iq_grids.h"

namespace specmoe::kernels::cuda::detail {

constexpr int kChunk = 32;  // elements per chunk: the block size of Q8_0/Q4_0/Q4_1, a K-quant sub-block

template <DType T>
struct QuantBlock;  // elements and bytes of one block (kernels/dtype.h has the same numbers)
template <> struct QuantBlock<DType::Q8_0> { static constexpr int elems = 32, bytes = 34; };   // d, qs[32]
template <> struct QuantBlock<DType::Q4_0> { static constexpr int elems = 32, bytes = 18; };   // d, qs[16]
template <> struct QuantBlock<DType::Q4_1> { static constexpr int elems = 32, bytes = 20; };   // d, m, qs[16]
template <> struct QuantBlock<DType::Q4_K> { static constexpr int elems = 256, bytes = 144; };  // d, dmin, scales[12], qs[128]
template <> struct QuantBlock<DType::Q5_K> { static constexpr int elems = 256, bytes = 176; };  // d, dmin, scales[12], qh[32], qs[128]
template <> struct QuantBlock<DType::Q6_K> { static constexpr int elems = 256, bytes = 210; };  // ql[128], qh[64], scales[16], d
template <> struct QuantBlock<DType::Q5_0> { static constexpr int elems = 32, bytes = 22; };   // d, qh[4], qs[16]
template <> struct QuantBlock<DType::Q5_1> { static constexpr int elems = 32, bytes = 24; };   // d, m, qh[4], qs[16]
template <> struct QuantBlock<DType::IQ4_NL> { static constexpr int elems = 32, bytes = 18; };  // d, qs[16]
template <> struct QuantBlock<DType::Q2_K> { static constexpr int elems = 256, bytes = 84; };   // scales[16], qs[64], d, dmin
template <> struct QuantBlock<DType::Q3_K> { static constexpr int elems = 256, bytes = 110; };  // hmask[32], qs[64], scales[12], d
template <> struct QuantBlock<DType::IQ4_XS> { static constexpr int elems = 256, bytes = 136; };  // d, scales_h, scales_l[4], qs[128]
template <> struct QuantBlock<DType::MXFP4> { static constexpr int elems = 32, bytes = 17; };  // e (E8M0), qs[16] (E2M1)
// The read-only formats (kernels/cpu/quant_iq.cpp has their layouts).
template <> struct QuantBlock<DType::IQ2_XXS> { static constexpr int elems = 256, bytes = 66; };
template <> struct QuantBlock<DType::IQ2_XS> { static constexpr int elems = 256, bytes = 74; };
template <> struct QuantBlock<DType::IQ2_S> { static constexpr int elems = 256, bytes = 82; };
template <> struct QuantBlock<DType::IQ3_XXS> { static constexpr int elems = 256, bytes = 98; };
template <> struct QuantBlock<DType::IQ3_S> { static constexpr int elems = 256, bytes = 110; };
template <> struct QuantBlock<DType::IQ1_S> { static constexpr int elems = 256, bytes = 50; };
template <> struct QuantBlock<DType::IQ1_M> { static constexpr int elems = 256, bytes = 56; };
template <> struct QuantBlock<DType::TQ1_0> { static constexpr int elems = 256, bytes = 54; };
template <> struct QuantBlock<DType::TQ2_0> { static constexpr int elems = 256, bytes = 66; };

// The i-quant grids (kernels/iq_grids.h) in device memory, one copy per translation unit,
// initialised at compile time.
static __device__ const iq::Grid<uint64_t, 256> kDevIq2xxsGrid = iq::kIq2xxsGrid;
static __device__ const iq::Grid<uint64_t, 512> kDevIq2xsGrid = iq::kIq2xsGrid;
static __device__ const iq::Grid<uint64_t, 1024> kDevIq2sGrid = iq::kIq2sGrid;
static __device__ const iq::Grid<uint32_t, 256> kDevIq3xxsGrid = iq::kIq3xxsGrid;
static __device__ const iq::Grid<uint32_t, 512> kDevIq3sGrid = iq::kIq3sGrid;
static __device__ const iq::Grid<uint64_t, 2048> kDevIq1sGrid = iq::kIq1sGrid;

__device__ __forceinline__ float load_half(const uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));  // little endian
  return __half2float(__ushort_as_half(bits));
}

// K-quants (Q4_K, Q5_K): the 6-bit scale and min of sub-block j (0..7) packed in 12 bytes, as
// ggml's get_scale_min_k4: j < 4 in the low 6 bits of bytes j / j+4; j >= 4 split between a
// nibble of byte j+4 and the top 2 bits of bytes j-4 / j.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, float& scale, float& min) {
  int sc, m;
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
  scale = static_cast<float>(sc);
  min = static_cast<float>(m);
}

// ggml's kvalues_iq4nl (the IQ4_NL / IQ4_XS value table) as four little-endian words of int8,
// looked up with __byte_perm: no memory access, and no serialisation when the lanes of a warp
// read different entries (which a __constant__ table would cost).
__host__ __device__ constexpr uint32_t pack_i8x4(int a, int b, int c, int d) {
  return (static_cast<uint32_t>(a) & 0xFFu) | ((static_cast<uint32_t>(b) & 0xFFu) << 8) |
         ((static_cast<uint32_t>(c) & 0xFFu) << 16) | ((static_cast<uint32_t>(d) & 0xFFu) << 24);
}
// ggml's kvalues_mxfp4 (E2M1 values doubled) the same way, and MXFP4's E8M0 scale for them:
// 2^(e - 128) (a subnormal for e < 2).
__device__ __forceinline__ int mxfp4_value(int idx) {
  constexpr uint32_t w0 = pack_i8x4(0, 1, 2, 3), w1 = pack_i8x4(4, 6, 8, 12);
  constexpr uint32_t w2 = pack_i8x4(0, -1, -2, -3), w3 = pack_i8x4(-4, -6, -8, -12);
  const uint32_t lo = __byte_perm(w0, w1, idx & 7), hi = __byte_perm(w2, w3, idx & 7);
  return static_cast<int8_t>((idx < 8 ? lo : hi) & 0xFFu);
}
__device__ __forceinline__ float mxfp4_scale(uint8_t e) {
  return __uint_as_float(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}
__device__ __forceinline__ int iq4_value(int idx) {
  constexpr uint32_t w0 = pack_i8x4(-127, -104, -83, -65), w1 = pack_i8x4(-49, -35, -22, -10);
  constexpr uint32_t w2 = pack_i8x4(1, 13, 25, 38), w3 = pack_i8x4(53, 69, 89, 113);
  const uint32_t lo = __byte_perm(w0, w1, idx & 7), hi = __byte_perm(w2, w3, idx & 7);
  return static_cast<int8_t>((idx < 8 ? lo : hi) & 0xFFu);
}

__device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {  // little endian, any alignment
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Decodes chunk c (elements 32c .. 32c+31) of a row stored in format T into out[0..31].
// The arithmetic follows ggml's dequantize_row_* term by term: (d * scale) * q - (dmin * min).
template <DType T>
__device__ __forceinline__ void dequant_chunk(const uint8_t* row, int64_t c, float* out) {
  if constexpr (T == DType::Q8_0) {
    const uint8_t* b = row + c * 34;
    const float d = load_half(b);
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(qs[i]);
  } else if constexpr (T == DType::Q4_0) {
    const uint8_t* b = row + c * 18;
    const float d = load_half(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = d * static_cast<float>((qs[i] & 0xF) - 8);
      out[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
    }
  } else if constexpr (T == DType::Q4_1) {
    const uint8_t* b = row + c * 20;
    const float d = load_half(b);
    const float m = load_half(b + 2);
    const uint8_t* qs = b + 4;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = d * static_cast<float>(qs[i] & 0xF) + m;
      out[i + 16] = d * static_cast<float>(qs[i] >> 4) + m;
    }
  } else if constexpr (T == DType::Q4_K) {
    // Super-block of 256 = 8 sub-blocks; sub-blocks 2p and 2p+1 share bytes qs[32p .. 32p+31],
    // low nibbles for the even one, high nibbles for the odd one.
    const uint8_t* b = row + (c / 8) * 144;
    const int j = static_cast<int>(c % 8);
    const float d = load_half(b), dmin = load_half(b + 2);
    float sc, m;
    scale_min_k4(j, b + 4, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    const uint8_t* q = b + 16 + 32 * (j / 2);
    const int shift = (j % 2) * 4;
#pragma unroll
    for (int l = 0; l < 32; ++l) out[l] = d1 * static_cast<float>((q[l] >> shift) & 0xF) - m1;
  } else if constexpr (T == DType::Q5_K) {
    // As Q4_K plus a fifth bit: bit j of qh[l] is the high bit of element l of sub-block j.
    const uint8_t* b = row + (c / 8) * 176;
    const int j = static_cast<int>(c % 8);
    const float d = load_half(b), dmin = load_half(b + 2);
    float sc, m;
    scale_min_k4(j, b + 4, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48 + 32 * (j / 2);
    const int shift = (j % 2) * 4;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = ((ql[l] >> shift) & 0xF) + (((qh[l] >> j) & 1) << 4);
      out[l] = d1 * static_cast<float>(q) - m1;
    }
  } else if constexpr (T == DType::Q6_K) {
    // Two halves of 128; in half h, quarter k (sub-block j = 4h + k) takes the low (k < 2) or high
    // (k >= 2) nibbles of ql[64h + 32(k % 2) + l], bits 2k..2k+1 of qh[32h + l], and the int8
    // scale scales[8h + l/16 + 2k]; the 6-bit value is centred by -32.
    const uint8_t* b = row + (c / 8) * 210;
    const int j = static_cast<int>(c % 8);
    const int h = j / 4, k = j % 4;
    const uint8_t* ql = b + 64 * h + 32 * (k % 2);
    const uint8_t* qh = b + 128 + 32 * h;
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * k;
    const float d = load_half(b + 208);
    const int nibble_shift = (k / 2) * 4;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = (((ql[l] >> nibble_shift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(scales[l / 16]) * static_cast<float>(q);
    }
  } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    // Byte i of qs holds elements i (low nibble) and i + 16 (high); bit i of the word qh is
    // element i's fifth bit. Q5_0: (q - 16) * d; Q5_1: q * d + m.
    constexpr bool has_min = T == DType::Q5_1;
    const uint8_t* b = row + c * (has_min ? 24 : 22);
    const float d = load_half(b), m = has_min ? load_half(b + 2) : 0.0f;
    const uint32_t qh = load_u32(b + (has_min ? 4 : 2));
    const uint8_t* qs = b + (has_min ? 8 : 6);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int lo = (qs[i] & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
      const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      if constexpr (has_min) {
        out[i] = d * static_cast<float>(lo) + m;
        out[i + 16] = d * static_cast<float>(hi) + m;
      } else {
        out[i] = d * static_cast<float>(lo - 16);
        out[i + 16] = d * static_cast<float>(hi - 16);
      }
    }
  } else if constexpr (T == DType::IQ4_NL) {
    const uint8_t* b = row + c * 18;
    const float d = load_half(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = d * static_cast<float>(iq4_value(qs[i] & 0xF));
      out[i + 16] = d * static_cast<float>(iq4_value(qs[i] >> 4));
    }
  } else if constexpr (T == DType::MXFP4) {
    const uint8_t* b = row + c * 17;
    const float d = mxfp4_scale(b[0]);
    const uint8_t* qs = b + 1;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = d * static_cast<float>(mxfp4_value(qs[i] & 0xF));
      out[i + 16] = d * static_cast<float>(mxfp4_value(qs[i] >> 4));
    }
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
    // Super-block of 256 = 16 sub-blocks of 16; chunk j (0..7) of it is elements 128h + 32k + l
    // (h = j / 4, k = j % 4), sub-blocks 2j (l < 16) and 2j + 1. The low 2 bits are bits 2k..2k+1
    // of qs[32h + l]. Q2_K: x = d * (sc & 15) * q - dmin * (sc >> 4), sc = scales[2j + l/16].
    // Q3_K: bit j of hmask[l] clear means q - 4; x = d * (ls - 32) * q with 6-bit ls packed in
    // 12 bytes (low 4 bits: nibble s / 8 of byte s % 8; top 2 bits: bits 2(s/4) of byte 8 + s%4).
    const int j = static_cast<int>(c % 8), h = j / 4, k = j % 4;
    if constexpr (T == DType::Q2_K) {
      const uint8_t* b = row + (c / 8) * 84;
      const float d = load_half(b + 80), dmin = load_half(b + 82);
      const uint8_t* qs = b + 16 + 32 * h;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int sc = b[2 * j + half];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
#pragma unroll
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          out[l] = dl * static_cast<float>((qs[l] >> (2 * k)) & 3) - ml;
      }
    } else {
      const uint8_t* b = row + (c / 8) * 110;
      const float d = load_half(b + 108);
      const uint8_t* hm = b;
      const uint8_t* qs = b + 32 + 32 * h;
      const uint8_t* sf = b + 96;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * j + half;
        const int ls = ((s < 8 ? sf[s] : sf[s - 8] >> 4) & 0xF) | (((sf[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
        const float dl = d * static_cast<float>(ls - 32);
#pragma unroll
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q = ((qs[l] >> (2 * k)) & 3) - (((hm[l] >> j) & 1) ? 0 : 4);
          out[l] = dl * static_cast<float>(q);
        }
      }
    }
  } else if constexpr (T == DType::IQ4_XS) {
    // Sub-block ib = c % 8 of 32: 6-bit scale ls (low 4 bits: nibble ib % 2 of scales_l[ib / 2],
    // top 2 bits: bits 2ib of scales_h); its 16 bytes at qs + 16 ib hold elements i and i + 16.
    const uint8_t* b = row + (c / 8) * 136;
    const int ib = static_cast<int>(c % 8);
    const float d = load_half(b);
    const int sh = b[2] | (b[3] << 8);
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    const uint8_t* qs = b + 8 + 16 * ib;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[i] = dl * static_cast<float>(iq4_value(qs[i] & 0xF));
      out[i + 16] = dl * static_cast<float>(iq4_value(qs[i] >> 4));
    }
  } else if constexpr (T == DType::IQ2_XXS || T == DType::IQ2_XS || T == DType::IQ2_S || T == DType::IQ3_XXS ||
                       T == DType::IQ3_S || T == DType::IQ1_S || T == DType::IQ1_M) {
    // Sub-block ib = c % 8 of a 256-element block: four groups of 8, each a grid entry's
    // magnitudes (two entries of 4 for IQ3) with 8 sign bits, or (IQ1) grid values +- 1/8; the
    // float steps are ggml's dequantize_row_* (kernels/cpu/quant_iq.cpp).
    const uint8_t* b = row + (c / 8) * QuantBlock<T>::bytes;
    const int ib = static_cast<int>(c % 8);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      uint64_t mag = 0;  // 8 magnitudes (IQ1: int8 grid values)
      uint32_t signs = 0;
      float dl;
      if constexpr (T == DType::IQ2_XXS) {
        const uint32_t idx = load_u32(b + 2 + 8 * ib), aux = load_u32(b + 6 + 8 * ib);
        dl = load_half(b) * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
        mag = kDevIq2xxsGrid[(idx >> (8 * l)) & 255];
        signs = iq::sign_byte(aux >> (7 * l));
      } else if constexpr (T == DType::IQ2_XS) {
        const uint32_t q = b[2 + 2 * (4 * ib + l)] | (b[3 + 2 * (4 * ib + l)] << 8);
        const int sc = l < 2 ? (b[66 + ib] & 15) : (b[66 + ib] >> 4);
        dl = load_half(b) * (0.5f + static_cast<float>(sc)) * 0.25f;
        mag = kDevIq2xsGrid[q & 511];
        signs = iq::sign_byte(q >> 9);
      } else if constexpr (T == DType::IQ2_S) {
        const int sc = l < 2 ? (b[74 + ib] & 15) : (b[74 + ib] >> 4);
        dl = load_half(b) * (0.5f + static_cast<float>(sc)) * 0.25f;
        mag = kDevIq2sGrid[b[2 + 4 * ib + l] | ((b[66 + ib] << (8 - 2 * l)) & 0x300)];
        signs = b[34 + 4 * ib + l];
      } else if constexpr (T == DType::IQ3_XXS) {
        const uint32_t aux = load_u32(b + 66 + 4 * ib);
        dl = load_half(b) * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
        mag = kDevIq3xxsGrid[b[2 + 8 * ib + 2 * l]] |
              (static_cast<uint64_t>(kDevIq3xxsGrid[b[3 + 8 * ib + 2 * l]]) << 32);
        signs = iq::sign_byte(aux >> (7 * l));
      } else if constexpr (T == DType::IQ3_S) {
        const int qh = b[66 + ib];
        const int sc = ib % 2 == 0 ? (b[106 + ib / 2] & 15) : (b[106 + ib / 2] >> 4);
        dl = load_half(b) * static_cast<float>(1 + 2 * sc);
        mag = kDevIq3sGrid[b[2 + 8 * ib + 2 * l] | (((qh >> (2 * l)) & 1) << 8)] |
              (static_cast<uint64_t>(kDevIq3sGrid[b[3 + 8 * ib + 2 * l] | (((qh >> (2 * l + 1)) & 1) << 8)]) << 32);
        signs = b[74 + 4 * ib + l];
      } else if constexpr (T == DType::IQ1_S) {
        const uint32_t qh = b[34 + 2 * ib] | (b[35 + 2 * ib] << 8);
        dl = load_half(b) * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
        mag = kDevIq1sGrid[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        signs = qh & 0x8000 ? 1u : 0u;  // the shift's sign
      } else {  // IQ1_M
        const uint8_t* sc = b + 48;
        const unsigned short bits = static_cast<unsigned short>(
            ((sc[1] >> 4)) | ((sc[3] >> 4) << 4) | ((sc[5] >> 4) << 8) | ((sc[7] >> 4) << 12));
        const float d = __half2float(__ushort_as_half(bits));
        const uint32_t w = sc[2 * (ib / 2)] | (sc[2 * (ib / 2) + 1] << 8);
        const uint32_t ls = (w >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
        dl = d * static_cast<float>(2 * ls + 1);
        const uint32_t nib = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
        mag = kDevIq1sGrid[b[4 * ib + l] | ((nib & 7) << 8)];
        signs = nib & 8 ? 1u : 0u;
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int byte = static_cast<int>((mag >> (8 * k)) & 0xFF);
        if constexpr (T == DType::IQ1_S || T == DType::IQ1_M)
          out[8 * l + k] = dl * (static_cast<float>(static_cast<int8_t>(byte)) + (signs ? -0.125f : 0.125f));
        else
          out[8 * l + k] = dl * static_cast<float>(byte) * (((signs >> k) & 1) ? -1.0f : 1.0f);
      }
    }
  } else if constexpr (T == DType::TQ2_0) {
    // Sub-block ib: bits 2 (ib % 4) of bytes 32 (ib / 4) .. +31, minus 1.
    const uint8_t* b = row + (c / 8) * 66;
    const int ib = static_cast<int>(c % 8);
    const float d = load_half(b + 64);
    const uint8_t* qs = b + 32 * (ib / 4);
#pragma unroll
    for (int m = 0; m < 32; ++m) out[m] = static_cast<float>(((qs[m] >> (2 * (ib % 4))) & 3) - 1) * d;
  } else if constexpr (T == DType::TQ1_0) {
    // Element e of the block: base-3 digit n of byte m (5 digits per byte of qs[0..47], 4 per qh
    // byte), read as ggml does: the top digit of byte * 3^n (mod 256).
    const uint8_t* b = row + (c / 8) * 54;
    const int ib = static_cast<int>(c % 8);
    const float d = load_half(b + 52);
#pragma unroll 4
    for (int i = 0; i < 32; ++i) {
      const int e = 32 * ib + i;
      int byte, n;
      if (e < 160) byte = e % 32, n = e / 32;
      else if (e < 240) byte = 32 + (e - 160) % 16, n = (e - 160) / 16;
      else byte = 48 + (e - 240) % 4, n = (e - 240) / 4;
      const int pow3 = n == 0 ? 1 : n == 1 ? 3 : n == 2 ? 9 : n == 3 ? 27 : 81;
      const int q = (b[byte] * pow3) & 0xFF;
      out[i] = static_cast<float>(((q * 3) >> 8) - 1) * d;
    }
  } else {
    static_assert(T == DType::Q8_0, "dequant_chunk: not a quantized type");
  }
}

// Calls f(std::integral_constant<DType, T>{}) for the quantized type `type`; returns false for
// F32/F16/BF16 (not quantized).
template <typename F>
bool dispatch_quant(DType type, F&& f) {
  switch (type) {
    case DType::Q8_0: f(std::integral_constant<DType, DType::Q8_0>{}); return true;
    case DType::Q4_0: f(std::integral_constant<DType, DType::Q4_0>{}); return true;
    case DType::Q4_1: f(std::integral_constant<DType, DType::Q4_1>{}); return true;
    case DType::Q4_K: f(std::integral_constant<DType, DType::Q4_K>{}); return true;
    case DType::Q5_K: f(std::integral_constant<DType, DType::Q5_K>{}); return true;
    case DType::Q6_K: f(std::integral_constant<DType, DType::Q6_K>{}); return true;
    case DType::Q5_0: f(std::integral_constant<DType, DType::Q5_0>{}); return true;
    case DType::Q5_1: f(std::integral_constant<DType, DType::Q5_1>{}); return true;
    case DType::IQ4_NL: f(std::integral_constant<DType, DType::IQ4_NL>{}); return true;
    case DType::Q2_K: f(std::integral_constant<DType, DType::Q2_K>{}); return true;
    case DType::Q3_K: f(std::integral_constant<DType, DType::Q3_K>{}); return true;
    case DType::IQ4_XS: f(std::integral_constant<DType, DType::IQ4_XS>{}); return true;
    case DType::MXFP4: f(std::integral_constant<DType, DType::MXFP4>{}); return true;
    case DType::IQ2_XXS: f(std::integral_constant<DType, DType::IQ2_XXS>{}); return true;
    case DType::IQ2_XS: f(std::integral_constant<DType, DType::IQ2_XS>{}); return true;
    case DType::IQ2_S: f(std::integral_constant<DType, DType::IQ2_S>{}); return true;
    case DType::IQ3_XXS: f(std::integral_constant<DType, DType::IQ3_XXS>{}); return true;
    case DType::IQ3_S: f(std::integral_constant<DType, DType::IQ3_S>{}); return true;
    case DType::IQ1_S: f(std::integral_constant<DType, DType::IQ1_S>{}); return true;
    case DType::IQ1_M: f(std::integral_constant<DType, DType::IQ1_M>{}); return true;
    case DType::TQ1_0: f(std::integral_constant<DType, DType::TQ1_0>{}); return true;
    case DType::TQ2_0: f(std::integral_constant<DType, DType::TQ2_0>{}); return true;
    default: return false;
  }
}

// Elements and bytes per block of any supported type (float types: 1 element).
inline void block_shape(DType type, int64_t& elems, int64_t& bytes) {
  switch (type) {
    case DType::F32: elems = 1; bytes = 4; return;
    case DType::F16: elems = 1; bytes = 2; return;
    case DType::BF16: elems = 1; bytes = 2; return;
    case DType::Q8_0: elems = 32; bytes = 34; return;
    case DType::Q4_0: elems = 32; bytes = 18; return;
    case DType::Q4_1: elems = 32; bytes = 20; return;
    case DType::Q4_K: elems = 256; bytes = 144; return;
    case DType::Q5_K: elems = 256; bytes = 176; return;
    case DType::Q6_K: elems = 256; bytes = 210; return;
    case DType::Q5_0: elems = 32; bytes = 22; return;
    case DType::Q5_1: elems = 32; bytes = 24; return;
    case DType::IQ4_NL: elems = 32; bytes = 18; return;
    case DType::Q2_K: elems = 256; bytes = 84; return;
    case DType::Q3_K: elems = 256; bytes = 110; return;
    case DType::IQ4_XS: elems = 256; bytes = 136; return;
    case DType::MXFP4: elems = 32; bytes = 17; return;
    case DType::IQ2_XXS: elems = 256; bytes = 66; return;
    case DType::IQ2_XS: elems = 256; bytes = 74; return;
    case DType::IQ2_S: elems = 256; bytes = 82; return;
    case DType::IQ3_XXS: elems = 256; bytes = 98; return;
    case DType::IQ3_S: elems = 256; bytes = 110; return;
    case DType::IQ1_S: elems = 256; bytes = 50; return;
    case DType::IQ1_M: elems = 256; bytes = 56; return;
    case DType::TQ1_0: elems = 256; bytes = 54; return;
    case DType::TQ2_0: elems = 256; bytes = 66; return;
    default: break;
  }
  throw Error(ErrorKind::Unsupported, "cuda: tensor type id " + std::to_string(static_cast<uint32_t>(type)) +
                                          " is not supported by the CUDA kernels");
}

// llama.cpp's spelling of a type name (kernels/dtype.h's dtype_name, kept local so this library
// does not depend on the CPU kernels library).
inline const char* type_name(DType type) {
  switch (type) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::IQ4_NL: return "IQ4_NL";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::IQ4_XS: return "IQ4_XS";
    case DType::MXFP4: return "MXFP4";
    case DType::IQ2_XXS: return "IQ2_XXS";
    case DType::IQ2_XS: return "IQ2_XS";
    case DType::IQ2_S: return "IQ2_S";
    case DType::IQ3_XXS: return "IQ3_XXS";
    case DType::IQ3_S: return "IQ3_S";
    case DType::IQ1_S: return "IQ1_S";
    case DType::IQ1_M: return "IQ1_M";
    case DType::TQ1_0: return "TQ1_0";
    case DType::TQ2_0: return "TQ2_0";
    default: break;
  }
  return "unknown";
}

inline bool is_quantized(DType type) {
  return type != DType::F32 && type != DType::F16 && type != DType::BF16;
}

}  // namespace specmoe::kernels::cuda::detail
