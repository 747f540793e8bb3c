// The sampling chain on the device: temperature, top-k, top-p, min-p and softmax producing the
// processed distribution (CUB radix sort + scan), and the penalties applied before it (the CTRL
// repetition penalty, the no-repeat-n-gram ban). The draws are in speculative.cu.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kSampleThreads = 256;

#define SPECMOE_GRID_STRIDE(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void scale_and_index_kernel(const float* logits, float temperature, float* keys, int32_t* ids, int n) {
  SPECMOE_GRID_STRIDE(i, n) {
    keys[i] = logits[i] / temperature;
    ids[i] = static_cast<int32_t>(i);
  }
}

// e[i] = exp(sorted[i] - sorted[0]) for the top-k prefix (sorted is descending, so sorted[0] is the
// max and e is non-increasing with e[0] = 1). Also resets the kept count to 1 (the max is always kept).
__global__ void exp_prefix_kernel(const float* sorted, int k, float* e, int* kept) {
  const float max_key = sorted[0];
  SPECMOE_GRID_STRIDE(i, k) e[i] = expf(sorted[i] - max_key);
  if (blockIdx.x == 0 && threadIdx.x == 0) *kept = 1;
}

// Token i (in descending order) survives top-p when the mass before it is still below top_p, and
// min-p when its probability is >= min_p * p_max, i.e. e[i] >= min_p (e[0] = 1). Both conditions
// are monotone in i, so the kept set is a prefix and its length is the largest kept i + 1.
__global__ void select_prefix_kernel(const float* e, const float* cum, int k, bool use_top_p, float top_p,
                                     bool use_min_p, float min_p, int* kept) {
  const float threshold = top_p * cum[k - 1];
  for (int64_t i = 1 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < k;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool keep_p = !use_top_p || cum[i - 1] < threshold;
    const bool keep_min = !use_min_p || e[i] >= min_p;
    if (keep_p && keep_min) atomicMax(kept, static_cast<int>(i + 1));
  }
}

// probs (zeroed before) [ids[i]] = e[i] / sum of the kept prefix, for i < *kept.
__global__ void scatter_kept_kernel(const float* e, const float* cum, const int32_t* ids, const int* kept,
                                    float* probs) {
  const int m = *kept;
  const float inv = 1.0f / cum[m - 1];
  SPECMOE_GRID_STRIDE(i, m) probs[ids[i]] = e[i] * inv;
}

__global__ void one_hot_kernel(const int32_t* ids, int64_t rows, int64_t n, float* probs) {
  SPECMOE_GRID_STRIDE(r, rows) probs[r * n + ids[r]] = 1.0f;
}

__global__ void mark_tokens_kernel(const int32_t* tokens, int64_t n_tokens, int64_t n_vocab, uint8_t* marks) {
  SPECMOE_GRID_STRIDE(i, n_tokens) {
    const int32_t t = tokens[i];
    if (t >= 0 && t < n_vocab) marks[t] = 1;  // duplicates write the same value: benign
  }
}

__global__ void penalize_kernel(float* logits, const uint8_t* marks, int64_t n_vocab, float penalty) {
  SPECMOE_GRID_STRIDE(i, n_vocab) {
    if (marks[i] != 0) {
      const float l = logits[i];
      logits[i] = l > 0.0f ? l / penalty : l * penalty;
    }
  }
}

#undef SPECMOE_GRID_STRIDE

__global__ void ban_kernel(float* logits, int64_t n_vocab, const int32_t* ids, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t t = ids[i];
    if (t >= 0 && t < n_vocab) logits[t] = -INFINITY;
  }
}

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace detail

