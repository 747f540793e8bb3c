// The transformer forward of every supported architecture (llama, qwen2, qwen2moe, qwen3, qwen3moe,
// olmoe, phi3, gemma2, gemma3, gpt2, deepseek2), written once as a list of Backend op calls (core/backend.h), in the manner of llm.c's
// gpt2_forward: the same code runs on the CPU and on a GPU. Model (core/model.h) checks the arguments and owns one Transformer.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/model_weights.h"

namespace specmoe::core {

// One forward's inputs, already checked (ids in the vocabulary, positions in range, mask
// T x (mask_past + T), the cache made by this backend with room for T more tokens).
struct TransformerBatch {
  std::span<const int32_t> tokens;     // [T]
  std::span<const int32_t> positions;  // [T]
  // host [T, mask_past + T]: mask[i * (mask_past + T) + mask_past + j] != 0 lets new token i see
  // new token j, mask[i * (mask_past + T) + c] the cache's row n_past - mask_past + c (the rows
  // before those are seen by all); null = causal
  const uint8_t* mask = nullptr;
  int64_t mask_past = 0;
  int n_layers = 0;                    // blocks to run (early exit when < n_layer)
  bool logits_all = true;              // false: only the last token's logits
  bool hidden_all = false;             // also every token's final hidden row (Transformer::hidden)
  // Also every token's input rows of these layers side by side ([T, k n_embd] in
  // Transformer::hidden; n_layer: the final hidden row after the output norm): the features an
  // EAGLE-3 head reads. Layers < n_layers, or n_layer with every layer run.
  std::span<const int> capture_layers;
  int64_t head_rows = 0;               // > 0: logits of ids [0, head_rows) only
  int moe_k = 0;                       // MoE: experts per token
  double moe_capacity_factor = 0.0;    // MoE: Switch capacity factor (<= 0: dropless)
};

class Transformer {
 public:
  // weights: resident in `backend`'s memory (resident_weights).
  Transformer(std::shared_ptr<Backend> backend, const ModelConfig& config, ModelWeights weights);

  // Appends the batch's keys/values to kv and returns the logits [T or 1, n_vocab] in the
  // backend's memory (valid until the next forward). routing: [n_layer], each MoE layer's routing
  // of this forward (dense layers and layers past an early exit are left empty).
  Rows forward(const TransformerBatch& batch, KVCache& kv, std::vector<moe::Routing>& routing);

  // The multi-token-prediction block (weights().nextn, present when ModelConfig::has_mtp()) over
  // the batch: token t_i with h_i, the target's final hidden row of the token before t_i ([T,
  // n_embd] in the backend's memory, not this transformer's workspace). kv: a cache whose layer
  // n_layer is the block's. Returns the logits as forward() does; hidden() then holds the block's
  // own normalised output rows, which the next prediction step takes as its h.
  Rows forward_mtp(const TransformerBatch& batch, const float* h, KVCache& kv, moe::Routing& routing);

  // An EAGLE-3 head (weights().eagle3, ModelConfig::is_eagle3) over the batch: token t_i with g_i
  // ([T, n_embd] in the backend's memory), the fused features of the target's rows of the token
  // before it, or the head's own output row of its parent. kv: a cache of its one layer. Returns the
  // logits over the target's vocabulary (a head with its own draft vocabulary scatters its rows
  // through d2t, -inf elsewhere; head_rows: the first ids only, without d2t); hidden() then holds
  // the layer's output rows before the output norm, the next step's g.
  Rows forward_eagle3(const TransformerBatch& batch, const float* g, KVCache& kv, moe::Routing& routing);
  // An EAGLE-3 head's fc over T rows of target features ([T, head_feature_width] in the
  // backend's memory): g rows [T, n_embd] in the workspace, valid until the next call.
  Rows eagle3_fuse(const float* features, int64_t T);
  // A DFlash draft's cache rows for T committed positions from its target's features ([T,
  // head_feature_width] in the backend's memory): each layer's keys and values of the fused rows.
  // Its block then runs through forward() (a mask over the block; logits through d2t).
  void dflash_inject(const float* features, std::span<const int32_t> positions, KVCache& kv);
  // An EAGLE-3 or DFlash head reads its target's embedding and head where its file has none.
  void share_target(const MatrixView& token_embd, const MatrixView& output);

  // The last forward's final hidden rows [T, n_embd] after the output norm (the input of a
  // multi-token-prediction block), when its batch asked (hidden_all), or its captured layer rows
  // (capture_layers); valid until the next forward.
  const Rows& hidden() const { return hidden_; }

  const ModelWeights& weights() const { return w_; }
  Backend& backend() const { return *be_; }

