// Internal: AVX2+FMA+F16C kernels (kernels/cpu/*_avx2.cpp). Call only when
// usable_isa(Isa::Avx2) == Isa::Avx2; the rest of the library dispatches through ops.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu::avx2 {

// y[t * w.n_out + j] = dot(x[t], row j) for rows j in [j0, j1) and all T tokens. `scratch` holds
// w.n_in floats (a dequantized row for block-quantized types).
void matmul_rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t j0, int64_t j1,
                 float* scratch);
float dot_f32(const float* a, const float* b, int64_t n);
// SwiGLU and GELU through a vectorised exp (activation_avx2.cpp): out may alias the inputs.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void gelu(const float* x, float* y, int64_t n);
// Sampling's softmax weights through the same exp: see exp_weights in ops.h.
double exp_weights(const float* x, float shift, float temperature, float* w, int64_t n);
// y[i] += a * x[i]
void axpy_f32(float a, const float* x, float* y, int64_t n);
// dst (n halves, little-endian) = fp32_to_fp16(src[i]) for i < n, 8 at a time (quantize_acts_avx2.cpp).
void fp32_to_fp16_row(const float* src, uint8_t* dst, int64_t n);

// ---- Integer kernels for block-quantized weights (matmul_quant_avx2.cpp).
// Activations are quantized once per matmul to 8-bit blocks (the role of llama.cpp's Q8_0 / Q8_K,
// with a float scale): x[i] ~ d * qs[i], qs in [-127, 127].
struct ActQ8x32 {   // for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL weights (Q8_0 / Q8_1's role)
  float d;          // amax / 127 rounded to fp16, as block_q8_0 / block_q8_1 store it
  float s;          // (amax / 127) * sum rounded to fp16: block_q8_1's s, the min term of Q4_1, Q5_1
  int32_t sum;      // sum of qs: the packed kernels' offset term (Q4_0's -8, Q5_0's -16, ...)
  int8_t qs[32];
};
// For Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS weights (Q8_K's role). qs first and 64-byte aligned
// (in a 64-byte aligned buffer): the AVX-512 kernels read it in whole cache lines.
struct alignas(64) ActQ8x256 {
  int8_t qs[256];
  int16_t bsums[16];  // bsums[k] = sum of qs[16k, 16k + 16) (the K-quants' min / offset terms)
  int16_t bsums32[8];  // bsums32[j] = sum of qs[32j, 32j + 32) (Q4_K / Q5_K's mins, per sub-block)
  float d;
};
// Elements per activation block for weights of `type`: 32, 256, or 0 when the type has no
// integer kernel (float types).
int64_t act_block_size(DType type);
// Bytes of one token's quantized activations (n_in a multiple of the weight block size).
size_t act_row_bytes(DType type, int64_t n_in);
// Quantizes one token's n_in activations into act_row_bytes(type, n_in) bytes at dst.
void quantize_acts(DType type, const float* x, int64_t n_in, uint8_t* dst);
// Issues a prefetch for every 64-byte line of weight rows [j0, j1): the row-major kernels fetch
// the rows of their chunk ahead of the row they compute.
void prefetch_rows(const MatrixView& w, int64_t j0, int64_t j1);
// Row-major weights of the types that are not packed (IQ4_NL, MXFP4, Q2_K, Q3_K, IQ4_XS, and the
// i-quants below; matmul_quant_avx2.cpp): y[t * w.n_out + j] for rows [j0, j1) and T tokens,
// token t's activations at acts + t * act_stride. biased: null (row by row), or, where row_tiles
// says so (a batch of a 256-element type), every token's activation codes plus 128
// (biased_codes, n_in bytes per token), made once per matmul: the rows then go through the 16-row
// tiles of matmul_tiles.h (j0 a multiple of 16), with AVX-512 VNNI where avx512 (the caller
// checked the CPU). The results are the same either way, bit for bit.
void matmul_quant_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, int64_t T, float* y,
                       int64_t j0, int64_t j1, const uint8_t* biased = nullptr, bool avx512 = false);
bool row_tiles(DType type, int64_t T, bool avx512);
void biased_codes(const uint8_t* acts, int64_t n_in, uint8_t* dst);  // one token's ActQ8x256 blocks
// The read-only i-quant and ternary formats (IQ2_XXS ... TQ2_0; matmul_iq_avx2.cpp), as above.
void matmul_iq_rows(const MatrixView& w, const uint8_t* acts, size_t act_stride, const uint8_t* biased, int64_t T,
                    float* y, int64_t j0, int64_t j1, bool avx512);
bool iq_tiles(int64_t T, bool avx512);  // row_tiles for the i-quants
// Packed weights (kernels/cpu/packed.h, matmul_packed_avx2.cpp): y[t * n_out + j] for rows
// [j0, j1) (j0 a multiple of 16) and T tokens; `groups` holds the packed groups j0 / 16 ..
// ceil(j1 / 16) - 1 of a matrix of n_in inputs; activations as for matmul_quant_rows.
void matmul_packed_rows(DType type, const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride,
                        int64_t T, float* y, int64_t n_out, int64_t j0, int64_t j1);

}  // namespace specmoe::kernels::cpu::avx2
