// Packing of block-quantized weights into 16-row groups (layout: packed_layout.h), its inverse
// for tests, and quant_dot_ref, the definition of the integer path's arithmetic that the packed
// kernels reproduce bit for bit. All scalar: packing runs once per matrix when a model loads.
#include "kernels/cpu/packed.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu {

namespace {

using namespace packed;

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float half_at(const uint8_t* p) { return fp16_to_fp32(u16_at(p)); }
float f32_at(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// ------------------------------------------------------------------ codes of the file's blocks
// The unsigned code of element k of one row's block, as the kernels multiply it.

int nibble32(const uint8_t* qs, int k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; }
int code_q4_0(const uint8_t* b, int k) { return nibble32(b + 2, k); }
int code_q4_1(const uint8_t* b, int k) { return nibble32(b + 4, k); }
int code_q5_0(const uint8_t* b, int k) { return nibble32(b + 6, k) | static_cast<int>(((u32_at(b + 2) >> k) & 1u) << 4); }
int code_q5_1(const uint8_t* b, int k) { return nibble32(b + 8, k) | static_cast<int>(((u32_at(b + 4) >> k) & 1u) << 4); }
int code_q8_0(const uint8_t* b, int k) { return static_cast<int8_t>(b[2 + k]); }  // signed
int code_q4_K(const uint8_t* b, int k) {
  const uint8_t* qs = b + 16;
  const int c = k / 64, l = k % 64;
  return l < 32 ? qs[32 * c + l] & 15 : qs[32 * c + l - 32] >> 4;
}
int code_q5_K(const uint8_t* b, int k) {
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  const int c = k / 64, l = k % 64;
  const int lo = l < 32 ? qs[32 * c + l] & 15 : qs[32 * c + l - 32] >> 4;
  const int hi = l < 32 ? (qh[l] >> (2 * c)) & 1 : (qh[l - 32] >> (2 * c + 1)) & 1;
  return lo | (hi << 4);
}
int code_q6_K(const uint8_t* b, int k) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int h = k / 128, e = k % 128, g = e / 32, l = e % 32;
  const int lo = (ql[64 * h + 32 * (g & 1) + l] >> (g < 2 ? 0 : 4)) & 15;
  const int hi = (qh[32 * h + l] >> (2 * g)) & 3;
  return lo | (hi << 4);
}

// ------------------------------------------------------------------ reading the packed fields
// `kg` counts k-groups from the start of the chunks / plane; r the row, m the element in the k-group.

int get_nibble(const uint8_t* chunks, int kg, int r, int m) { return (chunks[(kg / 2) * 64 + 4 * r + m] >> (4 * (kg & 1))) & 15; }
int get_bit(const uint8_t* plane, int kg, int r, int m) { return (plane[4 * r + m] >> kg) & 1; }
int get_crumb(const uint8_t* plane, int kg, int r, int m) { return (plane[4 * r + m] >> (2 * kg)) & 3; }

// Packing writes each output byte from its source bytes directly (a model's ~1 GB is packed at
// load, so no per-element decoding). nibble_chunk: the 16 bytes of one row in a nibble chunk, from
// 4-bit codes at bit `shift` of src[0..3] (low nibbles) and src[4..7] (high nibbles).
inline void nibble_chunk(const uint8_t* src, int shift, uint8_t* dst) {
  for (int m = 0; m < 4; ++m)
    dst[m] = static_cast<uint8_t>(((src[m] >> shift) & 15) | (((src[4 + m] >> shift) & 15) << 4));
}

// Row r's 32-element codes of Q4_0 / Q4_1 / Q5_0 / Q5_1 (qs: byte i holds elements i and i + 16).
inline void pack_nibbles32(const uint8_t* qs, int r, uint8_t* chunks) {
  for (int c = 0; c < 4; ++c) nibble_chunk(qs + 8 * (c & 1), c < 2 ? 0 : 4, chunks + 64 * c + 4 * r);
}
// Row r's 5th bits (bit k of qh = element k) as a bit plane.
inline void pack_plane32(uint32_t qh, int r, uint8_t* plane) {
  for (int m = 0; m < 4; ++m) {
    uint8_t v = 0;
    for (int kg = 0; kg < 8; ++kg) v |= static_cast<uint8_t>(((qh >> (4 * kg + m)) & 1u) << kg);
    plane[4 * r + m] = v;
  }
}

// One group block from the 16 rows' blocks (src[r] null: a padding row, all zero).
void pack_block(DType type, const uint8_t* const* src, uint8_t* dst, size_t bytes) {
  std::memset(dst, 0, bytes);
  for (int r = 0; r < kRows; ++r) {
    const uint8_t* b = src[r];
    if (b == nullptr) continue;
    switch (type) {
      case DType::Q8_0:
        std::memcpy(dst + 2 * r, b, 2);
        for (int kg = 0; kg < 8; ++kg) std::memcpy(dst + 32 + 64 * kg + 4 * r, b + 2 + 4 * kg, 4);
        break;
      case DType::Q4_0:
        std::memcpy(dst + 2 * r, b, 2);
        pack_nibbles32(b + 2, r, dst + 32);
        break;
      case DType::Q4_1:
        std::memcpy(dst + 2 * r, b, 2);
        std::memcpy(dst + 32 + 2 * r, b + 2, 2);
        pack_nibbles32(b + 4, r, dst + 64);
        break;
      case DType::Q5_0:
        std::memcpy(dst + 2 * r, b, 2);
        pack_nibbles32(b + 6, r, dst + 32);
        pack_plane32(u32_at(b + 2), r, dst + 288);
        break;
      case DType::Q5_1:
        std::memcpy(dst + 2 * r, b, 2);
        std::memcpy(dst + 32 + 2 * r, b + 2, 2);
        pack_nibbles32(b + 8, r, dst + 64);
        pack_plane32(u32_at(b + 4), r, dst + 320);
        break;
      case DType::Q4_K:
      case DType::Q5_K: {
        std::memcpy(dst + 2 * r, b, 2);
        std::memcpy(dst + 32 + 2 * r, b + 2, 2);
        for (int w = 0; w < 3; ++w) std::memcpy(dst + 64 + 64 * w + 4 * r, b + 4 + 4 * w, 4);
        const bool five = type == DType::Q5_K;
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + (five ? 48 : 16);
        // Sub-block j: the low (j even) or high (j odd) nibbles of the file's 32-byte chunk j / 2,
        // element 32 j + i at byte i; its 5th bit is bit j of qh[i].
        for (int j = 0; j < 8; ++j) {
          uint8_t* chunks = dst + kQ4_KCodes + 256 * j + 4 * r;
          for (int c = 0; c < 4; ++c) nibble_chunk(qs + 32 * (j / 2) + 8 * c, 4 * (j & 1), chunks + 64 * c);
          if (!five) continue;
          uint8_t* plane = dst + kQ5_KPlanes + 64 * j + 4 * r;
          for (int m = 0; m < 4; ++m) {
            uint8_t v = 0;
            for (int kg = 0; kg < 8; ++kg) v |= static_cast<uint8_t>(((qh[4 * kg + m] >> j) & 1) << kg);
            plane[m] = v;
          }
        }
        break;
      }
      case DType::Q6_K: {
        std::memcpy(dst + 2 * r, b + 208, 2);
        for (int s = 0; s < 16; ++s) dst[kQ6_KScales + 16 * s + r] = b[192 + s];
        // Element 16 s + i: half h = s / 8; in it group g = (s % 8) / 2 of 32 at l = 16 (s % 2) + i:
        // low 4 bits at bit 4 (g >= 2) of ql[64 h + 32 (g % 2) + l], top 2 at bit 2 g of qh[32 h + l].
        for (int s = 0; s < 16; ++s) {
          const int h = s / 8, g = (s % 8) / 2, l0 = 16 * (s % 2);
          const uint8_t* ql = b + 64 * h + 32 * (g % 2) + l0;
          const uint8_t* qh = b + 128 + 32 * h + l0;
          uint8_t* sb = dst + kQ6_KCodes + kQ6_KSubBlock * s + 4 * r;
          for (int c = 0; c < 2; ++c) nibble_chunk(ql + 8 * c, g >= 2 ? 4 : 0, sb + 64 * c);
          for (int m = 0; m < 4; ++m) {
            uint8_t v = 0;
            for (int kg = 0; kg < 4; ++kg) v |= static_cast<uint8_t>(((qh[4 * kg + m] >> (2 * g)) & 3) << (2 * kg));
            sb[128 + m] = v;
          }
        }
        break;
      }
      default: throw_error(ErrorKind::Runtime, "pack: {} weights are not packed", dtype_name(type));
    }
  }
}

// Row r of a group block, dequantized (n = the block's elements).
void dequantize_block(DType type, const uint8_t* gb, int r, float* y) {
  auto half = [&](size_t off) { return half_at(gb + off + 2 * r); };
  switch (type) {
    case DType::Q8_0: {
      const float d = half(0);
      for (int k = 0; k < 32; ++k) y[k] = d * static_cast<float>(static_cast<int8_t>(gb[32 + (k / 4) * 64 + 4 * r + k % 4]));
      return;
    }
    case DType::Q4_0:
    case DType::Q5_0: {
      // The file's dequantization, operation for operation (quant.cpp: (q - 8) * d, (q - 16) * d).
      const bool five = type == DType::Q5_0;
      const float d = half(0);
      for (int k = 0; k < 32; ++k) {
        int c = get_nibble(gb + 32, k / 4, r, k % 4);
        if (five) c |= get_bit(gb + 288, k / 4, r, k % 4) << 4;
        y[k] = static_cast<float>(c - (five ? 16 : 8)) * d;
      }
      return;
    }
    case DType::Q4_1:
    case DType::Q5_1: {
      const bool five = type == DType::Q5_1;
      const float d = half(0), m = half(32);
      for (int k = 0; k < 32; ++k) {
        int c = get_nibble(gb + 64, k / 4, r, k % 4);
        if (five) c |= get_bit(gb + 320, k / 4, r, k % 4) << 4;
        y[k] = static_cast<float>(c) * d + m;
      }
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = type == DType::Q5_K;
      const float d = half(0), dmin = half(32);
      uint8_t sc[12];
      for (int w = 0; w < 3; ++w) std::memcpy(sc + 4 * w, gb + 64 + 64 * w + 4 * r, 4);
      for (int j = 0; j < 8; ++j) {
        const int s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        const int mn = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        const float d1 = d * static_cast<float>(s), m1 = dmin * static_cast<float>(mn);
        for (int i = 0; i < 32; ++i) {
          const int kg = i / 4;
          int c = get_nibble(gb + kQ4_KCodes + 256 * j, kg, r, i % 4);
          if (five) c |= get_bit(gb + kQ5_KPlanes + 64 * j, kg, r, i % 4) << 4;
          y[32 * j + i] = d1 * static_cast<float>(c) - m1;
        }
      }
      return;
    }
    case DType::Q6_K: {
      const float d = half(0);
      for (int k = 0; k < 256; ++k) {
        const int s = k / 16, kg = (k % 16) / 4;
        const uint8_t* sb = gb + kQ6_KCodes + kQ6_KSubBlock * s;
        const int c = get_nibble(sb, kg, r, k % 4) | (get_crumb(sb + 128, kg, r, k % 4) << 4);
        y[k] = d * static_cast<float>(static_cast<int8_t>(gb[kQ6_KScales + 16 * s + r])) * static_cast<float>(c - 32);
      }
      return;
    }
    default: throw_error(ErrorKind::Runtime, "dequantize_packed_row: {} weights are not packed", dtype_name(type));
  }
}

}  // namespace