 private:
  // One forward's inputs in the backend's memory (upload_inputs).
  struct Inputs {
    const int32_t* ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* conv_prev = nullptr;      // lfm2
    const int32_t* dn_slots = nullptr;       // recurrent layers
    const int32_t* row_positions = nullptr;  // sliding windows, ALiBi
    const uint8_t* mask = nullptr;
  };
  Inputs upload_inputs(const TransformerBatch& b, KVCache& kv, bool trunk);
  // A draft head's input [rmsnorm(embed(ids); embed_norm) | rmsnorm(h; h_norm)] ([T, 2 n_embd] in
  // the workspace); the workspace's normed-input slot keeps rmsnorm(h; h_norm).
  const float* token_and_row(const MatrixView& embed, const VectorView& embed_norm, const float* h,
                             const VectorView& h_norm, const int32_t* ids, int64_t T);
  // A draft head's final norm and head over its own draft vocabulary, scattered through d2t.
  Rows draft_head(const TransformerBatch& b, int64_t T, KVCache& kv);
  // The final norm and the head over the residual stream; appends the batch to kv.
  Rows finish(const TransformerBatch& b, int64_t T, const VectorView& norm_w, const VectorView& norm_b,
              const MatrixView& head, KVCache& kv);
  // Layer l's weights (l = n_layer: the multi-token-prediction block's layer).
  const LayerWeights& layer(int l) const {
    return l < static_cast<int>(w_.layers.size()) ? w_.layers[static_cast<size_t>(l)] : w_.nextn.block;
  }
  float* buf(size_t slot, size_t floats);  // workspace slot, grown on demand
  void norm(const VectorView& w, const VectorView& b, const float* in, float* out, int64_t rows);
  // in: the attention's input when it is not the normed residual stream (an EAGLE-3 head's [T, 2
  // n_embd] rows; the projections' widths say how wide).
  void attention_block(int l, int64_t T, const int32_t* positions, const int32_t* row_positions, const uint8_t* mask,
                       KVCache& kv, const float* in = nullptr);
  // deepseek2's multi-head latent attention, absorbed form (the cache holds latent rows).
  void mla_attention_block(int l, int64_t T, const int32_t* positions, const uint8_t* mask, KVCache& kv);
  void ffn_block(int l, int64_t T, const TransformerBatch& b, moe::Routing& routing);
  // lfm2's gated short convolution (in place of attention in its convolution layers).
  void conv_block(int l, int64_t T, const int32_t* prev, KVCache& kv);
  // Each new token's n_taps - 1 predecessors on its path (cache rows, oldest first, -1 before the
  // sequence's start), from the batch's mask: the rows a token attends to, in cache order, are its
  // path.
  void conv_predecessors(const TransformerBatch& b, int64_t n_past);
  // qwen35's gated DeltaNet (in place of attention in its recurrent layers): slots [T, 2] each
  // token's parent state slot and its own in the layer's ring (kernels/cpu/ops.h delta_net).
  void delta_net_block(int l, int64_t T, const int32_t* slots, KVCache& kv);
  // granitehybrid's Mamba-2 mixer (in place of attention in its recurrent layers); slots as above.
  void mamba2_block(int l, int64_t T, const int32_t* slots, KVCache& kv);
  // The state slots of this forward's tokens (dn_slots_): each token's parent is its nearest
  // predecessor on its path (path_predecessors with one row).
  void delta_net_slots(const TransformerBatch& b, const KVCache& kv);

  std::shared_ptr<Backend> be_;
  ModelConfig c_;
  ModelWeights w_;
  std::vector<std::shared_ptr<void>> ws_;  // workspace slots in the backend's memory
  std::vector<size_t> ws_bytes_;
  std::vector<RopeParams> rope_;           // [n_layer] each layer's RoPE (n_head set per call)
  bool needs_row_positions_ = false;       // some layer attends through a sliding window, or ALiBi
  bool has_conv_layers_ = false;           // lfm2: some layer is a short convolution
  const float* rope_factors_ = nullptr;     // this forward's phi3 LongRoPE factors (null: the layer's own)
  int64_t mask_past_ = 0;                 // this forward's TransformerBatch::mask_past
  std::vector<int32_t> row_positions_;     // host scratch: positions of the cache rows + new tokens
  std::vector<float> temp_factors_;        // mistral3: this forward's attention temperature per token
  std::vector<int32_t> conv_prev_;         // lfm2: host [T, l_cache - 1], conv_predecessors()
  bool has_recurrent_layers_ = false;      // qwen35: some layer is a gated DeltaNet
  kernels::DeltaNetParams dn_;             // qwen35: its sizes
  kernels::Mamba2Params m2_;               // granitehybrid: its Mamba-2 sizes
  std::vector<int32_t> dn_slots_;          // qwen35: host [T, 2], delta_net_slots()
  std::vector<int32_t> dn_parent_;         // its scratch: each token's parent row
  Rows hidden_;                            // the last forward's hidden rows (hidden_all, capture_layers)
};

}  // namespace specmoe::core
