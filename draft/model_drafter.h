// ModelDrafter: drafts with a transformer (an independent, smaller draft model, or the target
// itself exiting after its first layers: see layerskip_drafter.h). It keeps its own KV cache in
// step with the context: accepted() rolls it back to the accepted prefix; each proposal first
// feeds the context tokens the cache lacks (one batched forward; it finds them by comparing the
// cached tokens with the context, so any context works), then decodes g tokens one at a time,
// sampling each from the processed distribution of the shared SamplerChain with the draft's own
// Rng. When the loop verifies on the device the draft model runs on (DraftParams::device), the
// distributions are computed and sampled there (core::DeviceSampler): q stays in device memory
// (Draft::q_device), each drawn id feeds the next draft forward from device memory, and the g
// ids come back in one copy per proposal (one per token with adaptive drafting, which reads the
// confidence).
#pragma once
#include <memory>

#include "core/device_sampler.h"
#include "core/model.h"
#include "draft/drafter.h"

namespace specmoe::draft {

class ModelDrafter : public Drafter {
 public:
  // model: the draft model (owned; keep `model` alive otherwise, see the raw-pointer overload).
  // target_n_vocab: the q rows are written in the target's vocabulary size (the draft's extra
  // padding ids are masked out; missing ids get probability 0). n_layers: early exit (-1 = all).
  // n_ctx: the draft cache's capacity (<= 0: the model's training context).
  ModelDrafter(std::shared_ptr<core::Model> model, int target_n_vocab, int n_layers = -1, int n_ctx = 0);
  ModelDrafter(core::Model* model, int target_n_vocab, int n_layers = -1, int n_ctx = 0);  // not owned

  std::string name() const override { return "model"; }
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;

  const core::KVCache& cache() const { return cache_; }
  // The tokens whose keys/values cache() holds, in order.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  core::Model& model() { return *model_; }

 private:
  void init(int n_ctx);
  // Makes the cache hold context[0..c) and leaves the logits of context[c-1] in logits_ (or, with
  // on_device, in device memory at d_logits_).
  void sync(std::span<const int32_t> context, bool on_device);
  // Appends to the cache; the last token's logits go to logits_ or d_logits_.
  void forward(std::span<const int32_t> tokens, bool on_device);
  // propose() with distributions and sampling on the model's device.
  void propose_on_device(const DraftParams& params, int g, Draft& out);

  std::shared_ptr<core::Model> owned_;
  core::Model* model_;
  int target_n_vocab_;
  int n_layers_;
  core::KVCache cache_;
  std::vector<int32_t> cached_;     // mirror of the cache's tokens
  size_t proposed_from_ = 0;        // context length of the last proposal
  std::vector<int32_t> positions_;  // scratch
  std::vector<int32_t> history_;    // context + drafted tokens, for the repetition penalties
  std::vector<float> logits_;       // (n_vocab_draft) of the last fed token
  std::unique_ptr<core::DeviceSampler> device_sampler_;  // made on the first on-device proposal
  const float* d_logits_ = nullptr;  // device (n_vocab_draft) logits of the last fed token
};

}  // namespace specmoe::draft
