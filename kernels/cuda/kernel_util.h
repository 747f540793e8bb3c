// Device-side helpers shared by the kernels/cuda/*.cu files: warp and block reductions, launch
// sizing and host-side argument checks. Include from .cu files only (uses CUDA syntax).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"

namespace specmoe::kernels::cuda::detail {

// Every kernel of this library is launched with a block size that is a multiple of 32, so that
// full-warp shuffles (mask 0xffffffff) are valid in reductions.
constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum of v over the block (1-D, blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. Every thread of the block must call it. Starts with a barrier, so it may be called
// repeatedly and after writes to global or shared memory that other threads read afterwards.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kWarp];
  __shared__ float result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // a previous call may still be reading `partial` / `result`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < n_warps ? partial[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) result = s;
  }
  __syncthreads();
  return result;
}

// Maximum of v over the block; same contract as block_sum. -inf for a block of -inf values.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[kWarp];
  __shared__ float result;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < n_warps ? partial[lane] : -INFINITY;
    m = warp_max(m);
    if (lane == 0) result = m;
  }
  __syncthreads();
  return result;
}

// Blocks for a grid-stride loop over n items with `threads` per block (capped: the loop covers
// the rest).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = 65535LL * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// Host-side argument checks: throw Error(InvalidArgument) naming the op and the argument.
inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(ErrorKind::InvalidArgument, std::string("cuda::") + op + ": " + what);
}

inline void require_ptr(const void* p, const char* op, const char* name) {
  require(p != nullptr, op, std::string(name) + " is null");
}

inline void require_int_range(int64_t v, const char* op, const char* name) {
  require(v >= 0 && v <= std::numeric_limits<int>::max(), op,
          std::string(name) + " = " + std::to_string(v) + " is outside [0, INT_MAX]");
}

inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

}  // namespace specmoe::kernels::cuda::detail
