// Internal to kernels/cuda: helpers shared by matmul.cu and dequantize.cu.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda::detail {

// Checks a MatrixView (supported type, n_in a multiple of its block, row_bytes large enough,
// data non-null when not empty); throws Error(InvalidArgument / Unsupported) naming `op`.
void check_matrix(const MatrixView& m, const char* op);

// dst (IEEE half, [n_rows, n_in] contiguous) = rows [0, n_rows) of a matrix of `type` whose rows
// are row_bytes apart. Queued on ctx's stream.
void dequantize_rows_f16(Context& ctx, DType type, const void* src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                         void* dst);

}  // namespace specmoe::kernels::cuda::detail
