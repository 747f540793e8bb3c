// Model: one transformer configured from GGUF metadata (llama, qwen2, qwen2moe, qwen3, gemma3,
// gpt2, and Mixtral-style MoE llama), running a batch of new tokens against a KV cache on the backend it
// was loaded onto (core/backend.h; the forward itself is core/transformer.cpp, written once).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/tokenizer.h"
#include "moe/router.h"

namespace specmoe::core {

class GGUFFile;
class Transformer;

// Which new tokens each new token may attend to (all cached tokens are always visible).
// allowed[i * n + j] != 0: new token i sees new token j. Causal: j <= i. Tree verification
// passes each node's ancestors.
struct AttentionMask {
  int n = 0;
  std::vector<uint8_t> allowed;
  static AttentionMask causal(int n);
  // Each token sees itself and its ancestors: parents[i] is the index (< i) of token i's parent
  // among the new tokens, or -1 for a child of the last cached token. Throws Error(InvalidArgument)
  // for a parent that is not an earlier token.
  static AttentionMask from_parents(std::span<const int32_t> parents);
};

// The new tokens of one forward: a chain (every token follows the previous one), or a tree.
struct Batch {
  std::span<const int32_t> tokens;
  // RoPE / learned positions; empty: kv.size() + i for a chain, kv.size() + depth(i) for a tree.
  std::span<const int32_t> positions;
  // Tree batches: parents[i] < i, the index of token i's parent among the new tokens, -1 for a
  // root (a child of the last cached token). The forward then attends along the tree (each token
  // sees the cache, its ancestors and itself). Empty: a chain.
  std::span<const int32_t> parents;
  // A tree drafted level by level: the parents of the cache's last cached_parents.size() rows,
  // nodes of the same tree an earlier forward stored (each an earlier one of them, or -1). parents
  // then number those rows first: p < M (M = cached_parents.size()) is cached row kv.size() - M + p,
  // p >= M new token p - M. Each new token sees the cache before those rows, its ancestors and
  // itself, exactly as if the whole tree were one batch; default positions continue the parents'.
  // Empty: the tree (if any) is all in the batch.
  std::span<const int32_t> cached_parents;

