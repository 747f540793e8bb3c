// ModelConfig: the hyperparameters of a transformer, read from GGUF metadata
// (`<arch>.block_count`, `<arch>.embedding_length`, ... as llama.cpp names them).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_params.h"

namespace specmoe::core {

class GGUFFile;

// The most taps a short convolution may have (lfm2's shortconv.l_cache; LFM2 has 3).
inline constexpr int kMaxShortConvTaps = 64;

enum class Arch {
  Llama, Qwen2, Qwen2Moe, Gpt2, Qwen3, Gemma3, Qwen3Moe, Olmoe, Phi3, Gemma2, Deepseek2,
  Granite, GraniteMoe, Olmo2, Smollm3, StableLm, Gemma, Starcoder2, GptNeox, Phi2, Ernie45, Exaone,
  Exaone4, Mistral3, CommandR, Cohere2, Internlm2, Qwen2Vl, SeedOss, MiniCpm, Glm4, HunyuanDense, Qwen3Vl,
  Qwen3VlMoe, Deepseek, Dots1, Glm4Moe, Ernie45Moe, BailingMoe2, HunyuanMoe, Arcee, Nemotron, Starcoder, GptOss,
  MinimaxM2, Bloom, Mpt, Refact, Jais, Falcon, Olmo, Baichuan, Dbrx, PhiMoe, Qwen, Xverse, Orion, Codeshell, Plamo,
  ChatGlm, ExaoneMoe, Lfm2, Lfm2Moe, SmallThinker, Qwen35, Qwen35Moe, GraniteHybrid, Mamba2, NemotronH, Eagle3, DFlash,
  Maincoder, Apertus, Qwen3Next, Mellum, BailingMoe, Nanbeige, Llama4, Afmoe, Maple, Spark25
};

// The mixer of a model's recurrent layers: Qwen3.5's gated DeltaNet or a Mamba-2 SSM (granitehybrid).
enum class RecurrentMixer { DeltaNet, Mamba2 };

// How RoPE pairs the dimensions of a head (llama.cpp's LLAMA_ROPE_TYPE_NORM vs _NEOX):
// Adjacent rotates (x[2i], x[2i+1]) (llama); SplitHalves rotates (x[i], x[i + d/2]) (qwen2).
enum class RopeStyle { Adjacent, SplitHalves, None };

// The activation of a gated feed-forward down(act(gate x) * up x): SwiGLU (llama, qwen) or
// GELU with the tanh approximation (gemma3's GeGLU); of an ungated one down(act(up x)): GELU
// (gpt2's family, whatever this says), the squared ReLU (arcee, nemotron: ReluSqr) or xIELU
// (apertus: XIelu, with per-layer scalars ModelConfig::xielu).
enum class FfnActivation { Silu, GeluTanh, ReluSqr, XIelu };

// RoPE scaling of the (global) layers: llama.cpp's <arch>.rope.scaling.type (none, linear, yarn),
// and llama3 for files that describe Llama 3.1's frequency factors by keys instead of the
// rope_freqs.weight tensor llama.cpp's converter writes.
enum class RopeScaling { None, Linear, Yarn, Llama3 };

// The RoPE of one layer as the rope op takes it (kernels/op_params.h RopeParams), with llama.cpp's
// YaRN conventions resolved: attn_factor already holds YaRN's magnitude 1 + 0.1 ln(1/freq_scale).
struct LayerRope {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
};

// How router logits become expert scores: llama.cpp's `<arch>.expert_gating_func`
// (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX = 1, _SIGMOID = 2).
enum class ExpertGating { Softmax = 1, Sigmoid = 2 };

struct ModelConfig {
  std::string arch_name;      // general.architecture
  Arch arch = Arch::Llama;
  std::string name;           // general.name (may be empty)
  int n_vocab = 0;
  int n_ctx_train = 0;        // <arch>.context_length
  int n_embd = 0;             // <arch>.embedding_length
  int n_layer = 0;            // <arch>.block_count
  // Multi-token-prediction blocks after the model's own (<arch>.nextn_predict_layers: DeepSeek-V3's
  // MTP, GLM-4.5's and Qwen3.5's NextN): block_count counts them, n_layer does not. The first is
  // layer n_layer of the weights (ModelWeights::nextn) when its architecture is one has_mtp() lists.
  int n_nextn = 0;
  // A looped transformer (nanbeige's <arch>.num_loops): the file's n_layer_phys blocks run
  // n_layer / n_layer_phys times over, each logical layer l with the weights of block
  // l % n_layer_phys and a cache of its own, and (unless <arch>.skip_loop_final_norm) output_norm
  // between loops. 0: not looped.
  int n_layer_phys = 0;
  bool loop_final_norm = true;
  // The file holds the block and the embedding and head only, no layer of the model's own
  // (llama.cpp's `convert_hf_to_gguf.py --mtp` export, "mtp-<name>.gguf"): a draft for the mtp
  // drafter beside its target; its own forward is refused.
  bool mtp_only = false;
  // An EAGLE-3 draft head (general.architecture "eagle3", llama.cpp's converter of EAGLE-3
  // checkpoints; Li et al. 2025): one decoder layer that drafts from the target's own features,
  // the input rows of the target's layers head_target_layers (<arch>.target_layers; n_layer of
  // the target: its final hidden row after the output norm), head_target_width
  // (<arch>.target_hidden_size) floats each, fused by its fc. Its own forward is refused: it runs
  // beside its target (Model::bind_target, forward_eagle3).
  std::vector<int> head_target_layers;
  int head_target_width = 0;
  bool eagle3_norm_before_residual = false;  // <arch>.norm_before_residual: the residual is hidden_norm(g), not g
  bool eagle3_norm_before_fc = false;        // <arch>.norm_before_fc: RMSNorm (enc.output_norm) of the features before fc
  int n_draft_vocab = 0;                     // the head's rows: d2t's length (its own draft vocabulary), else n_vocab
  // A DFlash draft (general.architecture "dflash"; Chen et al. 2026, "DFlash: Block Diffusion for
  // Flash Speculative Decoding"; llama.cpp's converter of DFlashDraftModel checkpoints): a small
  // Qwen3-style decoder whose cache rows are keys and values projected from the fused features of
  // the target's layers head_target_layers (head_target_width = n_embd each), and which drafts a
  // whole block in one forward: [last token, mask token x (block - 1)], attending to the cache and,
  // bidirectionally, to the block. Its own forward is refused: it runs beside its target
  // (Model::bind_target, dflash_inject, forward_dflash).
  int dflash_block_size = 0;    // <arch>.block_size (16 when absent, as llama.cpp): at most block - 1 drafts
  int mask_token_id = -1;       // tokenizer.ggml.mask_token_id (required for a DFlash draft)
  bool dflash_causal = false;   // <arch>.attention.causal: causal attention within the block
  int n_head = 0;             // <arch>.attention.head_count
  int n_head_kv = 0;          // <arch>.attention.head_count_kv (defaults to n_head)
  int head_dim = 0;           // n_embd / n_head unless <arch>.attention.key_length says otherwise
  int n_ff = 0;               // <arch>.feed_forward_length (dense FFN width)
  float norm_eps = 1e-5f;     // rms or layer norm epsilon
  RopeStyle rope_style = RopeStyle::Adjacent;
  int rope_dims = 0;          // <arch>.rope.dimension_count (defaults to head_dim)
  int rope_dims_swa = 0;      // maple, spark2_5: <arch>.rope.dimension_count_swa, the dims the local
                              // (windowed) layers rotate (0 = rope_dims; llama.cpp's n_rot(il))
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / <arch>.rope.scale_linear
  bool tied_output = false;   // no output.weight: the head reuses token_embd

