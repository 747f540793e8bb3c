// A transformer's weights as plain views, bound from a GGUF file's tensors (llama.cpp tensor
// names) with every tensor's shape and type checked at load. The same struct describes the host
// copy (matrices in the file's memory map, 1-D tensors converted to floats held by `host_floats`)
// and a backend's resident copy (resident_weights: on the CPU the same pointers, on a device the
// uploaded ones).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/gguf.h"
#include "core/model_config.h"

namespace specmoe::core {

// Looks tensors up by name and checks them; errors name the file, the tensor and the problem.
class TensorBinder {
 public:
  explicit TensorBinder(const GGUFFile& file) : file_(file) {}

  // A matrix with GGUF ne = {n_in, n_out} (row j = output j). Throws Error(Format) when missing
  // or shaped otherwise, Error(Unsupported) for a type no matmul kernel handles.
  MatrixView matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A stacked tensor with GGUF ne = {n_in, n_out, n_expert}, as one matrix of n_out * n_expert rows.
  MatrixView stacked(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) const;
  // A vector of n elements as floats (any float or quantized type is converted).
  std::vector<float> vector(const std::string& name, int64_t n) const { return values(name, {n}); }
  // A tensor of shape ne (GGUF order) as floats, in storage order.
  std::vector<float> values(const std::string& name, const std::vector<int64_t>& ne) const;
  // A vector of n integers (I32 or I64), e.g. an EAGLE-3 head's d2t.
  std::vector<int64_t> ids(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  const GGUFFile& file() const { return file_; }

 private:
  const GGUFTensorInfo& find(const std::string& name) const;
  // Error(Format) for an integer tensor where weights are expected.
  void reject_integers(const GGUFTensorInfo& t) const;
  const GGUFFile& file_;
};

// One transformer block. Empty views mean "absent" (no bias, no LayerNorm bias, no gate).
struct LayerWeights {
  VectorView attn_norm, attn_norm_b;           // [n_embd]
  // Separate projections (llama, qwen2) ...
  MatrixView wq;                               // (n_embd -> n_head * head_dim)
  MatrixView wk, wv;                           // (n_embd -> kv_dim)
  VectorView bq, bk, bv;                       // qwen2 biases (optional for llama, qwen3, gemma3)
  // ... or one fused projection (gpt2; any architecture whose file has attn_qkv, e.g. phi3):
  // rows [q | k | v].
  MatrixView wqkv;                             // (n_embd -> n_head*head_dim + 2*kv_dim)
  VectorView bqkv;
  // Multi-head latent attention (deepseek2): q = attn_q x, or attn_q_b(norm(attn_q_a x)) with a
  // q LoRA; the latent and the RoPE key [c | k_pe] = attn_kv_a_mqa x, c normalised by
  // attn_kv_a_norm; per head h the key absorption attn_k_b[h] (qk_nope -> kv_lora_rank) and the
  // value decompression attn_v_b[h] (kv_lora_rank -> v_head_dim), stacked over the heads.
  MatrixView wq_a;                             // (n_embd -> q_lora_rank)
  VectorView attn_q_a_norm;                    // [q_lora_rank]
  MatrixView wq_b;                             // (q_lora_rank -> n_head * head_dim)
  MatrixView wkv_a_mqa;                        // (n_embd -> kv_lora_rank + rope_dims)
  VectorView attn_kv_a_norm;                   // [kv_lora_rank]
  MatrixView wk_b;                             // n_head x (qk_nope -> kv_lora_rank): rows h*kv_lora_rank..
  MatrixView wv_b;                             // n_head x (kv_lora_rank -> v_head_dim): rows h*v_head_dim..
  MatrixView wo;                               // (n_head * head_dim -> n_embd)
  MatrixView attn_gate;                        // afmoe: (n_embd -> n_head * head_dim), the output gate
  VectorView bo;
  VectorView attn_q_norm, attn_k_norm;         // qwen3, qwen3moe, gemma3: [head_dim], RMSNorm of each
                                               // head; olmoe: [q_dim] and [kv_dim], of the whole projection
  VectorView attn_post_norm, ffn_post_norm;    // gemma2, gemma3: [n_embd], RMSNorm of each sublayer's output
  VectorView attn_sinks;                       // gpt-oss: [n_head] attention sink logits
  VectorView ffn_norm, ffn_norm_b;             // [n_embd]
  // Dense FFN: SwiGLU down(silu(gate x) * up x) (llama, qwen2), or gpt2's GELU MLP
  // down(gelu(up x + up_b)) + down_b (no gate), or phi3's fused [gate | up] = ffn_up x
  // (ffn_up then maps n_embd -> 2 n_ff).
  MatrixView ffn_gate, ffn_up;                 // (n_embd -> n_ff)
  MatrixView ffn_down;                         // (n_ff -> n_embd)
  VectorView ffn_gate_b, ffn_up_b, ffn_down_b; // gpt2, starcoder2 (up, down); granite (optional)
  // Mixture of experts (Mixtral-style llama, qwen2moe, qwen3moe, olmoe, deepseek2): the experts,
  // the router's description and its selection bias (core/backend.h MoEBlock).
  // moe.weights.empty() for a dense layer (deepseek2's leading layers among them).
  MoEBlock moe;
  // lfm2's gated short convolution, in place of attention: [B | C | x] = shortconv.in_proj xn
  // (n_embd -> 3 n_embd), y = C * conv(B * x) with conv_taps [n_embd, l_cache] (channel c's taps
  // in a row, the last one the current token's), then shortconv.out_proj y (n_embd -> n_embd).
  MatrixView conv_in, conv_out;
  VectorView conv_taps;
  // qwen35's gated DeltaNet, in place of attention (kernels/op_params.h DeltaNetParams):
  // [q | k | v] = attn_qkv xn (n_embd -> conv_dim), z = attn_gate xn (-> n_v_heads * head_dim),
  // alpha = ssm_alpha xn, beta = ssm_beta xn (-> n_v_heads); ssm_conv1d [conv_dim, d_conv],
  // ssm_dt.bias and ssm_a [n_v_heads]; out = ssm_out (rmsnorm_heads(o; ssm_norm) * silu(z)).
  MatrixView ssm_qkv, ssm_gate, ssm_alpha, ssm_beta, ssm_out;
  // qwen3next: [beta | alpha] of each query/key head's n_v / n_k value heads in one ssm_ba (n_embd
  // -> 2 n_v_heads); files of older converters carry ssm_in ([q | k | v | z] per query/key head) in
  // place of attn_qkv and attn_gate.
  MatrixView ssm_ba;
  VectorView ssm_conv, ssm_dt, ssm_a, ssm_norm;
  // granitehybrid's Mamba-2 mixer (kernels/op_params.h Mamba2Params): [z | xBC | dt] = ssm_in xn
  // (n_embd -> in_proj), ssm_conv1d [conv_dim, d_conv] with its optional bias ssm_conv_b, ssm_dt
  // (the dt bias), ssm_a and ssm_d [n_head], ssm_norm [d_inner] (the grouped norm), ssm_out
  // (d_inner -> n_embd).
  MatrixView ssm_in;
  VectorView ssm_conv_b, ssm_d;
  bool fused_qkv() const { return !wqkv.empty(); }
  bool is_mla() const { return !wkv_a_mqa.empty(); }
  bool is_moe() const { return !moe.weights.empty(); }
};

// A multi-token-prediction block (ModelConfig::has_mtp; DeepSeek-V3's MTP module, GLM-4.5's and
// Qwen3.5's NextN): for a token t and the target's final hidden row h of the token before it,
// x = eh_proj [enorm(embed(t)) | hnorm(h)], then the architecture's own decoder layer (`block`, the
// file's layer n_layer), then head_norm and head: the logits of the token after next.
struct NextnWeights {
  MatrixView eh_proj;        // (2 n_embd -> n_embd)
  VectorView enorm, hnorm;   // [n_embd]
  MatrixView embed;          // nextn.embed_tokens, else the model's token_embd
  VectorView head_norm;      // nextn.shared_head_norm, else output_norm
  MatrixView head;           // nextn.shared_head_head, else the model's output
  LayerWeights block;
  bool empty() const { return eh_proj.empty(); }
};

// An EAGLE-3 draft head's own tensors besides its decoder layer (ModelConfig::is_eagle3; llama.cpp
// src/models/eagle3.cpp): g = fc (enc_norm(f)) fuses the target's feature rows f (enc_norm only
// with norm_before_fc); the layer reads [attn_norm(embed(t)) | hidden_norm(g)].
struct Eagle3Weights {
  MatrixView fc;             // (head_feature_width -> n_embd)
  VectorView enc_norm;       // enc.output_norm [head_feature_width], or empty
  VectorView hidden_norm;    // blk.0.attn_norm_2 [n_embd]
  // d2t: the target id of each draft id (the converter adds the index to EAGLE-3's offsets), on the
  // host and as the backend holds it (int32, the scatter_cols op's columns); empty without d2t.
  std::shared_ptr<const std::vector<int32_t>> d2t_host;
  VectorView d2t;            // n_draft_vocab int32 values in the backend's memory (reinterpreted)
  bool empty() const { return fc.empty(); }
};

struct ModelWeights {
  // A looped model (ModelConfig::n_layer_phys > 0): layers[l] for l >= n_layer_phys are copies of
  // layers[l % n_layer_phys], the same weights (and, once resident, the same backend copies).
  int n_layer_phys = 0;
  MatrixView token_embd;                       // (n_embd, n_vocab): row = one token's embedding
  MatrixView position_embd;                    // gpt2, starcoder, some mpt: (n_embd, n_ctx_train)
  VectorView token_embd_norm, token_embd_norm_b;  // bloom: LayerNorm of the embedding
  VectorView alibi_slopes;                     // ALiBi models: [n_head] slopes (computed, not in the file)
  VectorView output_norm, output_norm_b;
  MatrixView output;                           // (n_embd -> n_vocab); token_embd when tied
  VectorView output_b;                         // phi2: [n_vocab], added to the logits
  VectorView rope_freqs;                       // llama3: [rope_dims / 2] frequency divisors (empty: none)
  VectorView rope_long, rope_short;            // phi3 LongRoPE: [rope_dims / 2] divisors (empty: none)
  std::vector<LayerWeights> layers;
  NextnWeights nextn;                          // empty unless ModelConfig::has_mtp()
  Eagle3Weights eagle3;                        // empty unless ModelConfig::is_eagle3(); its token_embd
                                               // and output may be empty (the target's: Model::bind_target)
  // Owner of the 1-D tensors' floats of a host copy (the views above point into it).
  std::shared_ptr<std::vector<std::vector<float>>> host_floats;

  // Bytes of weights one single-token forward reads: every matrix but the embedding table (one row
  // of it is read), and for an MoE layer the router, k routed experts and the shared expert.
  size_t bytes_per_token() const;
};

// Binds every tensor the architecture needs (host views); throws Error naming the file and tensor.
ModelWeights bind_weights(const GGUFFile& file, const ModelConfig& config);
// The router of an MoE layer as the model's metadata describes it, with k = config.n_expert_used
// (softmax top-k renormalised or raw; sigmoid + bias + group-limited with the weights' scale).
moe::RouterSpec config_router_spec(const ModelConfig& config, std::vector<float> bias = {});
// `host` as the backend holds it (core/backend.h Backend::resident for every tensor).
ModelWeights resident_weights(Backend& backend, const ModelWeights& host);

}  // namespace specmoe::core
