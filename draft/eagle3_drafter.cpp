// Drafting with an EAGLE-3 head: see eagle3_drafter.h.
#include "draft/eagle3_drafter.h"

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

namespace {

core::Model& checked_head(core::Model& target, const std::shared_ptr<core::Model>& head) {
  if (head == nullptr) throw_error(ErrorKind::InvalidArgument, "eagle3 drafter: no head model given");
  if (!head->is_eagle3())
    throw_error(ErrorKind::Unsupported, "eagle3 drafter: {} is not an EAGLE-3 head (general.architecture {}, not eagle3)",
                head->file().path(), head->config().arch_name);
  head->bind_target(target);
  return *head;
}

}  // namespace

Eagle3Drafter::Eagle3Drafter(core::Model& target, std::shared_ptr<core::Model> head, int n_ctx)
    : Eagle3Drafter(target, checked_head(target, head), head, n_ctx) {}

Eagle3Drafter::Eagle3Drafter(core::Model& target, core::Model& head, std::shared_ptr<core::Model> owned, int n_ctx)
    : FeatureDrafter(target, head, head.config().n_embd, 1, head.config().head_feature_width()),
      owned_head_(std::move(owned)) {
  own_vocabulary_ = head.config().n_draft_vocab != head.config().n_vocab;
  init(head.new_cache(n_ctx));
}

}  // namespace specmoe::draft
