// AVX2 integer matmul kernels for block-quantized weights (compiled with -mavx2 -mfma -mf16c;
// called only after the runtime check in matmul.cpp). The approach is llama.cpp's
// (ggml-cpu/arch/x86/quants.c, ggml_vec_dot_*_q8_*): the activations are quantized once per matmul
// to 8-bit blocks, and each weight block is multiplied with them in integers
// (_mm256_maddubs_epi16: u8 x i8 -> pairs summed to i16; _mm256_madd_epi16: -> i32), one float
// scale per block. At batch 1 a token forward is bound by reading the weights; the integer kernel
// touches each weight byte once with a few instructions, where the dequantize-to-f32 path wrote
// and re-read 4 bytes per element.
//
// Determinism: a token's activation blocks depend only on that token's row of x. The integer
// part of a block's dot product is exact, so its order is free; the float part is one
// fmadd(scale, float(int sum), acc) per block (plus one for the mins of Q4_K/Q5_K) into an
// 8-lane accumulator, in block order, then a fixed-order horizontal sum. None of it depends on T,
// on the token's place in the batch or on the thread, so a token's output in a batch is
// bit-identical to a one-token call.
//
// Overflow: maddubs saturates at +-32767 per pair. Pairs are bounded by 2 * 128 * 127 (Q8_0, signs
// moved onto the activations), 2 * 8 * 127 (Q4_0), 2 * 15 * 127 (Q4_1, Q4_K), 2 * 31 * 127
// (Q5_K), 2 * 63 * 127 (Q6_K), all below it; int32 sums of a block stay below 2^26.
// The kernels of Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K and IQ4_XS are in matmul_quant_more_avx2.cpp and
// follow the same rules; the shared helpers and the row loop are in matmul_quant_avx2.h.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_quant_avx2.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/dtype.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

using namespace quant;

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

// ------------------------------------------------------------------ per-type block dot kernels
// Each computes out[g] = dot(weight row, activations of token g) for G tokens; a[g] points at
// token g's activation blocks, nb = blocks per row.

template <int G>
void dot_q8_0(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* out) {
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += 34) {
    const float dw = load_half(w);
    const __m256i q = loadu256(w + 2);
    const __m256i aq = _mm256_sign_epi8(q, q);  // |q| as unsigned; q's sign goes onto x
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      const __m256i p = dot_u8_i8(aq, _mm256_sign_epi8(loadu256(x.qs), q));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(p), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

template <int G>
void dot_q4_0(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* out) {
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += 18) {
    const float dw = load_half(w);
    const __m256i q = _mm256_sub_epi8(unpack_nibbles16(w + 2), _mm256_set1_epi8(8));  // [-8, 7]
    const __m256i aq = _mm256_sign_epi8(q, q);
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      const __m256i p = dot_u8_i8(aq, _mm256_sign_epi8(loadu256(x.qs), q));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(p), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// Q4_1: x = q * d + m, so dot = d * dx * sum(q * qx) + m * s, s = dx * sum(qx) (fp16, block_q8_1).
template <int G>
void dot_q4_1(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* out) {
  __m256 acc[G];
  float acc_min[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps(), acc_min[g] = 0.0f;
  for (int64_t b = 0; b < nb; ++b, w += 20) {
    const float dw = load_half(w), mw = load_half(w + 2);
    const __m256i q = unpack_nibbles16(w + 4);
    for (int g = 0; g < G; ++g) {
      const ActQ8x32& x = a[g][b];
      const __m256i p = dot_u8_i8(q, loadu256(x.qs));
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(p), acc[g]);
      acc_min[g] += mw * x.s;
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]) + acc_min[g];
}

// The eight 6-bit scales and mins of a K-quant 12-byte field (layout in quant.cpp), as bytes.
inline void k_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const uint32_t sc03 = u[0] & lo6, mn03 = u[1] & lo6;
  const uint32_t sc47 = (u[2] & lo4) | (((u[0] >> 6) & lo2) << 4);
  const uint32_t mn47 = ((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4);
  std::memcpy(sc, &sc03, 4);
  std::memcpy(sc + 4, &sc47, 4);
  std::memcpy(mn, &mn03, 4);
  std::memcpy(mn + 4, &mn47, 4);
}

// 16 int16 lanes [mn0, mn0, mn1, mn1, ..., mn7, mn7]: madd with the activations' 16 sums of 16
// gives mn_s * (sum of sub-block s) for the 8 sub-blocks of 32.
inline __m256i mins_pairs(const uint8_t mn[8]) {
  const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
}

// Q4_K and Q5_K share everything but the 5th bit: x = d*sc*q - dmin*mn per sub-block of 32.
template <int G, bool kFiveBit>
void dot_q45_K(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  constexpr size_t kBlockBytes = kFiveBit ? 176 : 144;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += kBlockBytes) {
    const float d = load_half(w), dmin = load_half(w + 2);
    uint8_t sc[8], mn[8];
    k_scales(w + 4, sc, mn);
    const uint8_t* qs = w + (kFiveBit ? 48 : 16);
    __m256i hb = kFiveBit ? loadu256(w + 16) : _mm256_setzero_si256();
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = loadu256(qs + 32 * c);
      __m256i lo = _mm256_and_si256(raw, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (kFiveBit) {
        // Bits 2c and 2c+1 of qh (hb was shifted right by 2c; bits stay inside each byte).
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(1)), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(2)), 3));
        hb = _mm256_srli_epi16(hb, 2);
      }
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * c]), s_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int g = 0; g < G; ++g) {
        const int8_t* xq = a[g][b].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu256(xq)), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu256(xq + 32)), s_hi);
        sumi[g] = _mm256_add_epi32(sumi[g], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const __m256i mp = mins_pairs(mn);
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      const __m256i msum = _mm256_madd_epi16(loadu256(x.bsums), mp);
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(d * x.d), _mm256_cvtepi32_ps(sumi[g]), acc[g]);
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * x.d), _mm256_cvtepi32_ps(msum), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

