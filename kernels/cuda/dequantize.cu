// Dequantization of GGUF blocks to F16 / F32 and the embedding lookup (get_rows): one thread per
// 32-element chunk for quantized types, one thread per element for float types.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/dequantize.h"
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.h"

namespace specmoe::kernels::cuda {
namespace detail {

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

// Float-type element i of a row (F32, F16 or BF16 bits).
__device__ __forceinline__ float load_float_type(DType type, const uint8_t* row, int64_t i) {
  if (type == DType::F32) return reinterpret_cast<const float*>(row)[i];
  const unsigned short bits = reinterpret_cast<const unsigned short*>(row)[i];
  if (type == DType::F16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(static_cast<unsigned>(bits) << 16);  // BF16 is the top half of an F32
}

// dst[r * n_in + i] = element i of source row r, for rows r < n_rows; rows are row_bytes apart.
template <DType T, typename Out>
__global__ void dequantize_rows_kernel(const uint8_t* src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                                       Out* dst) {
  const int64_t chunks_per_row = n_in / kChunk;
  const int64_t total = n_rows * chunks_per_row;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = g / chunks_per_row, c = g % chunks_per_row;
    float v[kChunk];
    dequant_chunk<T>(src + r * row_bytes, c, v);
    Out* o = dst + r * n_in + c * kChunk;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) store(o + i, v[i]);
  }
}

template <typename Out>
__global__ void convert_rows_kernel(DType type, const uint8_t* src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                                    Out* dst) {
  const int64_t total = n_rows * n_in;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = g / n_in, i = g % n_in;
    store(dst + g, load_float_type(type, src + r * row_bytes, i));
  }
}

template <DType T>
__global__ void get_rows_quant_kernel(const uint8_t* table, size_t row_bytes, int64_t n_table_rows, int64_t n_in,
                                      const int32_t* ids, int64_t n_ids, float* out) {
  const int64_t chunks_per_row = n_in / kChunk;
  const int64_t total = n_ids * chunks_per_row;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = g / chunks_per_row, c = g % chunks_per_row;
    const int64_t id = ids[r];
    float* o = out + r * n_in + c * kChunk;
    if (id < 0 || id >= n_table_rows) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) o[i] = NAN;
      continue;
    }
    float v[kChunk];
    dequant_chunk<T>(table + id * row_bytes, c, v);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) o[i] = v[i];
  }
}

__global__ void get_rows_float_kernel(DType type, const uint8_t* table, size_t row_bytes, int64_t n_table_rows,
                                      int64_t n_in, const int32_t* ids, int64_t n_ids, float* out) {
  const int64_t total = n_ids * n_in;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = g / n_in, i = g % n_in;
    const int64_t id = ids[r];
    out[g] = (id < 0 || id >= n_table_rows) ? NAN : load_float_type(type, table + id * row_bytes, i);
  }
}

template <typename Out>
void dequantize_rows_impl(Context& ctx, DType type, const void* src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                          Out* dst) {
  if (n_rows == 0 || n_in == 0) return;
  DeviceGuard guard(ctx.device());
  const auto* s = static_cast<const uint8_t*>(src);
  constexpr int kThreads = 256;
  const bool quantized = dispatch_quant(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    dequantize_rows_kernel<T, Out><<<grid_for(n_rows * (n_in / kChunk), kThreads), kThreads, 0, stream_of(ctx)>>>(
        s, row_bytes, n_rows, n_in, dst);
  });
  if (!quantized) {
    convert_rows_kernel<Out><<<grid_for(n_rows * n_in, kThreads), kThreads, 0, stream_of(ctx)>>>(
        type, s, row_bytes, n_rows, n_in, dst);
  }
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void check_matrix(const MatrixView& m, const char* op) {
  int64_t elems = 0, bytes = 0;
  block_shape(m.type, elems, bytes);  // throws Unsupported for an unknown type id
  require(m.n_in >= 0 && m.n_out >= 0, op, "matrix has a negative dimension");
  require(m.n_in % elems == 0, op,
          std::string("matrix of type ") + type_name(m.type) + " has n_in = " + std::to_string(m.n_in) +
              ", not a multiple of its block of " + std::to_string(elems));
  const size_t min_row_bytes = static_cast<size_t>(m.n_in / elems * bytes);
  require(m.row_bytes >= min_row_bytes, op,
          "row_bytes = " + std::to_string(m.row_bytes) + " is less than the " + std::to_string(min_row_bytes) +
              " bytes of a row");
  require(m.data != nullptr || m.n_in == 0 || m.n_out == 0, op, "matrix data is null");
  // Float rows are read as whole elements: their starts must stay aligned.
  require(is_quantized(m.type) || m.row_bytes % static_cast<size_t>(bytes) == 0, op,
          std::string("row_bytes of a ") + type_name(m.type) + " matrix must be a multiple of " +
              std::to_string(bytes));
}

