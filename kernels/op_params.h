// Parameter structs shared by the CPU ops (kernels/cpu/ops.h) and their CUDA counterparts
// (kernels/cuda/ops.h), so both backends take the same description of RoPE, attention and a KV
// cache. Plain C++17 (the .cu files include it through kernels/cuda/ops.h).
#pragma once
#include <cstdint>

namespace specmoe::kernels {

enum class RopePairing {
  Adjacent,     // rotates (x[2i], x[2i+1])            llama.cpp LLAMA_ROPE_TYPE_NORM (llama)
  SplitHalves,  // rotates (x[i], x[i + rope_dims/2])  llama.cpp LLAMA_ROPE_TYPE_NEOX (qwen2)
};

struct RopeParams {
  int n_head = 0;
  int head_dim = 0;
  int rope_dims = 0;          // dims rotated at the start of each head (<= head_dim, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // positions are multiplied by it (linear scaling)
  RopePairing pairing = RopePairing::Adjacent;
};

// Scaled dot-product attention (Vaswani et al. 2017) with grouped-query heads (Ainslie et al.
// 2023): query head h reads KV head h / (n_head / n_head_kv).
struct AttentionParams {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
};

// Where the keys/values live (host memory for the CPU ops, device memory for the CUDA ones): row
// r (0 <= r < n_past + T) has kv_dim = n_head_kv * head_dim floats at k + r * kv_stride (likewise
// v). Rows [0, n_past) are the cached tokens, always visible; row n_past + j is new token j.
struct KVView {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t kv_stride = 0;  // floats between rows (>= kv_dim)
  int64_t n_past = 0;
};

}  // namespace specmoe::kernels
