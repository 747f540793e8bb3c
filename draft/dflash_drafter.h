// DFlashDrafter: DFlash (Chen et al. 2026, "DFlash: Block Diffusion for Flash Speculative
// Decoding"), as llama.cpp 2026-10 runs it (common/speculative.cpp, draft-dflash): a small decoder
// trained beside a target drafts a whole block in ONE forward, where a chain draft model runs g.
//
// Its cache holds one row per committed token, made from the target's features (the input rows of
// some of the target's layers, ModelConfig::head_target_layers) by core::Model::dflash_inject:
// after the prompt's prefill and after each verification, the accepted positions' rows of the
// verify batch are injected. A proposal after context x_0..x_{c-1} runs the block
// [x_{c-1}, <mask> x g] at positions c-1 .. c-1+g, every block token attending to the cache and to
// the whole block (a denoising step of block diffusion); block row i (1..g) gives the distribution
// of the token at position c-1+i, from which d_i is drawn (the target's logits processors, the
// drafter's own Rng, as ModelDrafter draws). The block's rows leave the cache at once. d_i does not
// condition on d_1..d_{i-1}: q_i is still the exact distribution d_i was drawn from, so
// speculative sampling stays lossless (Leviathan et al. 2023 need only that). At temperature 0 the
// drafts are the block rows' argmaxes, llama.cpp's drafts token for token.
//
// Chains only (a block is one path); tree options draw a chain. At most block_size - 1 tokens.
#pragma once
#include <memory>
#include <vector>

#include "core/model.h"
#include "draft/drafter.h"

namespace specmoe::draft {

class DFlashDrafter : public Drafter {
 public:
  // target: not owned, must outlive the drafter. draft: a DFlash draft (core::Model::is_dflash),
  // owned, bound to the target here (core::Model::bind_target: Error(InvalidArgument) naming both
  // files when they do not fit, Error(Unsupported) when it is no DFlash draft). n_ctx: the draft's
  // cache capacity (<= 0: its training context).
  DFlashDrafter(core::Model& target, std::shared_ptr<core::Model> draft, int n_ctx = 0);

  std::string name() const override { return "dflash"; }
  void begin(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) override;
  void accepted(int n_accepted, int32_t next_token) override;
  void accepted_path(std::span<const int32_t> path, int32_t next_token) override;
  bool reads_target_hidden() const override { return true; }
  std::vector<int> target_hidden_layers() const override { return draft_.config().head_target_layers; }
  void target_hidden(std::span<const int32_t> tokens, const core::Rows& hidden) override;

  // The most tokens one proposal drafts: the block size less the last token.
  int max_draft() const { return draft_.config().dflash_block_size - 1; }
  // The draft's cache: one row per committed token whose features were injected.
  const core::KVCache& cache() const { return cache_; }

 private:
  DFlashDrafter(core::Model& target, core::Model& draft, std::shared_ptr<core::Model> owned, int n_ctx);
  // Injects rows `rows` of the last verify batch's features (its first token, then the accepted
  // nodes) at the cache's next positions.
  void commit(std::span<const int32_t> rows);

  core::Model& target_;
  core::Model& draft_;
  std::shared_ptr<core::Model> owned_;
  int64_t width_ = 0;                 // the features' width (head_feature_width)
  core::KVCache cache_;
  core::RowBuffer h_, gathered_, q_;
  std::vector<int32_t> h_tokens_;     // the last verify batch's tokens (h_ holds their features)
  std::vector<int32_t> block_, history_, commit_rows_;
  int n_committed_ = 0;               // tokens whose features are in the cache
  bool awaiting_prefill_ = false;     // begin() saw a prompt the target prefills
};

}  // namespace specmoe::draft