  // Architecture specifics (llama.cpp src/models/<arch>.cpp); the defaults are llama's.
  bool qk_norm = false;       // qwen3, qwen3moe, gemma3, ...: RMSNorm of every q and k head (glm4moe:
                              // where the file has attn_q_norm)
                              // (blk.N.attn_{q,k}_norm, [head_dim]) before RoPE
  bool qk_norm_after_rope = false;  // hunyuan-dense, maincoder: that QK-norm after RoPE
  bool qk_l2_norm = false;    // llama4 (but its 128-expert Maverick): after RoPE, an RMSNorm without
                              // weight over every q and k head of the layers that rotate
                              // (llama.cpp's use_kq_norm, Meta's Llama4TextL2Norm)
  bool qk_norm_full = false;  // olmoe: RMSNorm of the whole q and k projections (attn_q_norm
                              // [n_head * head_dim], attn_k_norm [n_head_kv * head_dim]) before RoPE
  bool post_norms = false;    // gemma2, gemma3: RMSNorm of each sublayer's output (attn_post_norm,
                              // ffn_post_norm) before its residual add
  float embd_scale = 1.0f;    // gemma, gemma2, gemma3: the token embedding times sqrt(n_embd);
                              // granite: <arch>.embedding_scale
  FfnActivation ffn_act = FfnActivation::Silu;
  float attn_scale = 0.0f;    // q.k scale; 0 = 1/sqrt(head_dim). gemma3 27B: 1/sqrt(n_embd / n_head);
                              // granite: <arch>.attention.scale
                              // (its query_pre_attn_scalar; llama.cpp decides by model type)
  float final_logit_softcap = 0.0f;  // <arch>.final_logit_softcapping: logits = c tanh(logits / c); 0 = none
                                     // (gemma2: default 30)
  float attn_logit_softcap = 0.0f;   // gemma2: <arch>.attn_logit_softcapping (default 50): attention
                                     // scores s = c tanh(s / c) before the softmax; 0 = none
  // apertus: xIELU's scalars per layer, read from xielu.alpha_n, xielu.alpha_p, xielu.beta and
  // xielu.eps (a value or one per layer) and mapped as llama.cpp's ggml_xielu maps them.
  std::vector<kernels::XIeluParams> xielu;
  // maple: each layer's routed experts take llama.cpp's clamped SwiGLU silu(min(g, L)) clamp(u, -L, L)
  // with L = <arch>.swiglu_clamp_exp (a value or one per layer; 0 = plain SwiGLU in that layer).
  std::vector<float> swiglu_clamp;
  bool ffn_gate_up_fused = false;    // phi3: ffn_up holds [gate | up] (n_embd -> 2 n_ff), no ffn_gate
  // ALiBi (Press et al. 2022) in every layer, in place of RoPE: bloom, refact and baichuan with 40
  // layers 8 (llama.cpp fixes it), mpt and jais <arch>.attention.max_alibi_bias (absent = 0: no
  // positional signal at all). Head h's slope is kernels::alibi_slope(n_head, alibi_max_bias, h).
  float alibi_max_bias = 0.0f;
  float clamp_kqv = 0.0f;            // mpt, olmo, dbrx: <arch>.attention.clamp_kqv, q, k and v clamped to +-it (0 = none)
  bool rms_norm_bias = false;        // phimoe: each RMSNorm adds a bias (attn_norm.bias, ffn_norm.bias,
                                     // output_norm.bias), as llama.cpp's build_norm does for it
  bool embd_norm = false;            // bloom: LayerNorm of the token embedding (token_embd_norm{,.bias})
  bool position_embd = false;        // mpt: an optional position_embd (gpt2, starcoder: always)
  bool layer_norm = false;           // gpt2, stablelm, starcoder2: LayerNorm with a bias (attn_norm.bias,
                                     // ffn_norm.bias, output_norm.bias) in place of RMSNorm
  bool pre_norms = true;             // olmo2: false, no attn_norm / ffn_norm (its sublayers read the
                                     // residual stream itself and normalise their outputs: post_norms)
  float residual_scale = 1.0f;       // granite: <arch>.residual_scale, each sublayer's output times it
                                     // before its residual add (0 or absent = 1)
  float logit_scale = 1.0f;          // granite: <arch>.logit_scale, logits times 1 / it
  float logit_mult = 1.0f;           // command-r, cohere2: <arch>.logit_scale, logits times it
  int no_rope_step = 0;              // smollm3: 4, layer l has no RoPE when (l + 1) % 4 == 0 (NoPE layers);
                                     // granite with rope.scaling.finetuned false: 1 (no layer rotates)
  int no_rope_step_first = 0;        // smallthinker with windows: 4, layer l has no RoPE when l % 4 == 0
  bool router_reads_layer_input = false;  // smallthinker: the MoE router reads the layer's input (the
                                          // residual stream before attn_norm), the experts the FFN's
  bool parallel_residual = false;    // gptneox (<arch>.use_parallel_residual), phi2, command-r, cohere2:
                                     // x + attn(norm(x)) + ffn(norm'(x)), both sublayers reading the
                                     // layer's input (phi2's and cohere's norm' is their one attn_norm)
  // phi3 LongRoPE: rope_factors_long / rope_factors_short [rope_dims / 2] frequency divisors; the
  // long ones apply when the context (the KV cache's capacity) exceeds rope_n_ctx_orig, as
  // llama.cpp chooses by n_ctx_seq.
  bool rope_long_short_factors = false;
  // qwen3vl: the pairs interleaved M-RoPE assigns to its fourth section, where a text token's
  // position is 0 (llama.cpp's imrope): they do not rotate. Empty: every pair rotates.
  std::vector<uint8_t> rope_still_pairs;

