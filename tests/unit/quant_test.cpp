// Quantized block formats: hand-made blocks with hand-computed values for every type (so the
// layout matches ggml's, not just our own quantizer), then quantize -> dequantize error bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/quant.h"
#include "quant_reference.h"

using namespace specmoe;
using specmoe::kernels::cpu::dequantize_row;
using specmoe::kernels::cpu::quantize_row;

namespace {

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); }

std::vector<float> dequant(DType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), NAN);
  dequantize_row(t, bytes.data(), y.data(), n);
  return y;
}

// The K-quant scale field used by the Q4_K and Q5_K blocks below, packed by hand:
//   scales = {1, 2, 3, 63, 17, 33, 48, 5}, mins = {0, 1, 2, 3, 60, 31, 16, 63}
//   bytes 0-3: scale j (low 6 bits) | top 2 bits of scale j+4 << 6: 1|1<<6, 2|2<<6, 3|3<<6, 63|0
//   bytes 4-7: min j | top 2 bits of min j+4 << 6:                  0|3<<6, 1|1<<6, 2|1<<6, 3|3<<6
//   bytes 8-11: low 4 bits of scale j+4 | low 4 bits of min j+4 << 4: 1|12<<4, 1|15<<4, 0|0, 5|15<<4
const uint8_t kScales12[12] = {65, 130, 195, 63, 192, 65, 66, 195, 193, 241, 0, 245};
const int kSc[8] = {1, 2, 3, 63, 17, 33, 48, 5};
const int kMn[8] = {0, 1, 2, 3, 60, 31, 16, 63};

}  // namespace

