// Internal: AVX-512 (F, BW, VL, DQ) + VNNI kernels (kernels/cpu/*_avx512.cpp). Call only when
// usable_isa(Isa::Avx512) == Isa::Avx512; the rest of the library dispatches through ops.h.
//
// These kernels reproduce the AVX2 kernels' results bit for bit (same activation blocks, same
// exact integer sums per 8-lane group, same float operations in the same order), so a model
// gives the same tokens and logits on an AVX2 machine and on an AVX-512 one, and the goldens
// hold on both. They differ in how the work is laid out: each weight block is unpacked once into
// 512-bit registers and applied to up to 8 tokens (the AVX2 kernels unpack once per 4), the
// integer products use vpdpwssd / vpdpbusd, and long batches are tiled over tokens so the
// activations of a tile stay in L2 while a chunk of rows passes over them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu::avx512 {

// Whether matmul_quant_rows has a kernel for weights of `type` that pays at T tokens (the others
// use the AVX2 ones, which give the same bits).
bool has_quant_kernel(DType type, int64_t T);
// As avx2::matmul_quant_rows (activations quantized by avx2::quantize_acts for the same type);
// `scratch` holds scratch_floats(w, T) floats, per calling thread.
void matmul_quant_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y,
                       int64_t j0, int64_t j1, float* scratch);
size_t scratch_floats(const MatrixView& w, int64_t T);

}  // namespace specmoe::kernels::cpu::avx512
