// Synthetic models: deterministic random-weight GGUF files with a byte-level vocabulary, for
// tests and benchmarks that need a model of a given size without downloading one.
//
// Draft/target pairs: every weight is a pure function of (seed, tensor name, element index),
// so a draft that keeps the target's first layers, embedding and head has bit-identical copies
// of them. The target's deeper layers are scaled down (attn_output and ffn_down times
// deep_residual_scale), so the draft's greedy choice agrees with the target's most of the time,
// as a trained draft model would.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace specmoe::core {

class Model;

struct SynthSpec {
  std::string arch = "llama";      // llama | qwen2 | qwen2moe | gpt2 | qwen3 | gemma3 | qwen3moe | olmoe |
                                   // phi3 | gemma2 | deepseek2 | granite | granitemoe | olmo2 | smollm3 |
                                   // stablelm | gemma | starcoder2 | gptneox | phi2 | ernie4_5 | exaone |
                                   // exaone4 | mistral3 | command-r | cohere2 | internlm2 | qwen2vl |
                                   // seed_oss | minicpm | glm4 | hunyuan-dense | maincoder | apertus | qwen3next | mellum | bailingmoe | nanbeige | qwen3vl | qwen3vlmoe |
                                   // deepseek | dots1 | glm4moe | ernie4_5-moe | bailingmoe2 | hunyuan-moe |
                                   // arcee | nemotron | starcoder | gpt-oss | minimax-m2
  DType type = DType::F32;         // type of the 2-D and expert weights (norms, biases, routers F32);
                                   // every row width must be a multiple of its block (checked)
  int n_vocab = 320;               // >= 259: <unk> <s> </s> + 256 byte tokens, padded
  int n_embd = 64;
  int n_layer = 4;                 // layers of the full (target) model
  int n_head = 4;
  int n_head_kv = 2;               // gpt2: forced to n_head
  int n_ff = 192;
  int n_ctx = 512;
  bool tied_output = false;        // no output.weight: the head reuses token_embd
  float rope_freq_base = 10000.0f;
  int n_full_layers = -1;          // layers >= this have their residual branches scaled (-1: none)
  float deep_residual_scale = 1.0f;
  float repeat_penalty = 2.0f;     // output row of token j -= repeat_penalty * embedding of j / sqrt(n_embd)
  int keep_layers = -1;            // write only the first keep_layers layers (a draft); -1 = all
  // Multi-token-prediction blocks after the model's layers (nextn_predict_layers; deepseek2, glm4moe,
  // qwen35, qwen35moe): the architecture's own attention layer plus nextn.eh_proj, enorm, hnorm and
  // shared_head_norm, and with mtp_own_head its own embed_tokens and shared_head_head.
  int n_nextn = 0;
  bool mtp_own_head = false;
  bool mtp_only = false;  // the block (and embedding, final norm, head) alone: llama.cpp's --mtp export
  // arch "eagle3": an EAGLE-3 draft head (llama.cpp's converter layout) for a target of n_vocab ids
  // and width head_target_width, reading the input rows of its layers eagle3_layers (3; the
  // target's n_layer: its final hidden row). Its own head over eagle3_draft_vocab ids mapped through
  // d2t (0: the whole vocabulary); the target's head instead with eagle3_target_head (no d2t then);
  // its own token_embd with eagle3_own_embd. The head's rows equal the target's (a synth target of the
  // same seed and vocabulary: the same values), and its layer passes the token's normed embedding on
  // (attention that looks mostly at the token itself, small fc and FFN), so against a target whose
  // next token follows its current one a draft is often right.
  std::vector<int32_t> eagle3_layers;
  int head_target_width = 0;
  int eagle3_draft_vocab = 0;
  bool eagle3_target_head = false;
  bool eagle3_own_embd = false;
  bool eagle3_norm_before_fc = false;
  bool eagle3_norm_before_residual = false;
  // arch "dflash": a DFlash draft (llama.cpp's converter layout) of n_layer Qwen3 layers for a target
  // of n_vocab ids and width n_embd, reading the input rows of the target's layers dflash_layers;
  // blocks of dflash_block_size, filled with dflash_mask_token, causal with dflash_causal. Its head
  // and embedding as an EAGLE-3 head's (eagle3_target_head, eagle3_own_embd, eagle3_draft_vocab).
  std::vector<int32_t> dflash_layers;
  int dflash_block_size = 16;
  int dflash_mask_token = 0;
  bool dflash_causal = false;
  // With its own embedding (eagle3_own_embd) and n_head_kv = n_head: every embedding row carries a
  // shared component (3 in element 0; the mask token's row is that alone), whose sign q and k read
  // alone, q and k a radian apart in RoPE's fastest pair and normed to 3, and the cache's keys are 0
  // (element 0 of the fused rows is): a block token attends to the token one position before it
  // (e^-16 to the others), whose embedding v (element 0 left out) and o pass on. Block
  // row 1 then holds the last token's embedding, and drafts what a target of the same seed predicts
  // from it (the "agreeing" synth targets of the tests).
  bool dflash_attend_previous = false;
  // Mixture of experts, in llama.cpp's layout: llama = Mixtral (ffn_gate_inp + stacked
  // ffn_{gate,up,down}_exps, feed_forward_length = expert width); qwen2moe adds the shared expert
  // (ffn_{gate,up,down}_shexp) and its sigmoid gate ffn_gate_inp_shexp. The router matrix and
  // gate stay F32 as llama.cpp's converter and quantizer keep them.
  int n_expert = 0;                // 0 = dense; > 0: n_ff is each routed expert's width
  int n_expert_used = 0;           // k
  int n_ff_shared = 0;             // qwen2moe: shared expert width
  // qwen3moe, olmoe: llama.cpp's layout of the MoE block as llama's (qwen3moe writes the expert
  // width as expert_feed_forward_length, olmoe as feed_forward_length). deepseek2 (below) writes it
  // as expert_feed_forward_length and n_ff_dense as feed_forward_length.
  int expert_weights_norm = -1;    // -1: no key; 0 / 1: <arch>.expert_weights_norm
  float expert_weights_scale = 0;  // 0: no key; else <arch>.expert_weights_scale
  int n_expert_group = 0;          // 0: no keys; else expert_group_count / expert_group_used_count
  int n_expert_group_used = 0;
  int expert_gating = 0;           // 0: no key; 1 softmax, 2 sigmoid (<arch>.expert_gating_func)
  bool exp_probs_bias = false;     // blk.N.exp_probs_b.bias (selection bias) in every MoE layer
  // deepseek2: multi-head latent attention (head_dim = qk_nope + rope_dims is key_length_mla).
  // deepseek2 and the DeepSeek-style MoE architectures (deepseek, dots1, glm4moe, ernie4_5-moe,
  // bailingmoe2): leading dense layers of n_ff_dense, shared experts of the expert width.
  int q_lora_rank = 0;             // 0: attn_q (DeepSeek-V2-Lite), else attn_q_a / attn_q_b
  int kv_lora_rank = 0;
  int rope_dims = 0;               // rope.dimension_count (0 = head_dim); deepseek2: the RoPE part
  int rope_dims_swa = 0;           // maple, spark2_5: rope.dimension_count_swa (0 = not written)
  int v_head_dim = 0;              // value_length_mla
  int n_layer_dense_lead = 0;
  int n_ff_dense = 0;              // deepseek2: the leading dense layers' width
  int n_expert_shared = 0;
  int moe_layer_step = 1;          // ernie4_5-moe: interleave_moe_layer_step (layers past the lead with
                                   // (l + 1) % step != 0 are dense SwiGLUs of n_ff_dense)
  float yarn_log_mul = 0.0f;       // 0: no key; else rope.scaling.yarn_log_multiplier (0.1 x mscale_all_dim)
  // phi3: one attn_qkv and ffn_up = [gate | up] (always), optional LongRoPE factor tensors
  // rope_factors_long / _short (rope_orig_ctx is then written as original_context_length) and
  // rope.scaling.attn_factor (0 = no key).
  bool rope_long_short = false;
  float rope_attn_factor = 0.0f;
  // gemma2: attn_logit_softcapping (0 = no key: llama.cpp's 50); final_logit_softcap above
  // (0 = no key: 30).
  float attn_logit_softcap = 0.0f;
  // Head width: 0 = n_embd / n_head; else written as attention.key_length and value_length (qwen3
  // and gemma3 have heads wider than n_embd / n_head).
  int head_dim = 0;
  // RoPE scaling in llama.cpp's keys: rope.scaling.type ("" = no key, "linear", "yarn"), factor,
  // original_context_length (0 = no key). llama3_orig_ctx > 0 (llama): a rope_freqs.weight tensor
  // with Llama 3.1's frequency factors (factor 8, low/high frequency factors 1 and 4) for that
  // original context, as llama.cpp's converter writes it.
  std::string rope_scaling;
  float rope_scaling_factor = 0.0f;
  int rope_orig_ctx = 0;
  int llama3_orig_ctx = 0;
  // gemma2, gemma3, olmo2 (OLMo 3), cohere2 and 64-layer exaone4 (EXAONE 4.0 32B): attention.sliding_window,
  // attention.sliding_window_pattern as a period or, when swa_layers is given, one flag per layer
  // (as the OLMo 3 converter writes it), and gemma's rope.freq_base_swa (0 = key not written:
  // llama.cpp's defaults); gemma's final_logit_softcapping (0 = not written).
  int n_swa = 0;
  int swa_pattern = 0;
  std::vector<int32_t> swa_layers;
  float rope_freq_base_swa = 0.0f;
  float final_logit_softcap = 0.0f;
  // lfm2: one flag per layer, 1 = a gated short-convolution layer of shortconv_l_cache taps
  // (attention.head_count_kv is then written per layer, 0 for those); n_swa gives the attention
  // layers a window.
  std::vector<int32_t> conv_layers;
  int shortconv_l_cache = 3;
  // qwen35: gated DeltaNet layers (ssm.* keys; heads of ssm_d_state for queries/keys
  // (ssm_n_group) and values (ssm_dt_rank)) and gated attention layers (attn_q of 2 q_dim), which
  // every full_attention_interval-th layer is (0 = no key: llama.cpp's 4), or by one flag per layer
  // (1 = DeltaNet), written as attention.recurrent_layers (BOOLs, as the converter writes them).
  int ssm_d_conv = 4;
  int ssm_d_state = 16;
  int ssm_n_group = 2;
  int ssm_dt_rank = 4;
  int full_attention_interval = 0;
  std::vector<int32_t> recurrent_layers;
  // qwen3next: its DeltaNet layers' beta and alpha in one ssm_ba; ssm_in_legacy: [q | k | v | z] per
  // query/key head in one ssm_in (older converters) in place of attn_qkv and attn_gate.
  bool ssm_in_legacy = false;
  // nanbeige: its n_layer blocks run num_loops times (<arch>.num_loops; 1: no key).
  int n_loops = 1;
  // granitehybrid: Mamba-2 layers where recurrent_layers says (attention.head_count_kv 0 there),
  // ssm_dt_rank heads of ssm_d_inner / ssm_dt_rank, ssm_n_group groups of B and C of ssm_d_state;
  // granite's multipliers; rope_finetuned false = no RoPE (rope.scaling.finetuned).
  int ssm_d_inner = 0;  // 0: ssm_dt_rank * ssm_d_state (qwen35's)
  // nemotron_h: each layer's one sublayer, M (Mamba-2), * (attention, no RoPE) or - (a squared-ReLU
  // MLP of n_ff), written as head_count_kv and feed_forward_length per layer.
  std::string layer_pattern;
  bool rope_finetuned = true;
  std::string name = "synth";
};