TEST(QuantBlocks, Q4_0HandMade) {
  std::vector<uint8_t> b(18 * 2);
  put16(b, 0, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  put16(b, 18, 0xC000);  // d = -2
  for (int j = 0; j < 16; ++j) b[20 + j] = 0x8F;  // low nibble 15 -> +7, high 8 -> 0
  const auto y = dequant(DType::Q4_0, b, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;        // element j: low nibble of byte j
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j;   // element j+16: high nibble of byte j
    EXPECT_EQ(y[32 + j], -14.0f);
    EXPECT_EQ(y[48 + j], 0.0f);
    EXPECT_TRUE(std::signbit(y[48 + j])) << j;  // (8 - 8) * -2 is -0.0 in ggml's order
    EXPECT_FALSE(std::signbit(y[8])) << j;      // (8 - 8) * 0.5
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(QuantBlocks, Q4_1HandMade) {
  std::vector<uint8_t> b(20);
  put16(b, 0, 0x3400);  // d = 0.25
  put16(b, 2, 0xBC00);  // m = -1
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::Q4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.25f - 1.0f) << j;
  }
  EXPECT_EQ(y[15], 2.75f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(QuantBlocks, Q8_0HandMade) {
  std::vector<uint8_t> b(34);
  put16(b, 0, 0x4000);  // d = 2
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(4 * j - 64));
  b[2 + 5] = 0x80;  // -128 is a valid code
  const auto y = dequant(DType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j)
    if (j != 5) {
      EXPECT_EQ(y[j], (4 * j - 64) * 2.0f) << j;
    }
  EXPECT_EQ(y[5], -256.0f);
  EXPECT_EQ(y[31], 120.0f);
}

TEST(QuantBlocks, Q4_KHandMade) {
  std::vector<uint8_t> b(144);
  put16(b, 0, 0x3C00);  // d = 1
  put16(b, 2, 0x3800);  // dmin = 0.5
  std::memcpy(b.data() + 4, kScales12, 12);
  for (int k = 0; k < 128; ++k) b[16 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  const auto y = dequant(DType::Q4_K, b, 256);
  // Element e lives in 64-element chunk c = e/64 at w = e%64: w < 32 is the low nibble of
  // qs[32c + w], w >= 32 the high nibble of qs[32c + w - 32]; sub-block s = e/32.
  for (int e = 0; e < 256; ++e) {
    const int w = e % 64, s = e / 32;
    const int q = w < 32 ? w % 16 : 15 - (w - 32) % 16;
    EXPECT_EQ(y[e], 1.0f * kSc[s] * q - 0.5f * kMn[s]) << e;
  }
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[70], 17.0f);     // s=2, q=6: 3*6 - 0.5*2
  EXPECT_EQ(y[100], 691.5f);   // s=3, high nibble of qs[36] = 15-4 = 11: 63*11 - 0.5*3
  EXPECT_EQ(y[130], 4.0f);     // s=4, q=2: 17*2 - 0.5*60
  EXPECT_EQ(y[255], -31.5f);   // s=7, q=0: -0.5*63
}

TEST(QuantBlocks, Q5_KHandMade) {
  std::vector<uint8_t> b(176);
  put16(b, 0, 0x3C00);  // d = 1
  put16(b, 2, 0x3800);  // dmin = 0.5
  std::memcpy(b.data() + 4, kScales12, 12);
  // qh: bytes 0-15 = 0x55 (even bits: the first half of every chunk gets +16),
  // bytes 16-31 = 0xAA (odd bits: the second half of every chunk gets +16).
  for (int l = 0; l < 32; ++l) b[16 + l] = l < 16 ? 0x55 : 0xAA;
  for (int k = 0; k < 128; ++k) b[48 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  const auto y = dequant(DType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int w = e % 64, s = e / 32;
    const int l = w % 32;
    const bool first_half = w < 32;
    int q = first_half ? w % 16 : 15 - l % 16;
    if (first_half && l < 16) q += 16;
    if (!first_half && l >= 16) q += 16;
    EXPECT_EQ(y[e], 1.0f * kSc[s] * q - 0.5f * kMn[s]) << e;
  }
  EXPECT_EQ(y[0], 16.0f);     // q = 0 + 16 (bit 0 of 0x55)
  EXPECT_EQ(y[20], 4.0f);     // l=20: bit 0 of 0xAA clear, q = 4
  EXPECT_EQ(y[100], 691.5f);  // l=4: bit 3 of 0x55 clear, q = 11
  EXPECT_EQ(y[255], 48.5f);   // l=31: bit 7 of 0xAA set, q = 0 + 16: 5*16 - 31.5
}

TEST(QuantBlocks, Q6_KHandMade) {
  std::vector<uint8_t> b(210);
  for (int k = 0; k < 128; ++k) b[k] = static_cast<uint8_t>(k * 7);         // ql
  for (int k = 0; k < 64; ++k) b[128 + k] = static_cast<uint8_t>(k * 13);   // qh
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(3 * s - 20));
  put16(b, 208, 0x3400);  // d = 0.25
  const auto y = dequant(DType::Q6_K, b, 256);
  // Element e: half h = e/128, r = e%128, group g = r/32, l = r%32; low 4 bits from
  // ql[64h + l + 32*(g&1)] (low nibble for g < 2, high for g >= 2), top 2 bits from
  // qh[32h + l] >> 2g; value d * scales[e/16] * (q - 32).
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
    const uint8_t qlb = b[64 * h + l + 32 * (g & 1)];
    const int low = g < 2 ? (qlb & 0xF) : (qlb >> 4);
    const int high = (b[128 + 32 * h + l] >> (2 * g)) & 3;
    const int scale = 3 * (e / 16) - 20;
    EXPECT_EQ(y[e], 0.25f * static_cast<float>(scale * ((low | (high << 4)) - 32))) << e;
  }
  EXPECT_EQ(y[0], 160.0f);   // ql 0, qh 0 -> q=-32; scale -20
  EXPECT_EQ(y[33], -80.5f);  // ql[33]=0xE7 -> 7, qh[1]=13 -> bits 2-3 = 3: q = 55-32 = 23; scale -14
  EXPECT_EQ(y[200], -68.0f); // ql[72]=0xF8 -> high 15, qh[40]=8 -> bits 4-5 = 0: q = -17; scale 16
}

// ---- Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4: hand-made blocks with hand-computed values, and
// every element against the plain decoder of tests/quant_reference.h.

namespace {

void expect_matches_reference(DType t, const std::vector<uint8_t>& b, const std::vector<float>& y) {
  std::vector<float> ref(y.size());
  specmoe::testing::ref_dequantize_new(t, b.data(), ref.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(ref[i])) << i;
}

}  // namespace

TEST(QuantBlocks, Q5_0HandMade) {
  std::vector<uint8_t> b(22 * 2);
  put16(b, 0, 0x3800);  // d = 0.5
  const uint32_t qh0 = 0x0000FFFF;  // fifth bit set for elements 0..15
  std::memcpy(b.data() + 2, &qh0, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  put16(b, 22, 0xC000);  // d = -2
  const uint32_t qh1 = 0x80000001;  // elements 0 and 31
  std::memcpy(b.data() + 24, &qh1, 4);  // qs all zero
  const auto y = dequant(DType::Q5_0, b, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f) << j;                  // (j + 16 - 16) * 0.5
    EXPECT_EQ(y[j + 16], (-1 - j) * 0.5f) << j;      // (15 - j - 16) * 0.5
  }
  EXPECT_EQ(y[15], 7.5f);
  EXPECT_EQ(y[31], -8.0f);
  EXPECT_EQ(y[32], 0.0f);   // (0 + 16 - 16) * -2
  EXPECT_EQ(y[33], 32.0f);  // (0 - 16) * -2
  EXPECT_EQ(y[48], 32.0f);
  EXPECT_EQ(y[63], 0.0f);
  expect_matches_reference(DType::Q5_0, b, y);
}

TEST(QuantBlocks, Q5_1HandMade) {
  std::vector<uint8_t> b(24);
  put16(b, 0, 0x3400);  // d = 0.25
  put16(b, 2, 0xBC00);  // m = -1
  const uint32_t qh = 0xAAAAAAAA;  // fifth bit of the odd elements
  std::memcpy(b.data() + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::Q5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j + 16 * (j % 2)) * 0.25f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j + 16 * (j % 2)) * 0.25f - 1.0f) << j;
  }
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 3.25f);   // q = 1 + 16
  EXPECT_EQ(y[31], 3.0f);   // q = 0 + 16
  expect_matches_reference(DType::Q5_1, b, y);
}

