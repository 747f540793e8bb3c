// Eagle3Drafter: EAGLE-3 (Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large
// Language Models via Training-Time Test"; EAGLE and EAGLE-2, Li et al. 2024): a draft head of one
// decoder layer, trained beside a target, that drafts from the target's own features: the input
// rows of three of its layers (low, middle, high: ModelConfig::head_target_layers), fused by the
// head's fc into one row per token (core::Model::eagle3_fuse). It keeps a cache of its one layer;
// its drafted tokens read its own output rows in place of the target's features (EAGLE-3's
// training-time test). Files come from llama.cpp's converter of EAGLE-3 checkpoints
// (general.architecture "eagle3"); a head with its own smaller vocabulary maps its ids to the
// target's through d2t. The drafting loop is FeatureDrafter's (draft/feature_drafter.h): the
// head's row P pairs token x_{P+1} with the fused features of position P, as llama.cpp's
// draft-eagle3 keeps it (common/speculative.cpp), and trees grow as EAGLE-2's dynamic trees do.
#pragma once
#include <memory>
#include <vector>

#include "draft/feature_drafter.h"

namespace specmoe::draft {

class Eagle3Drafter : public FeatureDrafter {
 public:
  // target: not owned, must outlive the drafter. head: an EAGLE-3 head (core::Model::is_eagle3),
  // owned, bound to the target here (core::Model::bind_target: Error(InvalidArgument) naming both
  // files when they do not fit, Error(Unsupported) when `head` is no EAGLE-3 head). n_ctx: the
  // head's cache capacity (<= 0: its training context).
  Eagle3Drafter(core::Model& target, std::shared_ptr<core::Model> head, int n_ctx = 0);

  std::string name() const override { return "eagle3"; }
  std::vector<int> target_hidden_layers() const override { return head_.config().head_target_layers; }

 protected:
  core::ForwardResult head_forward(const core::Batch& batch, const float* f, core::KVCache& kv,
                                   const core::ForwardOptions& options) override {
    return head_.forward_eagle3(batch, f, kv, options);
  }
  const float* encode(const core::Rows& target_rows) override {
    return head_.eagle3_fuse(target_rows.data, target_rows.rows).data;
  }

 private:
  Eagle3Drafter(core::Model& target, core::Model& head, std::shared_ptr<core::Model> owned, int n_ctx);
  std::shared_ptr<core::Model> owned_head_;
};

}  // namespace specmoe::draft