  // Sliding-window attention (gemma3's local layers; llama.cpp LLAMA_SWA_TYPE_STANDARD).
  int n_swa = 0;              // <arch>.attention.sliding_window: a local layer's query at position p
                              // sees keys at positions > p - n_swa (0 = no local layers; gemma2 default 4096)
  int swa_pattern = 0;        // <arch>.attention.sliding_window_pattern N (gemma3 default 6, gemma2 2): layer l
                              // is local unless l % N == N - 1 (0: given per layer, or none)
  std::vector<uint8_t> swa_layers;  // [n_layer] 1 = local layer; empty when n_swa == 0
  float rope_freq_base_swa = 10000.0f;  // <arch>.rope.freq_base_swa: local layers' RoPE base
  float rope_freq_scale_swa = 1.0f;     // local layers are never position-scaled (llama.cpp)
  bool swa_plain_rope = false;  // olmo2 with windows (OLMo 3): local layers rotate with the global base,
                                // unscaled and without YaRN (ext_factor 0, attn_factor 1); the global
                                // ones carry the file's scaling
  bool swa_chunked = false;     // llama4: the local layers' attention is chunked, not sliding
                                // (llama.cpp's LLAMA_SWA_TYPE_CHUNKED): a query at position p sees
                                // the keys at positions p - p % n_swa .. p (n_swa 8192, fixed)
  bool nope_global = false;     // exaone4 with 64 layers (EXAONE 4.0 32B), cohere2: the global
                                // (non-window) layers have no RoPE

