// AVX2 row kernels of the recurrent layers' state updates (kernels/cpu/delta_net.cpp,
// kernels/cpu/mamba2.cpp): a DeltaNet head's step and a Mamba-2 head row's step, 8 state elements
// per instruction with FMA. The dots are summed in 8 lanes, then across them: another order than
// the scalar reference's (index order), so the two agree to float rounding, not bit for bit (the op
// harness bounds the difference); every AVX2 and AVX-512 machine runs this same code.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/recurrent_rows.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

}  // namespace

void delta_net_head_step(const float* m_in, float* m_out, const float* q, const float* k, const float* v, int S,
                         float decay, float beta, float scale, float* o) {
  const __m256 vdec = _mm256_set1_ps(decay);
  const int S8 = S & ~7;
  for (int j = 0; j < S; ++j) {
    const float* src = m_in ? m_in + static_cast<size_t>(j) * S : nullptr;
    float* row = m_out + static_cast<size_t>(j) * S;
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i < S8; i += 8) {
      const __m256 r = src ? _mm256_mul_ps(_mm256_loadu_ps(src + i), vdec) : _mm256_setzero_ps();
      _mm256_storeu_ps(row + i, r);
      acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc);
    }
    float sk = hsum(acc);
    for (; i < S; ++i) {
      row[i] = src ? src[i] * decay : 0.0f;
      sk += row[i] * k[i];
    }
    const float d = (v[j] - sk) * beta;
    const __m256 vd = _mm256_set1_ps(d);
    __m256 acc2 = _mm256_setzero_ps();
    for (i = 0; i < S8; i += 8) {
      const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vd, _mm256_loadu_ps(row + i));
      _mm256_storeu_ps(row + i, r);
      acc2 = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc2);
    }
    float out = hsum(acc2);
    for (; i < S; ++i) {
      row[i] += k[i] * d;
      out += row[i] * q[i];
    }
    o[j] = out * scale;
  }
}

float mamba2_row_step(const float* src, float* dst, const float* B, const float* C, int64_t N, float dA, float x_dt) {
  const __m256 vda = _mm256_set1_ps(dA), vx = _mm256_set1_ps(x_dt);
  const int64_t N8 = N & ~int64_t{7};
  __m256 acc = _mm256_setzero_ps();
  int64_t n = 0;
  for (; n < N8; n += 8) {
    const __m256 bx = _mm256_mul_ps(_mm256_loadu_ps(B + n), vx);
    const __m256 s = src ? _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + n), vda), bx) : bx;
    _mm256_storeu_ps(dst + n, s);
    acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(C + n), acc);
  }
  float y = hsum(acc);
  for (; n < N; ++n) {
    const float s = (src ? src[n] * dA : 0.0f) + B[n] * x_dt;
    dst[n] = s;
    y += s * C[n];
  }
  return y;
}

}  // namespace specmoe::kernels::cpu::avx2