bool packs(DType type) {
  return packs_integer(type) || type == DType::F32 || type == DType::F16 || type == DType::BF16;
}

bool packs_integer(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

size_t packed_bytes(const MatrixView& w) {
  const int64_t groups = (w.n_out + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * kPackRows) * dtype_row_bytes(w.type, w.n_in);
}

void pack_groups(const MatrixView& w, int64_t g0, int64_t g1, void* dst) {
  if (!packs(w.type)) throw_error(ErrorKind::Runtime, "pack: {} weights are not packed", dtype_name(w.type));
  if (!packs_integer(w.type)) {
    // Float rows (packed_layout.h): each row's chunks of 8 elements, 16 rows to a chunk, then the
    // tail element by element. Padding rows are zero.
    const size_t e = dtype_info(w.type).block_bytes, group_bytes = kRows * e * static_cast<size_t>(w.n_in);
    const int64_t n8 = w.n_in / 8;
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t g = g0; g < g1; ++g, out += group_bytes) {
      std::memset(out, 0, group_bytes);
      for (int r = 0; r < kRows; ++r) {
        const int64_t j = g * kRows + r;
        if (j >= w.n_out) break;
        const uint8_t* row = w.row(j);
        for (int64_t c = 0; c < n8; ++c) std::memcpy(out + (c * kRows + r) * 8 * e, row + c * 8 * e, 8 * e);
        for (int64_t k = 8 * n8; k < w.n_in; ++k) std::memcpy(out + (k * kRows + r) * e, row + k * e, e);
      }
    }
    return;
  }
  const DTypeInfo& info = dtype_info(w.type);
  const int64_t nb = w.n_in / info.block_size;
  const size_t gbytes = kRows * info.block_bytes;
  auto* out = static_cast<uint8_t*>(dst);
  const uint8_t* src[kRows];
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nb; ++b, out += gbytes) {
      for (int r = 0; r < kRows; ++r) {
        const int64_t j = g * kRows + r;
        src[r] = j < w.n_out ? w.row(j) + b * info.block_bytes : nullptr;
      }
      pack_block(w.type, src, out, gbytes);
    }
}

