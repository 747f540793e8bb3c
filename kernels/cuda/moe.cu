// Mixture-of-experts routing, capacity limit, grouping, gather and combine on the GPU (see moe_ops.h).
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

// The largest v[i] over i in [0, n) with eligible[i] != 0, or -1 when none is eligible: one scan
// of moe::top_k_indices (replaces the best only on a strictly greater value, so the lowest index
// wins among equals; NaN loses to every number).
__device__ int best_eligible(const float* v, int n, const uint8_t* eligible) {
  int best = -1;
  for (int i = 0; i < n; ++i) {
    if (!eligible[i]) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const float s = v[i], b = v[best];
    if (s > b || (isnan(b) && !isnan(s))) best = i;
  }
  return best;
}

// Bytes of dynamic shared memory of group_kernel: score, biased [E] and group score [G] floats,
// then the eligibility flags of experts [E] and groups [G].
size_t group_shared_bytes(int E, int G) {
  return (2 * static_cast<size_t>(E) + G) * sizeof(float) + static_cast<size_t>(E) + G;
}

// One block per token. The block computes the E scores (moe::gate_scores: sigmoid, or softmax
// with the max and the double sum taken by thread 0 in index order, as the CPU does), then thread
// 0 alone runs moe::GroupRouter::select step by step (a few scans of E entries for the k <= 8 of
// released models): the same float/double operations in the same order, so the CPU and GPU
// results agree exactly unless a double exp rounds differently (at most 1 ulp of double before
// the rounding to float). An expert or group already picked is made ineligible, which is
// top_k_indices' "taken".
__global__ void group_kernel(const float* logits, int E, int k, int G, int topk_group, bool normalize, float scale,
                             const float* bias, bool softmax, int32_t* experts, float* weights) {
  extern __shared__ float shm[];
  float* score = shm;                // [E] unbiased scores
  float* biased = score + E;         // [E] selection scores
  float* gscore = biased + E;        // [G]
  auto* elig = reinterpret_cast<uint8_t*>(gscore + G);  // [E]
  uint8_t* gelig = elig + E;         // [G]
  __shared__ float s_max;
  __shared__ double s_sum;
  const int64_t t = blockIdx.x;
  const float* l = logits + t * E;
  if (softmax) {
    if (threadIdx.x == 0) {
      float mx = -INFINITY;
      for (int e = 0; e < E; ++e)
        if (!isnan(l[e])) mx = fmaxf(mx, l[e]);
      if (!isfinite(mx)) mx = 0.0f;
      double sum = 0.0;
      for (int e = 0; e < E; ++e) sum += exp(static_cast<double>(l[e]) - mx);
      s_max = mx;
      s_sum = sum;
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    score[e] = softmax ? static_cast<float>(exp(static_cast<double>(l[e]) - s_max) / s_sum)
                       : static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(l[e]))));
    biased[e] = score[e] + (bias ? bias[e] : 0.0f);
  }
  __syncthreads();  // the last barrier: only thread 0 continues
  if (threadIdx.x != 0) return;

  const int gs = E / G;  // experts per group
  if (G > 1) {
    // A group's score: the sum of its (up to) two best biased scores.
    const int top = gs >= 2 ? 2 : 1;
    for (int g = 0; g < G; ++g) {
      const float* s = biased + g * gs;
      uint8_t* el = elig + g * gs;
      for (int i = 0; i < gs; ++i) el[i] = 1;
      const int b0 = best_eligible(s, gs, el);
      int b1 = 0;
      if (top == 2) {
        el[b0] = 0;
        b1 = best_eligible(s, gs, el);
      }
      gscore[g] = s[b0] + (top == 2 ? s[b1] : 0.0f);
    }
    for (int g = 0; g < G; ++g) gelig[g] = 1;
    for (int j = 0; j < topk_group; ++j) gelig[best_eligible(gscore, G, gelig)] = 0;  // 0 = kept group
    for (int e = 0; e < E; ++e) elig[e] = gelig[e / gs] == 0 ? 1 : 0;
  } else {
    for (int e = 0; e < E; ++e) elig[e] = 1;
  }
  int32_t* ex = experts + t * k;
  float* w = weights + t * k;
  for (int j = 0; j < k; ++j) {
    const int best = best_eligible(biased, E, elig);  // k <= eligible experts (host check): >= 0
    elig[best] = 0;
    ex[j] = best;
  }
  // Weights from the unbiased scores, in double, rounded once (as the CPU router).
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += score[ex[j]];
  for (int j = 0; j < k; ++j) {
    const double wj = normalize ? score[ex[j]] / (sum + 1e-20) : score[ex[j]];
    w[j] = static_cast<float>(wj * scale);
  }
}

