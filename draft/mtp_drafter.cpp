// Drafting with the target's multi-token-prediction block: see mtp_drafter.h.
#include "draft/mtp_drafter.h"

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::draft {

namespace {

core::Model& checked_block(core::Model& target, const std::shared_ptr<core::Model>& block) {
  if (block == nullptr) throw_error(ErrorKind::InvalidArgument, "mtp drafter: no block model given");
  const core::ModelConfig &t = target.config(), &b = block->config();
  if (t.n_embd != b.n_embd || t.n_vocab != b.n_vocab)
    throw_error(ErrorKind::InvalidArgument,
                "mtp drafter: the block of {} (width {}, {} ids) does not fit the target {} (width {}, {} ids)",
                block->file().path(), b.n_embd, b.n_vocab, target.file().path(), t.n_embd, t.n_vocab);
  if (!(block->device() == target.device()))
    throw_error(ErrorKind::InvalidArgument, "mtp drafter: the block of {} runs on {}, the target {} on {}: load both on one device",
                block->file().path(), block->device().name(), target.file().path(), target.device().name());
  return *block;
}

}  // namespace

MtpDrafter::MtpDrafter(core::Model& target, int n_ctx) : MtpDrafter(target, target, nullptr, n_ctx) {}

MtpDrafter::MtpDrafter(core::Model& target, std::shared_ptr<core::Model> block, int n_ctx)
    : MtpDrafter(target, checked_block(target, block), block, n_ctx) {}

MtpDrafter::MtpDrafter(core::Model& target, core::Model& block, std::shared_ptr<core::Model> owned, int n_ctx)
    : FeatureDrafter(target, block, block.config().n_embd, 0, target.config().n_embd), owned_block_(std::move(owned)) {
  if (!head_.has_mtp())
    throw_error(ErrorKind::Unsupported,
                "mtp drafter: {} has no multi-token-prediction block specmoe runs (nextn_predict_layers of a deepseek2, "
                "glm4moe, qwen35 or qwen35moe file converted with its NextN/MTP tensors)",
                head_.file().path());
  init(head_.new_mtp_cache(n_ctx));
}

}  // namespace specmoe::draft
