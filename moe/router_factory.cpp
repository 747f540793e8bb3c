#include "moe/router_factory.h"

namespace specmoe::moe {

std::unique_ptr<Router> make_router(RouterSpec spec) {
  std::unique_ptr<Router> r;
  switch (spec.kind) {
    case RouterKind::SoftmaxTopK:
      r = std::make_unique<SoftmaxTopKRouter>(spec.n_expert, spec.k, true);
      break;
    case RouterKind::SoftmaxTopKRaw:
      r = std::make_unique<SoftmaxTopKRouter>(spec.n_expert, spec.k, false);
      break;
    case RouterKind::NoisyTopK:
      r = std::make_unique<NoisyTopKRouter>(spec.n_expert, spec.k, spec.n_embd,
                                            std::move(spec.noise_weight), std::move(spec.noise));
      break;
    case RouterKind::SigmoidGroup:
    case RouterKind::SoftmaxGroup:
      spec.group.score = spec.kind == RouterKind::SoftmaxGroup ? GateScore::Softmax : GateScore::Sigmoid;
      r = std::make_unique<GroupRouter>(spec.n_expert, spec.k, std::move(spec.group));
      break;
  }
  r->set_capacity_factor(spec.capacity_factor);
  return r;
}

}  // namespace specmoe::moe
