// y[T, n_out] = x[T, n_in] * W^T on the GPU: cuBLAS GEMM for float weights, a dequantizing
// matrix-vector kernel for quantized weights and few tokens (decode and speculative verification,
// where reading the weights once dominates the cost), dequantize-to-F16 + cuBLAS for many tokens.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/dequantize.h"
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kMaxTokens = static_cast<int>(kMatvecMaxTokens);
constexpr int kRowsPerBlock = 4;  // one warp per output row, 4 warps per block

// One warp per output row: lane i decodes chunks i, i+32, ... of the weight row once and dots each
// with the T (<= kMaxTokens) token rows of x, so every weight byte is read once per call.
// x: [T, n_in], y: [T, n_out]; blockDim = (32, kRowsPerBlock).
template <DType Q>
__global__ void matvec_quant_kernel(const uint8_t* w, size_t row_bytes, const float* x, float* y, int64_t n_in,
                                    int64_t n_out, int T) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= n_out) return;  // the whole warp leaves together (threadIdx.y is warp-uniform)
  const uint8_t* wr = w + row * row_bytes;
  const int64_t n_chunks = n_in / kChunk;
  float acc[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[t] = 0.0f;
  for (int64_t c = threadIdx.x; c < n_chunks; c += kWarp) {
    float v[kChunk];
    dequant_chunk<Q>(wr, c, v);
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < T) {
        const float* xc = x + t * n_in + c * kChunk;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) s += v[i] * xc[i];
        acc[t] += s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) {
    if (t < T) {  // T is uniform, so the shuffle inside warp_sum sees the full warp
      const float s = warp_sum(acc[t]);
      if (threadIdx.x == 0) y[t * n_out + row] = s;
    }
  }
}

// x (F32) -> F16 with saturation at +-65504 (an activation beyond F16's range becomes its largest
// finite value instead of infinity, which would turn the whole output row into NaN/Inf).
__global__ void f32_to_f16_saturate_kernel(const float* x, __half* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    out[i] = __float2half_rn(isnan(v) ? v : fminf(fmaxf(v, -65504.0f), 65504.0f));
  }
}

