// Mixture-of-experts routing, grouping, gather and combine on the GPU (see moe_ops.h).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/moe_ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kMoEThreads = 128;

// One thread per token. k scans of the E logits (k <= 8 and E <= a few hundred in released
// models): the scan replaces the best only on a strictly greater score, so the lowest index wins
// among equals; NaN loses to every number. Already chosen indices are skipped by looking them up
// among the row's first j outputs (k is small).
__global__ void softmax_topk_kernel(const float* logits, int64_t T, int E, int k, bool renormalize,
                                    int32_t* experts, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const float* l = logits + t * E;
  int32_t* ex = experts + t * k;
  float* w = weights + t * k;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < E; ++i) {
      bool taken = false;
      for (int q = 0; q < j; ++q) taken = taken || ex[q] == i;
      if (taken) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const float s = l[i], b = l[best];
      if (s > b || (isnan(b) && !isnan(s))) best = i;
    }
    ex[j] = best;  // k <= E: always found
  }
  // Max-subtracted exponentials in double, rounded once to float (moe::softmax_selected_weights).
  const double mx = l[ex[0]];
  double sum = 0.0;
  if (renormalize) {
    for (int j = 0; j < k; ++j) sum += exp(static_cast<double>(l[ex[j]]) - mx);
  } else {
    for (int i = 0; i < E; ++i) sum += exp(static_cast<double>(l[i]) - mx);
  }
  for (int j = 0; j < k; ++j) w[j] = static_cast<float>(exp(static_cast<double>(l[ex[j]]) - mx) / sum);
}

// counts[experts[a]] += 1 (integer atomics: the result does not depend on the order); values[a] = a.
__global__ void histogram_iota_kernel(const int32_t* experts, int64_t n, int E, int32_t* counts, int32_t* values) {
  for (int64_t a = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; a < n;
       a += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = experts[a];
    if (e >= 0 && e < E) atomicAdd(counts + e, 1);
    values[a] = static_cast<int32_t>(a);
  }
}

// One block per sorted position p: copies row sorted[p] / k of x to row p of xs.
__global__ void gather_kernel(const float* x, int64_t d, const int32_t* sorted, int k, float* xs, int32_t* slot_pos) {
  const int64_t p = blockIdx.x;
  const int32_t a = sorted[p];
  if (threadIdx.x == 0) slot_pos[a] = static_cast<int32_t>(p);
  const float* src = x + static_cast<int64_t>(a / k) * d;
  float* dst = xs + p * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i];
}

// One block per token; each thread owns output elements i and sums the slots in rank order.
__global__ void combine_kernel(float* x, int64_t d, int k, const float* y, const int32_t* slot_pos,
                               const float* weights, const float* shared, const float* shared_gate) {
  const int64_t t = blockIdx.x;
  const int32_t* pos = slot_pos + t * k;
  const float* w = weights + t * k;
  float gs = 1.0f;
  if (shared_gate) gs = 1.0f / (1.0f + expf(-shared_gate[t]));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int j = 0; j < k; ++j) o += w[j] * y[static_cast<int64_t>(pos[j]) * d + i];
    if (shared) o += gs * shared[t * d + i];
    x[t * d + i] += o;
  }
}

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace detail

