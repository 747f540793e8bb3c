// Quantized block formats (GGUF / ggml layouts, bit for bit): dequantization of any supported
// type to float, and quantization from float (used by the GGUF writer and `specmoe synth`).
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace specmoe::kernels::cpu {

// Dequantizes n elements (a multiple of the type's block size) from src into dst.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Quantizes n floats (a multiple of the block size) into dst (dtype_row_bytes(type, n) bytes).
// Supported for every DType; K-quants use a simple (not llama.cpp-optimal) scale search.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace specmoe::kernels::cpu