TEST(QuantBlocks, Q2_KHandMade) {
  std::vector<uint8_t> b(84);
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(s | ((15 - s) << 4));  // scale s, min 15 - s
  for (int k = 0; k < 64; ++k) b[16 + k] = static_cast<uint8_t>(k);
  put16(b, 80, 0x3C00);  // d = 1
  put16(b, 82, 0x3800);  // dmin = 0.5
  const auto y = dequant(DType::Q2_K, b, 256);
  // Element e = 128h + 32j + l: q = bits 2j..2j+1 of qs[32h + l] = (32h + l) >> 2j & 3; s = e / 16.
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    const int q = ((32 * h + l) >> (2 * j)) & 3;
    EXPECT_EQ(y[e], 1.0f * s * q - 0.5f * (15 - s)) << e;
  }
  EXPECT_EQ(y[0], -7.5f);    // s = 0: scale 0, min 15
  EXPECT_EQ(y[17], -6.0f);   // qs[17] = 0b10001 -> q = 1; s = 1: 1 - 0.5 * 14
  EXPECT_EQ(y[200], 22.5f);  // qs[40] = 0b101000, bits 4-5 -> q = 2; s = 12: 24 - 1.5
  EXPECT_EQ(y[255], 0.0f);   // qs[63] bits 6-7 = 0; s = 15: min 0
  expect_matches_reference(DType::Q2_K, b, y);
}

TEST(QuantBlocks, Q3_KHandMade) {
  std::vector<uint8_t> b(110);
  for (int l = 0; l < 32; ++l) b[l] = l < 16 ? 0x0F : 0xF0;                 // hmask
  for (int k = 0; k < 64; ++k) b[32 + k] = static_cast<uint8_t>(k * 5);    // qs
  // Scales ls_s = 8 + 3s (ls - 32 = -24 .. 21), packed by hand: bytes 0-7 = low 4 bits of s | of
  // s + 8 << 4; byte 8 + m = top 2 bits of s = m, m+4, m+8, m+12 at bits 0, 2, 4, 6.
  const uint8_t scales[12] = {0x08, 0x3B, 0x6E, 0x91, 0xC4, 0xF7, 0x2A, 0x5D, 0xA4, 0xA4, 0xE4, 0xE5};
  std::memcpy(b.data() + 96, scales, 12);
  put16(b, 108, 0x3400);  // d = 0.25
  const auto y = dequant(DType::Q3_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    const int low = (((32 * h + l) * 5 & 0xFF) >> (2 * j)) & 3;
    const bool top = h == 0 ? l < 16 : l >= 16;  // bit 4h + j of hmask[l]
    EXPECT_EQ(y[e], 0.25f * (8 + 3 * s - 32) * (low - (top ? 0 : 4))) << e;
  }
  EXPECT_EQ(y[1], -6.0f);    // qs[1] = 5 -> 1, bit set: q = 1; s = 0: scale -24
  EXPECT_EQ(y[20], 21.0f);   // qs[20] = 100 -> 0, bit clear: q = -4; s = 1: scale -21
  EXPECT_EQ(y[200], -12.0f); // qs[40] = 200, bits 4-5 = 0, bit 6 of 0x0F clear: q = -4; s = 12: 12
  EXPECT_EQ(y[240], 15.75f); // qs[48] = 240, bits 6-7 = 3, bit 7 of 0xF0 set: q = 3; s = 15: 21
  expect_matches_reference(DType::Q3_K, b, y);
}