  // RoPE scaling of the global layers (llama.cpp's llama_context: YaRN's ext_factor 1 and
  // beta_fast 32 / beta_slow 1 unless a context overrides them; the attn_factor it derives).
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_scaling_factor = 0.0f;  // <arch>.rope.scaling.factor (0 = none)
  int rope_n_ctx_orig = 0;           // <arch>.rope.scaling.original_context_length (default n_ctx_train)
  float rope_attn_factor = 1.0f;     // <arch>.rope.scaling.attn_factor (multiplies cos/sin everywhere)
  float yarn_ext_factor = 0.0f;      // 1 for yarn
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float yarn_attn_factor = 1.0f;     // llama.cpp's cparams.yarn_attn_factor (rope_attn_factor included)
  bool rope_freq_factors = false;    // llama: per-pair frequency divisors, rope_freqs.weight
                                     // [rope_dims / 2], or computed for RopeScaling::Llama3
  float llama3_low_freq_factor = 1.0f;   // <arch>.rope.scaling.low_freq_factor (llama3 by keys)
  float llama3_high_freq_factor = 4.0f;  // <arch>.rope.scaling.high_freq_factor

  // Mixture of experts (0 experts = dense). Defaults per architecture as llama.cpp has them.
  int n_expert = 0;           // <arch>.expert_count
  int n_expert_used = 0;      // <arch>.expert_used_count (k)
  int n_ff_expert = 0;        // routed expert width: llama n_ff (llama.cpp binds the expert
                              // tensors with feed_forward_length); qwen2moe
                              // <arch>.expert_feed_forward_length, else n_ff / n_expert_used
  int n_ff_shared_expert = 0; // qwen2moe: <arch>.expert_shared_feed_forward_length, else n_ff
  bool expert_weights_norm = true;  // renormalise the top-k gate weights (Mixtral yes, Qwen-MoE no)
  ExpertGating expert_gating = ExpertGating::Softmax;  // <arch>.expert_gating_func (0 = default)
  float expert_weights_scale = 1.0f;  // <arch>.expert_weights_scale (0 or absent = 1)
  int n_expert_group = 1;       // <arch>.expert_group_count (group-limited routing; 1 = none)
  int n_expert_group_used = 1;  // <arch>.expert_group_used_count (groups kept per token)
  int n_layer_dense_lead = 0;   // <arch>.leading_dense_block_count (deepseek, deepseek2, dots1, glm4moe,
                                // ernie4_5-moe, bailingmoe2: the first layers have a dense SwiGLU of
                                // n_ff instead of experts)
  int n_moe_layer_step = 1;     // ernie4_5-moe: <arch>.interleave_moe_layer_step (past the leading dense
                                // layers, layer l has experts when (l + 1) % step == 0)
  int n_expert_shared = 0;      // <arch>.expert_shared_count (deepseek, deepseek2, dots1, glm4moe,
                                // bailingmoe2: shared experts, one ungated SwiGLU of n_ff_shared_expert)

