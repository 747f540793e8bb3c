// Device decoding of the GGUF quantized block formats (ggml's block_q8_0, block_q4_0, block_q4_1,
// block_q4_K, block_q5_K, block_q6_K), 32 consecutive elements ("a chunk") at a time: every
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
  }
  return "unknown";
}

inline bool is_quantized(DType type) {
  return type != DType::F32 && type != DType::F16 && type != DType::BF16;
}

}  // namespace specmoe::kernels::cuda::detail
