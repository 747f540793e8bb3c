// The mixture-of-experts feed-forward block of the shared transformer: binds llama.cpp's MoE
// tensors of one layer to a moe::MoELayer, picks the router from the model's GGUF metadata, and
// keeps the layer's expert statistics. make_feed_forward (core/model_ffn.h) builds it when
// ModelConfig::is_moe().
//
// Tensors (llama.cpp llama-arch.cpp names, llama-model.cpp shapes; GGUF ne order):
//   llama (Mixtral)  blk.N.ffn_gate_inp.weight   {n_embd, n_expert}
//                    blk.N.ffn_gate_exps.weight  {n_embd, n_ff_exp, n_expert}   ffn_up_exps the same
//                    blk.N.ffn_down_exps.weight  {n_ff_exp, n_embd, n_expert}
//   qwen2moe         the above, plus the shared expert
//                    blk.N.ffn_gate_shexp.weight {n_embd, n_ff_shexp}           ffn_up_shexp the same
//                    blk.N.ffn_down_shexp.weight {n_ff_shexp, n_embd}
//                    blk.N.ffn_gate_inp_shexp.weight {n_embd}   (sigmoid gate of the shared expert)
//   sigmoid gating   blk.N.exp_probs_b.bias {n_expert} when present (selection bias, DeepSeek-V3)
// Router: expert_gating softmax -> softmax top-k, renormalised when expert_weights_norm
// (Mixtral) or raw (Qwen-MoE); sigmoid -> sigmoid + group-limited top-k with expert_weights_norm
// and expert_weights_scale.
#pragma once
#include <memory>
#include <span>

#include "core/model_ffn.h"
#include "core/rng.h"
#include "moe/expert_stats.h"
#include "moe/moe_layer.h"
#include "moe/noisy_router.h"

namespace specmoe::core {

class MoEFeedForward : public FeedForward {
 public:
  // Throws Error(Format) naming the file and tensor when one is missing or shaped otherwise.
  MoEFeedForward(const TensorBinder& binder, const ModelConfig& config, int layer);

  void forward(kernels::cpu::ThreadPool& pool, const float* x, int64_t T, float* out) override;
  // Router + k routed experts + the shared expert: what one token's forward reads.
  size_t weight_bytes_per_token() const override;
  MoEFeedForward* moe() override { return this; }

  moe::MoELayer& layer() { return *layer_; }
  const moe::MoELayer& layer() const { return *layer_; }
  // Every forward is recorded here (the per-forward U(T) is in by_size() and last_distinct()).
  const moe::ExpertStats& stats() const { return stats_; }
  void reset_stats();
  // Of the last forward of this layer, on the CPU or on a device (record_routing).
  int last_distinct() const { return routed_elsewhere_ ? elsewhere_distinct_ : layer_->last_distinct_experts(); }
  const moe::Routing& last_routing() const { return routed_elsewhere_ ? elsewhere_routing_ : layer_->last_routing(); }
  // A forward of this layer that ran on a device (core/cuda_model.cpp): records its routing and
  // its tokens per expert ([n_expert], counted there) into the statistics, as forward() does,
  // and makes it the last routing. Throws Error(InvalidArgument) on mismatched sizes.
  void record_routing(moe::Routing routing, std::span<const int64_t> tokens_per_expert);

 private:
  std::unique_ptr<moe::MoELayer> layer_;
  moe::ExpertStats stats_;
  bool routed_elsewhere_ = false;  // the last forward was recorded by record_routing
  moe::Routing elsewhere_routing_;
  int elsewhere_distinct_ = 0;
};

// The router the model's metadata describes, with k = config.n_expert_used.
// bias: the sigmoid router's selection bias [n_expert] (empty = none).
std::unique_ptr<moe::Router> make_config_router(const ModelConfig& config, std::vector<float> bias = {});

// A moe::NormalSource drawing from a seeded counter-based generator (Rng::normal), for the
// noisy top-k router (moe/ sits below core and cannot name core::Rng itself).
inline moe::NormalSource rng_normal_source(std::shared_ptr<Rng> rng) {
  return [rng = std::move(rng)]() { return rng->normal(); };
}

}  // namespace specmoe::core