  // Multi-head latent attention (deepseek2; DeepSeek-AI 2024, DeepSeek-V2 sec. 2.1). Queries: a
  // low-rank q (q_lora_rank > 0: attn_q_a, attn_q_a_norm, attn_q_b) or attn_q; keys and values
  // come from one compressed latent c = norm(attn_kv_a_mqa x)[:kv_lora_rank] shared by all heads,
  // plus a decoupled RoPE key of rope_dims shared by all heads. head_dim = qk_nope + rope_dims is
  // the query/key head (llama.cpp's key_length_mla), mla_v_head_dim the value head
  // (value_length_mla). The cache holds kv_lora_rank + rope_dims floats per token and layer.
  int q_lora_rank = 0;        // <arch>.attention.q_lora_rank (0: a full-rank attn_q)
  int kv_lora_rank = 0;       // <arch>.attention.kv_lora_rank (0: not MLA)
  int mla_v_head_dim = 0;     // <arch>.attention.value_length_mla
  float rope_yarn_log_mul = 0.0f;  // mscale_all_dim: deepseek2 <arch>.rope.scaling.yarn_log_multiplier / 0.1,
                                   // mistral3 the key as it is (as llama.cpp reads each)
  // mistral3: Llama 4's attention temperature, <arch>.attention.temperature_scale (0 = none): the
  // query of a token at position p is multiplied by log(floor(p / attn_temp_floor) + 1) * scale + 1,
  // attn_temp_floor being the YaRN original context (so 1 below it).
  // llama4: the same with the position offset by attn_temp_offset (1: log(floor((p + 1) / 8192) +
  // 1) * 0.1 + 1), on the layers without RoPE only (attn_temp_nope_only).
  float attn_temp_scale = 0.0f;
  int attn_temp_floor = 0;
  float attn_temp_offset = 0.0f;
  bool attn_temp_nope_only = false;

  // lfm2 and lfm2moe (Liquid AI's LFM2, LFM2-MoE): a hybrid whose layers are either attention or a gated short causal
  // convolution (y = C * conv(B * x) over the last shortconv_l_cache positions, Poli et al. 2023's
  // Hyena operator at order 2 with a short filter); <arch>.attention.head_count_kv per layer, 0
  // for the convolution layers. Such a layer's cache row holds B * x of n_embd F32 per token, so
  // truncate and keep roll its state back as they do keys and values.
  std::vector<uint8_t> conv_layers;  // [n_layer] 1 = short-convolution layer; empty: none
  int shortconv_l_cache = 0;         // <arch>.shortconv.l_cache: the filter's taps, the current token's included

