// Packed weights: a CPU-only copy of a block-quantized weight matrix with its rows interleaved in
// groups of 16, the layout the integer matmul kernels read (kernels/cpu/matmul_packed_avx2.cpp,
// matmul_packed_avx512.cpp). The CPU backend packs every such matrix once when it makes a model's
// weights resident (MatrixView::packed); matmul packs a view that carries no copy on the fly.
//
// Why: in a row-major layout a kernel holds one weight row in its vector lanes, so every token
// needs its own horizontal reduction and its own float steps per block (the verify batch was
// bound by those, ~15 vector operations per 256 multiply-adds). With 16 rows interleaved, lane r
// of a vector holds row r: one vpdpbusd multiplies 4 codes of each of 16 rows by the same 4
// activation bytes (a broadcast), so the multiply-adds of a token are the whole work and a
// block's float steps are shared by 16 rows. Each weight block is unpacked once for up to 16
// tokens. llama.cpp repacks Q4_0/Q4_K/IQ4_NL into 4- or 8-row interleaved blocks for the same
// reason (ggml-cpu/repack.cpp); this layout and its kernels are specmoe's own.
//
// The arithmetic is defined row by row and token by token (quant_dot_ref below; for float
// weights the row-major AVX2 kernel's order, kernels/cpu/matmul_avx2.cpp), independent of the
// layout, the group, the lane, the batch and the instruction set: the AVX2 and AVX-512 kernels
// give that result bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

// Rows per interleaved group.
constexpr int64_t kPackRows = 16;

// Whether weights of `type` have a packed layout and kernels: the integer types Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (always multiplied packed: matmul packs a view that carries no
// copy), and the float types F32, F16, BF16 (packed when the view carries a copy: their packed
// kernels give the row-major kernels' results bit for bit, so a view without one runs those).
// Q2_K, Q3_K, IQ4_NL and IQ4_XS keep the row-major AVX2 kernels.
bool packs(DType type);
// The integer ones among them (the types quant_dot_ref defines).
bool packs_integer(DType type);
// Bytes of the packed copy of w: ceil(n_out / 16) groups of 16 rows, the last group padded with
// zero rows, the bytes of the file's layout per row (without any padding between w's rows).
size_t packed_bytes(const MatrixView& w);
// Writes the packed copy of w (w.data in the file's layout) into dst, packed_bytes(w) bytes;
// the pool's threads split the groups.
void pack(ThreadPool& pool, const MatrixView& w, void* dst);
// Groups [g0, g1) of w into dst (the group g0 first): what matmul does for a view without a copy.
void pack_groups(const MatrixView& w, int64_t g0, int64_t g1, void* dst);
// Row j of a packed copy, dequantized to w.n_in floats (the inverse of pack, for tests and tools):
// equal to dequantize_row of the file's row.
void dequantize_packed_row(const MatrixView& w, const void* packed, int64_t j, float* out);

// The integer path's value of y = dot(w_row, x) for one row of a packs_integer type, by definition:
// x is quantized per block to 8 bits (32-element blocks with fp16-rounded scale d, sum and s as
// llama.cpp's Q8_0 / Q8_1; 256-element blocks as Q8_K), then, block by block in order, from
// acc = 0:
//   Q8_0, Q4_0, Q5_0:  acc = fma(float(isum), dw * dx, acc), isum = sum (code - offset) * xq
//   Q4_1, Q5_1:        the same with offset 0, then acc = fma(mw, s, acc)
//   Q4_K, Q5_K:        acc = fma(float(isum), d * dx, acc); acc = fma(float(msum), -(dmin * dx), acc),
//                      isum = sum_j sc_j sum (code * xq), msum = sum_j mn_j (sum of x's sub-block j)
//   Q6_K:              acc = fma(float(isum), d * dx, acc), isum = sum_s sc_s sum (code - 32) * xq
// Integer sums are exact (int32), so only the float steps, done in this order with one rounding
// each, define the result. Needs an AVX2 CPU (the activation quantization is the kernels' own).
float quant_dot_ref(DType type, const void* w_row, const float* x, int64_t n_in);

}  // namespace specmoe::kernels::cpu
