// Element type table (ggml's block sizes and bytes, ggml-common.h) and exact scalar
// half-precision conversions.
#include "kernels/dtype.h"

#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <string>

#include "base/error.h"

namespace specmoe {
namespace {

// Block layouts as in ggml-common.h: Q4_0 = fp16 d + 16 B nibbles; Q4_1 = d, m + 16 B;
// Q5_0 = d, 4 B fifth bits, 16 B nibbles; Q5_1 = d, m, 4 B, 16 B; Q8_0 = d + 32 int8;
// Q2_K = 16 B 4-bit scale/min pairs, 64 B 2-bit codes, d, dmin; Q3_K = 32 B high bits, 64 B 2-bit
// codes, 12 B packed 6-bit scales, d; Q4_K = d, dmin, 12 B packed 6-bit scales/mins, 128 B
// nibbles; Q5_K = Q4_K + 32 B high bits; Q6_K = 128 B low nibbles, 64 B high 2 bits, 16 int8
// scales, d; IQ4_NL = d + 16 B nibbles (indices into a 16-value table); IQ4_XS = d, 2 B high and
// 4 B low scale bits, 128 B nibbles; MXFP4 = E8M0 scale byte + 16 B E2M1 nibbles.
constexpr std::array<DTypeInfo, 16> kTypes = {{
    {DType::F32, "F32", 1, 4},
    {DType::F16, "F16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},
    {DType::Q4_1, "Q4_1", 32, 20},
    {DType::Q5_0, "Q5_0", 32, 22},
    {DType::Q5_1, "Q5_1", 32, 24},
    {DType::Q8_0, "Q8_0", 32, 34},
    {DType::Q2_K, "Q2_K", 256, 84},
    {DType::Q3_K, "Q3_K", 256, 110},
    {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176},
    {DType::Q6_K, "Q6_K", 256, 210},
    {DType::IQ4_NL, "IQ4_NL", 32, 18},
    {DType::IQ4_XS, "IQ4_XS", 256, 136},
    {DType::MXFP4, "MXFP4", 32, 17},
    {DType::BF16, "BF16", 1, 2},
}};
// Formats read but never written (kernels/cpu/quant_iq.cpp has their layouts), outside kTypes so
// that no name lookup offers them as a quantization target.
constexpr std::array<DTypeInfo, 9> kReadTypes = {{
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {DType::IQ2_XS, "IQ2_XS", 256, 74},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {DType::IQ1_S, "IQ1_S", 256, 50},
    {DType::IQ3_S, "IQ3_S", 256, 110},
    {DType::IQ2_S, "IQ2_S", 256, 82},
    {DType::IQ1_M, "IQ1_M", 256, 56},
    {DType::TQ1_0, "TQ1_0", 256, 54},
    {DType::TQ2_0, "TQ2_0", 256, 66},
}};
// Integer element types, outside kTypes so that no name lookup offers them as a weight type.
constexpr std::array<DTypeInfo, 2> kIntTypes = {{
    {DType::I32, "I32", 1, 4},
    {DType::I64, "I64", 1, 8},
}};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t type_id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  for (const auto& t : kReadTypes)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  for (const auto& t : kIntTypes)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  for (const auto& t : kReadTypes)
    if (t.type == type) return t;
  for (const auto& t : kIntTypes)
    if (t.type == type) return t;
  throw_error(ErrorKind::InvalidArgument, "unknown dtype id {}", static_cast<uint32_t>(type));
}

const char* dtype_name(DType type) { return dtype_info(type).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    std::string_view tn = t.name;
    if (tn.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < tn.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == static_cast<unsigned char>(tn[i]);
    if (same) return t.type;
  }
  return std::nullopt;
}

const char* dtype_supported_names() {
  static const std::string names = [] {
    std::string s;
    for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
  }();
  return names.c_str();
}

const char* dtype_readable_names() {
  static const std::string names = [] {
    std::string s = dtype_supported_names();
    for (const auto& t : kReadTypes) s += ", " + std::string(t.name);
    return s;
  }();
  return names.c_str();
}

bool dtype_is_read_only(DType t) {
  for (const auto& r : kReadTypes)
    if (r.type == t) return true;
  return false;
}

size_t dtype_row_bytes(DType type, int64_t n) {
  const DTypeInfo& info = dtype_info(type);
  if (n < 0 || n % info.block_size != 0)
    throw_error(ErrorKind::InvalidArgument, "a row of {} elements is not a multiple of the {} block size {}", n,
                info.name, info.block_size);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exact in float.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    bits = std::bit_cast<uint32_t>(v) | sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // Inf, or NaN keeping its payload
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    // NaN: keep the top payload bits and force the quiet bit so it cannot become Inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504) and 65536; ties-to-even rounds up to Inf.
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax >= 0x38800000u) {  // normal half range (>= 2^-14)
    // Round to nearest even on the 13 dropped mantissa bits; a carry moves into the exponent.
    const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25 (half of the smallest subnormal) -> 0 (ties to even)
  // Subnormal half: result = round(value * 2^24) = round(m >> shift), m with the implicit bit.
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24 for e in [102, 112]
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | q);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // ties to even; overflow -> Inf
}

}  // namespace specmoe
