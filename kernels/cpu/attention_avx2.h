// Internal: AVX2+FMA+F16C kernels of attention over typed KV rows (attention_avx2.cpp). Call only
// when usable_isa(Isa::Avx2) == Isa::Avx2; kernels/cpu/attention.cpp dispatches to them. F32 rows
// use avx2::dot_f32 / axpy_f32 (simd_avx2.h).
#pragma once
#include <cstdint>

namespace specmoe::kernels::cpu::avx2 {

// dot(q, k) for n floats q and n IEEE halves k (converted exactly; the sums in float).
float dot_f16(const float* q, const uint16_t* k, int64_t n);
// y[i] += a * x[i] for n halves x.
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n);
// The query heads that share a KV head, over one key or over all values at once (each K / V row is
// read and widened once for them), with dot_f16's and axpy_f16's arithmetic for each head:
//   dots[g] = dot_f16(q[g], k, n) for g < G (G <= 8);
//   out[g][c] = sum over rows r in order of w[g * rows + r] * v_r[c], from 0, for c < n: the
//   result of axpy_f16 row after row into a zeroed out[g] (G <= 8).
void dot_f16_heads(const float* const* q, int G, const uint16_t* k, int64_t n, float* dots);
void weighted_sum_f16_heads(const float* w, int G, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out);

// A query head quantized to 8 bits per block of 32 for the integer dot with Q8_0 keys (the role
// of llama.cpp's quantized vec_dot operand): q[i] ~ d * qs[i], qs in [-127, 127], d a float.
struct QueryQ8 {
  float d;
  int8_t qs[32];
};
// nb blocks of q (32 nb floats) into out[nb].
void quantize_query_q8(const float* q, int64_t nb, QueryQ8* out);
// sum over blocks of d_q * d_k * sum(qs_q * qs_k) for nb Q8_0 blocks at k (34 bytes each).
float dot_q8_0(const QueryQ8* q, const uint8_t* k, int64_t nb);
// y[i] += a * x[i] for the 32 nb elements of nb Q8_0 blocks at x (a * d per block times qs).
void axpy_q8_0(float a, const uint8_t* x, float* y, int64_t nb);

}  // namespace specmoe::kernels::cpu::avx2
