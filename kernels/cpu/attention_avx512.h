// Internal: the AVX-512 forms of attention_avx2.h's f16 head-group kernels (attention_avx512.cpp),
// the same results bit for bit. Call only when usable_isa(Isa::Avx512) >= Isa::Avx512;
// kernels/cpu/attention.cpp dispatches to them.
#pragma once
#include <cstdint>

namespace specmoe::kernels::cpu::avx512 {

// As avx2::dot_f16_heads and avx2::weighted_sum_f16_heads (G <= 8).
void dot_f16_heads(const float* const* q, int G, const uint16_t* k, int64_t n, float* dots);
// scores[g * rows + t] = dot_f16_heads(q, G, k[t], n)[g] * scale for t < rows, the same bits.
void scores_f16_heads(const float* const* q, int G, const uint16_t* const* k, int64_t rows, int64_t n, float scale,
                      float* scores);
void weighted_sum_f16_heads(const float* w, int G, const uint16_t* const* v, int64_t rows, int64_t n, float* const* out);

}  // namespace specmoe::kernels::cpu::avx512
