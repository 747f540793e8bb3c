// Self-speculation by early exit: see layerskip_drafter.h.
#include "draft/layerskip_drafter.h"

#include "base/error.h"

namespace specmoe::draft {
namespace {

int checked_exit_layer(const core::Model& target, int exit_layer) {
  const int n_layer = target.config().n_layer;
  if (exit_layer < 1 || exit_layer >= n_layer)
    throw_error(ErrorKind::InvalidArgument,
                "layerskip drafter: exit layer {} must be in 1..{} (the target has {} layers)", exit_layer,
                n_layer - 1, n_layer);
  return exit_layer;
}

}  // namespace

LayerSkipDrafter::LayerSkipDrafter(core::Model& target, int exit_layer, int n_ctx)
    : ModelDrafter(&target, target.config().n_vocab, checked_exit_layer(target, exit_layer), n_ctx) {}

}  // namespace specmoe::draft
