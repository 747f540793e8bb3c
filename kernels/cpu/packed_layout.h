// Internal to kernels/cpu: the byte layout of packed weights (kernels/cpu/packed.h), shared by the
// packer (packed.cpp) and the kernels (matmul_packed_avx2.cpp, matmul_packed_avx512.cpp).
//
// A packed matrix is a sequence of groups of 16 rows; a group is its blocks in order (block b of
// the 16 rows: one "group block", 16 times the bytes of one row's block). Inside a group block,
// every per-row field is stored as 16 consecutive values (row r at index r), and the codes of the
// elements as "k-groups": k-group g holds elements 4g .. 4g + 3 of every row, byte 4r + m being
// element 4g + m of row r, so one 64-byte load (or its 32-byte halves: rows 0-7 and 8-15) puts
// 4 codes of each row in its 32-bit lane, which vpdpbusd / vpmaddubsw multiply with 4 broadcast
// activation bytes. Codes narrower than a byte share bytes:
//   nibble chunk: 64 bytes holding k-groups 2c (low nibbles) and 2c + 1 (high nibbles);
//   bit plane (5th bits): 64 bytes, bit i of byte 4r + m = the 5th bit of element 4i + m of the
//     plane's 8 k-groups;
//   crumb plane (Q6_K's top 2 bits): 64 bytes, bits 2i, 2i + 1 = the top bits of k-group i of 4.
//
// Group-block layouts (offsets in bytes; "16 x fp16" = the rows' fields in row order):
//   Q8_0  544:  d 16 x fp16 @0; k-groups 0..7 @32 (64 bytes each, signed codes)
//   Q4_0  288:  d @0; nibble chunks 0..3 @32 (codes 0..15; the value is code - 8)
//   Q4_1  320:  d @0, m @32; nibble chunks @64
//   Q5_0  352:  d @0; nibble chunks @32 (low 4 bits); bit plane @288 (value: code - 16)
//   Q5_1  384:  d @0, m @32; nibble chunks @64; bit plane @320
//   Q4_K 2304:  d @0, dmin @32; the 12-byte scale fields as three 16 x u32 words @64, @128, @192;
//               sub-block j (32 elements, k-groups 8j .. 8j + 7): nibble chunks @256 + 256 j
//   Q5_K 2816:  Q4_K's 2304 bytes, then sub-block j's bit plane @2304 + 64 j
//   Q6_K 3360:  d @0; scales 16 sub-blocks x 16 rows x i8 @32 (sub-block s at 32 + 16 s);
//               sub-block s (16 elements, k-groups 4s .. 4s + 3) @288 + 192 s: two nibble chunks
//               (low 4 bits), then a crumb plane (top 2 bits; the value is code - 32)
//   F32, F16, BF16 (no blocks; e = 4 or 2 bytes per element, n8 = n_in / 8 whole chunks):
//               chunk c (elements 8c .. 8c + 7) of the 16 rows @128 e c, row r's 8 elements at
//               8 e r in it, so one 64-byte load (F32; a 32-byte load and a conversion for F16
//               and BF16) holds rows 2p and 2p + 1, 8 consecutive elements each; then the
//               n_in % 8 tail elements, element k of the 16 rows @16 e k (lane r = row r)
#pragma once
#include <cstddef>
#include <cstdint>

namespace specmoe::kernels::cpu::packed {

constexpr int kRows = 16;

// Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1: 32-element blocks.
constexpr size_t kQ8_0Bytes = 544, kQ4_0Bytes = 288, kQ4_1Bytes = 320, kQ5_0Bytes = 352, kQ5_1Bytes = 384;
// Q4_K / Q5_K / Q6_K: 256-element super-blocks.
constexpr size_t kQ4_KBytes = 2304, kQ5_KBytes = 2816, kQ6_KBytes = 3360;
constexpr size_t kQ4_KCodes = 256;     // offset of sub-block 0's nibble chunks
constexpr size_t kQ5_KPlanes = 2304;   // offset of sub-block 0's bit plane
constexpr size_t kQ6_KScales = 32, kQ6_KCodes = 288, kQ6_KSubBlock = 192;

}  // namespace specmoe::kernels::cpu::packed
