// AVX2+FMA+F16C micro-kernels (compiled with -mavx2 -mfma -mf16c; called only after the runtime
// check in matmul.cpp). A weight row is converted 8 elements at a time (F16: vcvtph2ps, BF16: a
// 16-bit shift) and FMA'd into one pair of accumulators per token, up to 4 tokens per pass; the
// row stays in L1 across passes, so memory reads it once per batch.
//
// Summation order (fixed, for determinism): accumulator a0 takes elements [16k, 16k+8), a1
// [16k+8, 16k+16); a remaining full 8 goes into a0; then hsum(a0 + a1) in a fixed lane order,
// then the < 8 tail elements in index order. It depends only on n_in, not on T, the token's
// place in the batch or the thread.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);                   // 4 lanes
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));          // 2 lanes
  s = _mm_add_ss(s, _mm_movehdup_ps(s));           // 1 lane
  return _mm_cvtss_f32(s);
}

struct LoadF32 {
  const float* p;
  __m256 load(int64_t i) const { return _mm256_loadu_ps(p + i); }
  float scalar(int64_t i) const { return p[i]; }
};

struct LoadF16 {
  const uint16_t* p;
  __m256 load(int64_t i) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
  }
  float scalar(int64_t i) const { return _cvtsh_ss(p[i]); }
};

struct LoadBF16 {
  const uint16_t* p;
  __m256 load(int64_t i) const {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  float scalar(int64_t i) const {
    const uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// out[g] = dot(row, x + g * x_stride) for g < G.
template <int G, class Load>
inline void row_dot(const Load& w, const float* x, int64_t x_stride, int64_t n, float* out) {
  __m256 a0[G], a1[G];
  for (int g = 0; g < G; ++g) a0[g] = a1[g] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = w.load(i);
    const __m256 w1 = w.load(i + 8);
    for (int g = 0; g < G; ++g) {
      a0[g] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + g * x_stride + i), a0[g]);
      a1[g] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + g * x_stride + i + 8), a1[g]);
    }
  }
  if (i + 8 <= n) {
    const __m256 w0 = w.load(i);
    for (int g = 0; g < G; ++g) a0[g] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + g * x_stride + i), a0[g]);
    i += 8;
  }
  for (int g = 0; g < G; ++g) {
    float s = hsum(_mm256_add_ps(a0[g], a1[g]));
    for (int64_t k = i; k < n; ++k) s += w.scalar(k) * x[g * x_stride + k];
    out[g] = s;
  }
}

template <class Load>
inline void row_all_tokens(const Load& w, const float* x, int64_t T, int64_t n, float* y, int64_t y_stride) {
  float r[4];
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) {
    row_dot<4>(w, x + t * n, n, n, r);
    for (int g = 0; g < 4; ++g) y[(t + g) * y_stride] = r[g];
  }
  switch (T - t) {
    case 3: row_dot<3>(w, x + t * n, n, n, r); break;
    case 2: row_dot<2>(w, x + t * n, n, n, r); break;
    case 1: row_dot<1>(w, x + t * n, n, n, r); break;
    default: return;
  }
  for (int64_t g = 0; g < T - t; ++g) y[(t + g) * y_stride] = r[g];
}

}  // namespace

void matmul_rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t j0, int64_t j1,
                 float* scratch) {
  const int64_t n = w.n_in;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* src = w.row(j);
    switch (w.type) {
      case DType::F32:
        row_all_tokens(LoadF32{reinterpret_cast<const float*>(src)}, x, T, n, y + j, w.n_out);
        break;
      case DType::F16:
        row_all_tokens(LoadF16{reinterpret_cast<const uint16_t*>(src)}, x, T, n, y + j, w.n_out);
        break;
      case DType::BF16:
        row_all_tokens(LoadBF16{reinterpret_cast<const uint16_t*>(src)}, x, T, n, y + j, w.n_out);
        break;
      default:
        dequantize_row(w.type, src, scratch, n);
        row_all_tokens(LoadF32{scratch}, x, T, n, y + j, w.n_out);
        break;
    }
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float r;
  row_dot<1>(LoadF32{a}, b, 0, n, &r);
  return r;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace specmoe::kernels::cpu::avx2