// One thread per expert e: scans the n assignments in (token, slot) order in the read-only copy
// `ids` and drops e's assignments after the first `capacity` (moe::apply_capacity). Only thread
// ids[a] writes experts[a] and weights[a], and no thread reads them: no race.
__global__ void capacity_kernel(const int32_t* ids, int64_t n, int E, int64_t capacity, int32_t* experts,
                                float* weights) {
  const int e = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (e >= E) return;
  int64_t used = 0;
  for (int64_t a = 0; a < n; ++a) {
    if (ids[a] != e) continue;
    if (used < capacity) {
      ++used;
    } else {
      experts[a] = -1;
      weights[a] = 0.0f;
    }
  }
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

// One block per sorted position p: copies row sorted[p] / k of x to row p of xs; a dropped
// assignment (experts given and experts[a] < 0) is not copied and gets slot_pos -1.
__global__ void gather_kernel(const float* x, int64_t d, const int32_t* sorted, int k, float* xs, int32_t* slot_pos,
                              const int32_t* experts, const float* scale) {
  const int64_t p = blockIdx.x;
  const int32_t a = sorted[p];
  if (experts != nullptr && experts[a] < 0) {
    if (threadIdx.x == 0) slot_pos[a] = -1;
    return;
  }
  if (threadIdx.x == 0) slot_pos[a] = static_cast<int32_t>(p);
  const float* src = x + static_cast<int64_t>(a / k) * d;
  float* dst = xs + p * d;
  if (scale != nullptr) {  // llama4: the expert reads its routing weight times the row
    const float w = scale[a];
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i] * w;
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i];
  }
}

// One block per token; each thread owns output elements i and sums the kept slots in rank order
// (a dropped slot, slot_pos -1, is skipped as in moe::MoELayer::combine).
__global__ void combine_kernel(float* x, int64_t d, int k, const float* y, const int32_t* slot_pos,
                               const float* weights, const float* shared, const float* shared_gate) {
  const int64_t t = blockIdx.x;
  const int32_t* pos = slot_pos + t * k;
  const float* w = weights != nullptr ? weights + t * k : nullptr;
  float gs = 1.0f;
  if (shared_gate) gs = 1.0f / (1.0f + expf(-shared_gate[t]));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int j = 0; j < k; ++j)
      if (pos[j] >= 0) o += (w != nullptr ? w[j] : 1.0f) * y[static_cast<int64_t>(pos[j]) * d + i];
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