TEST(QuantBlocks, IQ4_NLHandMade) {
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::IQ4_NL, b, 32);
  const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kv[j]) << j;
    EXPECT_EQ(y[j + 16], 0.5f * kv[15 - j]) << j;
  }
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[7], -5.0f);
  EXPECT_EQ(y[8], 0.5f);
  EXPECT_EQ(y[16], 56.5f);
  expect_matches_reference(DType::IQ4_NL, b, y);
}

TEST(QuantBlocks, MXFP4HandMade) {
  // e = 128: the doubled E2M1 values times 2^0; e = 125: times 2^-3; e = 1: the subnormal 2^-127.
  std::vector<uint8_t> b(3 * 17);
  for (int blk = 0; blk < 3; ++blk) {
    b[blk * 17] = blk == 0 ? 128 : blk == 1 ? 125 : 1;
    for (int j = 0; j < 16; ++j) b[blk * 17 + 1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  const auto y = dequant(DType::MXFP4, b, 96);
  const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kv[j]) << j;
    EXPECT_EQ(y[j + 16], kv[15 - j]) << j;
    EXPECT_EQ(y[32 + j], kv[j] / 8.0f) << j;
    EXPECT_EQ(y[64 + j], kv[j] * std::ldexp(1.0f, -127)) << j;
  }
  EXPECT_EQ(y[7], 12.0f);   // code 7: 6 doubled
  EXPECT_EQ(y[16], -12.0f); // high nibble 15: -6 doubled
  expect_matches_reference(DType::MXFP4, b, y);
}

TEST(QuantBlocks, IQ4_XSHandMade) {
  std::vector<uint8_t> b(136);
  put16(b, 0, 0x3400);  // d = 0.25
  // ls_ib = 16 + 4 ib (ls - 32 = -16 .. 12): low 4 bits 0, 4, 8, 12, 0, 4, 8, 12 in nibbles of
  // scales_l; top 2 bits 1, 1, 1, 1, 2, 2, 2, 2 at bits 2ib of scales_h.
  put16(b, 2, 0xAA55);
  b[4] = 0x40, b[5] = 0xC8, b[6] = 0x40, b[7] = 0xC8;
  for (int k = 0; k < 128; ++k) b[8 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  const auto y = dequant(DType::IQ4_XS, b, 256);
  const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int e = 0; e < 256; ++e) {
    const int ib = e / 32, i = e % 32;
    const int nib = i < 16 ? i : 15 - (i - 16);
    EXPECT_EQ(y[e], 0.25f * (4 * ib - 16) * kv[nib]) << e;
  }
  EXPECT_EQ(y[0], 508.0f);    // -4 * -127
  EXPECT_EQ(y[40], -3.0f);    // ib 1: -3 * kv[8] = -3 * 1
  EXPECT_EQ(y[100], 49.0f);   // ib 3: -1 * kv[4]
  EXPECT_EQ(y[150], 0.0f);    // ib 4: ls - 32 = 0
  EXPECT_EQ(y[170], 25.0f);   // ib 5: 1 * kv[10]
  EXPECT_EQ(y[255], -381.0f); // ib 7: 3 * kv[0]
  expect_matches_reference(DType::IQ4_XS, b, y);
}