void moe_softmax_topk(Context& ctx, const float* logits, int64_t T, int E, int k, bool renormalize,
                      int32_t* experts, float* weights) {
  using detail::require;
  require(T >= 0, "moe_softmax_topk", "T = " + std::to_string(T) + " < 0");
  require(E >= 1 && k >= 1 && k <= E, "moe_softmax_topk",
          "k = " + std::to_string(k) + " must be in [1, E = " + std::to_string(E) + "]");
  if (T == 0) return;
  detail::require_ptr(logits, "moe_softmax_topk", "logits");
  detail::require_ptr(experts, "moe_softmax_topk", "experts");
  detail::require_ptr(weights, "moe_softmax_topk", "weights");
  require(T <= 0x7fffffffLL, "moe_softmax_topk", "T exceeds INT_MAX");
  DeviceGuard guard(ctx.device());
  const unsigned blocks = static_cast<unsigned>((T + detail::kMoEThreads - 1) / detail::kMoEThreads);
  detail::softmax_topk_kernel<<<blocks, detail::kMoEThreads, 0, detail::stream_of(ctx)>>>(logits, T, E, k, renormalize,
                                                                                          experts, weights);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void moe_group_by_expert(Context& ctx, const int32_t* experts, int64_t n, int E, int32_t* counts, int32_t* offsets,
                         int32_t* sorted) {
  using detail::require;
  require(n >= 0 && n <= 0x7fffffffLL, "moe_group_by_expert", "n = " + std::to_string(n) + " outside [0, INT_MAX]");
  require(E >= 1, "moe_group_by_expert", "E = " + std::to_string(E) + " < 1");
  detail::require_ptr(counts, "moe_group_by_expert", "counts");
  detail::require_ptr(offsets, "moe_group_by_expert", "offsets");
  DeviceGuard guard(ctx.device());
  cudaStream_t s = detail::stream_of(ctx);
  SPECMOE_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(E) * sizeof(int32_t), s));
  SPECMOE_CUDA_CHECK(cudaMemsetAsync(offsets, 0, sizeof(int32_t), s));
  if (n == 0) {
    SPECMOE_CUDA_CHECK(cudaMemsetAsync(offsets, 0, static_cast<size_t>(E + 1) * sizeof(int32_t), s));
    return;
  }
  detail::require_ptr(experts, "moe_group_by_expert", "experts");
  detail::require_ptr(sorted, "moe_group_by_expert", "sorted");
  // Radix sort over the bits that can be set in an expert id: ceil(log2 E), at least 1.
  int end_bit = 1;
  while ((1LL << end_bit) < E) ++end_bit;
  const int n_items = static_cast<int>(n);

  size_t sort_bytes = 0, scan_bytes = 0;
  SPECMOE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, experts, static_cast<int32_t*>(nullptr),
                                                     static_cast<const int32_t*>(nullptr),
                                                     static_cast<int32_t*>(nullptr), n_items, 0, end_bit, s));
  SPECMOE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, counts, offsets + 1, E, s));
  // Scratch: sorted keys [n], iota values [n], CUB temporaries (256-byte aligned pieces).
  const size_t keys_bytes = detail::align256(static_cast<size_t>(n) * sizeof(int32_t));
  const size_t temp_bytes = std::max<size_t>({sort_bytes, scan_bytes, 1});
  auto* base = static_cast<char*>(ctx.scratch(Context::Scratch::CubTemp, 2 * keys_bytes + temp_bytes));
  auto* keys_out = reinterpret_cast<int32_t*>(base);
  auto* values_in = reinterpret_cast<int32_t*>(base + keys_bytes);
  void* temp = base + 2 * keys_bytes;

  detail::histogram_iota_kernel<<<detail::grid_for(n, 256), 256, 0, s>>>(experts, n, E, counts, values_in);
  SPECMOE_CUDA_CHECK_LAUNCH();
  size_t bytes = sort_bytes;
  SPECMOE_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(temp, bytes, experts, keys_out, values_in, sorted, n_items, 0, end_bit, s));
  bytes = scan_bytes;
  SPECMOE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp, bytes, counts, offsets + 1, E, s));
}

void moe_gather(Context& ctx, const float* x, int64_t d, const int32_t* sorted, int64_t n, int k, float* xs,
                int32_t* slot_pos) {
  using detail::require;
  require(d >= 1 && k >= 1, "moe_gather", "d and k must be >= 1");
  require(n >= 0 && n <= 0x7fffffffLL, "moe_gather", "n = " + std::to_string(n) + " outside [0, INT_MAX]");
  if (n == 0) return;
  detail::require_ptr(x, "moe_gather", "x");
  detail::require_ptr(sorted, "moe_gather", "sorted");
  detail::require_ptr(xs, "moe_gather", "xs");
  detail::require_ptr(slot_pos, "moe_gather", "slot_pos");
  DeviceGuard guard(ctx.device());
  detail::gather_kernel<<<static_cast<unsigned>(n), detail::kMoEThreads, 0, detail::stream_of(ctx)>>>(x, d, sorted, k,
                                                                                                    xs, slot_pos);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void moe_combine(Context& ctx, float* x, int64_t T, int64_t d, int k, const float* y, const int32_t* slot_pos,
                 const float* weights, const float* shared, const float* shared_gate) {
  using detail::require;
  require(d >= 1 && k >= 1, "moe_combine", "d and k must be >= 1");
  require(T >= 0 && T <= 0x7fffffffLL, "moe_combine", "T = " + std::to_string(T) + " outside [0, INT_MAX]");
  if (T == 0) return;
  detail::require_ptr(x, "moe_combine", "x");
  detail::require_ptr(y, "moe_combine", "y");
  detail::require_ptr(slot_pos, "moe_combine", "slot_pos");
  detail::require_ptr(weights, "moe_combine", "weights");
  require(shared != nullptr || shared_gate == nullptr, "moe_combine", "shared_gate given without shared");
  DeviceGuard guard(ctx.device());
  detail::combine_kernel<<<static_cast<unsigned>(T), detail::kMoEThreads, 0, detail::stream_of(ctx)>>>(
      x, d, k, y, slot_pos, weights, shared, shared_gate);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