void sampling_distribution(Context& ctx, const float* logits, float* probs, int64_t rows, int64_t n_vocab,
                           const SamplingConfig& config) {
  using namespace detail;
  const char* op = "sampling_distribution";
  require(rows >= 0, op, "rows < 0");
  require(n_vocab > 0 && n_vocab <= 0x7fffffffLL, op, "n_vocab = " + std::to_string(n_vocab) + " is outside [1, INT_MAX]");
  require(std::isfinite(config.temperature), op, "temperature is not finite");
  require(config.top_p > 0.0f && config.top_p <= 1.0f, op, "top_p = " + std::to_string(config.top_p) + " is outside (0, 1]");
  require(config.min_p >= 0.0f && config.min_p <= 1.0f, op, "min_p = " + std::to_string(config.min_p) + " is outside [0, 1]");
  if (rows == 0) return;
  require_ptr(logits, op, "logits");
  require_ptr(probs, op, "probs");
  require(static_cast<const void*>(logits) != static_cast<const void*>(probs), op, "probs aliases logits");
  DeviceGuard guard(ctx.device());
  const cudaStream_t s = stream_of(ctx);
  const int n = static_cast<int>(n_vocab);
  ctx.zero(probs, static_cast<size_t>(rows * n_vocab) * sizeof(float));

  if (config.temperature <= 0.0f) {  // greedy: one-hot on the argmax (lowest id among ties)
    auto* ids = static_cast<int32_t*>(ctx.scratch(Context::Scratch::Sampling, static_cast<size_t>(rows) * sizeof(int32_t)));
    argmax_rows(ctx, logits, rows, n_vocab, ids);
    one_hot_kernel<<<grid_for(rows, kSampleThreads), kSampleThreads, 0, s>>>(ids, rows, n_vocab, probs);
    SPECMOE_CUDA_CHECK_LAUNCH();
    return;
  }

  const int k = (config.top_k <= 0 || config.top_k >= n) ? n : config.top_k;
  // Scratch for one row: keys_in, keys_out, e, cum (float), ids_in, ids_out (int32), kept (int).
  const size_t fbytes = align_up(static_cast<size_t>(n) * sizeof(float));
  auto* base = static_cast<uint8_t*>(ctx.scratch(Context::Scratch::Sampling, 6 * fbytes + 256));
  auto* keys_in = reinterpret_cast<float*>(base);
  auto* keys_out = reinterpret_cast<float*>(base + fbytes);
  auto* e = reinterpret_cast<float*>(base + 2 * fbytes);
  auto* cum = reinterpret_cast<float*>(base + 3 * fbytes);
  auto* ids_in = reinterpret_cast<int32_t*>(base + 4 * fbytes);
  auto* ids_out = reinterpret_cast<int32_t*>(base + 5 * fbytes);
  auto* kept = reinterpret_cast<int*>(base + 6 * fbytes);

  size_t sort_bytes = 0, scan_bytes = 0;
  SPECMOE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, keys_in, keys_out, ids_in, ids_out,
                                                                n, 0, static_cast<int>(sizeof(float) * 8), s));
  SPECMOE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, e, cum, k, s));
  const size_t temp_bytes = std::max<size_t>({sort_bytes, scan_bytes, 1});
  void* temp = ctx.scratch(Context::Scratch::CubTemp, temp_bytes);

  for (int64_t r = 0; r < rows; ++r) {
    const float* row_logits = logits + r * n_vocab;
    float* row_probs = probs + r * n_vocab;
    scale_and_index_kernel<<<grid_for(n, kSampleThreads), kSampleThreads, 0, s>>>(row_logits, config.temperature,
                                                                                   keys_in, ids_in, n);
    SPECMOE_CUDA_CHECK_LAUNCH();
    // Radix sort is stable: equal logits stay in id order, so top-k ties keep the lower id.
    size_t bytes = sort_bytes;
    SPECMOE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp, bytes, keys_in, keys_out, ids_in, ids_out, n, 0,
                                                                  static_cast<int>(sizeof(float) * 8), s));
    exp_prefix_kernel<<<grid_for(k, kSampleThreads), kSampleThreads, 0, s>>>(keys_out, k, e, kept);
    SPECMOE_CUDA_CHECK_LAUNCH();
    bytes = scan_bytes;
    SPECMOE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp, bytes, e, cum, k, s));
    if (k > 1) {
      select_prefix_kernel<<<grid_for(k - 1, kSampleThreads), kSampleThreads, 0, s>>>(
          e, cum, k, config.top_p < 1.0f, config.top_p, config.min_p > 0.0f, config.min_p, kept);
      SPECMOE_CUDA_CHECK_LAUNCH();
    }
    scatter_kept_kernel<<<grid_for(k, kSampleThreads), kSampleThreads, 0, s>>>(e, cum, ids_out, kept, row_probs);
    SPECMOE_CUDA_CHECK_LAUNCH();
  }
}

void repeat_penalty(Context& ctx, float* logits, int64_t n_vocab, const int32_t* tokens, int64_t n_tokens,
                    float penalty) {
  using namespace detail;
  const char* op = "repeat_penalty";
  require(n_vocab >= 0 && n_tokens >= 0, op, "negative size");
  require(std::isfinite(penalty) && penalty > 0.0f, op, "penalty = " + std::to_string(penalty) + " must be positive");
  if (n_vocab == 0 || n_tokens == 0 || penalty == 1.0f) return;
  require_ptr(logits, op, "logits");
  require_ptr(tokens, op, "tokens");
  DeviceGuard guard(ctx.device());
  const cudaStream_t s = stream_of(ctx);
  // Marks make each distinct id penalized once, however often it repeats in the window.
  auto* marks = static_cast<uint8_t*>(ctx.scratch(Context::Scratch::Sampling, static_cast<size_t>(n_vocab)));
  ctx.zero(marks, static_cast<size_t>(n_vocab));
  mark_tokens_kernel<<<grid_for(n_tokens, kSampleThreads), kSampleThreads, 0, s>>>(tokens, n_tokens, n_vocab, marks);
  SPECMOE_CUDA_CHECK_LAUNCH();
  penalize_kernel<<<grid_for(n_vocab, kSampleThreads), kSampleThreads, 0, s>>>(logits, marks, n_vocab, penalty);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void ban_tokens(Context& ctx, float* logits, int64_t n_vocab, const int32_t* ids, int64_t n) {
  using namespace detail;
  require(n_vocab >= 0 && n >= 0, "ban_tokens", "negative size");
  if (n_vocab == 0 || n == 0) return;
  require_ptr(logits, "ban_tokens", "logits");
  require_ptr(ids, "ban_tokens", "ids");
  DeviceGuard guard(ctx.device());
  ban_kernel<<<grid_for(n, kSampleThreads), kSampleThreads, 0, stream_of(ctx)>>>(logits, n_vocab, ids, n);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