void moe_group_topk(Context& ctx, const float* logits, int64_t T, int E, int k, const GroupRouterParams& p,
                    int32_t* experts, float* weights) {
  using detail::require;
  const char* op = "moe_group_topk";
  require(T >= 0 && T <= 0x7fffffffLL, op, "T = " + std::to_string(T) + " outside [0, INT_MAX]");
  require(E >= 1 && E <= 2048, op, "E = " + std::to_string(E) + " outside [1, 2048]");
  require(p.n_group >= 1 && E % p.n_group == 0, op,
          "n_group = " + std::to_string(p.n_group) + " must be >= 1 and divide E = " + std::to_string(E));
  require(p.topk_group >= 1 && p.topk_group <= p.n_group, op,
          "topk_group = " + std::to_string(p.topk_group) + " outside [1, n_group = " + std::to_string(p.n_group) + "]");
  const int max_k = p.topk_group * (E / p.n_group);
  require(k >= 1 && k <= max_k, op,
          "k = " + std::to_string(k) + " outside [1, " + std::to_string(max_k) + "] (experts of the kept groups)");
  require(std::isfinite(p.scale), op, "scale is not finite");
  if (T == 0) return;
  detail::require_ptr(logits, op, "logits");
  detail::require_ptr(experts, op, "experts");
  detail::require_ptr(weights, op, "weights");
  DeviceGuard guard(ctx.device());
  const size_t shared = detail::group_shared_bytes(E, p.n_group);  // <= 14 * 2048 bytes
  detail::group_kernel<<<static_cast<unsigned>(T), detail::kMoEThreads, shared, detail::stream_of(ctx)>>>(
      logits, E, k, p.n_group, p.topk_group, p.normalize, p.scale, p.bias, p.softmax, experts, weights);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void moe_apply_capacity(Context& ctx, int32_t* experts, float* weights, int64_t T, int k, int E, int64_t capacity) {
  using detail::require;
  const char* op = "moe_apply_capacity";
  require(T >= 0 && T <= 0x7fffffffLL && k >= 1 && T * k <= 0x7fffffffLL, op,
          "T = " + std::to_string(T) + ", k = " + std::to_string(k) + ": T >= 0, k >= 1 and T * k <= INT_MAX needed");
  require(E >= 1, op, "E = " + std::to_string(E) + " < 1");
  require(capacity >= 0, op, "capacity = " + std::to_string(capacity) + " < 0");
  const int64_t n = T * k;
  if (n == 0) return;
  detail::require_ptr(experts, op, "experts");
  detail::require_ptr(weights, op, "weights");
  DeviceGuard guard(ctx.device());
  cudaStream_t s = detail::stream_of(ctx);
  // The kernel reads a copy of the ids, so that its writes to `experts` race with no read.
  auto* ids = static_cast<int32_t*>(ctx.scratch(Context::Scratch::CubTemp, static_cast<size_t>(n) * sizeof(int32_t)));
  SPECMOE_CUDA_CHECK(
      cudaMemcpyAsync(ids, experts, static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyDeviceToDevice, s));
  const unsigned blocks = static_cast<unsigned>((E + detail::kMoEThreads - 1) / detail::kMoEThreads);
  detail::capacity_kernel<<<blocks, detail::kMoEThreads, 0, s>>>(ids, n, E, capacity, experts, weights);
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
  // Radix sort over the low end_bit bits, 2^end_bit > E: every expert id fits, and a dropped -1
  // (all those bits set; CUB's sign twiddle only touches bit 31) sorts after every expert.
  int end_bit = 1;
  while ((1LL << end_bit) <= E) ++end_bit;
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
                int32_t* slot_pos, const int32_t* experts, const float* scale) {
  using detail::require;
  require(d >= 1 && k >= 1, "moe_gather", "d and k must be >= 1");
  require(n >= 0 && n <= 0x7fffffffLL, "moe_gather", "n = " + std::to_string(n) + " outside [0, INT_MAX]");
  if (n == 0) return;
  detail::require_ptr(x, "moe_gather", "x");
  detail::require_ptr(sorted, "moe_gather", "sorted");
  detail::require_ptr(xs, "moe_gather", "xs");
  detail::require_ptr(slot_pos, "moe_gather", "slot_pos");
  DeviceGuard guard(ctx.device());
  detail::gather_kernel<<<static_cast<unsigned>(n), detail::kMoEThreads, 0, detail::stream_of(ctx)>>>(
      x, d, sorted, k, xs, slot_pos, experts, scale);
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
  require(shared != nullptr || shared_gate == nullptr, "moe_combine", "shared_gate given without shared");
  DeviceGuard guard(ctx.device());
  detail::combine_kernel<<<static_cast<unsigned>(T), detail::kMoEThreads, 0, detail::stream_of(ctx)>>>(
      x, d, k, y, slot_pos, weights, shared, shared_gate);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
