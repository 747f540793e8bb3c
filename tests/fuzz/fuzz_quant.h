// Fuzz entry point of the block decoders (target fuzz_quant): arbitrary bytes read as rows of
// every tensor type, through dequantize_row, get_rows_ref, the quantizers and a small matmul of
// every CPU path against matmul_ref. Shared by tests/fuzz/quant_fuzz.cpp and the regression
// replay (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: byte 0 picks the type (index into kQuantTypes), byte 1 the shape (bits 0-1: T - 1
// tokens; bits 2-7: the row length, in blocks for block types and in elements for float types),
// byte 2 the activations (kind and seed); the rest are the weight rows (up to 8; zero-padded to
// one row when short).
//
// Oracles (the block layouts are ggml's, ggml-common.h):
//  - dequantizing a whole matrix, each row and each block alone give the same floats;
//  - F16 and BF16 match the exact scalar conversions bit for bit (NaN payloads included), F32
//    is a copy;
//  - a block type's values are finite whenever its fp16 scales are (they are the only floats
//    in a block: everything else is small integers); MXFP4's whenever its E8M0 scale byte times
//    the largest code is (2^(e - 128) x 12: e <= 252);
//  - get_rows_ref returns the dequantized rows and rejects ids outside [0, rows);
//  - with finite weights and activations whose products sum far below FLT_MAX, matmul_ref is
//    finite and every matmul path (scalar, AVX2 float, AVX2 integer with 8-bit activations,
//    AVX-512) is within the bound kernels_test proves for it, and AVX-512 equals AVX2 bit for
//    bit; other weights may give NaN or infinities, never a crash;
//  - for the packed types (kernels/cpu/packed.h), on every integer path, every output equals
//    quant_dot_ref bit for bit (NaN for NaN), with the view's packed copy and without it; float
//    weights with a packed copy give the row-major kernels' bits; a packed row dequantizes to
//    the file's row bit for bit;
//  - quantizing finite rows of moderate range gives finite values within twice the largest
//    magnitude of each block's input, with quantize_row and with ggml's reference quantizers
//    (quantize_row_ggml) alike.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "fuzz_entry.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"

namespace specmoe::fuzz {

inline constexpr DType kQuantTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                                        DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,   DType::Q3_K,
                                        DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                                        DType::MXFP4,                                     // appended: byte 0 below 15 keeps its type
                                        DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                                        DType::IQ1_S, DType::IQ1_M, DType::TQ1_0, DType::TQ2_0};  // read only

// Byte offsets of the fp16 scales in one block (ggml-common.h block_* structs).
inline std::vector<size_t> fp16_scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: case DType::IQ4_NL: case DType::IQ4_XS: return {0};
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: return {0};
    case DType::TQ1_0: return {52};
    case DType::TQ2_0: return {64};
    default: return {};  // IQ1_M: its fp16 d is the top nibbles of bytes 49, 51, 53, 55 (iq1_m_half)
  }
}

// IQ1_M's fp16 d, gathered from the top nibbles of its four scale words.
inline uint16_t iq1_m_half(const uint8_t* blk) {
  return static_cast<uint16_t>((blk[49] >> 4) | ((blk[51] >> 4) << 4) | ((blk[53] >> 4) << 8) | ((blk[55] >> 4) << 12));
}
// The inverse: h written into those nibbles, the 3-bit scales below kept.
inline void set_iq1_m_half(uint8_t* blk, uint16_t h) {
  for (int w = 0; w < 4; ++w) blk[49 + 2 * w] = static_cast<uint8_t>((blk[49 + 2 * w] & 0x0F) | (((h >> (4 * w)) & 0xF) << 4));
}

// The block size of the 8-bit activations the AVX2 integer path multiplies with (0: that path
// multiplies in float), as kernels/cpu/ops.h documents it.
inline int64_t act_block_of(DType type, kernels::cpu::Isa isa) {
  if (kernels::cpu::usable_isa(isa) == kernels::cpu::Isa::Scalar) return 0;  // Avx512 multiplies as Avx2
  switch (type) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL:
    case DType::MXFP4:
      return 32;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::TQ1_0: case DType::TQ2_0:
      return 256;
    default: return 0;
  }
}