  Batch() = default;
  // A chain of these tokens (implicit, so that forward(tokens, kv) reads as it means).
  Batch(std::span<const int32_t> tokens_) : tokens(tokens_) {}                 // NOLINT
  Batch(const std::vector<int32_t>& tokens_) : tokens(tokens_) {}              // NOLINT
  template <size_t N>
  Batch(const int32_t (&tokens_)[N]) : tokens(tokens_) {}                      // NOLINT
  Batch(std::span<const int32_t> tokens_, std::span<const int32_t> positions_)
      : tokens(tokens_), positions(positions_) {}
};

struct ForwardOptions {
  int exit_layer = -1;                  // early exit: run only the first exit_layer blocks, then
                                        // the final norm and head (-1 = all layers). The cache
                                        // still counts the new tokens, but layers >= exit_layer
                                        // hold no keys/values for them: truncate them away
                                        // before a full-depth forward reads those rows.
  const AttentionMask* mask = nullptr;  // explicit mask among the new tokens (nullptr: causal, or
                                        // the tree's when Batch::parents is given)
  bool logits_all = true;               // false: only the last token's logits are computed
  int moe_k = 0;                        // MoE models: experts per token (0 = the model's moe_k())
  bool hidden = false;                  // also every token's final hidden row (ForwardResult::hidden)
  // Also every token's input rows of these layers, side by side (ForwardResult::hidden [T, k
  // n_embd]; n_layer: the final hidden row after the output norm, as `hidden` gives it): the
  // features an EAGLE-3 head reads. Not with `hidden`; layers past an early exit are errors.
  std::span<const int> hidden_layers;
  int64_t head_rows = 0;                // > 0: logits for the vocabulary's first head_rows ids only
                                        // (rows of width head_rows: a draft's reduced vocabulary,
                                        // draft/model_drafter.h); 0 = all n_vocab
};

// What one forward did besides its logits.
struct ForwardStats {
  // [n_layer]: the routing of each MoE layer this forward ran (n_tokens = 0 for a dense layer or
  // a layer past an early exit). Callers accumulate it (moe::ExpertStats); the model keeps none.
  std::vector<moe::Routing> moe;
  // Distinct routed experts layer `layer` ran, U(T); -1 for a dense layer or one not run.
  int distinct_experts(int layer) const;
};

struct ForwardResult {
  Rows logits;  // [n_tokens or 1, n_vocab or head_rows] in the model's memory, valid until its next forward
  // With ForwardOptions::hidden: [n_tokens, n_embd], each token's final hidden row after the output
  // norm (the row the head reads; the input of a multi-token-prediction block); with hidden_layers
  // [n_tokens, k n_embd], the rows of those layers; an EAGLE-3 head's forward_eagle3: its output
  // rows before the output norm. In the model's memory, valid until its next forward. Empty otherwise.
  Rows hidden;
  ForwardStats stats;
};

struct LoadOptions {
  int n_threads = 0;           // CPU: 0 = all hardware threads
  std::string device = "cpu";  // "cpu", "cuda" (= cuda:0) or "cuda:N": where the forward runs.
                               // On a device the weights are uploaded once at load and caches
                               // from new_cache live in device memory. No CUDA in this build:
                               // Error(Unsupported); no such device: Error(Runtime) naming it.
  // MoE models only (an error on a dense model): experts per token instead of the file's
  // expert_used_count (0 = the file's), and the Switch capacity factor (0 = dropless).
  int moe_k_override = 0;
  double moe_capacity_factor = 0.0;
  // Element types of the caches new_cache makes (llama.cpp's --cache-type-k/-v): F32, F16 (the
  // default, as llama.cpp's) or Q8_0, which needs a head dimension that is a multiple of 32
  // (Error(InvalidArgument) naming the file and layer otherwise).
  KVCacheTypes cache_types;
  // Wrap the backend in a ProfilingBackend (core/backend_profile.h; disabled until its enable(),
  // so untimed until asked): `specmoe bench --profile`.
  bool profile_ops = false;
  // CPU: the pages of the packed weights (kernels/cpu/huge_pages.h). Auto: 2 MiB pages while they
  // fault in cheaply (one-shot commands, which would otherwise pay seconds for them in some
  // virtual machines); the long-running `specmoe run` and `specmoe bench` take On.
  HugePages huge_pages = HugePages::Auto;
};

class Model {
 public:
  // Loads (memory-maps) a GGUF model; throws Error naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const GGUFFile& file() const;
  // Where the forward runs, its memory and ops (samplers and verifiers work on its Rows).
  Backend& backend() const;
  Device device() const;

  // A cache for up to n_ctx tokens (<= 0: the model's training context), in the model's memory,
  // with the element types the model was loaded with (LoadOptions::cache_types) or the given
  // ones. Throws Error(InvalidArgument) naming the file and layer for Q8_0 rows this model's
  // heads cannot be split into.
  KVCache new_cache(int n_ctx = 0) const;
  KVCache new_cache(int n_ctx, const KVCacheTypes& types) const;
  const KVCacheTypes& cache_types() const;

  // Appends the batch's keys/values to kv (converted to its element types) and returns the logits (all rows, or the last with
  // !options.logits_all) and this forward's statistics. Reads every weight once for the whole
  // batch. Throws Error(InvalidArgument) for ids outside the vocabulary, a cache this model did
  // not make or a bad tree, Error(Limit) when the cache is full.
  ForwardResult forward(const Batch& batch, KVCache& kv, const ForwardOptions& options = {});

  // Multi-token prediction (DeepSeek-V3's MTP module, GLM-4.5's and Qwen3.5's NextN block; Gloeckle
  // et al. 2024, DeepSeek-AI 2024 sec. 2.2): a decoder layer after the model's own that predicts
  // the token after next from a token and the model's final hidden row of the token before it.
  // has_mtp(): the file carries one specmoe runs (ModelConfig::has_mtp).
  bool has_mtp() const;
  // A cache for the block's own keys and values (one row per position it has read), up to n_ctx
  // tokens (<= 0: the training context). Throws Error(Unsupported) without a block.
  KVCache new_mtp_cache(int n_ctx = 0) const;
  // The block over a batch (a chain, or a tree as Model::forward takes it: parents, cached tree
  // rows), token i with hidden row i of `hidden` ([T, n_embd] in the model's memory; for the token
  // at position p, the model's ForwardResult::hidden row of position p - 1, or the block's own row
  // of its parent). Appends the block's keys/values to kv (made by new_mtp_cache) and returns the
  // logits (all rows, or the last with !options.logits_all; options.head_rows: the first ids only)
  // and in `hidden` the block's own output rows when options.hidden. Throws Error(InvalidArgument)
  // for ids outside the vocabulary, a cache new_mtp_cache did not make, a bad tree or an early
  // exit; Error(Limit) when the cache is full.
  ForwardResult forward_mtp(const Batch& batch, const float* hidden, KVCache& kv, const ForwardOptions& options = {});

