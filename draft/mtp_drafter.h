// MtpDrafter: self-speculative decoding with the target's own multi-token-prediction block
// (Gloeckle et al. 2024, "Better & Faster Large Language Models via Multi-token Prediction";
// DeepSeek-AI 2024, DeepSeek-V3 sec. 2.2; GLM-4.5's and Qwen3.5's NextN layer): a decoder layer
// trained to predict the token after next from a token and the target's final hidden row of the
// token before it (core::Model::forward_mtp). It shares the target's weights and keeps a cache of
// its own layer only. The drafting loop is FeatureDrafter's (draft/feature_drafter.h): the block's
// feature rows are the target's final hidden rows as they are, and its cache has a row for the
// first token (with a zero row before it), as llama.cpp's draft-mtp runs it (common/speculative.cpp).
#pragma once
#include <memory>

#include "draft/feature_drafter.h"

namespace specmoe::draft {

class MtpDrafter : public FeatureDrafter {
 public:
  // target: not owned, must outlive the drafter; Error(Unsupported) naming its file unless it has
  // a multi-token-prediction block (core::Model::has_mtp). n_ctx: the block's cache capacity (<= 0:
  // the model's training context).
  explicit MtpDrafter(core::Model& target, int n_ctx = 0);
  // The block from another file (`block`, owned): a file of the block alone (ModelConfig::mtp_only,
  // llama.cpp's --mtp export) or any file of the same model that carries it, beside a target
  // converted without it. Error(InvalidArgument) naming both files unless the widths and
  // vocabularies agree and both run on the same device.
  MtpDrafter(core::Model& target, std::shared_ptr<core::Model> block, int n_ctx = 0);

  std::string name() const override { return "mtp"; }

 protected:
  core::ForwardResult head_forward(const core::Batch& batch, const float* f, core::KVCache& kv,
                                   const core::ForwardOptions& options) override {
    return head_.forward_mtp(batch, f, kv, options);
  }
  const float* encode(const core::Rows& target_rows) override { return target_rows.data; }

 private:
  MtpDrafter(core::Model& target, core::Model& block, std::shared_ptr<core::Model> owned, int n_ctx);
  std::shared_ptr<core::Model> owned_block_;
};

}  // namespace specmoe::draft