// Random blocks (every byte pattern, including all codes and scale bits), bit for bit.
TEST(QuantBlocks, NewTypesMatchReferenceDecoderOnRandomBlocks) {
  std::mt19937 rng(2024);
  for (DType t : specmoe::testing::kNewQuantTypes) {
    SCOPED_TRACE(dtype_name(t));
    for (int64_t blocks : {1, 3, 17}) {
      const auto b = specmoe::testing::ref_random_blocks(t, rng, blocks);
      const int64_t n = blocks * dtype_info(t).block_size;
      const auto y = dequant(t, b, n);
      int nonzero = 0;
      for (float v : y) nonzero += v != 0.0f;
      EXPECT_GT(nonzero, n / 2);
      expect_matches_reference(t, b, y);
    }
  }
}

TEST(QuantBlocks, FloatTypes) {
  const std::vector<float> x = {1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), 3.14159f};
  std::vector<uint8_t> b(x.size() * 4);
  quantize_row(DType::F32, x.data(), b.data(), 5);
  EXPECT_EQ(dequant(DType::F32, b, 5), x);
  quantize_row(DType::F16, x.data(), b.data(), 5);
  auto y = dequant(DType::F16, b, 5);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(y[4], 3.140625f);  // nearest half to pi-ish: 3 + 0.140625 (step 2^-9 * ... )
  quantize_row(DType::BF16, x.data(), b.data(), 5);
  y = dequant(DType::BF16, b, 5);
  EXPECT_EQ(y[1], -2.5f);
  EXPECT_EQ(y[4], 3.140625f);
}

// The dequantizer's inline half conversion must agree with fp16_to_fp32 on every bit pattern.
TEST(QuantBlocks, F16RowMatchesScalarConversionOnAllHalves) {
  std::vector<uint8_t> b(65536 * 2);
  for (uint32_t h = 0; h < 65536; ++h) put16(b, 2 * h, static_cast<uint16_t>(h));
  const auto y = dequant(DType::F16, b, 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ref = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(y[h])) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(y[h]), std::bit_cast<uint32_t>(ref)) << h;
    }
  }
}

TEST(QuantBlocks, RejectsPartialBlocks) {
  std::vector<float> x(300);
  std::vector<uint8_t> b(1024);
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), b.data(), 33), Error);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), b.data(), 100), Error);
  EXPECT_THROW(dequantize_row(DType::Q6_K, b.data(), x.data(), 255), Error);
  EXPECT_THROW(quantize_row(DType::Q5_0, x.data(), b.data(), 48), Error);
  EXPECT_THROW(quantize_row(DType::IQ4_XS, x.data(), b.data(), 128), Error);
  EXPECT_THROW(dequantize_row(DType::Q2_K, b.data(), x.data(), 96), Error);
}

// ---------------------------------------------------------------- round trips

namespace {

// Random data with a per-32 scale spread over 3 decades and occasional outliers, so blocks and
// sub-blocks have very different ranges (what real weight rows look like).
std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    const float scale = std::pow(10.0f, -2.0f + 3.0f * static_cast<float>(rng() % 1000) / 1000.0f);
    const float shift = (rng() % 4 == 0) ? scale : 0.0f;  // some blocks are not centred on zero
    for (int64_t j = b; j < b + 32; ++j) x[j] = shift + scale * normal(rng) * ((rng() % 64 == 0) ? 5.0f : 1.0f);
  }
  return x;
}

float amax_of(const float* x, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}
float range_of(const float* x, int64_t n) {
  float lo = x[0], hi = x[0];
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  return hi - lo;
}