// Q6_K: x = d * sc * (q - 32), 16 sub-blocks of 16; the -32 is applied through the activation
// sums: sum(sc * (q - 32) * qx) = sum(sc * q * qx) - 32 * sum_s(sc_s * bsum_s).
template <int G>
void dot_q6_K(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += 210) {
    const auto* sc = reinterpret_cast<const int8_t*>(w + 192);
    const float d = load_half(w + 208);
    __m256i sumi[G];
    for (int g = 0; g < G; ++g) sumi[g] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w + 64 * h;
      const __m256i qh = loadu256(w + 128 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        // Group k of 32 (layout in quant.cpp): nibble of ql[32*(k&1) + l], bits 2k..2k+1 of qh[l].
        const __m256i l4 = loadu256(ql + 32 * (k & 1));
        const __m256i nib = k < 2 ? _mm256_and_si256(l4, low4) : _mm256_and_si256(_mm256_srli_epi16(l4, 4), low4);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), low2);
        const __m256i q = _mm256_or_si256(nib, _mm256_slli_epi16(top, 4));  // [0, 63]
        const int s = 8 * h + 2 * k;  // sub-blocks s (first 16 elements) and s + 1
        const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[s + 1]), _mm_set1_epi16(sc[s]));
        for (int g = 0; g < G; ++g) {
          const __m256i p = _mm256_maddubs_epi16(q, loadu256(a[g][b].qs + 128 * h + 32 * k));
          sumi[g] = _mm256_add_epi32(sumi[g], _mm256_madd_epi16(p, sv));
        }
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    for (int g = 0; g < G; ++g) {
      const ActQ8x256& x = a[g][b];
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(loadu256(x.bsums), sc16), 5);
      const __m256i total = _mm256_sub_epi32(sumi[g], offset);
      acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(d * x.d), _mm256_cvtepi32_ps(total), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = hsum(acc[g]);
}

template <int G> struct KQ8_0 { static void run(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* o) { dot_q8_0<G>(w, a, nb, o); } };
template <int G> struct KQ4_0 { static void run(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* o) { dot_q4_0<G>(w, a, nb, o); } };
template <int G> struct KQ4_1 { static void run(const uint8_t* w, const ActQ8x32* const* a, int64_t nb, float* o) { dot_q4_1<G>(w, a, nb, o); } };
template <int G> struct KQ4_K { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_q45_K<G, false>(w, a, nb, o); } };
template <int G> struct KQ5_K { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_q45_K<G, true>(w, a, nb, o); } };
template <int G> struct KQ6_K { static void run(const uint8_t* w, const ActQ8x256* const* a, int64_t nb, float* o) { dot_q6_K<G>(w, a, nb, o); } };

}  // namespace

void prefetch_rows(const MatrixView& w, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    const char* row = reinterpret_cast<const char*>(w.row(j));
    for (size_t off = 0; off < w.row_bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
  }
}

int64_t act_block_size(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL: return 32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return 256;
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
    }
  }
}

void matmul_quant_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y,
                       int64_t j0, int64_t j1) {
  switch (w.type) {
    case DType::Q8_0: rows_with<ActQ8x32, KQ8_0>(w, acts, act_stride, T, y, j0, j1, 32); return;
    case DType::Q4_0: rows_with<ActQ8x32, KQ4_0>(w, acts, act_stride, T, y, j0, j1, 32); return;
    case DType::Q4_1: rows_with<ActQ8x32, KQ4_1>(w, acts, act_stride, T, y, j0, j1, 32); return;
    case DType::Q4_K: rows_with<ActQ8x256, KQ4_K>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::Q5_K: rows_with<ActQ8x256, KQ5_K>(w, acts, act_stride, T, y, j0, j1, 256); return;
    case DType::Q6_K: rows_with<ActQ8x256, KQ6_K>(w, acts, act_stride, T, y, j0, j1, 256); return;
    default: matmul_quant_rows_more(w, acts, act_stride, T, y, j0, j1); return;
  }
}

}  // namespace specmoe::kernels::cpu::avx2
