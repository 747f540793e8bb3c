// The per-layer feed-forward block as a plug-in seam: the forward calls layer.ffn->forward()
// and does not care whether it is dense (SwiGLU for llama/qwen2, GELU MLP for gpt2) or a mixture
// of experts (moe/ plugs in its own FeedForward through make_feed_forward).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/model_weights.h"

namespace specmoe::core {

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x: [T, n_embd] (already normalised); out: [T, n_embd] (overwritten, not accumulated).
  virtual void forward(kernels::cpu::ThreadPool& pool, const float* x, int64_t T, float* out) = 0;
  // Weight bytes one single-token forward reads (for bandwidth figures).
  virtual size_t weight_bytes_per_token() const = 0;
};

// The FFN of layer `layer` as the file and config describe it. Throws Error(Unsupported) for
// MoE layers until an MoE FeedForward is registered here.
std::unique_ptr<FeedForward> make_feed_forward(const TensorBinder& binder, const ModelConfig& config, int layer);

}  // namespace specmoe::core