// Per-element error bound of each format, derived from how it quantizes (see quant.cpp):
// half the code step from rounding, plus a full step where the format cannot represent one side
// exactly (Q4_0/Q6_K map the largest magnitude to -8/-32, so +amax clamps to 7/31), plus the
// fp16 rounding of the stored scales (relative 2^-11, times up to 63/127 code units: bounded
// by 2^-8 of the block's magnitude).
float error_bound(DType t, const float* x, int64_t e) {
  constexpr float kFp16 = 1.0f / 256.0f;
  switch (t) {
    case DType::F32: return 0.0f;
    case DType::F16: return std::fabs(x[e]) * std::ldexp(1.0f, -11) + std::ldexp(1.0f, -25);
    case DType::BF16: return std::fabs(x[e]) * std::ldexp(1.0f, -8);
    default: break;
  }
  const int64_t bs = dtype_info(t).block_size;
  const float* blk = x + e / bs * bs;
  const float A = amax_of(blk, bs);
  switch (t) {
    case DType::Q8_0: return 0.5f * A / 127.0f + kFp16 * A;
    case DType::Q4_0: return A / 8.0f + kFp16 * A;
    case DType::Q4_1: return 0.5f * range_of(blk, bs) / 15.0f + kFp16 * A;
    case DType::Q5_0: return A / 16.0f + kFp16 * A;  // as Q4_0 with codes [-16, 15]
    case DType::Q5_1: return 0.5f * range_of(blk, bs) / 31.0f + kFp16 * A;
    case DType::Q4_K:
    case DType::Q5_K: {
      // Sub-block step = range_s/qmax rounded up to a multiple of d = max step / 63, and the
      // 6-bit min is off by at most dmin/2 = (max |negative part|)/126, which clamping at code 0
      // or qmax turns into at most that much error.
      const int qmax = t == DType::Q4_K ? 15 : 31;
      const float* sub = x + e / 32 * 32;
      float max_step = 0.0f;
      for (int s = 0; s < 8; ++s) {
        const float* xs = blk + 32 * s;
        float lo = 0.0f, hi = xs[0];
        for (int l = 0; l < 32; ++l) lo = std::min(lo, xs[l]), hi = std::max(hi, xs[l]);
        max_step = std::max(max_step, (hi - lo) / qmax);
      }
      float lo = 0.0f, hi = sub[0];
      for (int l = 0; l < 32; ++l) lo = std::min(lo, sub[l]), hi = std::max(hi, sub[l]);
      const float step = (hi - lo) / qmax + max_step / 63.0f;
      return std::max(0.5f * step, A / 126.0f) + kFp16 * A;
    }
    case DType::Q6_K: {
      // Sub-block scale amax_s/32 is stored as an int8 multiple of d = max scale / 127: off by
      // d/2, which over 32 code units moves the edge by 16 d; plus the clamp at +31.
      const float As = amax_of(x + e / 16 * 16, 16);
      return As / 32.0f + 17.0f * A / (32.0f * 127.0f) + kFp16 * A;
    }
    default: return 0.0f;
  }
}

// Q2_K, Q3_K, IQ4_NL, IQ4_XS choose their scales by a search (least squares over candidates), so
// there is no simple closed-form bound per element; what the quantizers do promise is that, for
// the scales they stored, every element gets the code whose value is nearest to it. This checks
// exactly that, against the values of every code of the element (tests/quant_reference.h); the
// normalized MSE ceiling then judges the scales. The slack covers float rounding of 1/scale.
bool searched_scales(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::IQ4_NL || t == DType::IQ4_XS || t == DType::MXFP4;
}

