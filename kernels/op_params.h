// Parameter structs shared by the CPU ops (kernels/cpu/ops.h) and their CUDA counterparts
// (kernels/cuda/ops.h), so both backends take the same description of RoPE, attention and a KV
// cache. Plain C++17 (the .cu files include it through kernels/cuda/ops.h).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace specmoe::kernels {

enum class RopePairing {
  Adjacent,     // rotates (x[2i], x[2i+1])            llama.cpp LLAMA_ROPE_TYPE_NORM (llama)
  SplitHalves,  // rotates (x[i], x[i + rope_dims/2])  llama.cpp LLAMA_ROPE_TYPE_NEOX (qwen2)
};

// Pair i (i < rope_dims / 2) of a token at position pos turns by
//   theta_extrap = pos * freq_base^(-2i/rope_dims) / freq_factors[i]
//   theta_interp = freq_scale * theta_extrap
//   theta        = theta_interp                                  (ext_factor == 0)
//                = theta_interp * (1 - m_i) + theta_extrap * m_i  (YaRN, Peng et al. 2023)
//     m_i = ext_factor * (1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1))
// and cos/sin are multiplied by attn_factor: the rotation of ggml's rope_yarn, with the YaRN
// magnitude correction folded into attn_factor by the caller (core::ModelConfig::rope_at).
struct RopeParams {
  int n_head = 0;
  int head_dim = 0;
  int rope_dims = 0;          // dims rotated at the start of each head (<= head_dim, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // positions are multiplied by it (linear scaling)
  RopePairing pairing = RopePairing::Adjacent;
  // Per-pair divisors of the frequency (llama3's rope_freqs.weight): [rope_dims / 2] floats in
  // the op's memory (host for the CPU ops, device for the CUDA ones); null = all 1.
  const float* freq_factors = nullptr;
  float ext_factor = 0.0f;    // YaRN's extrapolation mix (0 = plain interpolation)
  float corr_low = 0.0f;      // YaRN's ramp between these pair indices
  float corr_high = 0.0f;
  float attn_factor = 1.0f;   // cos and sin are multiplied by it (1 = a pure rotation)
};

// Scaled dot-product attention (Vaswani et al. 2017) with grouped-query heads (Ainslie et al.
// 2023): query head h reads KV head h / (n_head / n_head_kv).
struct AttentionParams {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
  // Sliding window (llama.cpp's LLAMA_SWA_TYPE_STANDARD, gemma3's local layers): with window > 0
  // a key at position pk is visible to a query at position pq only when pq - pk < window, on top
  // of the mask (KVView::positions gives the positions). 0 = the whole context.
  int window = 0;
  // Chunked attention (llama.cpp's LLAMA_SWA_TYPE_CHUNKED, Llama 4's local layers): with chunk > 0
  // a key at position pk is visible to a query at position pq only when pk >= pq - pq % chunk,
  // i.e. in the query's chunk of `chunk` positions, on top of the mask (positions as for window).
  // 0 = none.
  int chunk = 0;
  // Soft-capping of the scores (Gemma 2): s = softcap * tanh(s / softcap) after the scale, before
  // the softmax. 0 = none.
  float softcap = 0.0f;
  // Attention sinks (gpt-oss; Xiao et al. 2024 "Efficient Streaming Language Models with Attention
  // Sinks", as a learned logit): per query head h one more score sinks[h] (not scaled) joins the
  // softmax with no value, so a head may attend to nothing: out = sum_j e^(s_j - m) v_j / (sum_j
  // e^(s_j - m) + e^(sinks[h] - m)), m the largest of both. [n_head] floats in the op's memory;
  // null = none.
  const float* sinks = nullptr;
  // ALiBi (Press et al. 2022, "Train Short, Test Long"; bloom, mpt, refact, jais): query head h adds
  // -alibi_slopes[h] * |pq - pk| to the scaled score of the key at position pk (after soft-capping),
  // positions from KVView::positions (required then). [n_head] floats in the op's memory (the
  // slopes alibi_slope gives); null = none.
  const float* alibi_slopes = nullptr;
};

// ALiBi's slope of head h of n_head for a maximum bias max_bias, as ggml's soft_max computes it:
// with n = the largest power of two <= n_head, m0 = 2^(-max_bias / n) and m1 = 2^(-max_bias / 2 / n),
// head h < n gets m0^(h + 1) and the others m1^(2 (h - n) + 1) (the interleaved slopes of the
// paper for head counts that are not powers of two).
inline float alibi_slope(int n_head, float max_bias, int h) {
  const unsigned n = 1u << static_cast<unsigned>(std::floor(std::log2(static_cast<double>(n_head))));
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n));
  return static_cast<unsigned>(h) < n ? std::pow(m0, static_cast<float>(h + 1))
                                      : std::pow(m1, static_cast<float>(2 * (h - static_cast<int>(n)) + 1));
}

