// Activation quantization of the CPU integer matmul paths (compiled with -mavx2 -mfma -mf16c;
// called only after the runtime check in matmul.cpp): once per matmul, each token's activations
// become 8-bit blocks with a float scale, as llama.cpp's Q8_0 / Q8_1 (blocks of 32) and Q8_K
// (blocks of 256) are made (ggml-cpu/arch/x86/quants.c quantize_row_q8_*), plus the block sums
// the weights' offsets and mins need. Both the packed kernels (matmul_packed_avx2.cpp,
// matmul_packed_avx512.cpp) and the row-major ones (matmul_quant_avx2.cpp) read them.
//
// Determinism: a token's activation blocks depend only on that token's row of x, and the
// conversions round to nearest even, so every instruction set and batch gets the same bytes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/simd_avx2.h"
#include "kernels/dtype.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

// Quantizes 32 floats to int8 with scale id (round to nearest even, as vcvtps2dq does by
// default), stored in element order. Returns nothing; |x * id| <= 127 by construction.
inline void quantize32(const float* x, __m256 id, int8_t* out) {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
  // packs work within 128-bit lanes; the permute restores element order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

inline float abs_max(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

int64_t act_block_size(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4: return 32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::TQ1_0:
    case DType::TQ2_0: return 256;
    default: return 0;
  }
}

size_t act_row_bytes(DType type, int64_t n_in) {
  const int64_t block = act_block_size(type);
  if (block == 0) return 0;
  const size_t per = block == 32 ? sizeof(ActQ8x32) : sizeof(ActQ8x256);
  return per * static_cast<size_t>(n_in / block);
}

void quantize_acts(DType type, const float* x, int64_t n_in, uint8_t* dst) {
  const int64_t block = act_block_size(type);
  if (block == 32) {
    auto* out = reinterpret_cast<ActQ8x32*>(dst);
    for (int64_t b = 0; b < n_in / 32; ++b, x += 32) {
      // As ggml's quantize_row_q8_0/q8_1 (AVX2): the codes use the float inverse scale 127 / amax,
      // the stored scale is amax / 127 rounded to fp16 (block_q8_0's d), and Q8_1's s = d * sum(qs)
      // is rounded to fp16 from the float d. The fp16 roundings change a dot product by at most
      // 2^-11 of its size; they are kept so that the integer path computes what llama.cpp's does.
      const float amax = abs_max(x, 32);
      const float d32 = amax / 127.0f;
      out[b].d = fp16_to_fp32(fp32_to_fp16(d32));
      quantize32(x, _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f), out[b].qs);
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += out[b].qs[i];
      out[b].s = fp16_to_fp32(fp32_to_fp16(d32 * static_cast<float>(s)));
      out[b].sum = s;
    }
  } else if (block == 256) {
    auto* out = reinterpret_cast<ActQ8x256*>(dst);
    for (int64_t b = 0; b < n_in / 256; ++b, x += 256) {
      // Q8_K's scale is the float reciprocal of the inverse scale, not amax / 127 (one ulp apart
      // at times): ggml's quantize_row_q8_K_ref and the AVX2 ggml_quantize_mat_q8_K_4x8.
      const float amax = abs_max(x, 256);
      const float iscale = amax > 0.0f ? 127.0f / amax : 0.0f;
      out[b].d = amax > 0.0f ? 1.0f / iscale : 0.0f;
      const __m256 id = _mm256_set1_ps(iscale);
      for (int k = 0; k < 8; ++k) quantize32(x + 32 * k, id, out[b].qs + 32 * k);
      for (int k = 0; k < 16; ++k) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += out[b].qs[16 * k + i];
        out[b].bsums[k] = static_cast<int16_t>(s);
      }
      for (int j = 0; j < 8; ++j)
        out[b].bsums32[j] = static_cast<int16_t>(out[b].bsums[2 * j] + out[b].bsums[2 * j + 1]);
    }
  }
}

// F16C's conversion rounds to nearest even (immediate 0, not MXCSR), makes infinities and
// subnormals as IEEE says and quiets a NaN keeping its top payload bits: fp32_to_fp16's rules
// (kernels/dtype.h), so every input gets the same half (`Fp16.RowConversionMatchesTheScalarOne`).
// 8 elements per instruction: the KV cache's F16 rows of a 9-token batch took 8.6 us per layer
// and cache (2304 elements) one at a time.
void fp32_to_fp16_row(const float* src, uint8_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
  for (; i < n; ++i) {  // the last n % 8 (the same bits)
    const uint16_t h = fp32_to_fp16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

}  // namespace specmoe::kernels::cpu::avx2
