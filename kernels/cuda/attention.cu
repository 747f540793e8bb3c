// Scaled dot-product attention over a KV cache with GQA, an optional mask among the new tokens,
// an optional sliding window over positions, optional soft-capping of the scores (Gemma 2),
// optional attention sinks (gpt-oss), optional ALiBi biases (bloom, mpt, refact, jais), and
// K/V rows of F32, F16 or Q8_0 (the KV cache types).
// One simple kernel: one block per (token, head) does three passes over the visible keys --
// scores (one warp per key) into a scratch row, exp and sum, then the weighted sum of values.
// Rows are read as stored and widened to fp32 element by element (halves exactly, Q8_0 as
// d * q), so every type runs the same fp32 math as kernels/cpu attention_ref.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_blocks.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kAttentionThreads = 128;

// Bytes of n elements of a KV row type (n a multiple of 32 for Q8_0).
template <DType T>
__host__ __device__ constexpr int64_t kv_bytes(int64_t n) {
  if constexpr (T == DType::F32) return 4 * n;
  if constexpr (T == DType::F16) return 2 * n;
  return n / 32 * 34;  // Q8_0: fp16 d, int8 qs[32]
}

// Element i of a row of type T, as fp32.
template <DType T>
__device__ __forceinline__ float kv_at(const uint8_t* row, int i) {
  if constexpr (T == DType::F32) return reinterpret_cast<const float*>(row)[i];
  if constexpr (T == DType::F16) return __half2float(reinterpret_cast<const __half*>(row)[i]);
  const uint8_t* b = row + (i >> 5) * 34;
  return load_half(b) * static_cast<float>(static_cast<int8_t>(b[2 + (i & 31)]));
}

