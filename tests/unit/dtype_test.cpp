// Element type table and the exact half / bfloat16 conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "base/error.h"
#include "kernels/dtype.h"

using namespace specmoe;

namespace {
float bits_to_float(uint32_t b) { return std::bit_cast<float>(b); }
}  // namespace

TEST(DType, TableMatchesGgml) {
  struct Row {
    DType t;
    uint32_t id;
    const char* name;
    int64_t block;
    size_t bytes;
  };
  const Row rows[] = {{DType::F32, 0, "F32", 1, 4},       {DType::F16, 1, "F16", 1, 2},
                      {DType::Q4_0, 2, "Q4_0", 32, 18},   {DType::Q4_1, 3, "Q4_1", 32, 20},
                      {DType::Q8_0, 8, "Q8_0", 32, 34},   {DType::Q4_K, 12, "Q4_K", 256, 144},
                      {DType::Q5_K, 13, "Q5_K", 256, 176}, {DType::Q6_K, 14, "Q6_K", 256, 210},
                      {DType::BF16, 30, "BF16", 1, 2},     {DType::Q5_0, 6, "Q5_0", 32, 22},
                      {DType::Q5_1, 7, "Q5_1", 32, 24},    {DType::Q2_K, 10, "Q2_K", 256, 84},
                      {DType::Q3_K, 11, "Q3_K", 256, 110}, {DType::IQ4_NL, 20, "IQ4_NL", 32, 18},
                      {DType::IQ4_XS, 23, "IQ4_XS", 256, 136}, {DType::MXFP4, 39, "MXFP4", 32, 17},
                      {DType::IQ2_XXS, 16, "IQ2_XXS", 256, 66}, {DType::IQ2_XS, 17, "IQ2_XS", 256, 74},
                      {DType::IQ3_XXS, 18, "IQ3_XXS", 256, 98}, {DType::IQ1_S, 19, "IQ1_S", 256, 50},
                      {DType::IQ3_S, 21, "IQ3_S", 256, 110},    {DType::IQ2_S, 22, "IQ2_S", 256, 82},
                      {DType::IQ1_M, 29, "IQ1_M", 256, 56},     {DType::TQ1_0, 34, "TQ1_0", 256, 54},
                      {DType::TQ2_0, 35, "TQ2_0", 256, 66}};
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto info = dtype_info(r.id);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->type, r.t);
    EXPECT_STREQ(info->name, r.name);
    EXPECT_EQ(info->block_size, r.block);
    EXPECT_EQ(info->block_bytes, r.bytes);
    EXPECT_EQ(dtype_info(r.t).block_bytes, r.bytes);
    EXPECT_STREQ(dtype_name(r.t), r.name);
  }
  // Q8_1 and Q8_K (activation formats), I8, I16, F64, removed ids, NVFP4, Q1_0, Q2_0, unknown.
  for (uint32_t id : {4u, 9u, 15u, 24u, 25u, 28u, 31u, 40u, 41u, 42u, 77u, 0xffffffffu})
    EXPECT_FALSE(dtype_info(id).has_value()) << id;
}

TEST(DType, FromNameIsCaseInsensitive) {
  EXPECT_EQ(dtype_from_name("f16"), DType::F16);
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(dtype_from_name("q6_k"), DType::Q6_K);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_EQ(dtype_from_name("iq4_xs"), DType::IQ4_XS);
  EXPECT_EQ(dtype_from_name("Q5_0"), DType::Q5_0);
  EXPECT_FALSE(dtype_from_name("q4_k_m").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
  EXPECT_FALSE(dtype_from_name("f3").has_value());
}

TEST(DType, RowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::F32, 17), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 1), 2u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 96), 3u * 34u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 32), 18u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 768), 3u * 144u);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_K, 0), 0u);
  try {
    dtype_row_bytes(DType::Q4_K, 100);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("100"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("Q4_K block size 256"), std::string::npos);
  }
  EXPECT_THROW(dtype_row_bytes(DType::Q8_0, 33), Error);
  EXPECT_THROW(dtype_row_bytes(DType::F32, -1), Error);
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);   // below the halfway point 65520
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);   // tie: 0x7BFF is odd, rounds up to Inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);   // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);   // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);   // tie between 0 and 2^-24 -> even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);   // 1.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);   // 2.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up out of the subnormals
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);      // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(fp32_to_fp16(2.0f - std::ldexp(1.0f, -12)), 0x4000);      // mantissa carry into exponent
  const uint16_t nan = fp32_to_fp16(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A NaN whose payload sits only in the low bits must stay NaN, not become Inf.
  const uint16_t low_nan = fp32_to_fp16(bits_to_float(0x7F800001u));
  EXPECT_NE(low_nan & 0x03FF, 0);

  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x7C00), INFINITY);
  EXPECT_EQ(fp16_to_fp32(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(fp16_to_fp32(0x8000), 0.0f);
}

TEST(Fp16, EveryHalfRoundTrips) {
  int checked = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) << h;
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2046);  // 2 * 1023 NaN encodings
}

// Random floats against an independent rounding: the nearest of the two neighbouring halves
// computed in double, ties to the even one.
TEST(Fp16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(42);
  auto reference = [](float f) -> uint16_t {
    const double x = std::fabs(static_cast<double>(f));
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (x >= 65520.0) return sign | 0x7C00;
    // Halves are monotone in their bit pattern: binary search the largest h with value <= x.
    uint16_t lo = 0, hi = 0x7BFF;
    while (lo < hi) {
      const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
      if (static_cast<double>(fp16_to_fp32(mid)) <= x) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
    }
    const double below = fp16_to_fp32(lo);
    const double above = lo == 0x7BFF ? 65536.0 : static_cast<double>(fp16_to_fp32(static_cast<uint16_t>(lo + 1)));
    if (x - below < above - x) return sign | lo;
    if (x - below > above - x) return sign | static_cast<uint16_t>(lo + 1);
    return sign | ((lo & 1) ? static_cast<uint16_t>(lo + 1) : lo);
  };
  for (int k = 0; k < 200000; ++k) {
    // Exponents spread over the half range and beyond it on both sides.
    const uint32_t exp = 95 + rng() % 50;
    const uint32_t bits = (rng() & 0x80000000u) | (exp << 23) | (rng() & 0x7FFFFFu);
    const float f = bits_to_float(bits);
    ASSERT_EQ(fp32_to_fp16(f), reference(f)) << std::hex << bits;
  }
}

TEST(Bf16, RoundingAndSpecials) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3F808000u)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x00000001u)), 0x0000);  // tiny subnormal rounds to 0
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x00018000u)), 0x0002);  // subnormal tie -> even
  const uint16_t nan = fp32_to_bf16(bits_to_float(0x7F800001u));  // payload only in low bits
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC0A0), -5.0f);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << h;
  }
}