// Where the keys/values live (host memory for the CPU ops, device memory for the CUDA ones): row
// r (0 <= r < n_past + T) holds kv_dim = n_head_kv * head_dim elements of k_type at
// k + r * k_row_bytes (likewise v). Rows [0, n_past) are the cached tokens, visible to every new
// token (but the last mask_past, which the mask covers); row n_past + j is new token j. Element
// types (the KV cache types, llama.cpp's --cache-type-k/-v): F32; F16 (IEEE half); Q8_0 (ggml's
// block_q8_0: an fp16 scale and 32 int8 per block, which needs head_dim to be a multiple of 32 so
// that every head starts on a block). KV head g of a row starts dtype_row_bytes(type, g *
// head_dim) bytes into it.
struct KVView {
  const void* k = nullptr;
  const void* v = nullptr;
  size_t k_row_bytes = 0;  // bytes between key rows (>= the bytes of kv_dim elements)
  size_t v_row_bytes = 0;
  int64_t n_past = 0;
  // The mask's columns before the new tokens' (a tree drafted level by level: the cache's last
  // mask_past rows are nodes an earlier forward stored, visible to their descendants only). With
  // a mask, rows [0, n_past - mask_past) are always visible and the mask is [T, mask_past + T]:
  // column c is row n_past - mask_past + c. 0 without a mask.
  int64_t mask_past = 0;
  // [n_past + T] int32 positions of the rows (row n_past + j: new token j), in the op's memory;
  // read only when AttentionParams::window > 0 or alibi_slopes is set (and required then).
  const int32_t* positions = nullptr;
  DType k_type = DType::F32;
  DType v_type = DType::F32;

  // F32 keys and values, rows `stride` floats apart (the layout of every cache before typed ones).
  static KVView f32(const float* k, const float* v, int64_t stride, int64_t n_past,
                    const int32_t* positions = nullptr) {
    KVView kv;
    kv.k = k;
    kv.v = v;
    kv.k_row_bytes = kv.v_row_bytes = static_cast<size_t>(stride) * sizeof(float);
    kv.n_past = n_past;
    kv.positions = positions;
    return kv;
  }
};

// Multi-head latent attention in its absorbed form (DeepSeek-AI 2024, DeepSeek-V2 sec. 2.1.2-2.1.3:
// W_UK is folded into the query, W_UV is applied after the weighted sum, so the cache holds only
// the compressed latent and the decoupled RoPE key). Every token has one row shared by all heads,
// [c (kv_lora_rank) | k_pe (rope_dims)]; head h of new token t has the query [q_c | q_pe] of the
// same width, and the values are the latents c:
//   out[t, h, :] = sum_j softmax_j(scale * q[t, h, :] . row_j) * row_j[0 : kv_lora_rank]
// over the rows j token t sees (the cache, then the new tokens by the mask, within the window).
struct MlaAttentionParams {
  int n_head = 0;
  int kv_lora_rank = 0;
  int rope_dims = 0;
  float scale = 0.0f;
  int window = 0;  // as AttentionParams::window (MlaKVView::positions required when > 0)
  int row_width() const { return kv_lora_rank + rope_dims; }
};

// The latent rows: row r (0 <= r < n_past + T) has row_width floats at rows + r * stride (host
// memory for the CPU ops, device memory for the CUDA ones); rows [0, n_past) are cached, row
// n_past + j is new token j. A separate view from KVView: latent rows are F32 in specmoe's caches.
struct MlaKVView {
  const float* rows = nullptr;
  int64_t stride = 0;  // floats between rows (>= row_width)
  int64_t n_past = 0;
  const int32_t* positions = nullptr;  // [n_past + T], read only when window > 0
  int64_t mask_past = 0;               // as KVView::mask_past
};

