// exp for the softmaxes of attention: glibc's expf algorithm (Szabolcs Nagy's, glibc 2.28 and
// later, sysdeps/ieee754/flt-32/e_expf.c) in the operation order of glibc's x86-64 FMA build,
// which every x86-64 machine with FMA runs for expf. In double: x / ln2 * 32 = k + r with k an
// integer (rounded through a shifter), 2^(k/32) from a 32-entry table with k / 32 added to its
// exponent, 2^(r/32) by a cubic, the product rounded to float once.
//
// Written here, not called from libm, so that the scalar and the SIMD versions give one set of
// bits on every machine whatever its libm (and on this project's machines the same bits as the
// expf the attention softmax used to call: `ExpF32.MatchesThisLibmsExpf` compares them; all
// 2^32 inputs were compared once, no difference), and so the softmax can run 4-8 exps per
// instruction: libm's scalar call was a fifth of a 9-token attention at context 512.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace specmoe::kernels::cpu {

namespace expf_detail {
// tab[i] = the bits of 2^(i/32) (rounded to double) minus i << 47: adding k << 47 to entry
// k mod 32 gives 2^(k/32) with the whole part of k / 32 in the exponent.
extern const uint64_t kTable[32];
constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;                     // z + kShift rounds z to an integer
// 2^(r/32) ~ 1 + C2 r + C1 r^2 + C0 r^3 (the minimax cubic of 2^r scaled by 1/32 per power).
constexpr double kC0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32;
constexpr double kC1 = 0x1.ebfce50fac4f3p-3 / 32 / 32;
constexpr double kC2 = 0x1.62e42ff0c52d6p-1 / 32;
// Above kOverflow exp rounds to +inf, below kUnderflow to +0.
constexpr float kOverflow = 0x1.62e42ep6f, kUnderflow = -0x1.9fe368p6f;
}  // namespace expf_detail

// e^x rounded to float as described above: +0 for -inf and below kUnderflow, +inf above
// kOverflow, NaN for NaN (x + x, glibc's quieting).
inline float exp_f32(float x) {
  using namespace expf_detail;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (((bits >> 20) & 0x7ff) >= 0x42b) {  // |x| >= 88, inf or NaN
    if (x != x) return x + x;
    if (x > kOverflow) return INFINITY;
    if (x < kUnderflow) return 0.0f;
  }
  const double xd = x;
  const double z = kInvLn2N * xd;
  double kd = z + kShift;
  uint64_t ki;
  std::memcpy(&ki, &kd, 8);
  kd -= kShift;
  const double r = std::fma(kInvLn2N, xd, -kd);  // glibc's FMA build fuses z - kd with z's product
  uint64_t t = kTable[ki % 32] + (ki << 47);
  double s;
  std::memcpy(&s, &t, 8);
  const double p = std::fma(kC0, r, kC1), r2 = r * r;
  double y = std::fma(kC2, r, 1.0);
  y = std::fma(p, r2, y);
  return static_cast<float>(y * s);
}

// x[i] = exp_f32(x[i] - shift) for i < n (the subtraction in float), 8 at a time where the CPU has
// AVX2 + FMA, 16 with AVX-512: the same bits either way.
void exp_shifted(float* x, int64_t n, float shift);
enum class Isa;
// The same on a given instruction set (or the best usable below it): for tests and benchmarks.
void exp_shifted_on(Isa isa, float* x, int64_t n, float shift);

}  // namespace specmoe::kernels::cpu