  // qwen35 and qwen35moe (Qwen3.5): a hybrid of gated DeltaNet layers (Yang et al. 2025; linear
  // attention with a recurrent state, kernels/op_params.h DeltaNetParams) and gated attention
  // layers (full attention whose query projection carries a per-head output gate: [q_h | g_h] per
  // head, the attention's output times sigmoid(g)). <arch>.attention.recurrent_layers per layer, else
  // every full_attention_interval-th layer (default 4) is attention. A DeltaNet layer caches no keys
  // or values but a state per token (the KV cache's ring of the last few; KVLayerLayout::state_floats).
  // granitehybrid (Granite 4.0 H): Mamba-2 layers (Dao and Gu 2024; kernels/op_params.h
  // Mamba2Params) beside granite's attention, marked by attention.head_count_kv 0 per layer; its
  // state kept the same way. The ssm.* keys below then mean: conv_kernel, inner_size (n_head *
  // head_dim), state_size, time_step_rank (the heads), group_count (B and C groups).
  RecurrentMixer recurrent_mixer = RecurrentMixer::DeltaNet;
  std::vector<uint8_t> recurrent_layers;  // [n_layer] 1 = recurrent (DeltaNet or Mamba-2) layer; empty: none
  int ssm_d_conv = 0;    // <arch>.ssm.conv_kernel: the convolution's taps
  int ssm_d_inner = 0;   // <arch>.ssm.inner_size: value heads x head width
  int ssm_d_state = 0;   // <arch>.ssm.state_size: key (and value) head width
  int ssm_dt_rank = 0;   // <arch>.ssm.time_step_rank: value heads
  int ssm_n_group = 0;   // <arch>.ssm.group_count: query/key heads
  bool attn_output_gate = false;  // qwen35: attn_q gives [q_h | g_h] per head; output times sigmoid(g)
  // spark2_5: attn_gate (n_embd -> n_head) gives one gate per head; each head's attention output
  // times its sigmoid (afmoe's attn_gate has one gate per element: n_head * head_dim).
  bool attn_gate_per_head = false;
  // Layers with one sublayer only: mamba2's are their mixer (x += mixer(norm(x)), no feed-forward);
  // nemotron_h's are a Mamba-2 mixer, an attention or an MLP (x += mlp(attn_norm(x)), no mixer).
  std::vector<uint8_t> ffn_free_layers;    // [n_layer] 1 = no feed-forward; empty: every layer has one
  std::vector<uint8_t> mixer_free_layers;  // [n_layer] 1 = no attention or recurrent mixer; empty: none
  bool has_ffn(int layer) const {
    return layer < 0 || layer >= static_cast<int>(ffn_free_layers.size()) || ffn_free_layers[layer] == 0;
  }
  bool has_mixer(int layer) const {
    return layer < 0 || layer >= static_cast<int>(mixer_free_layers.size()) || mixer_free_layers[layer] == 0;
  }
  int n_attention_layers() const {
    int n = 0;
    for (int l = 0; l < n_layer; ++l) n += has_mixer(l) && !is_recurrent_layer(l) && !is_conv_layer(l);
    return n;
  }
  bool any_ffn() const {
    for (int l = 0; l < n_layer; ++l)
      if (has_ffn(l)) return true;
    return false;
  }

  bool is_recurrent_layer(int layer) const {
    return layer >= 0 && layer < static_cast<int>(recurrent_layers.size()) && recurrent_layers[layer] != 0;
  }
  int n_recurrent_layers() const {
    int n = 0;
    for (uint8_t v : recurrent_layers) n += v != 0;
    return n;
  }
  // Floats of a DeltaNet layer's per-token state: the convolution's last d_conv - 1 input rows and
  // each value head's head_dim x head_dim matrix (DeltaNetParams::state_floats).
  // Mamba-2: the convolution's last 3 inputs and a head_dim x state_size matrix per head.
  int64_t recurrent_state_floats() const {
    const int64_t conv_dim = 2 * static_cast<int64_t>(ssm_n_group) * ssm_d_state + ssm_d_inner;
    if (recurrent_mixer == RecurrentMixer::Mamba2)
      return (ssm_d_conv - 1) * conv_dim + static_cast<int64_t>(ssm_d_inner) * ssm_d_state;
    return (ssm_d_conv - 1) * conv_dim + static_cast<int64_t>(ssm_dt_rank) * ssm_d_state * ssm_d_state;
  }

