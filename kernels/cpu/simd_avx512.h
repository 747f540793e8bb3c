// Internal: AVX-512 (F, BW, VL, DQ) + VNNI kernels (kernels/cpu/*_avx512.cpp). Call only when
// usable_isa(Isa::Avx512) == Isa::Avx512; the rest of the library dispatches through ops.h.
//
// These kernels reproduce the AVX2 kernels' results bit for bit (same activation blocks, same
// exact integer sums, same float operations in the same order, lane for lane), so a model gives
// the same tokens and logits on an AVX2 machine and on an AVX-512 one, and the goldens hold on
// both. They differ in how the work is laid out: 16 rows of packed weights per 512-bit register
// (8 per 256-bit one on AVX2) and vpdpbusd / vpdpwssd for the integer products. Weight types
// without a packed kernel run their AVX2 kernel on either path.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu::avx512 {

// As avx2::matmul_packed_rows, with the same results bit for bit (matmul_packed_avx512.cpp).
void matmul_packed_rows(DType type, const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride,
                        int64_t T, float* y, int64_t n_out, int64_t j0, int64_t j1);
// As avx2::swiglu and avx2::gelu, 16 elements at a time, the same bits (activation_avx512.cpp).
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void gelu(const float* x, float* y, int64_t n);

}  // namespace specmoe::kernels::cpu::avx512