void dequantize_rows_f16(Context& ctx, DType type, const void* src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                         void* dst) {
  dequantize_rows_impl(ctx, type, src, row_bytes, n_rows, n_in, static_cast<__half*>(dst));
}

}  // namespace detail

size_t row_bytes_of(DType type, int64_t n) {
  int64_t elems = 0, bytes = 0;
  detail::block_shape(type, elems, bytes);
  detail::require(n >= 0 && n % elems == 0, "row_bytes_of",
                  std::to_string(n) + " elements is not a multiple of " + detail::type_name(type) + "'s block of " +
                      std::to_string(elems));
  return static_cast<size_t>(n / elems * bytes);
}

void dequantize_f16(Context& ctx, DType type, const void* src, int64_t n, uint16_t* dst) {
  const size_t bytes = row_bytes_of(type, n);  // checks n against the block size
  if (n == 0) return;
  detail::require_ptr(src, "dequantize_f16", "src");
  detail::require_ptr(dst, "dequantize_f16", "dst");
  // One "row" of n elements: chunk c of the row is chunk c of the array.
  detail::dequantize_rows_impl(ctx, type, src, bytes, 1, n, reinterpret_cast<__half*>(dst));
}

void dequantize_f32(Context& ctx, DType type, const void* src, int64_t n, float* dst) {
  const size_t bytes = row_bytes_of(type, n);
  if (n == 0) return;
  detail::require_ptr(src, "dequantize_f32", "src");
  detail::require_ptr(dst, "dequantize_f32", "dst");
  detail::dequantize_rows_impl(ctx, type, src, bytes, 1, n, dst);
}

void get_rows(Context& ctx, const MatrixView& table, const int32_t* ids, int64_t n_ids, float* out) {
  detail::check_matrix(table, "get_rows");
  detail::require(n_ids >= 0, "get_rows", "n_ids < 0");
  if (n_ids == 0 || table.n_in == 0) return;
  detail::require_ptr(ids, "get_rows", "ids");
  detail::require_ptr(out, "get_rows", "out");
  DeviceGuard guard(ctx.device());
  const auto* t = static_cast<const uint8_t*>(table.data);
  constexpr int kThreads = 256;
  const bool quantized = detail::dispatch_quant(table.type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    detail::get_rows_quant_kernel<T>
        <<<detail::grid_for(n_ids * (table.n_in / detail::kChunk), kThreads), kThreads, 0, detail::stream_of(ctx)>>>(
            t, table.row_bytes, table.n_out, table.n_in, ids, n_ids, out);
  });
  if (!quantized) {
    detail::get_rows_float_kernel<<<detail::grid_for(n_ids * table.n_in, kThreads), kThreads, 0,
                                    detail::stream_of(ctx)>>>(table.type, t, table.row_bytes, table.n_out,
                                                              table.n_in, ids, n_ids, out);
  }
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