__global__ void f32_to_bf16_kernel(const float* x, __nv_bfloat16* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

// Row-major y[T, n_rows] (row stride ldy) = x[T, n_in] * W^T for W[n_rows, n_in] with row stride
// ldw elements, all in cuBLAS's column-major terms: C (n_rows x T, ldc = ldy) = op_T(A) * B, where
// A is W seen as column-major n_in x n_rows (lda = ldw) and B is x seen as n_in x T (ldb = n_in).
void gemm(Context& ctx, cudaDataType ab_type, const void* w, int64_t ldw, const void* x, int64_t T,
          int64_t n_in, int64_t n_rows, float* y, int64_t ldy) {
  require_int_range(n_rows, "matmul", "n_out");
  require_int_range(T, "matmul", "T");
  require_int_range(n_in, "matmul", "n_in");
  require_int_range(ldw, "matmul", "row stride");
  require_int_range(ldy, "matmul", "output row stride");
  const float alpha = 1.0f, beta = 0.0f;
  SPECMOE_CUBLAS_CHECK(cublasGemmEx(static_cast<cublasHandle_t>(ctx.blas()), CUBLAS_OP_T, CUBLAS_OP_N,
                                    static_cast<int>(n_rows), static_cast<int>(T), static_cast<int>(n_in), &alpha,
                                    w, ab_type, static_cast<int>(ldw), x, ab_type, static_cast<int>(n_in), &beta, y,
                                    CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace detail

void matmul(Context& ctx, const float* x, int64_t T, const MatrixView& w, float* y) {
  using namespace detail;
  check_matrix(w, "matmul");
  require(T >= 0, "matmul", "T < 0");
  if (T == 0 || w.n_out == 0) return;
  require_ptr(y, "matmul", "y");
  if (w.n_in == 0) {  // empty dot products
    ctx.zero(y, static_cast<size_t>(T * w.n_out) * sizeof(float));
    return;
  }
  require_ptr(x, "matmul", "x");
  require(static_cast<const void*>(x) != static_cast<const void*>(y), "matmul", "y aliases x");
  DeviceGuard guard(ctx.device());
  const cudaStream_t stream = stream_of(ctx);
  constexpr int kThreads = 256;

  switch (w.type) {
    case DType::F32:
      require(w.row_bytes % 4 == 0, "matmul", "F32 row_bytes is not a multiple of 4");
      gemm(ctx, CUDA_R_32F, w.data, static_cast<int64_t>(w.row_bytes / 4), x, T, w.n_in, w.n_out, y, w.n_out);
      return;
    case DType::F16:
    case DType::BF16: {
      require(w.row_bytes % 2 == 0, "matmul", "F16/BF16 row_bytes is not a multiple of 2");
      void* xh = ctx.scratch(Context::Scratch::Matmul, static_cast<size_t>(T * w.n_in) * 2);
      if (w.type == DType::F16) {
        f32_to_f16_saturate_kernel<<<grid_for(T * w.n_in, kThreads), kThreads, 0, stream>>>(
            x, static_cast<__half*>(xh), T * w.n_in);
      } else {
        f32_to_bf16_kernel<<<grid_for(T * w.n_in, kThreads), kThreads, 0, stream>>>(
            x, static_cast<__nv_bfloat16*>(xh), T * w.n_in);
      }
      SPECMOE_CUDA_CHECK_LAUNCH();
      gemm(ctx, w.type == DType::F16 ? CUDA_R_16F : CUDA_R_16BF, w.data, static_cast<int64_t>(w.row_bytes / 2), xh,
           T, w.n_in, w.n_out, y, w.n_out);
      return;
    }
    default: break;
  }

  // Quantized weights.
  if (T <= kMatvecMaxTokens) {
    const int64_t blocks = (w.n_out + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= 0x7fffffffLL, "matmul", "n_out too large for one grid");
    dispatch_quant(w.type, [&](auto tag) {
      constexpr DType Q = decltype(tag)::value;
      matvec_quant_kernel<Q><<<static_cast<unsigned>(blocks), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
          static_cast<const uint8_t*>(w.data), w.row_bytes, x, y, w.n_in, w.n_out, static_cast<int>(T));
    });
    SPECMOE_CUDA_CHECK_LAUNCH();
    return;
  }

  // Many tokens: dequantize slices of rows to F16 (at most kDequantSliceBytes) and use cuBLAS,
  // whose tensor-core GEMM beats re-reading the quantized rows once per 8 tokens.
  const size_t row_f16_bytes = static_cast<size_t>(w.n_in) * 2;
  const int64_t slice_rows =
      std::min<int64_t>(w.n_out, std::max<int64_t>(1, static_cast<int64_t>(kDequantSliceBytes / row_f16_bytes)));
  const size_t x_bytes = align_up(static_cast<size_t>(T * w.n_in) * 2, 256);
  auto* base = static_cast<uint8_t*>(
      ctx.scratch(Context::Scratch::Matmul, x_bytes + static_cast<size_t>(slice_rows) * row_f16_bytes));
  __half* xh = reinterpret_cast<__half*>(base);
  __half* wh = reinterpret_cast<__half*>(base + x_bytes);
  f32_to_f16_saturate_kernel<<<grid_for(T * w.n_in, kThreads), kThreads, 0, stream>>>(x, xh, T * w.n_in);
  SPECMOE_CUDA_CHECK_LAUNCH();
  for (int64_t r0 = 0; r0 < w.n_out; r0 += slice_rows) {
    const int64_t nr = std::min(slice_rows, w.n_out - r0);
    dequantize_rows_f16(ctx, w.type, static_cast<const uint8_t*>(w.data) + r0 * w.row_bytes, w.row_bytes, nr,
                        w.n_in, wh);
    // Columns [r0, r0 + nr) of y: column-major C starts at y + r0 with ldc = n_out.
    gemm(ctx, CUDA_R_16F, wh, w.n_in, xh, T, w.n_in, nr, y + r0, w.n_out);
  }
}

}  // namespace specmoe::kernels::cuda
