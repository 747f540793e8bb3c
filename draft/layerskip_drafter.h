// LayerSkipDrafter: self-speculative decoding (Zhang et al. 2023 "Draft & Verify"; Elhoushi et
// al. 2024 "LayerSkip"): the target drafts for itself by running only its first L blocks, then
// its final norm and head (ForwardOptions::exit_layer = L). It shares the target's weights (no
// second copy) and keeps its own KV cache for those L layers.
#pragma once
#include "draft/model_drafter.h"

namespace specmoe::draft {

class LayerSkipDrafter : public ModelDrafter {
 public:
  // target: not owned, must outlive the drafter. exit_layer: 1..n_layer-1 (Error otherwise).
  LayerSkipDrafter(core::Model& target, int exit_layer, int n_ctx = 0);
  std::string name() const override { return "layerskip"; }
};

}  // namespace specmoe::draft