  bool is_moe() const { return n_expert > 0; }
  bool is_conv_layer(int layer) const {
    return layer >= 0 && layer < static_cast<int>(conv_layers.size()) && conv_layers[layer] != 0;
  }
  int n_conv_layers() const {
    int n = 0;
    for (uint8_t v : conv_layers) n += v != 0;
    return n;
  }
  bool has_conv_layers() const { return n_conv_layers() > 0; }
  // Learned absolute positions (position_embd) and no RoPE: gpt2, starcoder (StarCoder / SantaCoder,
  // gpt2's block with multi-query attention), mpt files that carry position_embd.
  bool learned_positions() const { return arch == Arch::Gpt2 || arch == Arch::Starcoder || position_embd; }
  // The architectures without RoPE whose positions (if any) come from ALiBi or learned embeddings.
  // baichuan: llama.cpp rotates only the 32-layer model (Baichuan 7B); the 40-layer one (13B) has
  // ALiBi, any other layer count neither.
  bool rope_free() const {
    return learned_positions() || arch == Arch::Bloom || arch == Arch::Mpt || arch == Arch::Refact || arch == Arch::Jais ||
           (arch == Arch::Baichuan && n_layer != 32) || arch == Arch::Mamba2 || arch == Arch::NemotronH;
  }
  bool alibi() const { return alibi_max_bias > 0.0f; }
  // Layer `layer` has experts (MoE models, past the leading dense layers, every n_moe_layer_step-th;
  // nemotron_h_moe: its MLP layers, the others having no feed-forward).
  bool is_moe_layer(int layer) const {
    return is_moe() && has_ffn(layer) && layer >= n_layer_dense_lead && (layer + 1) % n_moe_layer_step == 0;
  }
  // The first layer with experts (n_layer when none has).
  int first_moe_layer() const {
    for (int l = 0; l < n_layer; ++l)
      if (is_moe_layer(l)) return l;
    return n_layer;
  }
  bool is_mla() const { return kv_lora_rank > 0; }
  // The dims layer `layer` rotates: rope_dims_swa on the local layers when set, else rope_dims.
  int rope_dims_at(int layer) const { return rope_dims_swa > 0 && is_swa(layer) ? rope_dims_swa : rope_dims; }
  int mla_qk_nope() const { return head_dim - rope_dims; }
  int kv_dim() const { return n_head_kv * head_dim; }
  // Elements of one token's cached key and value rows per layer: n_head_kv * head_dim each, or
  // for MLA the latent plus the RoPE key (kv_lora_rank + rope_dims) and no separate values.
  int kv_key_width() const { return is_mla() ? kv_lora_rank + rope_dims : kv_dim(); }
  int kv_value_width() const { return is_mla() ? 0 : kv_dim(); }
  // Bytes the cache holds per token over all layers with elements of `element_bytes` bytes (a
  // convolution layer's row is n_embd F32 whatever the element size).
  int64_t kv_bytes_per_token(int element_bytes = 4) const {
    int64_t total = 0;
    for (int l = 0; l < n_layer; ++l)
      total += is_conv_layer(l)                          ? int64_t{n_embd} * 4
               : is_recurrent_layer(l) || !has_mixer(l) ? 0  // a fixed-size state, or nothing
                                                         : int64_t{kv_key_width() + kv_value_width()} * element_bytes;
    return total;
  }
  float attention_scale() const {
    return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  bool is_swa(int layer) const {
    return n_swa > 0 && layer >= 0 && layer < static_cast<int>(swa_layers.size()) && swa_layers[layer] != 0;
  }
  int window(int layer) const { return is_swa(layer) && !swa_chunked ? n_swa : 0; }  // 0 = the whole context
  int chunk(int layer) const { return is_swa(layer) && swa_chunked ? n_swa : 0; }    // llama4; 0 = none
  // Whether layer `layer` rotates its queries and keys (every RoPE architecture, but smollm3's
  // NoPE layers and EXAONE 4.0 32B's global ones).
  bool has_rope(int layer) const {
    return rope_style != RopeStyle::None && (no_rope_step <= 0 || (layer + 1) % no_rope_step != 0) &&
           (no_rope_step_first <= 0 || layer % no_rope_step_first != 0) && !(nope_global && !is_swa(layer));
  }
  // The RoPE of layer `layer`: local layers use the swa base and scale, global ones the file's
  // scaling; YaRN's correction range and magnitude as llama.cpp computes them.
  LayerRope rope_at(int layer) const;
  // Llama 3.1's frequency factors [rope_dims / 2] for RopeScaling::Llama3 (the formula
  // llama.cpp's converter writes into rope_freqs.weight).
  std::vector<float> llama3_rope_factors() const;

  // The file carries a multi-token-prediction block that specmoe runs (Model::forward_mtp): an
  // architecture whose NextN block is its own decoder layer (llama.cpp's graph_mtp of deepseek2,
  // glm4moe, qwen35, qwen35moe).
  bool has_mtp() const {
    return n_nextn > 0 &&
           (arch == Arch::Deepseek2 || arch == Arch::Glm4Moe || arch == Arch::Qwen35 || arch == Arch::Qwen35Moe);
  }

  bool is_eagle3() const { return arch == Arch::Eagle3; }
  bool is_dflash() const { return arch == Arch::DFlash; }
  // A draft head that reads its target's layer rows (EAGLE-3, DFlash): refused as a model of its own.
  bool reads_target_features() const { return is_eagle3() || is_dflash(); }
  // The width of an EAGLE-3 or DFlash head's fused input: its target layers' rows side by side.
  int64_t head_feature_width() const {
    return static_cast<int64_t>(head_target_layers.size()) * head_target_width;
  }

  static ModelConfig from_gguf(const GGUFFile& file);  // throws Error naming the file and key
  void validate() const;  // throws Error(Format) when sizes are inconsistent or out of range
};

}  // namespace specmoe::core