void pack(ThreadPool& pool, const MatrixView& w, void* dst) {
  const int64_t groups = (w.n_out + kPackRows - 1) / kPackRows;
  const size_t group_bytes = kPackRows * dtype_row_bytes(w.type, w.n_in);
  pool.parallel_for(groups, 16, [&](int64_t g0, int64_t g1) {
    pack_groups(w, g0, g1, static_cast<uint8_t*>(dst) + g0 * group_bytes);
  });
}

void dequantize_packed_row(const MatrixView& w, const void* packed, int64_t j, float* out) {
  const DTypeInfo& info = dtype_info(w.type);
  const int64_t nb = w.n_in / info.block_size;
  const size_t gbytes = kRows * info.block_bytes;
  const auto* group = static_cast<const uint8_t*>(packed) + (j / kRows) * nb * gbytes;
  if (!packs_integer(w.type)) {
    const size_t e = info.block_bytes;
    const int r = static_cast<int>(j % kRows);
    const int64_t n8 = w.n_in / 8;
    for (int64_t k = 0; k < w.n_in; ++k) {
      // Element k: in chunk k / 8 (row r's 8 elements at 8 r), or in the tail (16 per element).
      const size_t at = k < 8 * n8 ? static_cast<size_t>((k / 8) * kRows + r) * 8 + k % 8 : static_cast<size_t>(k * kRows + r);
      const uint8_t* v = group + at * e;
      out[k] = w.type == DType::F32 ? f32_at(v) : w.type == DType::F16 ? half_at(v) : bf16_to_fp32(u16_at(v));
    }
    return;
  }
  for (int64_t b = 0; b < nb; ++b)
    dequantize_block(w.type, group + b * gbytes, static_cast<int>(j % kRows), out + b * info.block_size);
}

