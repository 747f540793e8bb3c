// The synth presets: small models for tests in llama.cpp's layout of every architecture, and
// benchmark-sized dense and MoE targets with their drafts (core/synth.h lists them).
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "base/error.h"
#include "core/synth.h"

namespace specmoe::core {

namespace {

// A preset by its exact name, or nullopt.
std::optional<SynthSpec> base_preset(const std::string& preset) {
  SynthSpec s;
  if (preset == "tiny" || preset == "tiny-draft") {
    // ~0.2M parameters, F32: unit tests. Layers 1..3 are scaled for ~70% greedy agreement
    // with tiny-draft (its first layer).
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 192;
    s.n_ctx = 512;
    s.n_full_layers = 1;
    s.deep_residual_scale = 0.3f;
    s.name = preset;
    if (preset == "tiny-draft") s.keep_layers = 1;
    return s;
  }
  if (preset == "tiny-256") {
    // tiny with rows of 256 (dim 256, ff 512), so the 256-element blocks (K-quants, IQ4_XS) fit:
    // unit tests of those types (e.g. tiny-256-q2_k).
    s.n_embd = 256;
    s.n_ff = 512;
    s.n_full_layers = 1;
    s.deep_residual_scale = 0.3f;
    s.name = preset;
    return s;
  }
  if (preset == "target" || preset == "draft") {
    // ~144M parameters, F16 (~288 MB): weights far exceed CPU caches, so decode is memory bound.
    s.type = DType::F16;
    s.n_vocab = 4096;
    s.n_embd = 1024;
    s.n_layer = 12;
    s.n_head = 16;
    s.n_head_kv = 4;
    s.n_ff = 2816;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    if (preset == "draft") s.keep_layers = 2;
    return s;
  }
  if (preset == "moe-tiny" || preset == "qwen2moe-tiny") {
    // ~0.3M parameters, F32: unit tests of MoE models. Widths are multiples of 32 so Q8_0 works.
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ctx = 512;
    s.name = preset;
    if (preset == "moe-tiny") {
      s.n_layer = 3;
      s.n_ff = 96;  // each expert
      s.n_expert = 4;
      s.n_expert_used = 2;
    } else {
      s.arch = "qwen2moe";
      s.n_layer = 2;
      s.n_ff = 64;  // each routed expert
      s.n_expert = 6;
      s.n_expert_used = 2;
      s.n_ff_shared = 128;
      s.rope_freq_base = 1000000.0f;
    }
    return s;
  }
  if (preset == "moe-target" || preset == "moe-draft") {
    // moe-target: Mixtral-style, 8 experts top-2, F16, ~305M parameters (~610 MB), of which ~98M
    // are active per token: each layer's k = 2 experts of width 1408 equal one dense `target`
    // layer's FFN (2816). moe-draft: dense, the first 2 layers' attention and the embedding and
    // head of moe-target (same names, same seed: bit-identical), with a dense SwiGLU of width
    // k * 1408 in place of the experts.
    s.type = DType::F16;
    s.n_vocab = 4096;
    s.n_embd = 1024;
    s.n_layer = 8;
    s.n_head = 16;
    s.n_head_kv = 4;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    if (preset == "moe-target") {
      s.n_ff = 1408;
      s.n_expert = 8;
      s.n_expert_used = 2;
    } else {
      s.n_ff = 2816;
      s.keep_layers = 2;
    }
    return s;
  }
  if (preset == "target-1b") {
    // ~1.1B parameters, F16 (~2.2 GB), TinyLlama-1.1B's shape: the GPU decode benchmark
    // (scripts/gpu-check.sh), large enough that a forward reads far more than any GPU cache.
    s.type = DType::F16;
    s.n_vocab = 32000;
    s.n_embd = 2048;
    s.n_layer = 22;
    s.n_head = 32;
    s.n_head_kv = 4;
    s.n_ff = 5632;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3-tiny" || preset == "qwen3-yarn-tiny") {
    // qwen3 in llama.cpp's layout, F32: QK-norm, no QKV biases, heads of 32 wider than
    // n_embd / n_head = 16 (attention.key_length). The yarn variant asks for YaRN (factor 4,
    // original context 64: most pairs interpolated, the fastest extrapolated, cos/sin scaled).
    s.arch = "qwen3";
    s.head_dim = 32;
    s.rope_freq_base = 1000000.0f;
    s.name = preset;
    if (preset == "qwen3-yarn-tiny") {
      s.rope_scaling = "yarn";
      s.rope_scaling_factor = 4.0f;
      s.rope_orig_ctx = 64;
    }
    return s;
  }
  if (preset == "gemma3-tiny") {
    // gemma3 in llama.cpp's layout, F32, 6 layers: embedding times sqrt(n_embd), QK-norm, post-
    // norms, GeGLU, heads of 32, tied output, a sliding window of 4 positions on layers 0-4 and a
    // global layer 5 (llama.cpp's default pattern 6, no pattern key), global RoPE base 1e6 and
    // the local layers' default 10000 (no freq_base_swa key), as the converter writes them.
    s.arch = "gemma3";
    s.n_layer = 6;
    s.n_head_kv = 1;
    s.head_dim = 32;
    s.n_ff = 128;
    s.tied_output = true;
    s.rope_freq_base = 1000000.0f;
    s.n_swa = 4;
    s.name = preset;
    return s;
  }
  if (preset == "llama3-tiny") {
    // llama with Llama 3.1's RoPE frequency factors in rope_freqs.weight (original context 32, so
    // the smoothed and divided pairs turn visibly within a short test sequence) and a tied head.
    s.llama3_orig_ctx = 32;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3moe-tiny") {
    // qwen3moe in llama.cpp's layout, F32: qwen3's attention (QK-norm per head, heads of 32 from
    // key_length, no biases) with 16 experts top-4 of width 32 (expert_feed_forward_length), the
    // k weights renormalised (expert_weights_norm, llama.cpp's default for qwen3moe).
    s.arch = "qwen3moe";
    s.n_layer = 3;
    s.head_dim = 32;
    s.n_ff = 32;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.expert_weights_norm = 1;
    s.rope_freq_base = 1000000.0f;
    s.name = preset;
    return s;
  }
  if (preset == "olmoe-tiny") {
    // olmoe in llama.cpp's layout, F32: RMSNorm over the whole q and k projections (attn_q_norm
    // [n_embd], attn_k_norm [kv_dim]), 8 experts top-2 of width 64 (feed_forward_length), raw
    // softmax weights (OLMoE does not renormalise).
    s.arch = "olmoe";
    s.n_layer = 3;
    s.n_ff = 64;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.name = preset;
    return s;
  }
  if (preset == "phi3-tiny") {
    // phi3 in llama.cpp's layout, F32: one attn_qkv, ffn_up = [gate | up] of 2 x 96, LongRoPE
    // (rope_factors_long / rope_factors_short for an original context of 64: caches of more than
    // 64 positions use the long factors) and the converter's attn_factor sqrt(1 + ln 8 / ln 64).
    s.arch = "phi3";
    s.n_ff = 96;
    s.n_head_kv = 4;
    s.rope_long_short = true;
    s.rope_orig_ctx = 64;
    s.rope_attn_factor = std::sqrt(1.0f + std::log(8.0f) / std::log(64.0f));
    s.name = preset;
    return s;
  }
  if (preset == "gemma2-tiny") {
    // gemma2 in llama.cpp's layout, F32, 4 layers: gemma3's block without QK-norm, tied head,
    // a window of 4 positions on layers 0 and 2 (llama.cpp's default pattern 2: every second
    // layer global), and soft-capping tight enough to bite on random weights: attention scores at
    // 2 (llama.cpp's default 50), logits at 5 (default 30).
    s.arch = "gemma2";
    s.n_head_kv = 2;
    s.head_dim = 32;
    s.n_ff = 128;
    s.tied_output = true;
    s.n_swa = 4;
    s.attn_logit_softcap = 2.0f;
    s.final_logit_softcap = 5.0f;
    s.name = preset;
    return s;
  }
  if (preset == "granite-tiny" || preset == "granitemoe-tiny") {
    // granite in llama.cpp's layout, F32: llama with embedding, residual, attention and logit
    // scales (2, 0.5, 0.75 / sqrt(head_dim), 2). granitemoe-tiny: 3 layers of 4 experts top-2 of
    // width 64 (feed_forward_length), renormalised.
    s.arch = preset == "granite-tiny" ? "granite" : "granitemoe";
    if (preset == "granitemoe-tiny") {
      s.n_layer = 3;
      s.n_ff = 64;
      s.n_expert = 4;
      s.n_expert_used = 2;
    }
    s.name = preset;
    return s;
  }
  if (preset == "olmo2-tiny") {
    // olmo2 in llama.cpp's layout, F32: no pre-norms, RMSNorm over the whole q and k projections,
    // post-norms of both sublayers (post_attention_norm, post_ffw_norm), SwiGLU, split-halves RoPE.
    s.arch = "olmo2";
    s.name = preset;
    return s;
  }
  if (preset == "smollm3-tiny") {
    // smollm3 in llama.cpp's layout, F32, 4 layers: llama whose every fourth layer (here layer 3)
    // has no RoPE, tied head.
    s.arch = "smollm3";
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "stablelm-tiny") {
    // stablelm (StableLM 2) in llama.cpp's layout, F32: LayerNorm with biases, q/k/v biases,
    // SwiGLU, split-halves RoPE over the first quarter of each head (4 of 16 dims).
    s.arch = "stablelm";
    s.rope_dims = 4;
    s.name = preset;
    return s;
  }
  if (preset == "gemma-tiny") {
    // gemma (Gemma 1) in llama.cpp's layout, F32: embedding times sqrt(n_embd), GeGLU, tied head,
    // one KV head of 32.
    s.arch = "gemma";
    s.n_head_kv = 1;
    s.head_dim = 32;
    s.n_ff = 128;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "starcoder2-tiny") {
    // starcoder2 in llama.cpp's layout, F32: LayerNorm with biases, q/k/v/output biases, an
    // ungated GELU MLP with biases (width 128), split-halves RoPE.
    s.arch = "starcoder2";
    s.n_ff = 128;
    s.name = preset;
    return s;
  }
  if (preset == "gptneox-tiny") {
    // gptneox (Pythia) in llama.cpp's layout, F32: LayerNorm with biases, gpt2's fused attn_qkv and
    // biases, an ungated GELU MLP (width 128), split-halves RoPE over a quarter of each head (4 of
    // 16 dims), and the parallel residual x + attn(norm1 x) + ffn(norm2 x).
    s.arch = "gptneox";
    s.n_head_kv = s.n_head;
    s.n_ff = 128;
    s.rope_dims = 4;
    s.name = preset;
    return s;
  }
  if (preset == "phi2-tiny") {
    // phi2 in llama.cpp's layout, F32: one LayerNorm feeding attention and the MLP in parallel,
    // fused attn_qkv with bias, output biases, an ungated GELU MLP (width 128), split-halves RoPE
    // over 8 of 16 dims, and a bias on the logits (output.bias).
    s.arch = "phi2";
    s.n_head_kv = s.n_head;
    s.n_ff = 128;
    s.rope_dims = 8;
    s.name = preset;
    return s;
  }
  if (preset == "ernie4_5-tiny" || preset == "exaone-tiny") {
    // ernie4_5 (ERNIE 4.5's dense models) and exaone (EXAONE 3.x) in llama.cpp's layout, F32:
    // llama's tensors; ernie4_5 with adjacent-pair RoPE and a tied head, exaone with split-halves
    // RoPE.
    s.arch = preset == "ernie4_5-tiny" ? "ernie4_5" : "exaone";
    s.tied_output = preset == "ernie4_5-tiny";
    s.name = preset;
    return s;
  }
  if (preset == "exaone4-tiny") {
    // exaone4 (EXAONE 4.0 1.2B's form) in llama.cpp's layout, F32: olmo2's post-norms only with
    // RMSNorm of every q and k head (heads of 32), split-halves RoPE, tied head.
    s.arch = "exaone4";
    s.head_dim = 32;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "olmo3-tiny") {
    // OLMo 3 in llama.cpp's layout (olmo2 with windows), F32: olmo2-tiny with a window of 4
    // positions on layers 0-2 and a global layer 3 (the pattern as one flag per layer, as the
    // converter writes it) and YaRN (factor 4, original context 8) with rope.scaling.attn_factor
    // 1.25 that only the global layer applies: the local ones rotate unscaled, at magnitude 1.
    s.arch = "olmo2";
    s.n_swa = 4;
    s.swa_layers = {1, 1, 1, 0};
    s.rope_scaling = "yarn";
    s.rope_scaling_factor = 4.0f;
    s.rope_orig_ctx = 8;
    s.rope_attn_factor = 1.25f;
    s.name = preset;
    return s;
  }
  if (preset == "exaone4-32b-tiny") {
    // EXAONE 4.0 32B's form in llama.cpp's layout, F32: exaone4-tiny with 64 layers (llama.cpp's
    // condition for windows), dim 32, a window of 4 positions on every layer but each fourth (the
    // default pattern, no key), and no RoPE on those global layers.
    s.arch = "exaone4";
    s.n_layer = 64;
    s.n_embd = 32;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.head_dim = 16;
    s.n_ff = 64;
    s.n_swa = 4;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "command-r-tiny" || preset == "cohere2-tiny") {
    // command-r (Command R) and cohere2 (Command R7B) in llama.cpp's layout, F32: LayerNorm without
    // biases, one attn_norm feeding a parallel residual, adjacent-pair RoPE, the head from
    // token_embd, logits times logit_scale 0.5. cohere2: windows of 4 on layers 0-2 (the default
    // pattern 4), no RoPE on the global layer 3.
    s.arch = preset == "cohere2-tiny" ? "cohere2" : "command-r";
    s.tied_output = true;
    if (s.arch == "cohere2") s.n_swa = 4;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3vl-tiny") {
    // qwen3vl (Qwen3-VL's language model on text) in llama.cpp's layout, F32: qwen3-tiny with
    // interleaved M-RoPE sections [6, 4, 4, 0] over its 16 pairs, which leave pair 13 unrotated
    // for text, as Qwen3-VL's [24, 20, 20, 0] leave pairs 61 and 62.
    s.arch = "qwen3vl";
    s.head_dim = 32;
    s.rope_freq_base = 100.0f;  // low, so that pair 13 would turn visibly over the tests' positions
    s.name = preset;
    return s;
  }
  if (preset == "hunyuan-dense-tiny") {
    // hunyuan-dense (Hunyuan 0.5B-7B) in llama.cpp's layout, F32: llama with split-halves RoPE and
    // an RMSNorm of every q and k head after RoPE, tied head.
    s.arch = "hunyuan-dense";
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "maincoder-tiny") {
    // maincoder (Maincoder-1B) in llama.cpp's layout, F32: llama's block with adjacent-pair RoPE
    // and an RMSNorm of every q and k head after RoPE, a separate head.
    s.arch = "maincoder";
    s.name = preset;
    return s;
  }
  if (preset == "nanbeige-tiny") {
    // nanbeige (Nanbeige 4.2) in llama.cpp's layout, F32, dim 64: llama's block (adjacent-pair RoPE),
    // 3 blocks run twice over with the same weights, output_norm between the passes.
    s.arch = "nanbeige";
    s.n_layer = 3;
    s.n_loops = 2;
    s.name = preset;
    return s;
  }
  if (preset == "apertus-tiny") {
    // apertus (Apertus-8B) in llama.cpp's layout, F32: llama's attention with the q/k head norms
    // (and their biases, unused as in llama.cpp's graph) before split-halves RoPE, an ungated xIELU MLP down(xielu(up x)) with
    // per-layer scalars, a separate head.
    s.arch = "apertus";
    s.name = preset;
    return s;
  }
  if (preset == "glm4-tiny") {
    // glm4 (GLM-4-0414) in llama.cpp's layout, F32: pre- and post-norms around both sublayers,
    // q/k/v biases, ffn_up holding [gate | up], adjacent-pair RoPE over half of each head.
    s.arch = "glm4";
    s.rope_dims = 8;
    s.name = preset;
    return s;
  }
  if (preset == "minicpm-tiny") {
    // minicpm (MiniCPM) in llama.cpp's layout, F32: llama run with granite's multipliers, here
    // without their keys, so MiniCPM's defaults apply (embedding x 12, residual x 1.4 / sqrt(4),
    // logits x n_embd / 256).
    s.arch = "minicpm";
    s.name = preset;
    return s;
  }
  if (preset == "internlm2-tiny" || preset == "qwen2vl-tiny" || preset == "seed_oss-tiny") {
    // internlm2 (llama's block, adjacent-pair RoPE), qwen2vl (Qwen2-VL / Qwen2.5-VL's text model:
    // qwen2 with M-RoPE sections, whose text positions rotate as split-halves RoPE, and an
    // output.bias that llama.cpp's graph leaves unused) and seed_oss
    // (llama's block with split-halves RoPE and the FFN's pre-norm named post_attention_norm), F32.
    s.arch = preset.substr(0, preset.size() - 5);
    s.name = preset;
    return s;
  }
  if (preset == "mistral3-tiny") {
    // mistral3 (Ministral 3) in llama.cpp's layout, F32: llama with YaRN (factor 4, original context
    // 8, beta_fast 16, beta_slow 2, yarn_log_multiplier 1) and Llama 4's attention temperature 0.5,
    // which scales the queries of positions 8 and later.
    s.arch = "mistral3";
    s.rope_scaling = "yarn";
    s.rope_scaling_factor = 4.0f;
    s.rope_orig_ctx = 8;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3vlmoe-tiny") {
    // qwen3vlmoe (Qwen3-VL-30B-A3B's language model on text) in llama.cpp's layout, F32:
    // qwen3moe-tiny with qwen3vl-tiny's interleaved M-RoPE sections (pair 13 unrotated for text).
    s.arch = "qwen3vlmoe";
    s.n_layer = 3;
    s.head_dim = 32;
    s.n_ff = 32;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.rope_freq_base = 100.0f;
    s.name = preset;
    return s;
  }
  if (preset == "deepseek-tiny" || preset == "dots1-tiny" || preset == "glm4moe-tiny" ||
      preset == "bailingmoe2-tiny") {
    // The DeepSeek-style MoE blocks after one dense layer (width 128), F32, 3 layers, dim 64, 8
    // routed experts of width 32, top-2, plus shared ones:
    //   deepseek (DeepSeek-MoE 16B): llama's attention, softmax top-k, raw weights, 2 shared experts;
    //   dots1 (dots.llm1): qwen3's attention (QK-norm per head), sigmoid scores with a selection
    //     bias (exp_probs_b), renormalised, scaled by 2, 1 shared expert;
    //   glm4moe (GLM-4.5-Air): q/k/v biases, split-halves RoPE on 8 of 16 dims, the FFN's pre-norm
    //     named post_attention_norm, sigmoid scores with the bias, over 4 groups keeping 2, renormalised,
    //     scaled by 1.5, 1 shared expert;
    //   bailingmoe2 (Ling 2.0): one attn_qkv, QK-norm per head, RoPE on 8 of 16 dims, sigmoid scores
    //     with the bias over 2 groups keeping 1, renormalised, scaled by 2.5, 1 shared expert.
    s.arch = preset.substr(0, preset.size() - 5);
    s.n_layer = 3;
    s.n_layer_dense_lead = 1;
    s.n_ff_dense = 128;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_expert_shared = s.arch == "deepseek" ? 2 : 1;
    if (s.arch != "deepseek") {
      s.expert_gating = 2;
      s.exp_probs_bias = true;
      s.expert_weights_norm = 1;
      s.expert_weights_scale = s.arch == "dots1" ? 2.0f : s.arch == "glm4moe" ? 1.5f : 2.5f;
    }
    if (s.arch == "glm4moe" || s.arch == "bailingmoe2") {
      s.rope_dims = 8;
      s.n_expert_group = s.arch == "glm4moe" ? 4 : 2;
      s.n_expert_group_used = s.arch == "glm4moe" ? 2 : 1;
    }
    s.name = preset;
    return s;
  }
  if (preset == "bailingmoe-tiny") {
    // bailingmoe (Ling-lite, v1) in llama.cpp's layout, F32, 3 layers, dim 64: llama's attention
    // (adjacent-pair RoPE), 8 experts of width 32 top-2 in every layer under a softmax with raw
    // weights times 2, and 2 ungated shared experts.
    s.arch = "bailingmoe";
    s.n_layer = 3;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_expert_shared = 2;
    s.expert_weights_scale = 2.0f;
    s.name = preset;
    return s;
  }
  if (preset == "exaone-moe-tiny") {
    // exaone-moe (K-EXAONE) in llama.cpp's layout, F32, 4 layers, dim 64: QK-norm per head, windows of
    // 4 positions on layers 0-2 (the default pattern of 4) whose RoPE is split halves, no RoPE on the
    // global layer 3; 1 dense layer, then 8 experts of width 32 top-2 with one shared expert, sigmoid
    // scores with a selection bias, renormalised, scale 2.5.
    s.arch = "exaone-moe";
    s.n_swa = 4;
    s.n_layer_dense_lead = 1;
    s.n_ff_dense = 128;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_expert_shared = 1;
    s.expert_gating = 2;
    s.exp_probs_bias = true;
    s.expert_weights_norm = 1;
    s.expert_weights_scale = 2.5f;
    s.name = preset;
    return s;
  }
  if (preset == "minimax-m2-tiny") {
    // minimax-m2 (MiniMax-M2) in llama.cpp's layout, F32, 3 layers, dim 64: RMSNorm of the whole q and
    // k projections, split-halves RoPE on 8 of 16 dims, 8 experts of width 32 (feed_forward_length)
    // top-2, sigmoid scores with the selection bias (exp_probs_b), renormalised.
    s.arch = "minimax-m2";
    s.n_layer = 3;
    s.rope_dims = 8;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_gating = 2;
    s.exp_probs_bias = true;
    s.name = preset;
    return s;
  }
  if (preset == "gpt-oss-tiny") {
    // gpt-oss in llama.cpp's layout, F32, 4 layers, dim 64, heads 4/2 of 32 (key_length), windows of
    // 4 on layers 0 and 2, attention sinks, q/k/v and output biases, 8 experts of width 32 top-2
    // with router and expert biases and the clamped SwiGLU (alpha 1.702, limit 7).
    s.arch = "gpt-oss";
    s.head_dim = 32;
    s.n_swa = 4;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.name = preset;
    return s;
  }
  if (preset == "starcoder-tiny") {
    // starcoder (StarCoder / SantaCoder / tiny_starcoder) in llama.cpp's layout, F32, 4 layers, dim 64:
    // gpt2's block (LayerNorm, fused attn_qkv, GELU MLP, all with biases, learned positions) with
    // multi-query attention (one KV head for 4 query heads).
    s.arch = "starcoder";
    s.n_head_kv = 1;
    s.name = preset;
    return s;
  }
  if (preset == "bloom-tiny" || preset == "mpt-tiny" || preset == "refact-tiny" || preset == "jais-tiny") {
    // The ALiBi architectures in llama.cpp's layout, F32, 4 layers, no RoPE: bloom (BLOOM, BLOOMZ:
    // LayerNorm of the embedding, gpt2's block, a tied head, heads 4/4), mpt (MPT-7B: gpt2's block
    // without biases, q/k/v clamped to +-1.5, max bias 8, heads 6/6 of 16: the interleaved slopes of
    // a head count that is not a power of two), refact (Refact-1.6B: llama's block, heads 4/1) and
    // jais (gpt2's attention, a SwiGLU with biases, scores scaled by 1/head_dim, heads 4/4).
    s.arch = preset.substr(0, preset.size() - 5);
    s.n_head_kv = s.arch == "refact" ? 1 : 4;
    if (s.arch == "mpt") s.n_embd = 96, s.n_head = s.n_head_kv = 6;
    s.tied_output = s.arch == "bloom";
    s.name = preset;
    return s;
  }
  if (preset == "falcon-tiny" || preset == "falcon40b-tiny") {
    // falcon in llama.cpp's layout, F32, 4 layers, dim 64: a parallel residual x + attn(n(x)) +
    // mlp(n(x)) under one LayerNorm with its bias, fused attn_qkv, an ungated GELU MLP, no other
    // biases, split-halves RoPE; Falcon-7B's multi-query attention (heads 4/1), or Falcon-40B's
    // grouped one (heads 4/2) with the attention's own norm (attn_norm_2).
    s.arch = "falcon";
    s.n_head_kv = preset == "falcon-tiny" ? 1 : 2;
    s.name = preset;
    return s;
  }
  if (preset == "olmo-tiny") {
    // olmo (OLMo 1) in llama.cpp's layout, F32, 4 layers, dim 64: LayerNorms without parameters,
    // q, k and v clamped to +-1.5 (attention.clamp_kqv), llama's attention and SwiGLU, a tied head.
    s.arch = "olmo";
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "baichuan-tiny" || preset == "baichuan13b-tiny") {
    // baichuan in llama.cpp's layout, F32, dim 32: llama's block; llama.cpp rotates only the 32-layer
    // model (Baichuan 7B: adjacent-pair RoPE) and gives the 40-layer one (13B) ALiBi with max bias 8.
    s.arch = "baichuan";
    s.n_layer = preset == "baichuan-tiny" ? 32 : 40;
    s.n_embd = 32;
    s.n_head = 4;
    s.n_head_kv = 4;
    s.n_ff = 64;
    s.name = preset;
    return s;
  }
  if (preset == "dbrx-tiny" || preset == "phimoe-tiny") {
    // dbrx (DBRX) and phimoe (Phi-3.5-MoE) in llama.cpp's layout, F32, 4 layers, dim 64, 8 experts of
    // width 32, top-2, softmax renormalised (both graphs fix it): dbrx with fused attn_qkv, LayerNorms
    // without biases, attn_output_norm before the FFN and q/k/v clamped to +-2; phimoe with RMSNorms
    // that add biases, q/k/v and output biases, a logit bias and LongRoPE factors (original context 64).
    s.arch = preset.substr(0, preset.size() - 5);
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    if (s.arch == "phimoe") {
      s.rope_long_short = true;
      s.rope_orig_ctx = 64;
    }
    s.name = preset;
    return s;
  }
  if (preset == "qwen-tiny" || preset == "xverse-tiny" || preset == "orion-tiny" || preset == "codeshell-tiny" ||
      preset == "plamo-tiny" || preset == "chatglm-tiny") {
    // Llama-like architectures in llama.cpp's layout, F32, 4 layers, dim 64: qwen (Qwen 1: attn_qkv
    // with a bias, split-halves RoPE, an MLP of half of feed_forward_length), xverse (llama's block),
    // orion (LayerNorms with biases, q/k/v biases, split-halves RoPE), codeshell (LayerNorms, q/k/v
    // and output biases, gpt2's GELU MLP with biases, split-halves RoPE), plamo (one RMSNorm for a
    // parallel residual) and chatglm (ChatGLM3: attn_qkv with a bias, ffn_up = [gate | up], adjacent
    // pairs over half of each head).
    s.arch = preset.substr(0, preset.size() - 5);
    if (s.arch == "chatglm") s.rope_dims = 8;
    s.name = preset;
    return s;
  }
  // lfm2's layers as LFM2-350M orders them: short convolutions of 3 taps on layers 0, 1, 3 and 5,
  // attention on 2 and 4.
  const auto lfm2_layers = [](SynthSpec& s) {
    s.n_layer = 6;
    s.conv_layers = {1, 1, 0, 1, 0, 1};
    s.shortconv_l_cache = 3;
  };
  if (preset == "lfm2-tiny" || preset == "lfm2-swa-tiny") {
    // lfm2 (Liquid AI's LFM2) in llama.cpp's layout, F32, 6 layers, dim 64, heads 4/2: gated short
    // convolutions of 3 taps on layers 0, 1, 3 and 5, attention with per-head QK-norm and
    // split-halves RoPE on layers 2 and 4 (LFM2-350M interleaves them so), SwiGLU everywhere, the
    // final norm named token_embd_norm; lfm2-swa-tiny gives the attention layers windows of 4.
    s.arch = "lfm2";
    lfm2_layers(s);
    if (preset == "lfm2-swa-tiny") s.n_swa = 4;
    s.name = preset;
    return s;
  }
  if (preset == "lfm2moe-tiny") {
    // lfm2moe (LFM2-8B-A1B's form) in llama.cpp's layout: lfm2-tiny's layers, the first dense
    // (width 128), then 8 experts of width 32 top-2 under sigmoid scores with a selection bias,
    // renormalised (llama.cpp fixes both) and unscaled.
    s.arch = "lfm2moe";
    lfm2_layers(s);
    s.n_layer_dense_lead = 1;
    s.n_ff_dense = 128;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_gating = 2;
    s.exp_probs_bias = true;
    s.name = preset;
    return s;
  }
  // qwen35's gated attention layers: heads of 32, interleaved M-RoPE on 16 of them, a low base.
  const auto qwen35_attention = [](SynthSpec& s) {
    s.head_dim = 32;
    s.rope_dims = 16;
    s.rope_freq_base = 100.0f;
  };
  if (preset == "qwen35-tiny" || preset == "qwen35-mix-tiny") {
    // qwen35 (Qwen3.5) in llama.cpp's layout, F32, dim 64: gated DeltaNet layers (convolution of 4
    // taps, 2 query/key heads and 4 value heads of 16) and gated attention layers (heads 4/2 of
    // 32, QK-norm, interleaved M-RoPE on 16 of 32 dims, the output times sigmoid of attn_q's gate
    // half), SwiGLU everywhere. qwen35-tiny: 4 layers, no interval key (llama.cpp's 4: layer 3 is
    // attention); qwen35-mix-tiny: 6 layers given by attention.recurrent_layers (BOOLs; attention
    // on 1 and 4), one value head per key head.
    s.arch = "qwen35";
    qwen35_attention(s);
    if (preset == "qwen35-mix-tiny") {
      s.n_layer = 6;
      s.recurrent_layers = {1, 0, 1, 1, 0, 1};
      s.ssm_dt_rank = 2;
    }
    s.name = preset;
    return s;
  }
  // The Mamba-2 mixers of granitehybrid's, mamba2's and nemotron_h's presets: 8 heads of 16 (d_inner
  // 128), state 16, `groups` groups of B and C.
  const auto mamba2_sizes = [](SynthSpec& s, int groups) {
    s.ssm_dt_rank = 8;
    s.ssm_d_state = 16;
    s.ssm_d_inner = 128;
    s.ssm_n_group = groups;
  };
  if (preset == "granitehybrid-tiny" || preset == "granitehybrid-moe-tiny") {
    // granitehybrid (Granite 4.0 H) in llama.cpp's layout, F32, dim 64: Mamba-2 layers (8 heads of
    // 16, d_inner 128, state 16, convolution of 4 taps with a bias) on layers 0, 1 and 3, granite's
    // attention (heads 4/2) on layer 2, granite's multipliers. granitehybrid-tiny: dense SwiGLUs,
    // one group of B and C, RoPE; granitehybrid-moe-tiny (Granite 4.0 H Tiny's form): 8 experts of 32
    // top-2 and an ungated shared expert of 64 in every layer, 2 groups, no RoPE (rope.scaling.finetuned
    // false, as Granite 4.0 H's NoPE).
    s.arch = "granitehybrid";
    s.recurrent_layers = {1, 1, 0, 1};
    mamba2_sizes(s, preset == "granitehybrid-moe-tiny" ? 2 : 1);
    if (preset == "granitehybrid-moe-tiny") {
      s.n_ff = 32;
      s.n_expert = 8;
      s.n_expert_used = 2;
      s.n_ff_shared = 64;
      s.rope_finetuned = false;
    }
    s.name = preset;
    return s;
  }
  if (preset == "mamba2-tiny") {
    // mamba2 (Mamba-2) in llama.cpp's layout, F32, 4 layers of 64: a Mamba-2 mixer per layer (8
    // heads of 16, d_inner 128, state 16, 2 groups, a convolution of 4 taps with its bias) under
    // attn_norm, no feed-forward and no attention (head_count 0).
    s.arch = "mamba2";
    mamba2_sizes(s, 2);
    s.n_ff = 0;
    s.name = preset;
    return s;
  }
  if (preset == "nemotron_h-tiny") {
    // nemotron_h (Nemotron-H, Nemotron Nano 2) in llama.cpp's layout, F32, 6 layers of 64 in the
    // pattern M M * - M -: Mamba-2 mixers (8 heads of 16, state 16, 2 groups), attention without
    // RoPE (heads 4/2 of 32), squared-ReLU MLPs of 192, each layer one of them under attn_norm.
    s.arch = "nemotron_h";
    s.n_layer = 6;
    s.layer_pattern = "MM*-M-";
    s.head_dim = 32;
    mamba2_sizes(s, 2);
    s.name = preset;
    return s;
  }
  if (preset == "afmoe-tiny") {
    // afmoe (Arcee Trinity) in llama.cpp's layout, F32, 4 layers, dim 64: the embedding times 8,
    // pre- and post-norms, QK-norm, an attention output gate (attn_gate), windows of 4 on layers
    // 0-2 (the 11 tokens of the tests pass them) rotated with a local base of 5000, no RoPE on
    // layer 3; layer 0 dense (width 128), then 8 experts of 32 top-2 and one shared, sigmoid with a
    // selection bias, renormalised, scaled by 2.5 (exaone-moe-tiny's shape and router).
    s = *base_preset("exaone-moe-tiny");
    s.arch = "afmoe";
    s.rope_freq_base_swa = 5000.0f;
    s.name = preset;
    return s;
  }
  if (preset == "nemotron_h_moe-tiny") {
    // nemotron_h_moe (Nemotron 3 Nano) in llama.cpp's layout: nemotron_h-tiny's layers with experts
    // in its two MLP layers: 8 ungated squared-ReLU experts of width 32 top-2 and one such shared
    // expert of 64, sigmoid scores with a selection bias, renormalised and scaled by 2.5 (Nano's
    // routed_scaling_factor).
    SynthSpec s = *base_preset("nemotron_h-tiny");
    s.arch = "nemotron_h_moe";
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_shared = 64;
    s.expert_weights_norm = 1;
    s.expert_weights_scale = 2.5f;
    s.name = preset;
    return s;
  }
  if (preset == "qwen35moe-tiny") {
    // qwen35moe (Qwen3.5-MoE) in llama.cpp's layout: qwen35-tiny's layers with 8 experts of width
    // 32 top-2 in every one (softmax, renormalised) and a shared expert of 64 under its sigmoid gate.
    s.arch = "qwen35moe";
    qwen35_attention(s);
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_shared = 64;
    s.name = preset;
    return s;
  }
  if (preset == "qwen3next-tiny" || preset == "qwen3next-legacy-tiny") {
    // qwen3next (Qwen3-Next) in llama.cpp's layout: qwen35moe-tiny's layers with split-halves RoPE
    // on 8 of 32 dims (no M-RoPE), 6 value heads on 2 query/key heads (value heads 3g .. 3g + 2
    // read query/key head g), beta and alpha in one ssm_ba; -legacy: the older converters' ssm_in.
    s.arch = "qwen3next";
    qwen35_attention(s);
    s.rope_dims = 8;
    s.ssm_dt_rank = 6;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_shared = 64;
    s.ssm_in_legacy = preset == "qwen3next-legacy-tiny";
    s.name = preset;
    return s;
  }
  if (preset == "spark2_5-tiny") {
    // spark2_5 (Spark-X 2.5) in llama.cpp's layout, F32, 4 layers, dim 64: llama's block with
    // split-halves RoPE on every layer, windows of 4 on layers 0, 2 and 3 rotating 8 of 16 dims with
    // base 1000 (layer 1 global, all 16 dims), a sigmoid gate per head on the attention's output
    // (attn_gate), a GELU-gated MLP, a tied head.
    s.arch = "spark2_5";
    s.n_swa = 4;
    s.swa_layers = {1, 0, 1, 1};
    s.rope_freq_base_swa = 1000.0f;
    s.rope_dims_swa = 8;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "maple-tiny") {
    // maple in llama.cpp's layout, F32, 4 layers, dim 64: qwen3's attention (QK-norm, split-halves
    // RoPE) with windows of 4 on layers 0, 1 and 3 and RoPE there only (base 1000), layer 2 global
    // without RoPE; 8 experts of width 32 top-2 in every layer (softmax, renormalised) whose SwiGLU is
    // clamped at 0.75, none, 1.25 and 1.5 (swiglu_clamp_exp per layer).
    s.arch = "maple";
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_swa = 4;
    s.swa_layers = {1, 1, 0, 1};
    s.rope_freq_base_swa = 1000.0f;
    s.name = preset;
    return s;
  }
  if (preset == "mellum-tiny") {
    // mellum (Mellum 2) in llama.cpp's layout, F32, 5 layers, dim 64: qwen3's attention (QK-norm,
    // split-halves RoPE), 8 experts of width 32 top-2 in every layer (softmax, renormalised), windows
    // of 4 positions on every layer but each fourth (the default period: layer 3 global), the local
    // layers rotating with the global base.
    s.arch = "mellum";
    s.n_layer = 5;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_swa = 4;
    s.name = preset;
    return s;
  }
  if (preset == "smallthinker-tiny" || preset == "smallthinker-swa-tiny") {
    // smallthinker (SmallThinker) in llama.cpp's layout, F32, 4 layers, dim 64: llama's attention with
    // split-halves RoPE, 8 experts of width 32 top-2 in every layer, the router reading the layer's
    // input and the experts a ReLU-gated GLU, softmax renormalised; the -swa form has 5 layers and
    // the window key (llama.cpp then uses windows of 4096 whatever it says, on layers 1-3), a local
    // RoPE base of 1000, no RoPE on the global layers 0 and 4 (a 4-layer model would rotate them
    // all), and sigmoid scores.
    s.arch = "smallthinker";
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_gating = 1;
    if (preset == "smallthinker-swa-tiny") {
      s.n_layer = 5;
      s.n_swa = 4;
      s.rope_freq_base_swa = 1000.0f;
      s.expert_gating = 2;
    }
    s.name = preset;
    return s;
  }
  if (preset == "jais2-tiny") {
    // jais2 (Jais 2) in llama.cpp's layout, F32, 4 layers, dim 64: nemotron's block (LayerNorms with
    // biases, q/k/v/o and MLP biases, the ungated squared-ReLU MLP) with NEOX RoPE over whole heads
    // and the head tied to token_embd.
    s.arch = "jais2";
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "arcee-tiny" || preset == "nemotron-tiny") {
    // arcee (AFM-4.5B) and nemotron (Nemotron-Mini / Minitron) in llama.cpp's layout, F32, 4 layers,
    // dim 64: an ungated squared-ReLU MLP down(relu(up x)^2); arcee with llama's attention
    // (adjacent-pair RoPE, RMSNorm), nemotron with LayerNorms with biases, q/k/v/o and MLP biases and
    // split-halves RoPE on 8 of 16 dims.
    s.arch = preset.substr(0, preset.size() - 5);
    if (s.arch == "nemotron") s.rope_dims = 8;
    s.name = preset;
    return s;
  }
  if (preset == "hunyuan-moe-tiny") {
    // hunyuan-moe (Hunyuan-A13B's form) in llama.cpp's layout, F32, 3 layers, dim 64: hunyuan-dense's
    // attention (QK-norm per head after RoPE, split halves), 8 experts of width 32 (feed_forward_length)
    // top-2, renormalised softmax, one ungated shared expert of 64 in every layer.
    s.arch = "hunyuan-moe";
    s.n_layer = 3;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_shared = 64;
    s.name = preset;
    return s;
  }
  if (preset == "llama4-tiny" || preset == "llama4-128e-tiny") {
    // llama4 (Llama 4) in llama.cpp's layout, F32, 4 layers, dim 64, 4/2 heads: chunked attention
    // (llama.cpp's fixed 8192-position chunks) and QK L2 norm on layers 0-2, no RoPE on layer 3;
    // experts in layers 1 and 3 (interleave_moe_layer_step 2, Maverick's form; Scout's is 1), 4 of
    // width 32 top-1 whose sigmoid scores multiply their inputs, one shared expert of the expert
    // width; layers 0 and 2 dense of width 96; llama3 frequency factors (rope_freqs.weight) over an
    // original context of 64. llama4-128e-tiny: 128 experts of width 16, which llama.cpp runs
    // without the QK norm (as Maverick), and layer flags for the chunked layers (2 of 4).
    s.arch = "llama4";
    s.moe_layer_step = 2;
    s.n_ff_dense = 96;
    const bool wide = preset == "llama4-128e-tiny";
    s.n_ff = wide ? 16 : 32;
    s.n_ff_shared = s.n_ff;
    s.n_expert = wide ? 128 : 4;
    s.n_expert_used = 1;
    s.llama3_orig_ctx = 64;
    if (wide) {
      s.n_swa = 8192;
      s.swa_layers = {1, 0, 1, 0};
    }
    s.name = preset;
    return s;
  }
  if (preset == "ernie4_5-moe-tiny") {
    // ernie4_5-moe (ERNIE-4.5-21B-A3B's form) in llama.cpp's layout, F32, 4 layers, dim 64: layer 0
    // dense (leading_dense_block_count 1), then experts in every second layer
    // (interleave_moe_layer_step 2: layers 1 and 3; layer 2 dense, width 128), 8 experts of width
    // 32 top-2, softmax with a selection bias, renormalised, one ungated shared expert of width 64,
    // adjacent-pair RoPE, tied head.
    s.arch = "ernie4_5-moe";
    s.n_layer_dense_lead = 1;
    s.moe_layer_step = 2;
    s.n_ff_dense = 128;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_shared = 64;
    s.exp_probs_bias = true;
    s.tied_output = true;
    s.name = preset;
    return s;
  }
  if (preset == "mistral4-tiny") {
    // mistral4 (Mistral Small 4): deepseek2-tiny under its name, whose YaRN magnitude llama.cpp
    // computes as for any architecture but deepseek2, with Mistral Large 3's attention temperature
    // (scale 0.5 from position 4) that deepseek2 files may carry too.
    SynthSpec s = *base_preset("deepseek2-tiny");
    s.arch = "mistral4";
    s.name = preset;
    return s;
  }
  if (preset == "deepseek2-tiny" || preset == "deepseek2-lite-tiny") {
    // deepseek2 in llama.cpp's layout (MLA converted to its absorbed form), F32, 3 layers, dim 64,
    // 4 heads: query/key heads of 48 = 32 non-RoPE + 16 RoPE dims, value heads of 32, a latent of
    // rank 32 (the cache holds 32 + 16 floats per token and layer), the first layer dense (width
    // 128), then 8 routed experts top-2 of width 32 plus 2 shared ones. deepseek2-tiny: DeepSeek-V2's
    // shape: a q LoRA of rank 32, softmax routing over 4 groups of which 2 are kept, weights
    // scaled by 1.5 without renormalisation, YaRN (factor 4, original context 64, mscale_all_dim
    // 0.707). deepseek2-lite-tiny: DeepSeek-V2-Lite's: attn_q, one group, no scale, no YaRN.
    s.arch = "deepseek2";
    s.n_layer = 3;
    s.n_head = 4;
    s.n_head_kv = 1;
    s.head_dim = 48;
    s.rope_dims = 16;
    s.v_head_dim = 32;
    s.kv_lora_rank = 32;
    s.n_layer_dense_lead = 1;
    s.n_ff_dense = 128;
    s.n_ff = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_expert_shared = 2;
    s.name = preset;
    if (preset == "deepseek2-tiny") {
      s.q_lora_rank = 32;
      s.n_expert_group = 4;
      s.n_expert_group_used = 2;
      s.expert_weights_scale = 1.5f;
      s.expert_gating = 1;
      s.exp_probs_bias = false;
      s.rope_scaling = "yarn";
      s.rope_scaling_factor = 4.0f;
      s.rope_orig_ctx = 64;
      s.yarn_log_mul = 0.0707f;
    }
    return s;
  }
  if (preset == "qwen3moe-target") {
    // Qwen3-30B-A3B's routing (128 experts, top-8, renormalised, narrow experts, QK-norm, heads
    // wider than n_embd / n_head) scaled down to run on 2 cores: F16, 6 layers, dim 512, heads 8/2
    // of 128 (key_length; n_embd / n_head is 64), experts of width 128 (~160M parameters, ~20M
    // read per token).
    s.type = DType::F16;
    s.arch = "qwen3moe";
    s.n_vocab = 4096;
    s.n_embd = 512;
    s.n_layer = 6;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 128;
    s.n_ff = 128;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.expert_weights_norm = 1;
    s.n_ctx = 2048;
    s.rope_freq_base = 1000000.0f;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    return s;
  }
  if (preset == "deepseek2-target") {
    // DeepSeek-V2-Lite's shape (64 routed experts top-6, 2 shared, the first layer dense, MLA
    // with a latent of 512 = 4x the value heads, no q LoRA, raw softmax weights) scaled down to
    // run on 2 cores: F16, 6 layers, dim 512, 8 heads of 96 = 64 + 32 RoPE dims, value heads of
    // 64, latent rank 128 (160 floats cached per token and layer, against 2 x 8 x 96 for the same
    // heads without compression), experts of width 192 (~110M parameters, ~20M read per token).
    s.type = DType::F16;
    s.arch = "deepseek2";
    s.n_vocab = 4096;
    s.n_embd = 512;
    s.n_layer = 6;
    s.n_head = 8;
    s.n_head_kv = 1;
    s.head_dim = 96;
    s.rope_dims = 32;
    s.v_head_dim = 64;
    s.kv_lora_rank = 128;
    s.n_layer_dense_lead = 1;
    s.n_ff_dense = 1536;
    s.n_ff = 192;
    s.n_expert = 64;
    s.n_expert_used = 6;
    s.n_expert_shared = 2;
    s.n_ctx = 2048;
    s.n_full_layers = 2;
    s.deep_residual_scale = 0.15f;
    s.name = preset;
    return s;
  }
  // ARCH-mtp-tiny: ARCH-tiny with one multi-token-prediction block after its layers (glm4moe's with
  // its own embedding and head, the others sharing the model's, as Qwen3.5's and DeepSeek-V3's).
  if (preset == "qwen35-mtp-only-tiny") {
    // qwen35-mtp-tiny's block, embedding, final norm and head alone (llama.cpp's --mtp export):
    // the draft of a qwen35-tiny target of the same seed.
    SynthSpec s = *base_preset("qwen35-mtp-tiny");
    s.mtp_only = true;
    s.name = preset;
    return s;
  }
  if (preset == "eagle3-tiny" || preset == "eagle3-d2t-tiny") {
    // An EAGLE-3 head for a "tiny" target (width 64, 4 layers, 320 ids) of the same seed. eagle3-tiny:
    // llama.cpp's default layers for a 4-layer target ([2, N/2, N-3] = 2, 2, 1 would repeat one; 1,
    // 2, 3 here), the target's embedding and head. eagle3-d2t-tiny: layers 0, 1 and 3, its own
    // embedding, its own head over 160 of the 320 ids (d2t), norm_before_fc and norm_before_residual.
    s = SynthSpec{};
    s.arch = "eagle3";
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_layer = 1;
    s.n_head = 4;
    s.n_head_kv = 4;
    s.n_ff = 128;
    s.n_ctx = 512;
    s.head_target_width = 64;
    const bool d2t = preset == "eagle3-d2t-tiny";
    s.eagle3_layers = d2t ? std::vector<int32_t>{0, 1, 3} : std::vector<int32_t>{1, 2, 3};
    s.eagle3_target_head = !d2t;
    s.eagle3_own_embd = d2t;
    s.eagle3_draft_vocab = d2t ? 160 : 0;
    s.eagle3_norm_before_fc = d2t;
    s.eagle3_norm_before_residual = d2t;
    s.name = preset;
    return s;
  }
  if (preset == "dflash-tiny" || preset == "dflash-d2t-tiny") {
    // A DFlash draft for a "tiny" target (width 64, 4 layers, 320 ids) of the same seed. dflash-tiny:
    // two layers (2 KV heads, random q and k) reading the input rows of the target's layers 1 and 3,
    // the target's embedding and head, blocks of 8 (bidirectional). dflash-d2t-tiny: one layer
    // reading layers 0, 2 and 3, its own embedding and a head over 160 of the 320 ids (d2t), blocks
    // of 5, causal, each block token attending to the one before it (dflash_attend_previous), so
    // that its first draft is the target's likely next token.
    s = SynthSpec{};
    s.arch = "dflash";
    const bool d2t = preset == "dflash-d2t-tiny";
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_layer = d2t ? 1 : 2;
    s.n_head = 4;
    s.n_head_kv = d2t ? 4 : 2;
    s.n_ff = 128;
    s.n_ctx = 512;
    s.dflash_layers = d2t ? std::vector<int32_t>{0, 2, 3} : std::vector<int32_t>{1, 3};
    s.dflash_block_size = d2t ? 5 : 8;
    s.dflash_mask_token = 319;
    s.dflash_causal = d2t;
    s.eagle3_target_head = !d2t;
    s.eagle3_own_embd = d2t;
    s.eagle3_draft_vocab = d2t ? 160 : 0;
    s.dflash_attend_previous = d2t;
    s.name = preset;
    return s;
  }
  for (const std::string arch : {"qwen35", "qwen35moe", "glm4moe", "deepseek2"}) {
    if (preset != arch + "-mtp-tiny") continue;
    SynthSpec s = *base_preset(arch + "-tiny");
    s.n_nextn = 1;
    s.mtp_own_head = arch == "glm4moe";
    s.name = preset;
    return s;
  }
  return std::nullopt;
}

}  // namespace

SynthSpec synth_spec(const std::string& preset) {
  if (auto s = base_preset(preset)) return *s;
  // PRESET-TYPE: the preset with its matrices in TYPE (a dtype name, any case).
  if (const size_t dash = preset.rfind('-'); dash != std::string::npos) {
    const auto type = dtype_from_name(std::string_view(preset).substr(dash + 1));
    if (auto s = type ? base_preset(preset.substr(0, dash)) : std::nullopt) {
      s->type = *type;
      s->name = preset;
      return *s;
    }
  }
  std::string known;
  for (const auto& p : synth_presets()) known += (known.empty() ? "" : ", ") + p.substr(0, p.find(':'));
  throw_error(ErrorKind::InvalidArgument,
              "synth: unknown preset '{}' (known: {}; PRESET-TYPE, e.g. tiny-q8_0, writes a preset's matrices in TYPE)",
              preset, known);
}

std::vector<std::string> synth_presets() {
  return {
      "tiny: llama, F32, 4 layers, dim 64, vocab 320 (~0.2M params): unit tests, writes in milliseconds",
      "tiny-draft: the first layer of tiny with its embedding and head: a draft for tiny",
      "tiny-256: tiny with dim 256 and ff 512 (~2.5M params), so rows fit the 256-element blocks of the K-quants and "
      "IQ4_XS",
      "target: llama, F16, 12 layers, dim 1024, ff 2816, 16/4 heads, vocab 4096 (~144M params): benchmarks",
      "draft: the first 2 layers of target with its embedding and head (~31M params): a draft for target",
      "moe-tiny: llama (Mixtral layout), F32, 3 layers, dim 64, 4 experts top-2 of width 96: MoE unit tests",
      "qwen2moe-tiny: qwen2moe, F32, 2 layers, dim 64, 6 experts top-2 of width 64 + gated shared expert 128",
      "moe-target: llama (Mixtral layout), F16, 8 layers, dim 1024, 8 experts top-2 of width 1408 (~305M params, "
      "~98M active): MoE benchmarks",
      "moe-draft: dense, the first 2 layers' attention, embedding and head of moe-target, ff 2816 (~29M params)",
      "target-1b: llama, F16, 22 layers, dim 2048, ff 5632, 32/4 heads, vocab 32000 (~1.1B params, 2.2 GB): GPU "
      "benchmarks",
      "qwen3-tiny: qwen3, F32, 4 layers, dim 64, heads 4/2 of 32 (key_length), QK-norm, no QKV biases",
      "qwen3-yarn-tiny: qwen3-tiny with YaRN RoPE scaling (factor 4, original context 64)",
      "gemma3-tiny: gemma3, F32, 6 layers, dim 64, heads 4/1 of 32, QK-norm, post-norms, GeGLU, tied head, "
      "window 4 on layers 0-4 (default pattern 6), RoPE bases 1e6 global / 10000 local",
      "llama3-tiny: tiny with Llama 3.1's RoPE frequency factors (rope_freqs.weight, original context 32) and a "
      "tied head",
      "qwen3moe-tiny: qwen3moe, F32, 3 layers, dim 64, heads 4/2 of 32, QK-norm, 16 experts top-4 of width 32, "
      "renormalised",
      "olmoe-tiny: olmoe, F32, 3 layers, dim 64, QK-norm over the whole projections, 8 experts top-2 of width 64, raw "
      "softmax weights",
      "phi3-tiny: phi3, F32, 4 layers, dim 64, fused QKV and gate-up (2 x 96), LongRoPE long/short factors "
      "(original context 64) and attn_factor",
      "gemma2-tiny: gemma2, F32, 4 layers, dim 64, heads 4/2 of 32, post-norms, GeGLU, tied head, window 4 on layers "
      "0 and 2, attention and final soft-capping at 2 and 5",
      "granite-tiny: granite, F32, 4 layers, dim 64, embedding / residual / attention / logit scales",
      "granitemoe-tiny: granitemoe, F32, 3 layers, dim 64, granite's scales, 4 experts top-2 of width 64",
      "olmo2-tiny: olmo2, F32, 4 layers, dim 64, no pre-norms, QK-norm over the whole projections, post-norms",
      "smollm3-tiny: smollm3, F32, 4 layers, dim 64, no RoPE on layer 3 (every fourth), tied head",
      "stablelm-tiny: stablelm, F32, 4 layers, dim 64, LayerNorm with biases, QKV biases, RoPE on 4 of 16 dims",
      "gemma-tiny: gemma, F32, 4 layers, dim 64, heads 4/1 of 32, embedding scale, GeGLU, tied head",
      "starcoder2-tiny: starcoder2, F32, 4 layers, dim 64, LayerNorm with biases, biases, ungated GELU MLP",
      "gptneox-tiny: gptneox (Pythia), F32, 4 layers, dim 64, parallel residual, LayerNorm with biases, RoPE on 4 "
      "of 16 dims",
      "phi2-tiny: phi2, F32, 4 layers, dim 64, one LayerNorm for parallel attention and MLP, biases, RoPE on 8 of "
      "16 dims, logit bias",
      "ernie4_5-tiny: ernie4_5 (dense), F32, 4 layers, dim 64, llama's block, tied head",
      "exaone-tiny: exaone, F32, 4 layers, dim 64, llama's block with split-halves RoPE",
      "exaone4-tiny: exaone4, F32, 4 layers, dim 64, heads 4/2 of 32, post-norms only, QK-norm per head, tied head",
      "olmo3-tiny: olmo2-tiny with windows of 4 on layers 0-2 (per-layer flags) and YaRN (factor 4, original "
      "context 8, attn_factor 1.25) on the global layer 3 only",
      "exaone4-32b-tiny: exaone4 in EXAONE 4.0 32B's form, F32, 64 layers, dim 32, heads 2/1 of 16, windows of 4 on "
      "every layer but each fourth, no RoPE on those",
      "command-r-tiny: command-r, F32, 4 layers, dim 64, LayerNorm without biases, one norm, parallel residual, tied "
      "head, logits x 0.5",
      "cohere2-tiny: cohere2, command-r-tiny with windows of 4 on layers 0-2 and no RoPE on layer 3",
      "internlm2-tiny: internlm2, F32, 4 layers, dim 64, llama's block",
      "qwen2vl-tiny: qwen2vl (Qwen2.5-VL's text model), F32, 4 layers, dim 64, qwen2 with M-RoPE sections 4/6/6/0",
      "seed_oss-tiny: seed_oss, F32, 4 layers, dim 64, llama's block with split-halves RoPE, FFN norm named "
      "post_attention_norm",
      "minicpm-tiny: minicpm, F32, 4 layers, dim 64, granite's multipliers at MiniCPM's defaults (no keys)",
      "glm4-tiny: glm4, F32, 4 layers, dim 64, pre- and post-norms, q/k/v biases, fused gate-up, RoPE on 8 of 16 dims",
      "hunyuan-dense-tiny: hunyuan-dense, F32, 4 layers, dim 64, QK-norm per head after RoPE, tied head",
      "maincoder-tiny: maincoder, F32, 4 layers, dim 64, adjacent-pair RoPE, QK-norm per head after RoPE",
      "bailingmoe-tiny: bailingmoe (Ling v1), F32, 3 layers, dim 64, 8 experts top-2 + 2 shared, softmax, raw weights x 2",
      "mellum-tiny: mellum, F32, 5 layers, dim 64, QK-norm, 8 experts top-2, windows of 4 on all but layer 3",
      "spark2_5-tiny: spark2_5, F32, 4 layers, dim 64, windows of 4 on layers 0, 2 and 3 rotating 8 of 16 dims "
      "(base 1000), a sigmoid gate per head, GELU-gated MLP, tied head",
      "maple-tiny: maple, F32, 4 layers, dim 64, QK-norm, windows of 4 with RoPE (base 1000) on layers 0, 1 and 3, "
      "layer 2 global without RoPE, 8 experts top-2 with a SwiGLU clamp per layer",
      "qwen3next-tiny: qwen3next, qwen35moe-tiny's layers with plain RoPE on 8 of 32 dims, 6 value heads "
      "interleaved on 2 query/key heads, ssm_ba",
      "qwen3next-legacy-tiny: qwen3next-tiny with the older converters' ssm_in",
      "nanbeige-tiny: nanbeige, F32, 3 blocks run twice (6 layers with shared weights), output_norm between passes",
      "apertus-tiny: apertus, F32, 4 layers, dim 64, QK-norm (its unused biases), ungated xIELU MLP with per-layer scalars",
      "qwen3vl-tiny: qwen3vl (Qwen3-VL's text model), qwen3-tiny with interleaved M-RoPE sections 6/4/4/0 (pair 13 "
      "still)",
      "mistral3-tiny: mistral3, F32, 4 layers, dim 64, YaRN with its beta and log-multiplier keys, attention "
      "temperature from position 8",
      "qwen3vlmoe-tiny: qwen3vlmoe (Qwen3-VL-30B-A3B's text model), qwen3moe-tiny with qwen3vl-tiny's M-RoPE "
      "sections",
      "deepseek-tiny: deepseek (DeepSeek-MoE), F32, 3 layers, dim 64, 1 dense + 2 MoE layers of 8 experts top-2 + "
      "2 shared, raw softmax weights",
      "dots1-tiny: dots1, F32, 3 layers, dim 64, QK-norm, 1 dense + 2 MoE layers of 8 experts top-2 + 1 shared, "
      "sigmoid with selection bias, scale 2",
      "glm4moe-tiny: glm4moe (GLM-4.5-Air), F32, 3 layers, dim 64, q/k/v biases, RoPE on 8 of 16 dims, 1 dense + 2 "
      "MoE layers of 8 experts top-2 + 1 shared, sigmoid with bias over 4 groups keep 2, scale 1.5",
      "llama4-tiny: llama4, F32, 4 layers, dim 64, chunked attention and QK L2 norm on layers 0-2, no RoPE on layer 3, "
      "experts in layers 1 and 3 (step 2), 4 top-1 scaling their inputs + one shared expert, llama3 frequency factors",
      "llama4-128e-tiny: llama4-tiny with 128 experts of width 16 (no QK norm, as Maverick) and chunked layers 0 and 2",
            "ernie4_5-moe-tiny: ernie4_5-moe, F32, 4 layers, dim 64, experts in layers 1 and 3 (step 2), 8 top-2 + one "
      "shared of 64, softmax with selection bias, tied head",
      "minimax-m2-tiny: minimax-m2, F32, 3 layers, dim 64, QK-norm over the projections, RoPE on 8 of 16 dims, 8 "
      "experts top-2, sigmoid with selection bias",
      "gpt-oss-tiny: gpt-oss, F32, 4 layers, dim 64, heads 4/2 of 32, windows of 4 on even layers, sinks, biases, "
      "8 experts top-2 with biases and the clamped SwiGLU",
      "starcoder-tiny: starcoder, F32, 4 layers, dim 64, gpt2's block with multi-query attention (heads 4/1)",
      "bloom-tiny: bloom, F32, 4 layers, dim 64, ALiBi, LayerNorm of the embedding, gpt2's block, tied head",
      "mpt-tiny: mpt, F32, 4 layers, dim 96, ALiBi over 6 heads, gpt2's block without biases, q/k/v clamped",
      "refact-tiny: refact, F32, 4 layers, dim 64, ALiBi, llama's block (heads 4/1)",
      "jais-tiny: jais, F32, 4 layers, dim 64, ALiBi, LayerNorms and biases, SwiGLU, scores scaled by 1/head_dim",
      "falcon-tiny: falcon (Falcon-7B's form), F32, 4 layers, dim 64, parallel residual under one LayerNorm, heads 4/1",
      "falcon40b-tiny: falcon (Falcon-40B's form), F32, 4 layers, dim 64, heads 4/2, the attention's own norm",
      "olmo-tiny: olmo (OLMo 1), F32, 4 layers, dim 64, LayerNorms without parameters, q/k/v clamped, tied head",
      "baichuan-tiny: baichuan (7B's form), F32, 32 layers, dim 32, llama's block with RoPE",
      "baichuan13b-tiny: baichuan (13B's form), F32, 40 layers, dim 32, llama's block with ALiBi",
      "dbrx-tiny: dbrx, F32, 4 layers, dim 64, fused QKV, bias-free LayerNorms, q/k/v clamped, 8 experts top-2",
      "phimoe-tiny: phimoe (Phi-3.5-MoE), F32, 4 layers, dim 64, RMSNorms with biases, LongRoPE, 8 experts top-2",
      "qwen-tiny: qwen (Qwen 1), F32, 4 layers, dim 64, attn_qkv with a bias, the MLP half of feed_forward_length",
      "xverse-tiny: xverse, F32, 4 layers, dim 64, llama's block",
      "orion-tiny: orion, F32, 4 layers, dim 64, LayerNorms with biases, q/k/v biases, split-halves RoPE",
      "codeshell-tiny: codeshell, F32, 4 layers, dim 64, LayerNorms and biases, GELU MLP, split-halves RoPE",
      "plamo-tiny: plamo, F32, 4 layers, dim 64, one RMSNorm for a parallel residual",
      "chatglm-tiny: chatglm (ChatGLM3), F32, 4 layers, dim 64, attn_qkv with a bias, fused gate-up, RoPE on 8 of 16",
      "exaone-moe-tiny: exaone-moe (K-EXAONE), F32, 4 layers, dim 64, QK-norm, windows of 4 and a NoPE global layer, "
      "1 dense + 3 MoE layers of 8 experts top-2 + 1 shared, sigmoid with bias, scale 2.5",
      "lfm2-tiny: lfm2 (LFM2), F32, 6 layers, dim 64, gated short convolutions (3 taps) on 4 layers, attention with "
      "QK-norm on 2",
      "lfm2-swa-tiny: lfm2-tiny with windows of 4 on its attention layers",
      "lfm2moe-tiny: lfm2moe (LFM2-MoE), lfm2-tiny's layers, 1 dense + 5 MoE layers of 8 experts top-2, sigmoid with "
      "bias",
      "smallthinker-tiny: smallthinker (SmallThinker), F32, 4 layers, dim 64, 8 experts top-2 of ReLU GLUs routed by "
      "the layer's input",
      "smallthinker-swa-tiny: smallthinker-tiny with 5 layers, the window key (windows of 4096), a local RoPE base, "
      "NoPE layers 0 and 4, sigmoid scores",
      "qwen35-tiny: qwen35 (Qwen3.5), F32, 4 layers, dim 64, 3 gated DeltaNet layers (2 key heads, 4 value heads of "
      "16, conv of 4), 1 gated attention layer (QK-norm, M-RoPE on 16 of 32)",
      "qwen35-mix-tiny: qwen35-tiny with 6 layers by attention.recurrent_layers (attention on 1 and 4), 2 value heads",
      "qwen35moe-tiny: qwen35moe (Qwen3.5-MoE), qwen35-tiny's layers with 8 experts top-2 of width 32 and a gated "
      "shared expert of 64",
      "qwen35-mtp-tiny: qwen35-tiny with a multi-token-prediction block (NextN: a gated attention layer and a "
      "SwiGLU after eh_proj over the token's embedding and the hidden row; the model's embedding and head)",
      "qwen35moe-mtp-tiny: qwen35moe-tiny with a multi-token-prediction block (an attention layer with experts)",
      "qwen35-mtp-only-tiny: qwen35-mtp-tiny's block with the embedding and head alone (llama.cpp's --mtp export), a "
      "draft for qwen35-tiny of the same seed",
      "glm4moe-mtp-tiny: glm4moe-tiny with a multi-token-prediction block with its own embedding and head",
      "eagle3-tiny: an EAGLE-3 draft head (one llama layer over [embedding | fused features]) for tiny of the same "
      "seed, reading its layers 1, 2 and 3, with the target's embedding and head",
      "eagle3-d2t-tiny: an EAGLE-3 head for tiny reading layers 0, 1 and 3, with its own embedding and a head over "
      "160 of the 320 ids (d2t), norm_before_fc and norm_before_residual",
      "dflash-tiny: a DFlash draft (two Qwen3 layers, 2 KV heads, drafting a block of 8 in one bidirectional "
      "forward) for tiny of the same seed, reading its layers 1 and 3, with the target's embedding and head",
      "dflash-d2t-tiny: a DFlash draft for tiny of one layer reading layers 0, 2 and 3, blocks of 5 with causal "
      "attention to the token before, its own embedding and a head over 160 of the 320 ids (d2t)",
"afmoe-tiny: afmoe, F32, 4 layers, dim 64, embedding x8, pre- and post-norms, QK-norm, an attention output "
      "gate, windows of 4 on layers 0-2, no RoPE on layer 3, 1 dense + 3 MoE layers of 8 experts top-2 + 1 shared",
      "nemotron_h_moe-tiny: nemotron_h-tiny with experts in its MLP layers: 8 ungated squared ReLUs of 32 top-2 and "
      "a shared one of 64, sigmoid with a selection bias, renormalised, scale 2.5",
      "mistral4-tiny: deepseek2-tiny as mistral4 (llama.cpp's YaRN magnitude for it) with an attention temperature "
      "of 0.5 from position 4",
            "deepseek2-mtp-tiny: deepseek2-tiny with a multi-token-prediction block (MLA and experts, DeepSeek-V3's MTP "
      "module)",
      "granitehybrid-tiny: granitehybrid (Granite 4.0 H), F32, 4 layers, dim 64, Mamba-2 (8 heads of 16, state 16) on "
      "3 and granite's attention on 1, granite's multipliers",
      "granitehybrid-moe-tiny: granitehybrid-tiny with 8 experts top-2 of 32 and a shared expert of 64, 2 groups, "
      "no RoPE",
      "mamba2-tiny: mamba2 (Mamba-2), F32, 4 layers of 64, a Mamba-2 mixer each (8 heads of 16, state 16, 2 groups), "
      "no FFN",
      "nemotron_h-tiny: nemotron_h (Nemotron-H), F32, 6 layers of 64: Mamba-2, Mamba-2, attention (no RoPE), "
      "squared-ReLU MLP, Mamba-2, MLP",
      "arcee-tiny: arcee (AFM), F32, 4 layers, dim 64, llama's attention, ungated squared-ReLU MLP",
      "nemotron-tiny: nemotron, F32, 4 layers, dim 64, LayerNorm with biases, biases, RoPE on 8 of 16 dims, ungated "
      "squared-ReLU MLP with biases",
      "jais2-tiny: jais2 (Jais 2), F32, 4 layers, dim 64, nemotron's block with RoPE over whole heads and a tied head",
      "hunyuan-moe-tiny: hunyuan-moe (Hunyuan-A13B), F32, 3 layers, dim 64, QK-norm after RoPE, 8 experts top-2 "
      "of width 32 + one shared of 64",
      "bailingmoe2-tiny: bailingmoe2 (Ling 2.0), F32, 3 layers, dim 64, attn_qkv, QK-norm, RoPE on 8 of 16 dims, 1 "
      "dense + 2 MoE layers of 8 experts top-2 + 1 shared, sigmoid with bias over 2 groups keep 1, scale 2.5",
      "deepseek2-tiny: deepseek2 (MLA, heads 32 + 16 RoPE, q LoRA 32, latent 32 + RoPE 16), F32, 3 layers, dim 64, 1 dense + 2 MoE layers "
      "of 8 experts top-2 + 2 shared, softmax over 4 groups keep 2, scale 1.5, YaRN",
      "deepseek2-lite-tiny: deepseek2-tiny in DeepSeek-V2-Lite's form: attn_q, no groups, no scale, no YaRN",
      "qwen3moe-target: qwen3moe, F16, 6 layers, dim 512, 128 experts top-8 of width 128 (Qwen3-30B-A3B's routing "
      "scaled down, ~160M params, ~20M read per token): MoE study",
      "deepseek2-target: deepseek2, F16, 6 layers, dim 512, MLA (latent 128 + RoPE 32), 1 dense + 5 MoE layers of 64 "
      "experts top-6 of width 192 + 2 shared (DeepSeek-V2-Lite's shape scaled down, ~110M params): MoE study",
  };
}

}  // namespace specmoe::core