// The bound of tests/unit/kernels_test.cpp (matmul_tolerance): two float summation orders differ
// by at most 2 (n+1) eps sum|x_i w_i| (Wilkinson), and 8-bit activations per block of B change a
// product by at most sum over blocks of amax_B / 127 / 2 * sum_B |w_i|; 1.01 and the doubled
// order bound cover the rounding of the scales. Blocks of 32 store their activation scale
// d = amax / 127 as fp16 (block_q8_0's d, Q8_1's s = d * sum(q), as llama.cpp): d is off by at
// most 2^-11 d, or by 2^-25 where it is subnormal or underflows to zero (amax below ~4e-6, which
// zeroes the block's whole contribution, as in llama.cpp), and each of the 32 codes is at most
// 127; the sum term (Q4_1, Q5_1) scales with the min, at most the largest |w| of the block. `w` here is each weight's magnitude as the
// paths compute it (weight_magnitudes): for the types with a min the two terms d*q and m are
// summed separately, and their rounding errors scale with |d*q| + |m| even where they cancel.
inline double matmul_bound(DType type, kernels::cpu::Isa isa, const float* x, const float* w, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(x[i]) * w[i]);
  const double order = 2.0 * static_cast<double>(n + 1) * FLT_EPSILON * s + 1e-30;
  const int64_t B = act_block_of(type, isa);
  if (B == 0) return order;
  double act = 0.0;
  for (int64_t b = 0; b < n; b += B) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t i = b; i < b + B; ++i) amax = std::max(amax, static_cast<double>(std::fabs(x[i]))), wsum += std::fabs(w[i]);
    act += amax / 127.0 / 2.0 * wsum;
    if (B == 32) {
      double wmax = 0.0;
      for (int64_t i = b; i < b + B; ++i) wmax = std::max(wmax, static_cast<double>(w[i]));
      act += (std::ldexp(amax, -11) + 127.0 * std::ldexp(1.0, -25)) * (wsum + 32.0 * wmax);
    }
  }
  return 1.01 * act + 2.0 * order;
}

// Per weight, |d*q| + |m| for the types whose blocks hold a scale and a min (the second fp16 of
// fp16_scale_offsets: Q4_1, Q5_1, Q2_K, Q4_K, Q5_K; dequantized with the min zeroed, then with
// the scale zeroed), else |w|. A block of d == dmin with sc*q == m dequantizes to exact zeros
// while the integer path's two sums cancel only to rounding (fuzz_quant found such a Q2_K block).
// MXFP4: the block's scale times its largest code (2^(e - 128) x 12) for each weight, since the
// integer path multiplies the scale by the activations' before the codes: a block of zero codes
// under e = 255 dequantizes to zeros, while its scale times the activations' overflows (NaN, as
// in ggml's dot; fuzz_quant found such a block).
inline std::vector<float> weight_magnitudes(DType type, const uint8_t* w, size_t w_bytes, const std::vector<float>& deq) {
  const std::vector<size_t> scales = fp16_scale_offsets(type);
  std::vector<float> mag(deq.size());
  if (type == DType::MXFP4) {
    const DTypeInfo& info = dtype_info(type);
    for (size_t i = 0; i < deq.size(); ++i)
      mag[i] = std::ldexp(12.0f, static_cast<int>(w[i / info.block_size * info.block_bytes]) - 128);
    return mag;
  }
  if (scales.size() != 2) {
    for (size_t i = 0; i < deq.size(); ++i) mag[i] = std::fabs(deq[i]);
    return mag;
  }
  const DTypeInfo& info = dtype_info(type);
  std::vector<float> scale_part(deq.size()), min_part(deq.size());
  for (int part = 0; part < 2; ++part) {
    std::vector<uint8_t> copy(w, w + w_bytes);
    for (size_t b = 0; b + info.block_bytes <= w_bytes; b += info.block_bytes) std::memset(&copy[b + scales[1 - part]], 0, 2);
    kernels::cpu::dequantize_row(type, copy.data(), (part == 0 ? scale_part : min_part).data(),
                                 static_cast<int64_t>(deq.size()));
  }
  for (size_t i = 0; i < deq.size(); ++i) mag[i] = std::fabs(scale_part[i]) + std::fabs(min_part[i]);
  return mag;
}