// grid = (n_head, tokens in this chunk); token t = t0 + blockIdx.y.
// q, out: [T, n_head, head_dim]; k, v rows r < n_past + T at r * k_pitch / v_pitch bytes, KV head
// g at kv_bytes(g * head_dim) into a row. scores: [chunk tokens, n_head, n_kv] scratch. Dynamic
// shared memory: head_dim floats (scaled q). window > 0: positions [n_past + T] (device) hide
// the keys window or more positions behind t, attn_chunk > 0 the keys before t's chunk (Llama 4);
// alibi_slopes (device, [n_head]): the score of a key gets -slope * |pq - pk| from the same positions.
template <DType KT, DType VT>
__global__ void attention_kernel(const float* q, const uint8_t* k, const uint8_t* v, int64_t k_pitch, int64_t v_pitch,
                                 int64_t n_past, int64_t T, int64_t t0, const uint8_t* allowed, int64_t mask_past,
                                 int n_head, int group, int head_dim, float scale, int window, int attn_chunk,
                                 const int32_t* positions, float softcap, const float* sinks,
                                 const float* alibi_slopes, float* scores, float* out) {
  extern __shared__ float q_s[];
  const int h = blockIdx.x;
  const int64_t t = t0 + blockIdx.y;
  const int kvh = h / group;
  const int64_t n_kv = n_past + T;
  // Causal: new token t sees new tokens 0..t, so keys beyond n_past + t are never visible.
  const int64_t n_scan = allowed != nullptr ? n_kv : n_past + t + 1;
  const float* qr = q + (t * n_head + h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) q_s[d] = qr[d] * scale;
  __syncthreads();

  float* s = scores + (static_cast<int64_t>(blockIdx.y) * n_head + h) * n_kv;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
  const uint8_t* kh = k + kv_bytes<KT>(static_cast<int64_t>(kvh) * head_dim);
  const uint8_t* vh = v + kv_bytes<VT>(static_cast<int64_t>(kvh) * head_dim);

  // Pass 1: scores, one warp per key (lanes split the head dimension: coalesced reads of K).
  float local_max = -INFINITY;
  const int64_t q_pos = window > 0 || attn_chunk > 0 || alibi_slopes != nullptr ? positions[n_past + t] : 0;
  const int64_t chunk_start = attn_chunk > 0 ? q_pos - q_pos % attn_chunk : 0;
  const float slope = alibi_slopes != nullptr ? alibi_slopes[h] : 0.0f;
  for (int64_t j = warp; j < n_scan; j += n_warps) {
    const bool visible = (j < n_past - mask_past || allowed == nullptr ||
                          allowed[t * (mask_past + T) + (j - (n_past - mask_past))] != 0) &&
                         (window <= 0 || q_pos - positions[j] < window) &&
                         (attn_chunk <= 0 || positions[j] >= chunk_start);
    float score = -INFINITY;
    if (visible) {  // warp-uniform (same j for all lanes)
      const uint8_t* kr = kh + j * k_pitch;
      float acc = 0.0f;
      for (int d = lane; d < head_dim; d += kWarp) acc += q_s[d] * kv_at<KT>(kr, d);
      score = warp_sum(acc);
      if (softcap > 0.0f) score = softcap * tanhf(score / softcap);  // Gemma 2's attention soft-capping
      if (alibi_slopes != nullptr) {
        const int64_t dist = q_pos - positions[j];
        score += slope * -static_cast<float>(dist < 0 ? -dist : dist);
      }
    }
    if (lane == 0) s[j] = score;
    local_max = fmaxf(local_max, score);
  }
  const float key_max = block_max(local_max);  // its barriers also publish s[] to the block
  if (key_max == -INFINITY) {  // sees no key at all (block-uniform branch): no value to weigh
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) out[(t * n_head + h) * head_dim + d] = 0.0f;
    return;
  }

  // The sink (gpt-oss) joins the softmax without a value: in the max and, once, in the sum.
  const float max_score = sinks != nullptr ? fmaxf(key_max, sinks[h]) : key_max;
  // Pass 2: unnormalized probabilities in place, and their sum.
  float local_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n_scan; j += blockDim.x) {
    const float p = expf(s[j] - max_score);  // exp(-inf) = 0 for masked keys
    s[j] = p;
    local_sum += p;
  }
  const float sink = sinks != nullptr ? expf(sinks[h] - max_score) : 0.0f;
  const float inv_sum = 1.0f / (block_sum(local_sum) + sink);  // one term (a key's or the sink's) is 1

  // Pass 3: out[d] = sum_j p_j v_j[d] / sum; threads split d (coalesced reads of V rows).
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n_scan; ++j) {
      const float p = s[j];
      if (p != 0.0f) acc += p * kv_at<VT>(vh + j * v_pitch, d);  // skipping masked rows keeps 0 * inf out
    }
    out[(t * n_head + h) * head_dim + d] = acc * inv_sum;
  }
}

// Calls f(integral_constant<DType, T>) for a KV row type; false for any other type.
template <typename F>
bool dispatch_kv(DType type, F&& f) {
  switch (type) {
    case DType::F32: f(std::integral_constant<DType, DType::F32>{}); return true;
    case DType::F16: f(std::integral_constant<DType, DType::F16>{}); return true;
    case DType::Q8_0: f(std::integral_constant<DType, DType::Q8_0>{}); return true;
    default: return false;
  }
}

}  // namespace detail

