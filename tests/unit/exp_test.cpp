// exp_f32 and exp_shifted (kernels/cpu/exp.h): the SIMD version gives the scalar one's bits, both
// give this machine's libm expf where that is glibc's x86-64 FMA build (this project's machines),
// and the special inputs give what expf gives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/exp.h"
#include "kernels/cpu/ops.h"

namespace cpu = specmoe::kernels::cpu;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every 997th bit pattern (all signs, exponents and NaNs), every float in [-104, 89] at a step of
// 2^-12 relative, the boundaries, and the two inputs (of all 2^32) where computing r = z - kd
// unfused (glibc's build without FMA) gives a result one ulp off.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 997) xs.push_back(from_bits(static_cast<uint32_t>(u)));
  for (float x = -104.0f; x < 89.0f; x = std::nextafter(x, 90.0f) + std::abs(x) * 0x1p-12f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, -88.0f, cpu::expf_detail::kOverflow, cpu::expf_detail::kUnderflow,
                  std::nextafter(cpu::expf_detail::kOverflow, 100.0f), std::nextafter(cpu::expf_detail::kUnderflow, -200.0f),
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                  from_bits(0x4202422f), from_bits(0xc27c65d9)})
    xs.push_back(x);
  return xs;
}

bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

bool libm_is_glibc_fma_build() {
#if defined(__GLIBC__) && defined(__x86_64__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 28)
  return __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

}  // namespace

// On every instruction set this CPU has (AVX2: a gather per 4 table entries; AVX-512: permutes).
TEST(ExpF32, ShiftedVectorsMatchTheScalarVersionBitForBit) {
  const std::vector<float> xs = sweep();
  ASSERT_GT(xs.size(), 4'000'000u);
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (cpu::usable_isa(isa) != isa) continue;
    for (float shift : {0.0f, 3.25f, -17.5f}) {
      // Lengths that leave every tail of the 8- and 16-wide loops.
      for (size_t n : {xs.size(), size_t{1}, size_t{7}, size_t{13}, size_t{31}}) {
        std::vector<float> v(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n));
        cpu::exp_shifted_on(isa, v.data(), static_cast<int64_t>(n), shift);
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(same(v[i], cpu::exp_f32(xs[i] - shift)))
              << cpu::isa_name(isa) << ": x = " << xs[i] << " shift " << shift << ": " << v[i] << " vs "
              << cpu::exp_f32(xs[i] - shift);
      }
    }
  }
}

TEST(ExpF32, SpecialInputs) {
  EXPECT_EQ(bits(cpu::exp_f32(0.0f)), bits(1.0f));
  EXPECT_EQ(bits(cpu::exp_f32(-0.0f)), bits(1.0f));
  EXPECT_EQ(bits(cpu::exp_f32(-std::numeric_limits<float>::infinity())), bits(0.0f));
  EXPECT_EQ(cpu::exp_f32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(cpu::exp_f32(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(cpu::exp_f32(-104.0f)), bits(0.0f));
  EXPECT_EQ(cpu::exp_f32(-103.0f), std::exp(-103.0f));  // a subnormal result
  EXPECT_GT(cpu::exp_f32(-103.0f), 0.0f);
  EXPECT_FLOAT_EQ(cpu::exp_f32(1.0f), 2.7182817f);
}

// The same bits as this machine's expf: all of them on glibc 2.28+ for x86-64 with FMA (whose
// expf is the algorithm exp_f32 follows, in its FMA build's operation order); within one ulp of
// any other libm's.
TEST(ExpF32, MatchesThisLibmsExpf) {
  const std::vector<float> xs = sweep();
  const bool exact = libm_is_glibc_fma_build();
  size_t differ = 0;
  for (float x : xs) {
    const float ours = cpu::exp_f32(x), libm = std::exp(x);
    if (same(ours, libm)) continue;
    ++differ;
    ASSERT_FALSE(exact) << "x = " << x << " (bits " << std::hex << bits(x) << "): " << ours << " vs expf " << libm;
    ASSERT_LE(std::abs(static_cast<int64_t>(bits(ours)) - static_cast<int64_t>(bits(libm))), 1) << "x = " << x;
  }
  if (!exact) GTEST_LOG_(INFO) << differ << " of " << xs.size() << " inputs one ulp from this libm's expf";
}
