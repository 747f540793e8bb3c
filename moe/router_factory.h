// make_router: builds any router family from one plain spec (configs and the model loader pick
// the family by name or from GGUF keys such as expert_gating_func / expert_weights_norm).
#pragma once
#include <memory>
#include <vector>

#include "moe/group_router.h"
#include "moe/noisy_router.h"
#include "moe/router.h"
#include "moe/softmax_router.h"

namespace specmoe::moe {

struct RouterSpec {
  RouterKind kind = RouterKind::SoftmaxTopK;
  int n_expert = 0;
  int k = 0;
  double capacity_factor = 0.0;   // <= 0: dropless
  GroupRouterOptions group;      // SigmoidGroup and SoftmaxGroup (group.score is set from kind)
  int n_embd = 0;                 // NoisyTopK only: hidden size
  std::vector<float> noise_weight;  // NoisyTopK only: [n_expert, n_embd]
  NormalSource noise;             // NoisyTopK only
};

std::unique_ptr<Router> make_router(RouterSpec spec);  // throws Error(InvalidArgument)

}  // namespace specmoe::moe
