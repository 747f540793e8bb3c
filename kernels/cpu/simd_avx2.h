// Internal: AVX2+FMA+F16C kernels (kernels/cpu/*_avx2.cpp). Call only when
// usable_isa(Isa::Avx2) == Isa::Avx2; the rest of the library dispatches through ops.h.
#pragma once
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu::avx2 {

// y[t * w.n_out + j] = dot(x[t], row j) for rows j in [j0, j1) and all T tokens. `scratch` holds
// w.n_in floats (a dequantized row for block-quantized types).
void matmul_rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t j0, int64_t j1,
                 float* scratch);
float dot_f32(const float* a, const float* b, int64_t n);
// y[i] += a * x[i]
void axpy_f32(float a, const float* x, float* y, int64_t n);

}  // namespace specmoe::kernels::cpu::avx2