  // EAGLE-3 (Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models
  // via Training-Time Test"): a draft head of one decoder layer (ModelConfig::is_eagle3, a file of
  // llama.cpp's converter) that drafts from its target's features, the input rows of three of the
  // target's layers (ModelConfig::head_target_layers; ForwardOptions::hidden_layers). Its own
  // forward is refused.
  bool is_eagle3() const;
  // Ties the head to its target: checks that the target's width, depth and vocabulary fit (Error(
  // InvalidArgument) naming both files) and that both run on one device, and reads the target's
  // token embedding and head where the head's file has none. The target must outlive this model.
  void bind_target(const Model& target);
  // g rows [T, n_embd] from T rows of the target's features ([T, head_feature_width] in this
  // model's memory): the head's fc (after its norm with norm_before_fc). Valid until the next call.
  Rows eagle3_fuse(const float* features, int64_t T);
  // The head over a batch (a chain or a tree, as Model::forward takes it), token i with g row i
  // ([T, n_embd] in the model's memory: eagle3_fuse of the target's features of the token before
  // it, or the head's own output row of its parent, ForwardResult::hidden). kv: made by this
  // model's new_cache (its one layer). Returns the logits over the target's vocabulary (a head
  // with its own draft vocabulary maps its rows through d2t; the other ids are -inf), all rows or
  // the last with !options.logits_all; head_rows only for a head without d2t; with
  // options.hidden, the layer's output rows before the output norm. Throws Error(Unsupported) for
  // a model that is not an EAGLE-3 head, or one without its own embedding or head not bound to its
  // target, Error(InvalidArgument) as
  // forward_mtp does, Error(Limit) when the cache is full.
  ForwardResult forward_eagle3(const Batch& batch, const float* g, KVCache& kv, const ForwardOptions& options = {});

  // DFlash (Chen et al. 2026, "DFlash: Block Diffusion for Flash Speculative Decoding"; llama.cpp's
  // draft-dflash): a small decoder (ModelConfig::is_dflash) whose cache rows come from its target's
  // features and which drafts a block of tokens in one forward. Its own forward is refused;
  // bind_target ties it to its target as an EAGLE-3 head's.
  bool is_dflash() const;
  // Appends T cache rows (positions kv.size() ..) from the target's features of T committed
  // positions ([T, head_feature_width] in this model's memory): each layer's keys and values of
  // the fused rows. kv: made by this model's new_cache. Error(Limit) when the cache is full.
  void dflash_inject(const float* features, int64_t T, KVCache& kv);
  // The block [last token, mask_token_id x g] at the cache's next positions, every token seeing the
  // cache and the whole block (causal with ModelConfig::dflash_causal): the logits of every block
  // token over the target's vocabulary (through d2t when the draft has one; row i > 0 drafts the
  // token i positions after the last one). Appends the block to kv; the caller truncates it away.
  // Throws Error(Unsupported) for a model that is not a DFlash draft or one not bound to a target
  // whose embedding or head it needs, Error(InvalidArgument) for options other than logits_all and
  // head_rows (without d2t), Error(Limit) when the cache is full.
  ForwardResult forward_dflash(std::span<const int32_t> block, KVCache& kv, const ForwardOptions& options = {});

  // Bytes of weights one single-token forward reads (for bandwidth figures).
  size_t weight_bytes_per_token() const;

  // Mixture of experts: experts per token (0 for a dense model), the capacity factor (<= 0:
  // dropless), and the weight bytes of one routed expert of layer `layer` (0 if dense).
  int moe_k() const;
  double moe_capacity_factor() const;
  size_t moe_expert_bytes(int layer) const;
  // The router of layer `layer` as the model runs it (its selection bias included); the first MoE
  // layer's when `layer` has no experts; a default spec for a dense model.
  moe::RouterSpec moe_router(int layer) const;

 private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specmoe::core