// A gated DeltaNet layer's recurrence (Yang, Kautz and Hatamizadeh 2025, "Gated Delta Networks:
// Improving Mamba2 with Delta Rule"; Qwen3-Next's and Qwen3.5's linear-attention layers, llama.cpp
// src/models/qwen35.cpp and ggml_gated_delta_net). Per token, from its projections
// qkv = [q | k | v] (the pre-convolution mix, conv_dim() floats), alpha and beta (n_v_heads each):
//   y = silu(causal depthwise conv of qkv over the token's last d_conv rows on its path)
//   q, k = y's first two parts, each head L2-normalised (x / sqrt(sum x^2 + eps)); v = y's last part
//   per value head h (query/key head h % n_k_heads, as ggml repeats them for qwen35; h / (n_v_heads /
//   n_k_heads) with kv_interleaved, Qwen3-Next's repeat-interleave):
//     M = M_parent * exp(softplus(alpha_h + dt_bias_h) * a_h)          (a = -exp(A_log) < 0)
//     d_j = (v_j - M_j . k) * sigmoid(beta_h);  M_j += d_j k;  out_j = (M_j . q) / sqrt(head_dim)
// where M [head_dim (value j), head_dim (key i)] is the head's state after the token's parent.
// The state of a token (its "slot", state_floats() floats) is [conv tail | M of every value head]:
// the conv tail holds the last d_conv - 1 rows of qkv on the path, oldest first.
struct DeltaNetParams {
  int n_k_heads = 0;  // <arch>.ssm.group_count: query/key heads
  int n_v_heads = 0;  // <arch>.ssm.time_step_rank: value heads, a multiple of n_k_heads
  int head_dim = 0;   // <arch>.ssm.state_size: key and value head width
  int d_conv = 0;     // <arch>.ssm.conv_kernel: the convolution's taps, the token's own included
  float eps = 0.0f;   // the L2 norm's epsilon (the model's RMS epsilon)
  bool kv_interleaved = false;  // qwen3next: value heads g r .. g r + r - 1 read query/key head g
  int64_t key_dim() const { return static_cast<int64_t>(n_k_heads) * head_dim; }
  int64_t value_dim() const { return static_cast<int64_t>(n_v_heads) * head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t conv_state_floats() const { return static_cast<int64_t>(d_conv - 1) * conv_dim(); }
  int64_t state_floats() const {
    return conv_state_floats() + static_cast<int64_t>(n_v_heads) * head_dim * head_dim;
  }
};

// A Mamba-2 mixer's recurrence (Dao and Gu 2024, "Transformers are SSMs", the SSD layer; llama.cpp
// src/models/mamba-base.cpp build_mamba2_layer, granitehybrid's recurrent layers). Per token, from
// its projection [z | xBC | dt] (in_proj() floats: z and x of d_inner, B and C of n_group * d_state,
// dt of n_head):
//   xBC = silu(causal depthwise conv of xBC over the token's last d_conv rows on its path + conv bias)
//   per head h (group g = h / (n_head / n_group), the heads of a group consecutive):
//     dt_h = softplus(dt_h + dt_bias_h);  S_h = exp(dt_h a_h) S_h + dt_h x_h B_g^T   (S_h [head_dim, d_state])
//     y_h = S_h C_g + d_h x_h
//   y = y * silu(z), then RMS-normed over each group's d_inner / n_group channels times norm_w
// where S_h starts from the token's parent's state. A token's state slot (state_floats() floats) is
// [conv tail | S of every head], the conv tail the last d_conv - 1 rows of xBC on the path.
struct Mamba2Params {
  int n_head = 0;    // <arch>.ssm.time_step_rank
  int head_dim = 0;  // <arch>.ssm.inner_size / n_head
  int d_state = 0;   // <arch>.ssm.state_size
  int n_group = 0;   // <arch>.ssm.group_count
  int d_conv = 0;    // <arch>.ssm.conv_kernel
  float eps = 0.0f;  // the grouped norm's epsilon (the model's RMS epsilon)
  int64_t d_inner() const { return static_cast<int64_t>(n_head) * head_dim; }
  int64_t conv_dim() const { return d_inner() + 2 * static_cast<int64_t>(n_group) * d_state; }
  int64_t in_proj() const { return d_inner() + conv_dim() + n_head; }
  int64_t conv_state_floats() const { return static_cast<int64_t>(d_conv - 1) * conv_dim(); }
  int64_t state_floats() const { return conv_state_floats() + d_inner() * d_state; }
};

// xIELU (Huang et al. 2025, "Deriving Activation Functions Using Integration"; Apertus's MLP),
// with its trainable scalars already mapped as llama.cpp's ggml_xielu maps them (alpha_n = beta +
// softplus(a_n), alpha_p = softplus(a_p)):
//   y = alpha_p x^2 + beta x                              for x > 0
//   y = (expm1(min(x, eps)) - x) alpha_n + beta x         otherwise
struct XIeluParams {
  float alpha_n = 0.0f;
  float alpha_p = 0.0f;
  float beta = 0.0f;
  float eps = 0.0f;
};

}  // namespace specmoe::kernels