void attention(Context& ctx, const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
               const AttentionParams& p, float* out) {
  using detail::require;
  require(T >= 0, "attention", "T < 0");
  require(p.n_head > 0 && p.n_head_kv > 0 && p.head_dim > 0, "attention",
          "n_head, n_head_kv and head_dim must be positive");
  require(p.n_head % p.n_head_kv == 0, "attention",
          "n_head = " + std::to_string(p.n_head) + " is not a multiple of n_head_kv = " + std::to_string(p.n_head_kv));
  require(kv.n_past >= 0, "attention", "n_past < 0");
  require(kv.mask_past >= 0 && kv.mask_past <= kv.n_past && (kv.mask_past == 0 || allowed != nullptr), "attention",
          "a mask over the last " + std::to_string(kv.mask_past) + " of " + std::to_string(kv.n_past) +
              " cached rows needs 0 <= mask_past <= n_past and a mask");
  const int64_t kv_dim = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
  for (const auto& [type, pitch, what] : {std::tuple{kv.k_type, kv.k_row_bytes, "key"},
                                          std::tuple{kv.v_type, kv.v_row_bytes, "value"}}) {
    const bool known = type == DType::F32 || type == DType::F16 || type == DType::Q8_0;
    require(known, "attention", std::string(what) + " rows of type " + dtype_name(type) + ": KV rows are F32, F16 or Q8_0");
    require(type != DType::Q8_0 || p.head_dim % 32 == 0, "attention",
            std::string("Q8_0 ") + what + " rows need head_dim = " + std::to_string(p.head_dim) +
                " to be a multiple of 32");
    require(pitch >= row_bytes_of(type, kv_dim), "attention",
            std::string(what) + " rows " + std::to_string(pitch) + " bytes apart hold fewer than kv_dim = " +
                std::to_string(kv_dim) + " elements");
  }
  // q_s (head_dim floats) must fit the 48 KiB of shared memory a launch gets without opt-in.
  require(p.head_dim <= 4096, "attention", "head_dim = " + std::to_string(p.head_dim) + " exceeds 4096");
  require(p.window >= 0, "attention", "window < 0");
  require(p.softcap >= 0.0f, "attention", "softcap < 0");
  require(p.window == 0 || kv.positions != nullptr, "attention", "a sliding window needs kv.positions");
  require(p.chunk >= 0, "attention", "chunk < 0");
  require(p.chunk == 0 || kv.positions != nullptr, "attention", "chunked attention needs kv.positions");
  require(p.alibi_slopes == nullptr || kv.positions != nullptr, "attention", "ALiBi needs kv.positions");
  if (T == 0) return;
  detail::require_ptr(q, "attention", "q");
  detail::require_ptr(kv.k, "attention", "kv.k");
  detail::require_ptr(kv.v, "attention", "kv.v");
  detail::require_ptr(out, "attention", "out");
  require(static_cast<const void*>(q) != static_cast<const void*>(out), "attention", "out aliases q");
  DeviceGuard guard(ctx.device());

  // Scores scratch: tokens are processed in chunks so that it stays under kDequantSliceBytes
  // (a long prompt against a long cache would otherwise need T * n_head * n_kv floats).
  const int64_t n_kv = kv.n_past + T;
  const size_t row_bytes = static_cast<size_t>(p.n_head) * static_cast<size_t>(n_kv) * sizeof(float);
  int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kDequantSliceBytes / row_bytes));
  chunk = std::min<int64_t>({chunk, T, 65535});  // gridDim.y limit
  auto* scores = static_cast<float*>(ctx.scratch(Context::Scratch::Attention, static_cast<size_t>(chunk) * row_bytes));
  const size_t smem = static_cast<size_t>(p.head_dim) * sizeof(float);
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t n = std::min(chunk, T - t0);
    const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(n));
    detail::dispatch_kv(kv.k_type, [&](auto kt) {
      detail::dispatch_kv(kv.v_type, [&](auto vt) {
        detail::attention_kernel<decltype(kt)::value, decltype(vt)::value>
            <<<grid, detail::kAttentionThreads, smem, detail::stream_of(ctx)>>>(
                q, static_cast<const uint8_t*>(kv.k), static_cast<const uint8_t*>(kv.v),
                static_cast<int64_t>(kv.k_row_bytes), static_cast<int64_t>(kv.v_row_bytes), kv.n_past, T, t0, allowed,
                kv.mask_past,
                p.n_head, p.n_head / p.n_head_kv, p.head_dim, p.scale, p.window, p.chunk, kv.positions, p.softcap, p.sinks,
                p.alibi_slopes, scores, out);
      });
    });
    SPECMOE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace specmoe::kernels::cuda