// A preset's spec ("tiny", "tiny-draft", "tiny-256", "target", "draft", "moe-tiny",
// "qwen2moe-tiny", "moe-target", "moe-draft", "target-1b", "qwen3-tiny", "qwen3-yarn-tiny",
// "gemma3-tiny", "llama3-tiny", "qwen3moe-tiny", "olmoe-tiny", "phi3-tiny", "gemma2-tiny",
// "granite-tiny", "granitemoe-tiny", "olmo2-tiny", "smollm3-tiny", "stablelm-tiny", "gemma-tiny",
// "starcoder2-tiny", "gptneox-tiny", "phi2-tiny", "ernie4_5-tiny", "exaone-tiny", "exaone4-tiny",
// "olmo3-tiny", "exaone4-32b-tiny", "command-r-tiny", "cohere2-tiny", "internlm2-tiny", "qwen2vl-tiny",
// "seed_oss-tiny", "minicpm-tiny", "glm4-tiny", "hunyuan-dense-tiny", "maincoder-tiny", "apertus-tiny", "qwen3next-tiny",
// "qwen3next-legacy-tiny", "mellum-tiny", "bailingmoe-tiny", "nanbeige-tiny", "qwen3vl-tiny",
// "qwen3vlmoe-tiny", "deepseek-tiny", "dots1-tiny", "glm4moe-tiny", "ernie4_5-moe-tiny",
// "bailingmoe2-tiny", "hunyuan-moe-tiny", "minimax-m2-tiny", "gpt-oss-tiny", "starcoder-tiny", "arcee-tiny", "nemotron-tiny", "mistral3-tiny", "deepseek2-tiny", "deepseek2-lite-tiny", "qwen3moe-target", "deepseek2-target"), or
// "PRESET-TYPE" for a preset with
// its matrices in TYPE (a dtype name in any case: "tiny-q5_0", "tiny-256-iq4_xs",
// "target-q4_k"); throws Error(InvalidArgument) naming the preset and listing the known ones.
SynthSpec synth_spec(const std::string& preset);
// "name: one-line description" for each preset (for `specmoe synth --help`).
std::vector<std::string> synth_presets();

// Writes the model of `spec` with weights drawn from `seed`. Same spec + seed = same bytes.
void synth_write(const SynthSpec& spec, const std::string& path, uint64_t seed);
void synth_write(const std::string& preset, const std::string& path, uint64_t seed);

// Greedy agreement of a draft with its target (acceptance rate at temperature 0): for each
// prompt (encoded with BOS), the target greedily generates n_tokens; at each step the draft,
// fed the same tokens, predicts the next one; returns matches / predictions.
double synth_greedy_agreement(Model& target, Model& draft, const std::vector<std::string>& prompts, int n_tokens);

}  // namespace specmoe::core