inline bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

inline Outcome run_quant(std::span<const uint8_t> bytes) {
  namespace cpu = kernels::cpu;
  if (bytes.size() < 3) return Outcome::Rejected;
  const DType type = kQuantTypes[bytes[0] % std::size(kQuantTypes)];
  const DTypeInfo& info = dtype_info(type);
  const int64_t T = 1 + (bytes[1] & 3);
  const int64_t units = 1 + (bytes[1] >> 2);  // 1..64
  const int64_t n_in = info.block_size == 1 ? units : info.block_size * (1 + (units - 1) % 4);
  const size_t row_bytes = dtype_row_bytes(type, n_in);
  const std::span<const uint8_t> payload = bytes.subspan(3);
  const int64_t n_out = std::clamp<int64_t>(static_cast<int64_t>(payload.size() / row_bytes), 1, 8);
  // Exact-size heap buffer, so AddressSanitizer sees a read past the last row.
  const size_t w_bytes = row_bytes * static_cast<size_t>(n_out);
  std::unique_ptr<uint8_t[]> w(new uint8_t[w_bytes]);
  std::memset(w.get(), 0, w_bytes);
  std::memcpy(w.get(), payload.data(), std::min(payload.size(), w_bytes));
  const std::string what = fmt::format("{} [{} x {}]", info.name, n_out, n_in);

  // Dequantized: whole, per row, per block.
  const size_t n_all = static_cast<size_t>(n_in * n_out);
  std::vector<float> deq(n_all), part(n_all);
  cpu::dequantize_row(type, w.get(), deq.data(), n_in * n_out);
  for (int64_t r = 0; r < n_out; ++r)
    cpu::dequantize_row(type, w.get() + r * row_bytes, part.data() + r * n_in, n_in);
  SPECMOE_FUZZ_CHECK(std::memcmp(deq.data(), part.data(), n_all * 4) == 0, what + ": a matrix and its rows dequantize differently");
  const int64_t n_blocks = (n_in * n_out) / info.block_size;
  for (int64_t b = 0; b < n_blocks; ++b)
    cpu::dequantize_row(type, w.get() + b * info.block_bytes, part.data() + b * info.block_size, info.block_size);
  SPECMOE_FUZZ_CHECK(std::memcmp(deq.data(), part.data(), n_all * 4) == 0, what + ": a row and its blocks dequantize differently");

  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = w.get() + b * info.block_bytes;
    const float* y = deq.data() + b * info.block_size;
    if (type == DType::F32) {
      SPECMOE_FUZZ_CHECK(std::memcmp(y, blk, 4) == 0, what + ": F32 is not a copy");
    } else if (type == DType::F16 || type == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, blk, 2);
      const float exact = type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      SPECMOE_FUZZ_CHECK(std::memcmp(y, &exact, 4) == 0,
                         fmt::format("{}: 0x{:04x} dequantizes to {} (exact {})", what, h, *y, exact));
    } else {
      // MXFP4: the E8M0 byte e scales the doubled codes (at most 12) by 2^(e - 128), ggml's half scale.
      bool scales_finite = type != DType::MXFP4 || std::isfinite(std::ldexp(12.0f, static_cast<int>(blk[0]) - 128));
      if (type == DType::IQ1_M) scales_finite = std::isfinite(fp16_to_fp32(iq1_m_half(blk)));
      for (size_t off : fp16_scale_offsets(type)) {
        uint16_t h;
        std::memcpy(&h, blk + off, 2);
        scales_finite &= std::isfinite(fp16_to_fp32(h));
      }
      if (scales_finite)
        for (int64_t i = 0; i < info.block_size; ++i)
          SPECMOE_FUZZ_CHECK(std::isfinite(y[i]), fmt::format("{}: block {} has finite scales but element {} is {}",
                                                              what, b, i, y[i]));
    }
  }

  // Row lookups: the dequantized rows, and out-of-range ids rejected.
  const kernels::MatrixView view = kernels::MatrixView::make(type, w.get(), n_in, n_out);
  {
    std::vector<float> rows(static_cast<size_t>(n_in));
    const int32_t last = static_cast<int32_t>(n_out - 1);
    cpu::get_rows_ref(view, &last, 1, rows.data());
    SPECMOE_FUZZ_CHECK(std::memcmp(rows.data(), deq.data() + last * n_in, static_cast<size_t>(n_in) * 4) == 0,
                       what + ": get_rows_ref differs from dequantize_row");
    for (int32_t bad : {-1, static_cast<int32_t>(n_out)}) {
      try {
        cpu::get_rows_ref(view, &bad, 1, rows.data());
        SPECMOE_FUZZ_CHECK(false, fmt::format("{}: get_rows_ref accepted id {}", what, bad));
      } catch (const Error& e) {
        SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, what + ": get_rows_ref threw the wrong kind");
      }
    }
  }

  // Activations: byte 2 low bits pick the kind, the rest seed them.
  std::vector<float> x(static_cast<size_t>(T * n_in));
  std::mt19937 rng(bytes[2]);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    switch (bytes[2] & 3) {
      case 0: x[i] = normal(rng); break;
      case 1: x[i] = 0.0f; break;
      case 2: x[i] = i % 37 == 5 ? 1000.0f : normal(rng) * 1e-3f; break;  // one large value per block
      default: x[i] = normal(rng) * 1e-30f; break;                          // subnormal products
    }
  }
  std::vector<float> ref(static_cast<size_t>(T * n_out));
  cpu::matmul_ref(x.data(), T, view, ref.data());
  const bool finite_weights = all_finite(deq);
  const std::vector<float> mag = weight_magnitudes(type, w.get(), w_bytes, deq);
  const bool finite_mag = all_finite(mag);
  // Where sum |x_i| mag_i stays far below FLT_MAX no partial sum can overflow: the output must be
  // finite, and within the bound of the path. Elsewhere (huge F32/F16 weights) only no crash.
  auto bounded = [&](int64_t t, int64_t j) {
    double s = 0.0;
    for (int64_t i = 0; i < n_in; ++i) s += std::fabs(static_cast<double>(x[t * n_in + i])) * mag[j * n_in + i];
    return finite_weights && finite_mag && s < 1e36;
  };
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < n_out; ++j)
      if (bounded(t, j))
        SPECMOE_FUZZ_CHECK(std::isfinite(ref[t * n_out + j]), what + ": matmul_ref of bounded weights is not finite");
  static cpu::ThreadPool pool(2);
  std::vector<float> y_avx2;
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512, cpu::Isa::Amx}) {
    if (cpu::usable_isa(isa) != isa) continue;
    std::vector<float> y(ref.size(), -7.0f);
    cpu::matmul(pool, x.data(), T, view, y.data(), isa);
    // kernels/cpu/ops.h: the AVX-512 and AMX kernels give the AVX2 results bit for bit, NaN included.
    if (isa == cpu::Isa::Avx2) y_avx2 = y;
    if (isa >= cpu::Isa::Avx512 && !y_avx2.empty())
      SPECMOE_FUZZ_CHECK(std::memcmp(y.data(), y_avx2.data(), y.size() * sizeof(float)) == 0,
                         fmt::format("{}: matmul ({}) differs from matmul (avx2)", what, cpu::isa_name(isa)));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < n_out; ++j) {
        if (!bounded(t, j)) continue;
        const float got = y[t * n_out + j], want = ref[t * n_out + j];
        const double bound = matmul_bound(type, isa, x.data() + t * n_in, mag.data() + j * n_in, n_in);
        SPECMOE_FUZZ_CHECK(std::isfinite(got) && std::fabs(static_cast<double>(got) - want) <= bound,
                           fmt::format("{}: matmul ({}) token {} row {} is {}, matmul_ref {} (bound {})", what,
                                       cpu::isa_name(isa), t, j, got, want, bound));
      }
  }

  // Packed types: the definition, bit for bit, with and without the packed copy.
  if (cpu::packs(type) && cpu::usable_isa(cpu::Isa::Avx2) == cpu::Isa::Avx2) {
    std::vector<uint8_t> packed(cpu::packed_bytes(view));
    cpu::pack(pool, view, packed.data());
    std::vector<float> prow(static_cast<size_t>(n_in));
    for (int64_t j = 0; j < n_out; ++j) {
      cpu::dequantize_packed_row(view, packed.data(), j, prow.data());
      SPECMOE_FUZZ_CHECK(std::memcmp(prow.data(), deq.data() + j * n_in, static_cast<size_t>(n_in) * 4) == 0,
                         fmt::format("{}: packed row {} dequantizes differently", what, j));
    }
    kernels::MatrixView with_copy = view;
    with_copy.packed = packed.data();
    for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512, cpu::Isa::Amx}) {
      if (cpu::usable_isa(isa) != isa) continue;
      // Integer types: the definition; float types: the row-major kernel without the copy.
      std::vector<float> want(ref.size());
      if (cpu::packs_integer(type)) {
        for (int64_t t = 0; t < T; ++t)
          for (int64_t j = 0; j < n_out; ++j)
            want[t * n_out + j] = cpu::quant_dot_ref(type, view.row(j), x.data() + t * n_in, n_in);
      } else {
        cpu::matmul(pool, x.data(), T, view, want.data(), isa);
      }
      for (const kernels::MatrixView* v : {&view, static_cast<const kernels::MatrixView*>(&with_copy)}) {
        std::vector<float> y(ref.size(), -7.0f);
        cpu::matmul(pool, x.data(), T, *v, y.data(), isa);
        for (size_t i = 0; i < y.size(); ++i) {
          const bool same = (std::isnan(y[i]) && std::isnan(want[i])) || std::memcmp(&y[i], &want[i], 4) == 0;
          SPECMOE_FUZZ_CHECK(same, fmt::format("{}: matmul ({}{}) output {} is {}, quant_dot_ref {}", what,
                                               cpu::isa_name(isa), v == &view ? "" : ", packed copy", i, y[i],
                                               want[i]));
        }
      }
    }
  }

  // The quantizers on the decoded rows (finite, magnitudes an fp16 scale can express); the
  // read-only formats have none.
  if (finite_weights && !dtype_is_read_only(type)) {
    float amax = 0.0f;
    for (float v : deq) amax = std::max(amax, std::fabs(v));
    if (amax <= 6e4f) {
      std::vector<uint8_t> q(w_bytes);
      std::vector<float> back(n_all);
      // specmoe's own quantizers, then ggml's reference ones (`specmoe quantize`) where the type has one.
      for (bool ggml : {false, true}) {
        if (ggml && !cpu::has_ggml_quantizer(type)) continue;
        if (ggml) cpu::quantize_row_ggml(type, deq.data(), q.data(), n_in * n_out);
        else cpu::quantize_row(type, deq.data(), q.data(), n_in * n_out);
        cpu::dequantize_row(type, q.data(), back.data(), n_in * n_out);
        for (int64_t b = 0; b < n_blocks; ++b) {
          const float* src = deq.data() + b * info.block_size;
          float block_amax = 0.0f;
          for (int64_t i = 0; i < info.block_size; ++i) block_amax = std::max(block_amax, std::fabs(src[i]));
          for (int64_t i = 0; i < info.block_size; ++i) {
            const float got = back[b * info.block_size + i];
            SPECMOE_FUZZ_CHECK(std::isfinite(got) && std::fabs(got - src[i]) <= 2.0f * block_amax * 1.001f + 1e-30f,
                               fmt::format("{}: element {} of block {} quantizes ({}) from {} to {}", what, i, b,
                                           ggml ? "ggml's reference" : "quantize_row", src[i], got));
          }
        }
      }
    }
  }
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
