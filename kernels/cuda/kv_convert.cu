// convert_rows: float rows into KV cache rows of F32, F16 or Q8_0 (the forward's store of new
// keys and values). The bytes equal kernels/cpu quantize_row's: F16 by __float2half_rn (round to
// nearest even, as fp32_to_fp16); Q8_0 by the CPU's fp32 steps with explicit IEEE rounding
// (__fdiv_rn, __fmul_rn, __float2int_rn rounds half to even as lrintf does), so no contraction or
// fast-math flag can change a byte.
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kConvertThreads = 256;

// One thread per element: dst row r, element c as IEEE half bits.
__global__ void convert_f16_kernel(const float* src, int64_t rows, int64_t n, uint8_t* dst, int64_t pitch) {
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    reinterpret_cast<__half*>(dst + r * pitch)[c] = __float2half_rn(src[i]);
  }
}

// One warp per block of 32 elements (block b of row r at r * pitch + 34 b): the block's absolute
// maximum, d = amax / 127 stored as half, q = round(x / d) in [-127, 127].
__global__ void convert_q8_0_kernel(const float* src, int64_t rows, int64_t n, uint8_t* dst, int64_t pitch) {
  const int64_t nb = n / 32, total = rows * nb;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp; w < total; w += warps) {
    const int64_t r = w / nb, b = w % nb;
    const float x = src[r * n + b * 32 + lane];
    const float amax = warp_max(fabsf(x));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const int q = min(127, max(-127, __float2int_rn(__fmul_rn(x, id))));
    uint8_t* block = dst + r * pitch + b * 34;
    block[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
    if (lane == 0) {
      const unsigned short bits = __half_as_ushort(__float2half_rn(d));
      block[0] = static_cast<uint8_t>(bits & 0xFF);
      block[1] = static_cast<uint8_t>(bits >> 8);
    }
  }
}

}  // namespace detail

void convert_rows(Context& ctx, const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch) {
  using detail::require;
  require(rows >= 0 && n >= 0, "convert_rows", "rows and n must be non-negative");
  require(type == DType::F32 || type == DType::F16 || type == DType::Q8_0, "convert_rows",
          std::string("rows of ") + dtype_name(type) + ": only F32, F16 and Q8_0");
  require(dst_pitch >= row_bytes_of(type, n), "convert_rows",
          std::to_string(n) + " " + dtype_name(type) + " elements do not fit rows " + std::to_string(dst_pitch) +
              " bytes apart");
  if (rows == 0 || n == 0) return;
  detail::require_ptr(src, "convert_rows", "src");
  detail::require_ptr(dst, "convert_rows", "dst");
  DeviceGuard guard(ctx.device());
  const cudaStream_t stream = detail::stream_of(ctx);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t pitch = static_cast<int64_t>(dst_pitch);
  switch (type) {
    case DType::F32:
      SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, static_cast<size_t>(n) * sizeof(float),
                                           static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(rows),
                                           cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::F16:
      detail::convert_f16_kernel<<<detail::grid_for(rows * n, detail::kConvertThreads), detail::kConvertThreads, 0,
                                   stream>>>(src, rows, n, out, pitch);
      break;
    default:
      detail::convert_q8_0_kernel<<<detail::grid_for(rows * n, detail::kConvertThreads), detail::kConvertThreads, 0,
                                    stream>>>(src, rows, n, out, pitch);
  }
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
