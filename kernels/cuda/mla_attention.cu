// Multi-head latent attention in its absorbed form (DeepSeek-V2) over a cache of latent rows: the
// attention kernel's three passes (attention.cu) with every head reading the same row per token,
// [c | k_pe] as the key and its latent part c as the value. One block per (token, head).
#include <algorithm>
#include <string>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kMlaThreads = 128;

// grid = (n_head, tokens in this chunk); token t = t0 + blockIdx.y. q: [T, n_head, width], out:
// [T, n_head, rank], rows r < n_past + T at r * stride. scores: [chunk tokens, n_head, n_kv].
// Dynamic shared memory: width floats (the scaled query).
__global__ void mla_attention_kernel(const float* q, const float* rows, int64_t stride, int64_t n_past, int64_t T,
                                     int64_t t0, const uint8_t* allowed, int64_t mask_past, int n_head, int width,
                                     int rank, float scale, int window, const int32_t* positions, float* scores,
                                     float* out) {
  extern __shared__ float q_s[];
  const int h = blockIdx.x;
  const int64_t t = t0 + blockIdx.y;
  const int64_t n_kv = n_past + T;
  const int64_t n_scan = allowed != nullptr ? n_kv : n_past + t + 1;
  const float* qr = q + (t * n_head + h) * width;
  for (int d = threadIdx.x; d < width; d += blockDim.x) q_s[d] = qr[d] * scale;
  __syncthreads();

  float* s = scores + (static_cast<int64_t>(blockIdx.y) * n_head + h) * n_kv;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
  float local_max = -INFINITY;
  const int64_t q_pos = window > 0 ? positions[n_past + t] : 0;
  for (int64_t j = warp; j < n_scan; j += n_warps) {
    const bool visible = (j < n_past - mask_past || allowed == nullptr ||
                          allowed[t * (mask_past + T) + (j - (n_past - mask_past))] != 0) &&
                         (window <= 0 || q_pos - positions[j] < window);
    float score = -INFINITY;
    if (visible) {
      const float* kr = rows + j * stride;
      float acc = 0.0f;
      for (int d = lane; d < width; d += kWarp) acc += q_s[d] * kr[d];
      score = warp_sum(acc);
    }
    if (lane == 0) s[j] = score;
    local_max = fmaxf(local_max, score);
  }
  const float max_score = block_max(local_max);
  float* o = out + (t * n_head + h) * rank;
  if (max_score == -INFINITY) {
    for (int d = threadIdx.x; d < rank; d += blockDim.x) o[d] = 0.0f;
    return;
  }
  float local_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n_scan; j += blockDim.x) {
    const float p = expf(s[j] - max_score);
    s[j] = p;
    local_sum += p;
  }
  const float inv_sum = 1.0f / block_sum(local_sum);
  for (int d = threadIdx.x; d < rank; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n_scan; ++j) {
      const float p = s[j];
      if (p != 0.0f) acc += p * rows[j * stride + d];
    }
    o[d] = acc * inv_sum;
  }
}

}  // namespace detail

void mla_attention(Context& ctx, const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                   const MlaAttentionParams& p, float* out) {
  using detail::require;
  const char* op = "mla_attention";
  require(T >= 0, op, "T < 0");
  require(p.n_head > 0 && p.kv_lora_rank > 0 && p.rope_dims >= 0, op,
          "n_head and kv_lora_rank must be positive, rope_dims >= 0");
  require(kv.n_past >= 0, op, "n_past < 0");
  require(kv.mask_past >= 0 && kv.mask_past <= kv.n_past && (kv.mask_past == 0 || allowed != nullptr), op,
          "a mask over the last " + std::to_string(kv.mask_past) + " of " + std::to_string(kv.n_past) +
              " cached rows needs 0 <= mask_past <= n_past and a mask");
  require(kv.stride >= p.row_width(), op,
          "row stride " + std::to_string(kv.stride) + " is less than the row width " + std::to_string(p.row_width()));
  require(p.row_width() <= 4096, op, "row width " + std::to_string(p.row_width()) + " exceeds 4096");
  require(p.window >= 0, op, "window < 0");
  require(p.window == 0 || kv.positions != nullptr, op, "a sliding window needs kv.positions");
  if (T == 0) return;
  detail::require_ptr(q, op, "q");
  detail::require_ptr(kv.rows, op, "kv.rows");
  detail::require_ptr(out, op, "out");
  require(static_cast<const void*>(q) != static_cast<const void*>(out), op, "out aliases q");
  DeviceGuard guard(ctx.device());

  const int64_t n_kv = kv.n_past + T;
  const size_t row_bytes = static_cast<size_t>(p.n_head) * static_cast<size_t>(n_kv) * sizeof(float);
  int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kDequantSliceBytes / row_bytes));
  chunk = std::min<int64_t>({chunk, T, 65535});
  auto* scores = static_cast<float*>(ctx.scratch(Context::Scratch::Attention, static_cast<size_t>(chunk) * row_bytes));
  const size_t smem = static_cast<size_t>(p.row_width()) * sizeof(float);
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t n = std::min(chunk, T - t0);
    const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(n));
    detail::mla_attention_kernel<<<grid, detail::kMlaThreads, smem, detail::stream_of(ctx)>>>(
        q, kv.rows, kv.stride, kv.n_past, T, t0, allowed, kv.mask_past, p.n_head, p.row_width(), p.kv_lora_rank,
        p.scale, p.window, kv.positions, scores, out);
    SPECMOE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace specmoe::kernels::cuda