float quant_dot_ref(DType type, const void* w_row, const float* x, int64_t n_in) {
  if (!packs_integer(type))
    throw_error(ErrorKind::InvalidArgument, "quant_dot_ref: {} weights are not multiplied in integers", dtype_name(type));
  const DTypeInfo& info = dtype_info(type);
  const int64_t nb = n_in / info.block_size;
  std::vector<uint8_t> acts(avx2::act_row_bytes(type, n_in) + 64);
  // ActQ8x256 is 64-byte aligned.
  uint8_t* a = acts.data() + (64 - reinterpret_cast<uintptr_t>(acts.data()) % 64) % 64;
  avx2::quantize_acts(type, x, n_in, a);
  const auto* w = static_cast<const uint8_t*>(w_row);
  float acc = 0.0f;
  if (info.block_size == 32) {
    const auto* xb = reinterpret_cast<const avx2::ActQ8x32*>(a);
    for (int64_t b = 0; b < nb; ++b, w += info.block_bytes) {
      const float dw = half_at(w);
      int32_t isum = 0;
      for (int k = 0; k < 32; ++k) {
        int c;
        switch (type) {
          case DType::Q8_0: c = code_q8_0(w, k); break;
          case DType::Q4_0: c = code_q4_0(w, k) - 8; break;
          case DType::Q5_0: c = code_q5_0(w, k) - 16; break;
          case DType::Q4_1: c = code_q4_1(w, k); break;
          default: c = code_q5_1(w, k); break;
        }
        isum += c * xb[b].qs[k];
      }
      acc = std::fma(static_cast<float>(isum), dw * xb[b].d, acc);
      if (type == DType::Q4_1 || type == DType::Q5_1) acc = std::fma(half_at(w + 2), xb[b].s, acc);
    }
    return acc;
  }
  const auto* xb = reinterpret_cast<const avx2::ActQ8x256*>(a);
  for (int64_t b = 0; b < nb; ++b, w += info.block_bytes) {
    int32_t isum = 0;
    if (type == DType::Q6_K) {
      for (int s = 0; s < 16; ++s) {
        int32_t si = 0;
        for (int i = 0; i < 16; ++i) si += (code_q6_K(w, 16 * s + i) - 32) * xb[b].qs[16 * s + i];
        isum += static_cast<int8_t>(w[192 + s]) * si;
      }
      acc = std::fma(static_cast<float>(isum), half_at(w + 208) * xb[b].d, acc);
      continue;
    }
    const uint8_t* sc = w + 4;
    int32_t msum = 0;
    for (int j = 0; j < 8; ++j) {
      const int s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
      const int mn = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      int32_t si = 0;
      for (int i = 0; i < 32; ++i) {
        const int k = 32 * j + i;
        si += (type == DType::Q5_K ? code_q5_K(w, k) : code_q4_K(w, k)) * xb[b].qs[k];
      }
      isum += s * si;
      msum += mn * xb[b].bsums32[j];
    }
    acc = std::fma(static_cast<float>(isum), half_at(w) * xb[b].d, acc);
    acc = std::fma(static_cast<float>(msum), -(half_at(w + 2) * xb[b].d), acc);
  }
  return acc;
}

}  // namespace specmoe::kernels::cpu
