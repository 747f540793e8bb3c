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

// ggml's reference quantizers (quantize_row_*_ref: what llama-quantize writes without an
// importance matrix), bit for bit, for the types has_ggml_quantizer names (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q6_K, and MXFP4, whose quantize_row is ggml's rounding already: the same exponent
// and nearest code, ties to the smaller magnitude); any other type goes to quantize_row. Used by `specmoe quantize` (core/quantize.h).
bool has_ggml_quantizer(DType type);
void quantize_row_ggml(DType type, const float* src, void* dst, int64_t n);

}  // namespace specmoe::kernels::cpu