double nearest_code_error(DType t, const uint8_t* row, const float* x, int64_t e) {
  const auto& info = dtype_info(t);
  const uint8_t* b = row + (e / info.block_size) * info.block_bytes;
  const int i = static_cast<int>(e % info.block_size);
  double best = INFINITY;
  for (int c = 0; c < specmoe::testing::ref_code_count(t); ++c)
    best = std::min(best, std::fabs(specmoe::testing::ref_value_of(t, b, i, c) - x[e]));
  return best;
}

}  // namespace

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, ErrorWithinFormatBound) {
  const DType t = GetParam();
  const int64_t bs = dtype_info(t).block_size;
  for (int64_t n : {32, 96, 256, 768}) {
    if (n % bs != 0) continue;
    SCOPED_TRACE(fmt::format("{} n={}", dtype_name(t), n));
    const auto x = random_row(n, static_cast<uint32_t>(n) * 31 + static_cast<uint32_t>(t));
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    double err2 = 0.0, sig2 = 0.0;
    int nonzero = 0;
    const float A = amax_of(x.data(), n);
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_TRUE(std::isfinite(y[e])) << e;
      const float bound = searched_scales(t)
                              ? static_cast<float>(nearest_code_error(t, q.data(), x.data(), e) * (1 + 1e-5)) + 1e-6f * A
                              : error_bound(t, x.data(), e) * 1.001f + 1e-12f;
      ASSERT_LE(std::fabs(y[e] - x[e]), bound) << "element " << e << " x=" << x[e] << " y=" << y[e];
      err2 += (y[e] - x[e]) * static_cast<double>(y[e] - x[e]);
      sig2 += static_cast<double>(x[e]) * x[e];
      nonzero += y[e] != 0.0f;
    }
    // Guard: the dequantized row is not trivially zero. Q3_K has no min and 6-bit signed sub-block
    // scales relative to the largest, so on this data (block scales spread over 3 decades) the
    // sub-blocks over 64x smaller than a super-block's largest quantize to zero (measured 73 of 256).
    EXPECT_GT(nonzero, t == DType::Q3_K ? n / 5 : n / 2);
    // Normalized MSE ceilings, about 2-4x the values measured on this data (F16 4e-8, BF16 3e-6,
    // Q8_0 5e-5, Q4_0 1.8e-2, Q4_1 9e-3, Q4_K 6.5e-3, Q5_K 1.2e-3, Q6_K 4.4e-4): they catch a
    // format that stays inside its per-element bound but is much worse on average. The error is
    // dominated by the blocks with the largest scale, whose uniform rounding noise is step^2/12.
    const double nmse = err2 / sig2;
    double ceiling = 0.0;
    switch (t) {
      case DType::F32: ceiling = 0.0; break;
      case DType::F16: ceiling = 2e-7; break;
      case DType::BF16: ceiling = 1e-5; break;
      case DType::Q8_0: ceiling = 2e-4; break;
      case DType::Q4_0: ceiling = 4e-2; break;
      case DType::Q4_1: ceiling = 2e-2; break;
      case DType::Q4_K: ceiling = 2e-2; break;
      case DType::Q5_K: ceiling = 4e-3; break;
      case DType::Q6_K: ceiling = 1.5e-3; break;
      // Measured: Q5_0 4.5e-3, Q5_1 2.3e-3, Q2_K 8.5e-2, Q3_K 4e-2, IQ4_NL 6e-3, IQ4_XS 9.7e-3.
      case DType::Q5_0: ceiling = 1.2e-2; break;
      case DType::Q5_1: ceiling = 6e-3; break;
      case DType::Q2_K: ceiling = 0.2; break;
      case DType::Q3_K: ceiling = 0.1; break;
      case DType::IQ4_NL: ceiling = 1.5e-2; break;
      case DType::IQ4_XS: ceiling = 2.5e-2; break;
      case DType::MXFP4: ceiling = 6e-2; break;  // E2M1 under a power-of-two scale
      default: break;
    }
    EXPECT_LE(nmse, ceiling);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0, DType::Q5_1,
                                           DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Finite weights at the ends of the float range: a block spanning -3e38 .. 3e38 overflows the
// range computations of the scale searches (hi - lo is infinite). The row must still quantize,
// without a float -> int conversion of NaN or infinity (CI runs this under UBSan), to the same
// bytes every time, and the blocks after it, of ordinary values, must not be touched by it.
TEST(QuantRoundTrip, BlocksSpanningTheFloatRangeQuantizeDeterministically) {
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,   DType::Q5_K,  DType::Q6_K,
                         DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS};
  std::vector<float> x(512);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  for (int i = 0; i < 256; i += 7) x[static_cast<size_t>(i)] = (i % 2 ? -3.0e38f : 3.0e38f);
  for (DType t : types) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<uint8_t> q1(dtype_row_bytes(t, 512)), q2(q1.size(), 0xAA);
    quantize_row(t, x.data(), q1.data(), 512);
    quantize_row(t, x.data(), q2.data(), 512);
    EXPECT_EQ(q1, q2);
    // The second 256 elements, quantized alone, give the second half of the row's bytes.
    std::vector<uint8_t> tail(dtype_row_bytes(t, 256));
    quantize_row(t, x.data() + 256, tail.data(), 256);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), q1.begin() + static_cast<std::ptrdiff_t>(q1.size() - tail.size())));
    std::vector<float> y(256, NAN);
    dequantize_row(t, tail.data(), y.data(), 256);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], x[256 + i], 2.5f) << i;  // 4 sigma of N(0, 1) at 2+ bits
  }
}

TEST(QuantRoundTrip, ZeroAndConstantBlocks) {
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,   DType::Q5_K,  DType::Q6_K,
                         DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS};
  for (DType t : types) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<float> zeros(256, 0.0f), y(256, NAN);
    std::vector<uint8_t> q(dtype_row_bytes(t, 256));
    quantize_row(t, zeros.data(), q.data(), 256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f);
    std::vector<float> c(256, -3.0f);
    quantize_row(t, c.data(), q.data(), 256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_NEAR(v, -3.0f, 3.0f / 256.0f);  // fp16 scale rounding only
  }
}
