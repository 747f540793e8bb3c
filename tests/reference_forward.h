// Double-precision reference forward over a whole sequence (no cache), straight from the
// definitions: llama (Touvron et al. 2023), qwen2 (llama + QKV biases, NEOX RoPE), gpt2 (Radford
// et al. 2019), qwen3 and qwen3moe (qwen2 without biases, RMSNorm of each q/k head), olmoe (RMSNorm
// of the whole q and k projections), phi3 (fused QKV and gate-up, LongRoPE's long/short factors
// by context), gemma2 and gemma3 (Gemma Team 2024/2025: embedding times sqrt(n_embd), post-norms,
// GeGLU, sliding-window local layers with their own RoPE base; gemma2's attention and final
// soft-capping, gemma3's QK-norm; gemma 1 without post-norms), granite (embedding, residual,
// attention and logit multipliers), olmo2 (post-norms only, QK-norm of the whole projections),
// smollm3 (no RoPE on every fourth layer), stablelm and starcoder2 (LayerNorm with biases, partial
// RoPE; starcoder2's ungated GELU MLP), gptneox and phi2 (a parallel residual: both sublayers read
// the layer's input; phi2's one norm and logit bias), ernie4_5 and exaone (llama's block), exaone4
// (olmo2's post-norms with per-head QK-norm), OLMo 3 (olmo2 with windows: local layers rotate
// without scaling) and EXAONE 4.0 32B (exaone4 with 64 layers: windows, global layers without RoPE), command-r
// and cohere2 (LayerNorm without biases, one norm for a parallel residual, logits times
// logit_scale; cohere2's windows and NoPE global layers), minicpm (granite's multipliers with
// MiniCPM's defaults), glm4 (pre- and post-norms, fused gate-up, partial RoPE),
// hunyuan-dense (QK-norm after RoPE, the NTK-aware alpha on the base), maincoder (QK-norm after
// adjacent-pair RoPE),
// qwen3vl and qwen3vlmoe (interleaved M-RoPE: some pairs unrotated for text), internlm2, qwen2vl (M-RoPE, which
// rotates text as split-halves RoPE does; an output.bias left unused) and seed_oss, mistral3 (YaRN's keys, Llama 4's attention
// temperature), bloom, mpt, refact and jais (ALiBi, Press et al. 2022: head h adds -m_h |i - j| to
// the score of query i on key j, m_h the paper's geometric slopes, interleaved for head counts that
// are not powers of two; bloom's LayerNorm of the embedding, mpt's clamp of q/k/v, jais's 1/d
// score scale; baichuan: RoPE at 32 layers, ALiBi at 40, neither otherwise, as llama.cpp has it),
// falcon (a parallel residual under one LayerNorm; Falcon-40B's attention under its own), olmo
// (LayerNorms without parameters, q/k/v clamped), qwen (Qwen 1), xverse, orion (LayerNorms), codeshell
// (LayerNorms, gpt2's MLP; the head's rows as the embedding when token_embd is absent), plamo (one
// RMSNorm for a parallel residual) and chatglm (fused gate-up, partial RoPE), deepseek2's multi-head latent attention in its plain,
// decompressed form (DeepSeek-AI 2024: per-head keys [W_UK c | k_pe] and values W_UV c from the
// normalised latent c; the model runs the absorbed form), RoPE with Llama 3.1's frequency factors
// and YaRN (Peng et al. 2023). The model tests compare the transformer's logits with it; an MoE
// test supplies its own feed-forward block through run()'s hook and reuses the building blocks.
//
// Written apart from core/: it takes the sizes from ModelConfig but reads every architecture
// specific (windows, layer pattern, RoPE bases, scaling and factors, soft-capping, MLA's scale)
// from the GGUF keys itself, with llama.cpp's defaults, and computes the RoPE angles from the
// papers' formulas.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/model_config.h"
#include "kernels/cpu/quant.h"

namespace specmoe::testing {

class ReferenceForward {
 public:
  explicit ReferenceForward(const std::string& path)
      : f_(core::GGUFFile::open(path)), c_(core::ModelConfig::from_gguf(*f_)) {
    arch_ = f_->get_string("general.architecture");
    const std::string a = arch_ + ".";
    gemma2_ = arch_ == "gemma2";
    gemma_ = gemma2_ || arch_ == "gemma3";
    qk_norm_ = arch_ == "qwen3" || arch_ == "qwen3moe" || arch_ == "gemma3" || arch_ == "exaone4" ||
               arch_ == "hunyuan-dense" || arch_ == "qwen3vl" || arch_ == "qwen3vlmoe" || arch_ == "dots1" ||
               arch_ == "bailingmoe2" || arch_ == "hunyuan-moe" || arch_ == "exaone-moe" || arch_ == "lfm2" || arch_ == "lfm2moe" ||
               arch_ == "qwen35" || arch_ == "qwen35moe" || arch_ == "maincoder" || arch_ == "apertus" || arch_ == "qwen3next" || arch_ == "mellum" || arch_ == "maple" ||
               arch_ == "afmoe" ||
               (arch_ == "glm4moe" && f_->find_tensor("blk.0.attn_q_norm.weight"));
    if (arch_ == "qwen3vl" || arch_ == "qwen3vlmoe" || arch_ == "qwen35" || arch_ == "qwen35moe") {
      // Interleaved M-RoPE on text: pair i's section is s = i mod (sum of sections); it rotates by
      // the position when s = 0 mod 3 below 3 s0, 1 mod 3 below 3 s1 or 2 mod 3 below 3 s2, and
      // otherwise sits in the fourth section, whose text position is 0.
      const auto sec = f_->get_int_array(a + "rope.dimension_sections");
      int64_t sum = 0;
      for (auto v : sec) sum += v;
      still_.assign(c_.rope_dims / 2, false);
      for (int i = 0; i < c_.rope_dims / 2; ++i) {
        const int64_t s = i % sum;
        still_[i] = !((s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]));
      }
    }
    qk_norm_full_ = arch_ == "olmoe" || arch_ == "olmo2" || arch_ == "minimax-m2";
    gemma1_ = arch_ == "gemma";
    post_only_ = arch_ == "olmo2" || arch_ == "exaone4";  // post-norms only
    layer_norm_ = arch_ == "gpt2" || arch_ == "starcoder" || arch_ == "stablelm" || arch_ == "starcoder2" || arch_ == "gptneox" ||
                  arch_ == "phi2" || arch_ == "nemotron" || arch_ == "jais2" || arch_ == "bloom" || arch_ == "mpt" ||
                  arch_ == "jais" || arch_ == "falcon" || arch_ == "olmo" || arch_ == "dbrx" || arch_ == "orion" || arch_ == "codeshell";
    plamo_ = arch_ == "plamo";
    rms_bias_ = arch_ == "phimoe";  // RMSNorms that add their .bias
    falcon_ = arch_ == "falcon";
    weightless_ = arch_ == "olmo";
    // No RoPE: learned positions (gpt2, starcoder), ALiBi (bloom, refact: max bias 8; mpt, jais: the key).
    const int64_t blocks = f_->get_int(a + "block_count", 0);
    rope_free_ = arch_ == "gpt2" || arch_ == "starcoder" || arch_ == "bloom" || arch_ == "mpt" || arch_ == "refact" ||
                 arch_ == "nemotron_h" ||
                 arch_ == "jais" || (arch_ == "baichuan" && blocks != 32);
    const double max_bias = arch_ == "bloom" || arch_ == "refact" || (arch_ == "baichuan" && blocks == 40) ? 8.0
                            : arch_ == "mpt" || arch_ == "jais" ? f_->get_float(a + "attention.max_alibi_bias", 0.0)
                                                                : 0.0;
    if (max_bias > 0) {
      const int H = c_.n_head;
      int n = 1;
      while (2 * n <= H) n *= 2;
      for (int h = 0; h < H; ++h)
        slopes_.push_back(h < n ? std::pow(2.0, -max_bias * (h + 1) / n) : std::pow(2.0, -max_bias * (2 * (h - n) + 1) / (2 * n)));
    }
    clamp_ = arch_ == "mpt" || arch_ == "olmo" || arch_ == "dbrx" ? f_->get_float(a + "attention.clamp_kqv", 0.0) : 0.0;
    phi2_ = arch_ == "phi2";
    cohere_ = arch_ == "command-r" || arch_ == "cohere2";  // LayerNorm without biases, one norm
    layer_norm_ = layer_norm_ || cohere_;
    parallel_ = phi2_ || cohere_ || falcon_ || plamo_ || (arch_ == "gptneox" && f_->get_bool(a + "use_parallel_residual", false));
    if (cohere_) logit_mul_ = f_->get_float(a + "logit_scale", 0.0);
    if (logit_mul_ == 0) logit_mul_ = 1;
    relu_sqr_ = arch_ == "arcee" || arch_ == "nemotron" || arch_ == "jais2";  // down(relu(up x)^2)
    if (arch_ == "apertus") {  // down(xielu(up x)): the file's raw scalars, a value or one per layer
      auto per_layer = [&](const char* key) {
        try {
          return f_->get_float_array(key);
        } catch (const std::exception&) {
          return std::vector<double>(static_cast<size_t>(c_.n_layer), f_->get_float(key));
        }
      };
      xielu_an_ = per_layer("xielu.alpha_n"), xielu_ap_ = per_layer("xielu.alpha_p");
      xielu_beta_ = per_layer("xielu.beta"), xielu_eps_ = per_layer("xielu.eps");
    }
    ungated_ = arch_ == "apertus" || arch_ == "gpt2" || arch_ == "starcoder" || arch_ == "starcoder2" || arch_ == "gptneox" || phi2_ || relu_sqr_ ||
               arch_ == "bloom" || arch_ == "mpt" || falcon_ || arch_ == "codeshell";
    if (arch_ == "granite" || arch_ == "granitemoe" || arch_ == "granitehybrid") {
      // Granite's multipliers (0 or absent: none; granitehybrid's logit scale optional too).
      embd_mul_ = f_->get_float(a + "embedding_scale", 0.0);
      residual_mul_ = f_->get_float(a + "residual_scale", 0.0);
      logit_div_ = arch_ == "granitehybrid" ? f_->get_float(a + "logit_scale", 0.0) : f_->get_float(a + "logit_scale");
      if (logit_div_ == 0) logit_div_ = 1;
      if (embd_mul_ == 0) embd_mul_ = 1;
      if (residual_mul_ == 0) residual_mul_ = 1;
    }
    if (arch_ == "minicpm") {  // granite's multipliers with MiniCPM's defaults
      embd_mul_ = f_->get_float(a + "embedding_scale", 12.0);
      residual_mul_ = f_->get_float(a + "residual_scale", 1.4 / std::sqrt(static_cast<double>(c_.n_layer)));
      logit_div_ = f_->get_float(a + "logit_scale", 256.0 / c_.n_embd);
    }
    no_rope_step_ = arch_ == "smollm3" || arch_ == "llama4" || arch_ == "afmoe" ? 4 : 0;  // NoPE every fourth layer
    // granite's rope.scaling.finetuned = false: no RoPE anywhere (every first layer of 1).
    if ((arch_ == "granite" || arch_ == "granitehybrid") && !f_->get_bool(a + "rope.scaling.finetuned", true))
      no_rope_step_ = 1;
    if (arch_ == "mistral3") {
      // YaRN's ramp bounds and mscale_all_dim from the file; Llama 4's attention temperature.
      beta_fast_ = f_->get_float(a + "rope.scaling.yarn_beta_fast", 32.0);
      beta_slow_ = f_->get_float(a + "rope.scaling.yarn_beta_slow", 1.0);
      yarn_log_mul_ = f_->get_float(a + "rope.scaling.yarn_log_multiplier", 0.0);
      temp_scale_ = f_->get_float(a + "attention.temperature_scale", 0.0);
    }
    // mistral4: deepseek2's model under another name; llama_context's YaRN magnitude differs (below).
    mistral4_ = arch_ == "mistral4";
    mla_ = arch_ == "deepseek2" || mistral4_;
    if (mla_) {  // Mistral Large 3's attention temperature: every query times it (offset 0)
      mla_temp_scale_ = f_->get_float(a + "attention.temperature_scale", 0.0);
      mla_temp_len_ = static_cast<double>(f_->get_int(a + "attention.temperature_length", 0));
    }
    softcap_ = f_->get_float(a + "final_logit_softcapping", gemma2_ ? 30.0 : 0.0);
    attn_softcap_ = gemma2_ ? f_->get_float(a + "attn_logit_softcapping", 50.0) : 0.0;
    // Sliding windows (gemma, OLMo 3, EXAONE 4.0 32B): window w, layer l local when
    // l % pattern < pattern - 1 (or a flag per layer); query i sees key j when i - w < j <= i.
    // gemma2: w 4096 and pattern 2 by default; gemma3: no window unless the key says, pattern 6;
    // olmo2: no window unless the key says, pattern 4; exaone4: windows only with 64 layers, w 4096
    // and pattern 4 by default.
    // mellum: windows when the key says, its local layers rotated as OLMo 3's.
    olmo3_ = (arch_ == "olmo2" || arch_ == "mellum") && f_->get_int(a + "attention.sliding_window", 0) > 0;
    // EXAONE 4.0 32B and cohere2: windows, global layers without RoPE, local ones as usual.
    // exaone-moe: the same with pre-norms, and its window key required.
    // maple: the same, the window and its per-layer flags required, the local base rope.freq_base_swa.
    nope_global_ = (arch_ == "exaone4" && c_.n_layer == 64) || arch_ == "cohere2" || arch_ == "exaone-moe" || arch_ == "maple";
    // gpt-oss: windows (the key required) on every second layer, rotated as the global ones.
    gpt_oss_ = arch_ == "gpt-oss";
    const int default_window = gemma2_ || nope_global_ ? 4096 : 0;
    // afmoe: windows when the key says, its embedding times sqrt(n_embd), pre- and post-norms, an
    // attention output gate (attn_gate), no RoPE on every fourth layer.
    afmoe_ = arch_ == "afmoe";
    // spark2_5: windows (the key and its per-layer flags required) rotating with their own base,
    // the global scale and rope.dimension_count_swa dims; a sigmoid gate per head (attn_gate) on the
    // attention's output; a GELU-gated MLP. maple's windowed layers may rotate their own dims too.
    spark_ = arch_ == "spark2_5";
    if (spark_ || arch_ == "maple") rope_dims_swa_ = static_cast<int>(f_->get_int(a + "rope.dimension_count_swa", 0));
    window_ = gemma_ || olmo3_ || nope_global_ || gpt_oss_ || afmoe_ || spark_
                  ? static_cast<int>(f_->get_int(a + "attention.sliding_window", default_window))
                  : 0;
    // lfm2: head_count_kv per layer, 0 marking a gated short-convolution layer of shortconv.l_cache
    // taps; attention.sliding_window (when > 0) windows every attention layer.
    conv_.assign(c_.n_layer, false);
    if (arch_ == "lfm2" || arch_ == "lfm2moe") {
      const auto heads = f_->get_int_array(a + "attention.head_count_kv");
      for (int l = 0; l < c_.n_layer; ++l) conv_[l] = heads[l] == 0;
      taps_ = static_cast<int>(f_->get_int(a + "shortconv.l_cache"));
      if (arch_ == "lfm2") window_ = static_cast<int>(f_->get_int(a + "attention.sliding_window", 0));
    }
    // qwen35: gated DeltaNet layers by attention.recurrent_layers (one flag per layer), else all but
    // every full_attention_interval-th (default 4); the others gated attention (attn_q [q_h | g_h]).
    qwen35_ = arch_ == "qwen35" || arch_ == "qwen35moe" || arch_ == "qwen3next";
    recurrent_.assign(c_.n_layer, false);
    if (qwen35_) {
      const core::GGUFValue* flags = f_->find(a + "attention.recurrent_layers");
      const int64_t interval = f_->get_int(a + "full_attention_interval", 4);
      for (int l = 0; l < c_.n_layer; ++l) recurrent_[l] = flags ? flags->items[l].i != 0 : (l + 1) % interval != 0;
    }
    // granitehybrid: Mamba-2 layers where attention.head_count_kv (per layer) is 0.
    mamba2_.assign(c_.n_layer, false);
    if (arch_ == "mamba2") mamba2_.assign(c_.n_layer, true);  // every layer, no feed-forward
    // nemotron_h: one sublayer per layer: an MLP where feed_forward_length > 0, attention where
    // head_count_kv > 0, else Mamba-2.
    nemotron_h_ = arch_ == "nemotron_h" || arch_ == "nemotron_h_moe";  // _moe: experts in the MLP layers
    mlp_only_.assign(c_.n_layer, false);
    if (nemotron_h_) {
      const auto heads = f_->get_int_array(a + "attention.head_count_kv");
      const auto ffs = f_->get_int_array(a + "feed_forward_length");
      for (int l = 0; l < c_.n_layer; ++l) {
        mlp_only_[l] = ffs[l] > 0;
        mamba2_[l] = ffs[l] == 0 && heads[l] == 0;
      }
    }
    if (arch_ == "granitehybrid") {
      const core::GGUFValue* heads = f_->find(a + "attention.head_count_kv");
      for (int l = 0; l < c_.n_layer; ++l)
        mamba2_[l] = heads && heads->type == core::GGUFType::ARRAY ? heads->items[l].i == 0 : heads && heads->i == 0;
    }
    // smallthinker: with the window key > 0, windows of 4096 (llama.cpp's loader fixes it) on every
    // layer but each fourth from layer 0 (dense first), those layers without RoPE (unless the model
    // has exactly 4 layers), the local ones
    // rotating with rope.freq_base_swa (default the global base) and the global scale.
    smallthinker_ = arch_ == "smallthinker";
    if (smallthinker_ && f_->get_int(a + "attention.sliding_window", 0) > 0) window_ = 4096;
    local_.assign(c_.n_layer, false);
    // attention.sliding_window_pattern: one flag per layer, or a period n (default_n when absent):
    // layer l local unless l % n == n - 1 (dense_first: unless l % n == 0); period 0: all local.
    const auto pattern_layers = [&](int default_n, bool dense_first) {
      const core::GGUFValue* pat = f_->find(a + "attention.sliding_window_pattern");
      for (int l = 0; l < c_.n_layer; ++l) {
        if (pat && pat->type == core::GGUFType::ARRAY) {
          local_[l] = pat->items[l].i != 0;
        } else {
          const int n = pat ? static_cast<int>(pat->i) : default_n;
          local_[l] = n == 0 || (dense_first ? l % n != 0 : l % n < n - 1);
        }
      }
    };
    if (window_ > 0 && smallthinker_) {
      pattern_layers(4, true);
    } else if (arch_ == "llama4") {
      // llama4: chunks of 8192 positions (llama.cpp's constant, not the file's) on the layers
      // attention.sliding_window_pattern marks (default: all but each fourth), rotated with
      // rope.freq_base_swa (default the global base) and the global scale and factors; the QK
      // L2 norm on the layers that rotate, unless the model has 128 experts; the attention
      // temperature log(floor((p + 1) / 8192) + 1) * 0.1 + 1 on the NoPE layers' queries.
      chunk_ = 8192;
      llama4_kq_norm_ = f_->get_int(a + "expert_count", 0) != 128;
      pattern_layers(4, false);
    } else if (window_ > 0 && arch_ == "lfm2") {  // lfm2moe reads no window
      for (int l = 0; l < c_.n_layer; ++l) local_[l] = !conv_[l];
    } else if (window_ > 0) {
      pattern_layers(gemma2_ || gpt_oss_ ? 2 : gemma_ ? 6 : 4, false);
    }
    // RoPE: base per layer kind, the linear factor (also YaRN's), YaRN's original context.
    base_ = f_->get_float(a + "rope.freq_base", 10000.0);
    if (arch_ == "hunyuan-dense" && f_->get_float(a + "rope.scaling.alpha", 0.0) > 0) {  // NTK-aware alpha
      const double hd = c_.head_dim;
      base_ *= std::pow(f_->get_float(a + "rope.scaling.alpha", 0.0), hd / (hd - 2));
    }
    base_local_ = gemma_     ? f_->get_float(a + "rope.freq_base_swa", gemma2_ ? base_ : 10000.0)
                  : gpt_oss_ || arch_ == "exaone-moe" || smallthinker_ || arch_ == "llama4" || afmoe_ || arch_ == "maple" || spark_
                      ? f_->get_float(a + "rope.freq_base_swa", base_)
                             : base_;
    const std::string type = f_->get_string(a + "rope.scaling.type", "linear");
    double factor = f_->get_float(a + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = f_->get_float(a + "rope.scale_linear", 0.0);
    factor_ = type == "none" || factor == 0.0 ? 1.0 : factor;
    yarn_ = type == "yarn";
    orig_ctx_ = static_cast<double>(f_->get_int(a + "rope.scaling.original_context_length", c_.n_ctx_train));
    attn_factor_ = f_->get_float(a + "rope.scaling.attn_factor", 1.0);
    if ((arch_ == "llama" || arch_ == "granite" || arch_ == "granitemoe" || arch_ == "exaone" || arch_ == "exaone4" ||
         arch_ == "minicpm" || arch_ == "arcee" || arch_ == "exaone-moe" || arch_ == "apertus" || arch_ == "nanbeige" ||
         arch_ == "llama4") &&
        f_->find_tensor("rope_freqs.weight"))
      freq_factors_ = tensor("rope_freqs.weight");
    context_ = c_.n_ctx_train;
    // Gemma's query_pre_attn_scalar is n_embd / n_head for the 27B (gemma2: 46 layers, gemma3: 62),
    // else head_dim.
    q_scale_ = gemma_ && c_.n_layer == (gemma2_ ? 46 : 62)
                   ? 1.0 / std::sqrt(static_cast<double>(c_.n_embd / c_.n_head))
                   : 1.0 / std::sqrt(static_cast<double>(c_.head_dim));
    if (arch_ == "jais") q_scale_ = 1.0 / c_.head_dim;
    if (arch_ == "granite" || arch_ == "granitemoe" || arch_ == "granitehybrid") {
      const double s = f_->get_float(a + "attention.scale", 0.0);
      if (s != 0) q_scale_ = s;
    }
    if (mla_) {
      // DeepSeek-V2's softmax scale: q_head_dim^-1/2 times YaRN's mscale(s, mscale_all_dim)^2
      // (mscale_all_dim = yarn_log_multiplier / 0.1 as the converter writes it), times the
      // file's attn_factor squared; the RoPE itself then carries no YaRN magnitude.
      mscale_all_ = f_->get_float(a + "rope.scaling.yarn_log_multiplier", 0.0) / 0.1;
      // mistral4: llama_context's attn_factor is 1 / mscale(mscale_all_dim) there (mscale 1 over
      // mscale_all_dim), so the scores take mscale(1) = 1 + 0.1 ln s and the RoPE the ratio.
      const double m = attn_factor_ * (yarn_ ? 1.0 + 0.1 * (mistral4_ ? 1.0 : mscale_all_) * std::log(factor_) : 1.0);
      q_scale_ = m * m / std::sqrt(static_cast<double>(c_.head_dim));
    }
    // A multi-token-prediction block is layer n_layer: an attention layer (run_mtp).
    for (std::vector<bool>* v : {&conv_, &recurrent_, &mamba2_, &mlp_only_, &local_}) v->resize(c_.n_layer + 1, false);
  }
  // The context the model runs at (the KV cache's capacity): phi3 picks its long RoPE factors
  // when it exceeds the original context.
  void set_context(int n_ctx) { context_ = n_ctx; }
  virtual ~ReferenceForward() = default;

  // The feed-forward block of layer l on token t, in place (x += FFN(norm(x))). Empty: the
  // architecture's dense FFN (SwiGLU, GeGLU for gemma3, GELU for gpt2).
  using FfnBlock = std::function<void(std::vector<double>& x, int layer, int token)>;

  // The multi-token-prediction block (DeepSeek-V3's MTP, GLM-4.5's and Qwen3.5's NextN; llama.cpp's
  // graph_mtp) over tokens ids, h[t] the hidden row read with token t:
  //   x = eh_proj [rmsnorm(embed(t); enorm) | rmsnorm(h; hnorm)]  (embed: nextn.embed_tokens, else token_embd)
  //   x = layer n_layer (x), then logits = head(rmsnorm(x; shared_head_norm, else output_norm))
  // with the head nextn.shared_head_head, else the model's. hidden() then holds the normed rows.
  std::vector<std::vector<double>> run_mtp(const std::vector<int32_t>& ids, const std::vector<std::vector<double>>& h,
                                           const FfnBlock& ffn = {}) {
    mtp_h_ = &h;
    auto logits = run(ids, ffn);
    mtp_h_ = nullptr;
    return logits;
  }
  // The last run's final hidden rows [T][n_embd]: the input of the head, after the final norm.
  const std::vector<std::vector<double>>& hidden() const { return hidden_; }
  // The last run's input rows of every layer it ran [layer][T][n_embd] (an EAGLE-3 head's features).
  const std::vector<std::vector<std::vector<double>>>& layer_inputs() const { return layer_inputs_; }

  // logits [T][n_vocab]
  std::vector<std::vector<double>> run(const std::vector<int32_t>& ids, const FfnBlock& ffn = {}) {
    const int T = static_cast<int>(ids.size()), d = c_.n_embd;
    const std::string mtp = "blk." + std::to_string(c_.n_layer) + ".nextn.";
    const bool gpt2 = f_->find_tensor("position_embd.weight") != nullptr;  // gpt2, starcoder, some mpt
    std::vector<std::vector<double>> x(T);
    // codeshell without token_embd: the embedding rows are output.weight's.
    const auto emb = tensor(f_->find_tensor("token_embd.weight") ? "token_embd.weight" : "output.weight");
    for (int t = 0; t < T; ++t) {
      x[t].assign(emb.begin() + static_cast<size_t>(ids[t]) * d, emb.begin() + static_cast<size_t>(ids[t] + 1) * d);
      if (gpt2) {
        const auto pe = tensor("position_embd.weight");
        for (int i = 0; i < d; ++i) x[t][i] += pe[static_cast<size_t>(t) * d + i];
      }
      if (gemma_ || gemma1_ || afmoe_)
        for (double& e : x[t]) e *= std::sqrt(static_cast<double>(d));
      for (double& e : x[t]) e *= embd_mul_;
      if (arch_ == "bloom") x[t] = norm(x[t], "token_embd_norm");
    }
    if (mtp_h_) {
      const bool own = f_->find_tensor(mtp + "embed_tokens.weight") != nullptr;
      const auto e = own ? tensor(mtp + "embed_tokens.weight") : emb;
      for (int t = 0; t < T; ++t) {
        std::vector<double> cat(e.begin() + static_cast<size_t>(ids[t]) * d, e.begin() + static_cast<size_t>(ids[t] + 1) * d);
        cat = norm(cat, mtp + "enorm");
        const auto hn = norm((*mtp_h_)[t], mtp + "hnorm");
        cat.insert(cat.end(), hn.begin(), hn.end());
        x[t] = linear(cat, mtp + "eh_proj", d, false);
      }
    }
    std::vector<std::vector<double>> par(T);  // a parallel residual's attention outputs
    layer_inputs_.clear();
    // x += FFN(norm(x)) of layer l for every token (the hook's block, or the dense one), then a
    // parallel residual's attention output.
    const auto feed_forward = [&](int l, const std::string& p) {
      for (int t = 0; t < T; ++t) {
        if (ffn)
          ffn(x[t], l, t);
        else
          dense_ffn(x[t], p);
        if (parallel_)
          for (int i = 0; i < d; ++i) x[t][i] += par[t][i];
      }
    };
    // nanbeige: block_count blocks run num_loops times, output_norm between the passes unless
    // skip_loop_final_norm.
    const int blocks = arch_ == "nanbeige" ? static_cast<int>(f_->get_int(arch_ + ".block_count")) : 0;
    const bool loop_norm = blocks > 0 && !f_->get_bool(arch_ + ".skip_loop_final_norm", false);
    for (int l = mtp_h_ ? c_.n_layer : 0; l < c_.n_layer + (mtp_h_ ? 1 : 0); ++l) {
      const std::string p = "blk." + std::to_string(blocks > 0 ? l % blocks : l) + ".";
      if (loop_norm && l > 0 && l % blocks == 0)
        for (int t = 0; t < T; ++t) x[t] = norm(x[t], "output_norm");
      layer_in_ = x;  // the layer's input (smallthinker's router reads it)
      layer_inputs_.push_back(x);
      if (recurrent_[l]) {
        delta_net(x, p);
        feed_forward(l, p);
        continue;
      }
      if (mamba2_[l]) {
        mamba2(x, p);
        if (arch_ != "mamba2" && !nemotron_h_) feed_forward(l, p);
        continue;
      }
      if (mlp_only_[l] && ffn && c_.n_expert > 0) {  // nemotron_h_moe: the MoE block's
        for (int t = 0; t < T; ++t) ffn(x[t], l, t);
        continue;
      }
      if (mlp_only_[l]) {  // nemotron_h: x += down(relu(up attn_norm(x))^2)
        for (int t = 0; t < T; ++t) {
          auto u = linear(norm(x[t], p + "attn_norm"), p + "ffn_up", c_.n_ff);
          for (double& e : u) e = std::max(e, 0.0) * std::max(e, 0.0);
          const auto f = linear(u, p + "ffn_down", d);
          for (int i = 0; i < d; ++i) x[t][i] += f[i];
        }
        continue;
      }
      if (conv_[l]) {
        // lfm2's gated short convolution: [B | C | x] = in_proj norm(x_t), s_t = B * x, then
        // y_t = C * sum_k taps[c][k] s_{t - (L - 1) + k} (s before the first token: 0), x_t += out_proj y.
        const auto taps = tensor(p + "shortconv.conv.weight");  // ne {L, d}: channel c's taps at c L + k
        std::vector<std::vector<double>> bx(T), cg(T);
        for (int t = 0; t < T; ++t) {
          const auto y = linear(norm(x[t], p + "attn_norm"), p + "shortconv.in_proj", 3 * d, false);
          bx[t].resize(d), cg[t].assign(y.begin() + d, y.begin() + 2 * d);
          for (int i = 0; i < d; ++i) bx[t][i] = y[i] * y[2 * d + i];
        }
        for (int t = 0; t < T; ++t) {
          std::vector<double> y(d, 0.0);
          for (int k = 0; k < taps_; ++k) {
            const int j = t - (taps_ - 1) + k;
            if (j < 0) continue;
            for (int i = 0; i < d; ++i) y[i] += taps[static_cast<size_t>(i) * taps_ + k] * bx[j][i];
          }
          for (int i = 0; i < d; ++i) y[i] *= cg[t][i];
          const auto o = linear(y, p + "shortconv.out_proj", d, false);
          for (int i = 0; i < d; ++i) x[t][i] += o[i];
        }
        feed_forward(l, p);
        continue;
      }
      // Per token: queries [n_head, dk], keys [n_kv, dk], values [n_kv, dv].
      std::vector<std::vector<double>> q(T), k(T), v(T);
      int n_kv = c_.n_head_kv, dk = c_.head_dim, dv = c_.head_dim;
      for (int t = 0; t < T; ++t) {
        // Falcon-40B's attention reads its own norm, attn_norm_2.
        const bool norm2 = falcon_ && f_->find_tensor(p + "attn_norm_2.weight");
        const auto h = post_only_ ? x[t] : norm(x[t], p + (norm2 ? "attn_norm_2" : "attn_norm"));
        if (mla_) {
          mla_qkv(h, p, t, l, q[t], k[t], v[t]);
          n_kv = c_.n_head, dv = c_.mla_v_head_dim;
        } else {
          qkv(h, p, t, l, q[t], k[t], v[t]);
        }
      }
      const int w = local_[l] ? window_ : 0;
      // gpt-oss's sinks: one more logit per head in the softmax, with no value.
      const std::vector<double> sinks =
          f_->find_tensor(p + "attn_sinks.weight") ? tensor(p + "attn_sinks.weight") : std::vector<double>();
      for (int t = 0; t < T; ++t) {
        int j0 = w > 0 ? std::max(0, t - w + 1) : 0;  // the window: t - j < w
        if (chunk_ > 0 && local_[l]) j0 = t - t % chunk_;  // llama4: the query's chunk
        std::vector<double> att(static_cast<size_t>(c_.n_head) * dv, 0.0);
        for (int h = 0; h < c_.n_head; ++h) {
          const int kh = h / (c_.n_head / n_kv);
          std::vector<double> s(t + 1);
          double mx = -1e300, sum = 0;
          for (int j = j0; j <= t; ++j) {
            double dot = 0;
            for (int i = 0; i < dk; ++i) dot += q[t][h * dk + i] * k[j][kh * dk + i];
            s[j] = dot * q_scale_;
            if (attn_softcap_ > 0) s[j] = attn_softcap_ * std::tanh(s[j] / attn_softcap_);
            if (!slopes_.empty()) s[j] -= slopes_[h] * (t - j);  // ALiBi
            mx = std::max(mx, s[j]);
          }
          const double sink = sinks.empty() ? -1e300 : sinks[h];
          mx = std::max(mx, sink);
          for (int j = j0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
          if (sink > -1e300) sum += std::exp(sink - mx);
          for (int j = j0; j <= t; ++j)
            for (int i = 0; i < dv; ++i) att[h * dv + i] += s[j] / sum * v[j][kh * dv + i];
        }
        // These graphs add no bias to the output projection, even where the file has one.
        const bool out_bias = arch_ != "ernie4_5" && arch_ != "ernie4_5-moe" && arch_ != "glm4moe" &&
                              arch_ != "dots1" && arch_ != "bailingmoe2" && arch_ != "deepseek" &&
                              arch_ != "qwen3vlmoe" && arch_ != "hunyuan-moe" && arch_ != "refact" &&
                              arch_ != "baichuan" && arch_ != "olmo" && !falcon_ && arch_ != "qwen" && arch_ != "xverse" &&
                              arch_ != "orion" && arch_ != "plamo" && arch_ != "chatglm" && arch_ != "exaone-moe" &&
                              arch_ != "lfm2" && arch_ != "lfm2moe";
        if (qwen35_ || afmoe_)  // the gated attention's output gate (afmoe: attn_gate's)
          for (size_t i = 0; i < att.size(); ++i) att[i] /= 1.0 + std::exp(-gate_[t][i]);
        if (spark_)  // one gate per head
          for (size_t i = 0; i < att.size(); ++i) att[i] /= 1.0 + std::exp(-gate_[t][i / c_.head_dim]);
        auto o = linear(att, p + "attn_output", d, out_bias);
        if (gemma_ || post_only_ || arch_ == "glm4" || afmoe_) o = norm(o, p + "post_attention_norm");
        for (double& e : o) e *= residual_mul_;
        if (parallel_)
          par[t] = o;  // the feed-forward reads the layer's input
        else
          for (int i = 0; i < d; ++i) x[t][i] += o[i];
      }
      if (!nemotron_h_) feed_forward(l, p);  // nemotron_h's attention layers are attention only
    }
    std::vector<std::vector<double>> logits(T);
    std::string head =
        f_->find_tensor("output.weight") && !gemma2_ && !gemma1_ && !cohere_ ? "output" : "token_embd";
    // lfm2's final norm is token_embd_norm (llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2).
    std::string final_norm = arch_ == "lfm2" || arch_ == "lfm2moe" ? "token_embd_norm" : "output_norm";
    if (mtp_h_ && f_->find_tensor(mtp + "shared_head_head.weight")) head = mtp + "shared_head_head";
    if (mtp_h_ && f_->find_tensor(mtp + "shared_head_norm.weight")) final_norm = mtp + "shared_head_norm";
    hidden_.assign(T, {});
    for (int t = 0; t < T; ++t) {
      // qwen2vl's graph leaves an output.bias unused (llama.cpp binds it, then adds nothing).
      hidden_[t] = norm(x[t], final_norm);
      logits[t] = linear(hidden_[t], head, c_.n_vocab, arch_ != "qwen2vl");
      for (double& e : logits[t]) e /= logit_div_;
      for (double& e : logits[t]) e *= logit_mul_;
      if (softcap_ > 0)
        for (double& e : logits[t]) e = softcap_ * std::tanh(e / softcap_);
    }
    return logits;
  }

  const core::ModelConfig& config() const { return c_; }
  bool is_local(int layer) const { return local_[layer]; }

  // A tensor of the file, dequantized, as doubles.
  std::vector<double> tensor(const std::string& name) const {
    const core::GGUFTensorInfo& t = f_->tensor(name);
    std::vector<float> v(t.n_elements);
    kernels::cpu::dequantize_row(t.type, t.data, v.data(), t.n_elements);
    return std::vector<double>(v.begin(), v.end());
  }
  // y = W x (+ b when the file has `name`.bias and `bias`): W has ne {n_in, n_out}.
  std::vector<double> linear(const std::vector<double>& in, const std::string& name, int n_out,
                             bool bias = true) const {
    const auto w = tensor(name + ".weight");
    const size_t n_in = in.size();
    std::vector<double> y(n_out, 0.0);
    for (int j = 0; j < n_out; ++j)
      for (size_t i = 0; i < n_in; ++i) y[j] += w[j * n_in + i] * in[i];
    if (bias && f_->find_tensor(name + ".bias")) {
      const auto b = tensor(name + ".bias");
      for (int j = 0; j < n_out; ++j) y[j] += b[j];
    }
    return y;
  }
  // RMSNorm (LayerNorm with bias for gpt2) with the weight `name`.weight.
  std::vector<double> norm(const std::vector<double>& in, const std::string& name) const {
    if (weightless_) return norm_with(in, std::vector<double>(in.size(), 1.0), name);  // olmo: no parameters
    return norm_with(in, tensor(name + ".weight"), name);
  }
  // RMSNorm of each of n_head heads of v (head_dim each) with the weight `name`.weight [head_dim].
  // name "": no weight (llama4's L2 norm).
  void head_norm(std::vector<double>& v, const std::string& name, int n_head) const {
    const auto w = name.empty() ? std::vector<double>(c_.head_dim, 1.0) : tensor(name + ".weight");
    const int hd = c_.head_dim;
    for (int h = 0; h < n_head; ++h) {
      double ss = 0;
      for (int i = 0; i < hd; ++i) ss += v[h * hd + i] * v[h * hd + i] / hd;
      const double inv = 1.0 / std::sqrt(ss + c_.norm_eps);
      for (int i = 0; i < hd; ++i) v[h * hd + i] *= inv * w[i];
    }
  }
  // RoPE in place on n_head heads of v (head_width floats each, default head_dim) at position pos
  // for layer `layer` (adjacent pairs or split halves; the first rope_dims of each head). Pair i's
  // frequency is base^(-2i/d) / factor_i (llama3's rope_freqs, phi3's long factors when the
  // context exceeds the original one, else its short ones); the angle is pos times it divided by
  // the linear factor s, except under YaRN, whose NTK-by-parts mix keeps the fast pairs
  // (wavelength below L / beta_fast, L the original context) unscaled, scales the slow ones (above
  // L / beta_slow) by 1/s and ramps linearly in between, and whose attention temperature
  // multiplies cos and sin by 0.1 ln s + 1 (deepseek2 moves it into the scores instead). Local
  // gemma layers use their own base, unscaled for gemma3 and scaled as the global ones for gemma2.
  void rope(std::vector<double>& v, int n_head, int pos, int layer = 0, int head_width = 0) const {
    const bool local = local_[layer];
    const int hd = head_width > 0 ? head_width : c_.head_dim, nd = local && rope_dims_swa_ > 0 ? rope_dims_swa_ : c_.rope_dims;
    const bool neox = c_.rope_style == core::RopeStyle::SplitHalves;
    const double base = local ? base_local_ : base_;
    // OLMo 3's local layers: no scaling, no YaRN, no magnitude; EXAONE 4.0 32B's as the global ones.
    const bool plain = local && olmo3_;
    const double s =
        local && !gemma2_ && !nope_global_ && !gpt_oss_ && !smallthinker_ && chunk_ == 0 && !afmoe_ && !spark_ ? 1.0 : factor_;
    const bool yarn = yarn_ && !plain;
    double mscale = plain ? 1.0 : attn_factor_, low = 0, high = 0;
    std::vector<double> ff = freq_factors_;
    if ((arch_ == "phi3" || arch_ == "phimoe") && f_->find_tensor("rope_factors_long.weight"))
      ff = tensor(context_ > orig_ctx_ ? "rope_factors_long.weight" : "rope_factors_short.weight");
    if (yarn) {
      if (s > 1 && !mla_) mscale *= 0.1 * std::log(s) + 1.0;
      if (s > 1 && mistral4_) mscale *= (0.1 * std::log(s) + 1.0) / (0.1 * mscale_all_ * std::log(s) + 1.0);
      // mistral3's yarn_log_multiplier (mscale_all_dim) divides the magnitude by its own mscale.
      if (s > 1 && yarn_log_mul_ != 0) mscale /= 0.1 * yarn_log_mul_ * std::log(s) + 1.0;
      auto dim_of = [&](double rotations) {  // the pair index that turns `rotations` times in L
        return nd * std::log(orig_ctx_ / (rotations * 2 * M_PI)) / (2 * std::log(base));
      };
      low = std::max(0.0, std::floor(dim_of(beta_fast_)));
      high = std::min(nd - 1.0, std::ceil(dim_of(beta_slow_)));
    }
    for (int h = 0; h < n_head; ++h)
      for (int i = 0; i < nd / 2; ++i) {
        double freq = std::pow(base, -2.0 * i / nd);
        if (!ff.empty()) freq /= ff[i];
        double th = pos * freq / s;
        if (yarn) {
          const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
          const double keep = 1.0 - ramp;  // 1: extrapolate (unscaled), 0: interpolate
          th = pos * freq / s * (1.0 - keep) + pos * freq * keep;
        }
        if (!still_.empty() && still_[i]) th = 0;  // qwen3vl: M-RoPE's fourth section
        double& a = v[h * hd + (neox ? i : 2 * i)];
        double& b = v[h * hd + (neox ? i + nd / 2 : 2 * i + 1)];
        const double a0 = a, b0 = b;
        a = mscale * (a0 * std::cos(th) - b0 * std::sin(th));
        b = mscale * (a0 * std::sin(th) + b0 * std::cos(th));
      }
  }

 protected:
  std::vector<double> norm_with(const std::vector<double>& in, const std::vector<double>& w,
                                const std::string& name) const {
    const double n = static_cast<double>(in.size());
    std::vector<double> out(in.size());
    if (layer_norm_) {
      // command-r's, cohere2's and some of mpt's LayerNorms have no bias.
      const auto b = cohere_ || !f_->find_tensor(name + ".bias") ? std::vector<double>(in.size(), 0.0) : tensor(name + ".bias");
      double mean = 0, var = 0;
      for (double e : in) mean += e / n;
      for (double e : in) var += (e - mean) * (e - mean) / n;
      for (size_t i = 0; i < in.size(); ++i) out[i] = (in[i] - mean) / std::sqrt(var + c_.norm_eps) * w[i] + b[i];
    } else {
      double ss = 0;
      for (double e : in) ss += e * e / n;
      for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] / std::sqrt(ss + c_.norm_eps) * w[i];
      if (rms_bias_) {
        const auto b = tensor(name + ".bias");
        for (size_t i = 0; i < in.size(); ++i) out[i] += b[i];
      }
    }
    return out;
  }

  // q [n_head * head_dim], k and v [n_kv * head_dim] of token t at layer l from its normalised
  // input h: one fused attn_qkv (gpt2, phi3) or three projections, QK-norm per head or over the
  // whole projections, RoPE (not gpt2).
  void qkv(const std::vector<double>& h, const std::string& p, int t, int l, std::vector<double>& q,
           std::vector<double>& k, std::vector<double>& v) const {
    const int qd = c_.n_head * c_.head_dim, kvd = c_.kv_dim();
    if (f_->find_tensor(p + "attn_qkv.weight")) {
      const auto y = linear(h, p + "attn_qkv", qd + 2 * kvd);
      q.assign(y.begin(), y.begin() + qd);
      k.assign(y.begin() + qd, y.begin() + qd + kvd);
      v.assign(y.begin() + qd + kvd, y.end());
    } else if (qwen35_) {  // [q_h | g_h] per head
      const auto qg = linear(h, p + "attn_q", 2 * qd);
      const int hd = c_.head_dim;
      q.assign(qd, 0.0);
      if (gate_.size() <= static_cast<size_t>(t)) gate_.resize(t + 1);
      gate_[t].assign(qd, 0.0);
      for (int hh = 0; hh < c_.n_head; ++hh)
        for (int i = 0; i < hd; ++i) {
          q[hh * hd + i] = qg[2 * hh * hd + i];
          gate_[t][hh * hd + i] = qg[2 * hh * hd + hd + i];
        }
      k = linear(h, p + "attn_k", kvd);
      v = linear(h, p + "attn_v", kvd);
    } else {
      q = linear(h, p + "attn_q", qd);
      k = linear(h, p + "attn_k", kvd);
      v = linear(h, p + "attn_v", kvd);
      if (afmoe_) {  // the output gate's own projection of the same input
        if (gate_.size() <= static_cast<size_t>(t)) gate_.resize(t + 1);
        gate_[t] = linear(h, p + "attn_gate", qd);
      }
    }
    if (spark_) {  // a gate per head from the same input, beside a fused or separate projection
      if (gate_.size() <= static_cast<size_t>(t)) gate_.resize(t + 1);
      gate_[t] = linear(h, p + "attn_gate", c_.n_head);
    }
    if (clamp_ > 0)  // mpt: q, k and v clamped after their biases
      for (auto* y : {&q, &k, &v})
        for (double& e : *y) e = std::clamp(e, -clamp_, clamp_);
    if (rope_free_) return;
    const bool norm_after_rope = arch_ == "hunyuan-dense" || arch_ == "hunyuan-moe" || arch_ == "maincoder";  // QK-norm after RoPE
    if (qk_norm_ && !norm_after_rope) {
      head_norm(q, p + "attn_q_norm", c_.n_head);
      head_norm(k, p + "attn_k_norm", c_.n_head_kv);
    }
    if (qk_norm_full_) {
      q = norm(q, p + "attn_q_norm");
      k = norm(k, p + "attn_k_norm");
    }
    if (no_rope_step_ > 0 && (l + 1) % no_rope_step_ == 0) {  // a NoPE layer
      if (arch_ == "llama4") {  // its attention temperature
        const double f = std::log(std::floor((t + 1.0) / 8192) + 1.0) * 0.1 + 1.0;
        for (double& e : q) e *= f;
      }
      return;
    }
    if (nope_global_ && !local_[l]) return;                          // EXAONE 4.0 32B's, cohere2's global layers
    // smallthinker's NoPE layers (every layer rotates in a 4-layer model: llama.cpp's use_rope test is
    // step == n_layer || il % step != 0).
    if (smallthinker_ && window_ > 0 && c_.n_layer != 4 && l % 4 == 0) return;
    rope(q, c_.n_head, t, l);
    rope(k, c_.n_head_kv, t, l);
    if (qk_norm_ && norm_after_rope) {
      head_norm(q, p + "attn_q_norm", c_.n_head);
      head_norm(k, p + "attn_k_norm", c_.n_head_kv);
    }
    if (llama4_kq_norm_) {  // Llama4TextL2Norm: an RMSNorm without weight over each head
      head_norm(q, "", c_.n_head);
      head_norm(k, "", c_.n_head_kv);
    }
    if (temp_scale_ != 0) {  // Llama 4's temperature: 1 below the YaRN original context
      const double f = std::log(std::floor(t / orig_ctx_) + 1.0) * temp_scale_ + 1.0;
      for (double& e : q) e *= f;
    }
  }

  // deepseek2's attention inputs in the plain form: per head the query [q_nope | rope(q_pe)], the
  // key [W_UK[h]^T c | rope(k_pe)] and the value W_UV[h] c, with c = norm(latent). attn_k_b is
  // {nope, rank, n_head}: head h's row r (r < rank) holds W_UK[h][:, r] over the nope dims.
  void mla_qkv(const std::vector<double>& h, const std::string& p, int t, int l, std::vector<double>& q,
               std::vector<double>& k, std::vector<double>& v) const {
    const int H = c_.n_head, hd = c_.head_dim, P = c_.rope_dims, nope = hd - P, R = c_.kv_lora_rank;
    const int vd = c_.mla_v_head_dim;
    if (f_->find_tensor(p + "attn_q_a.weight"))
      q = linear(norm(linear(h, p + "attn_q_a", c_.q_lora_rank), p + "attn_q_a_norm"), p + "attn_q_b", H * hd);
    else
      q = linear(h, p + "attn_q", H * hd);
    const auto kva = linear(h, p + "attn_kv_a_mqa", R + P);
    const auto c = norm(std::vector<double>(kva.begin(), kva.begin() + R), p + "attn_kv_a_norm");
    std::vector<double> k_pe(kva.begin() + R, kva.end());
    rope(k_pe, 1, t, l, P);
    std::vector<double> q_pe(static_cast<size_t>(H) * P);
    for (int hh = 0; hh < H; ++hh)
      for (int i = 0; i < P; ++i) q_pe[hh * P + i] = q[hh * hd + nope + i];
    rope(q_pe, H, t, l, P);
    const auto kb = tensor(p + "attn_k_b.weight"), vb = tensor(p + "attn_v_b.weight");
    k.assign(static_cast<size_t>(H) * hd, 0.0);
    v.assign(static_cast<size_t>(H) * vd, 0.0);
    if (mla_temp_scale_ != 0) {  // Llama 4's temperature on the whole query
      const double f = std::log(std::floor(t / mla_temp_len_) + 1.0) * mla_temp_scale_ + 1.0;
      for (double& e : q) e *= f;
      for (double& e : q_pe) e *= f;
    }
    for (int hh = 0; hh < H; ++hh) {
      for (int i = 0; i < P; ++i) q[hh * hd + nope + i] = q_pe[hh * P + i];
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < nope; ++i) k[hh * hd + i] += kb[(static_cast<size_t>(hh) * R + r) * nope + i] * c[r];
      for (int i = 0; i < P; ++i) k[hh * hd + nope + i] = k_pe[i];
      for (int j = 0; j < vd; ++j)
        for (int r = 0; r < R; ++r) v[hh * vd + j] += vb[(static_cast<size_t>(hh) * vd + j) * R + r] * c[r];
    }
  }

  // x += FFN(norm(x)) for layer prefix p: SwiGLU (phi3: gate and up as the two halves of one
  // ffn_up), GeGLU (tanh GELU) followed by gemma's post-norm, or GELU (tanh form) for gpt2.
  // qwen35's gated DeltaNet layer over the whole sequence (Yang et al. 2025, "Gated Delta
  // Networks"), from the keys: ssm.group_count query/key heads and ssm.time_step_rank value heads of
  // ssm.state_size, a causal depthwise convolution of ssm.conv_kernel taps. Per token t:
  //   [q | k | v] = silu(conv(attn_qkv h)), q and k L2-normalised per head (eps: the RMS epsilon)
  //   per value head j (query/key head j mod group_count): S = exp(softplus(alpha_j + dt_j) a_j) S;
  //   S += k (sigmoid(beta_j) (v_j - S^T k))^T; o_j = S^T q / sqrt(state_size)   (S: [key, value])
  //   x += ssm_out(concat_j rmsnorm(o_j; ssm_norm) * silu(attn_gate h))
  // qwen3next: value head j reads query/key head j / (time_step_rank / group_count); beta and alpha
  // come from ssm_ba as [beta (r) | alpha (r)] per query/key head, and in older files [q | k | v]
  // and z from ssm_in as [q (S) | k (S) | v (r S) | z (r S)] per query/key head.
  void delta_net(std::vector<std::vector<double>>& x, const std::string& p) const {
    const std::string a = arch_ + ".";
    const int T = static_cast<int>(x.size()), d = c_.n_embd;
    const int K = static_cast<int>(f_->get_int(a + "ssm.conv_kernel")), S = static_cast<int>(f_->get_int(a + "ssm.state_size"));
    const int Hk = static_cast<int>(f_->get_int(a + "ssm.group_count")), Hv = static_cast<int>(f_->get_int(a + "ssm.time_step_rank"));
    const int C = 2 * Hk * S + Hv * S;
    const auto conv = tensor(p + "ssm_conv1d.weight");  // ne {K, C}: channel c's taps at c K + k
    const auto dt = tensor(p + "ssm_dt.bias"), A = tensor(p + "ssm_a"), nw = tensor(p + "ssm_norm.weight");
    std::vector<std::vector<double>> in(T), z(T), al(T), be(T);
    for (int t = 0; t < T; ++t) {
      const auto h = norm(x[t], p + "attn_norm");
      const int r = Hv / Hk;
      if (f_->find_tensor(p + "ssm_in.weight") != nullptr) {
        const int per = 2 * S + 2 * r * S;
        const auto qkvz = linear(h, p + "ssm_in", Hk * per, false);
        in[t].assign(C, 0.0), z[t].assign(static_cast<size_t>(Hv) * S, 0.0);
        for (int g = 0; g < Hk; ++g)
          for (int i = 0; i < S; ++i) {
            in[t][g * S + i] = qkvz[g * per + i];
            in[t][Hk * S + g * S + i] = qkvz[g * per + S + i];
          }
        for (int g = 0; g < Hk; ++g)
          for (int i = 0; i < r * S; ++i) {
            in[t][2 * Hk * S + g * r * S + i] = qkvz[g * per + 2 * S + i];
            z[t][g * r * S + i] = qkvz[g * per + 2 * S + r * S + i];
          }
      } else {
        in[t] = linear(h, p + "attn_qkv", C, false);
        z[t] = linear(h, p + "attn_gate", Hv * S, false);
      }
      if (f_->find_tensor(p + "ssm_ba.weight") != nullptr) {
        const auto ba = linear(h, p + "ssm_ba", 2 * Hv, false);
        al[t].assign(Hv, 0.0), be[t].assign(Hv, 0.0);
        for (int g = 0; g < Hk; ++g)
          for (int j = 0; j < r; ++j) be[t][g * r + j] = ba[g * 2 * r + j], al[t][g * r + j] = ba[g * 2 * r + r + j];
      } else {
        al[t] = linear(h, p + "ssm_alpha", Hv, false);
        be[t] = linear(h, p + "ssm_beta", Hv, false);
      }
    }
    const bool interleaved = arch_ == "qwen3next";
    std::vector<double> state(static_cast<size_t>(Hv) * S * S, 0.0);  // [head][key i][value j]
    for (int t = 0; t < T; ++t) {
      std::vector<double> y(C, 0.0);
      for (int c = 0; c < C; ++c) {
        for (int k = 0; k < K; ++k) {
          const int j = t - (K - 1) + k;
          if (j >= 0) y[c] += conv[static_cast<size_t>(c) * K + k] * in[j][c];
        }
        y[c] /= 1.0 + std::exp(-y[c]);
      }
      for (int hh = 0; hh < 2 * Hk; ++hh) {  // q heads, then k heads
        double ss = 0;
        for (int i = 0; i < S; ++i) ss += y[hh * S + i] * y[hh * S + i];
        for (int i = 0; i < S; ++i) y[hh * S + i] /= std::sqrt(ss + c_.norm_eps);
      }
      std::vector<double> o(static_cast<size_t>(Hv) * S);
      for (int j = 0; j < Hv; ++j) {
        const int kj = interleaved ? j / (Hv / Hk) : j % Hk;
        const double* qh = &y[kj * S];
        const double* kh = &y[(Hk + kj) * S];
        const double* vh = &y[(2 * Hk + j) * S];
        const double u = al[t][j] + dt[j], softplus = u > 20 ? u : std::log1p(std::exp(u));
        const double decay = std::exp(softplus * A[j]), b = 1.0 / (1.0 + std::exp(-be[t][j]));
        double* st = &state[static_cast<size_t>(j) * S * S];
        for (int e = 0; e < S * S; ++e) st[e] *= decay;
        for (int vj = 0; vj < S; ++vj) {
          double sk = 0;
          for (int i = 0; i < S; ++i) sk += st[i * S + vj] * kh[i];
          const double delta = b * (vh[vj] - sk);
          for (int i = 0; i < S; ++i) st[i * S + vj] += kh[i] * delta;
        }
        double ss = 0;
        for (int vj = 0; vj < S; ++vj) {
          double out = 0;
          for (int i = 0; i < S; ++i) out += st[i * S + vj] * qh[i];
          o[j * S + vj] = out / std::sqrt(static_cast<double>(S));
          ss += o[j * S + vj] * o[j * S + vj] / S;
        }
        for (int vj = 0; vj < S; ++vj) {
          const double zz = z[t][j * S + vj];
          o[j * S + vj] *= nw[vj] / std::sqrt(ss + c_.norm_eps) * (zz / (1.0 + std::exp(-zz)));
        }
      }
      const auto out = linear(o, p + "ssm_out", d, false);
      for (int i = 0; i < d; ++i) x[t][i] += out[i];
    }
  }

  // granitehybrid's Mamba-2 layer over the whole sequence (Dao and Gu 2024, the SSD layer), from
  // the keys: ssm.time_step_rank heads of ssm.inner_size / heads, ssm.group_count groups of B and C
  // of ssm.state_size (head h in group h / (heads / groups)), a causal depthwise convolution of
  // ssm.conv_kernel taps with its bias. Per token t:
  //   [z | xBC | dt] = ssm_in h;  xBC = silu(conv(xBC) + bias)
  //   dt_h = softplus(dt_h + dt_bias_h);  S_h = exp(dt_h a_h) S_h + dt_h x_h B^T;  y_h = S_h C + d_h x_h
  //   y = rmsnorm_per_group(y * silu(z); ssm_norm);  x += residual_scale * ssm_out y
  void mamba2(std::vector<std::vector<double>>& x, const std::string& p) const {
    const std::string a = arch_ + ".";
    const int T = static_cast<int>(x.size()), d = c_.n_embd;
    const int K = static_cast<int>(f_->get_int(a + "ssm.conv_kernel")), N = static_cast<int>(f_->get_int(a + "ssm.state_size"));
    const int di = static_cast<int>(f_->get_int(a + "ssm.inner_size")), H = static_cast<int>(f_->get_int(a + "ssm.time_step_rank"));
    const int G = static_cast<int>(f_->get_int(a + "ssm.group_count")), hd = di / H, C = di + 2 * G * N;
    const auto conv = tensor(p + "ssm_conv1d.weight");  // ne {K, C}: channel c's taps at c K + k
    const std::vector<double> conv_b =
        f_->find_tensor(p + "ssm_conv1d.bias") ? tensor(p + "ssm_conv1d.bias") : std::vector<double>(C, 0.0);
    const auto dtb = tensor(p + "ssm_dt.bias"), A = tensor(p + "ssm_a"), D = tensor(p + "ssm_d");
    const auto nw = tensor(p + "ssm_norm.weight");  // ne {di / G, G}: group g's weights at g di / G
    std::vector<std::vector<double>> in(T);
    for (int t = 0; t < T; ++t) in[t] = linear(norm(x[t], p + "attn_norm"), p + "ssm_in", di + C + H, false);
    std::vector<double> state(static_cast<size_t>(di) * N, 0.0);  // [head][dim][state]
    for (int t = 0; t < T; ++t) {
      std::vector<double> xbc(C);
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int k = 0; k < K; ++k) {
          const int j = t - (K - 1) + k;
          if (j >= 0) s += conv[static_cast<size_t>(c) * K + k] * in[j][di + c];
        }
        s += conv_b[c];
        xbc[c] = s / (1.0 + std::exp(-s));
      }
      std::vector<double> y(di);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / G);
        const double u = in[t][di + C + h] + dtb[h], dt = u > 20 ? u : std::log1p(std::exp(u));
        const double dA = std::exp(dt * A[h]);
        for (int i = 0; i < hd; ++i) {
          const double xi = xbc[h * hd + i];
          double yi = 0;
          for (int n = 0; n < N; ++n) {
            double& s = state[(static_cast<size_t>(h) * hd + i) * N + n];
            s = s * dA + xbc[di + g * N + n] * xi * dt;
            yi += s * xbc[di + G * N + g * N + n];
          }
          y[h * hd + i] = yi + D[h] * xi;
        }
      }
      const int w = di / G;
      for (int g = 0; g < G; ++g) {
        double ss = 0;
        for (int i = g * w; i < (g + 1) * w; ++i) {
          const double z = in[t][i];
          y[i] *= z / (1.0 + std::exp(-z));
          ss += y[i] * y[i] / w;
        }
        for (int i = g * w; i < (g + 1) * w; ++i) y[i] *= nw[i] / std::sqrt(ss + c_.norm_eps);
      }
      const auto out = linear(y, p + "ssm_out", d, false);
      for (int i = 0; i < d; ++i) x[t][i] += residual_mul_ * out[i];
    }
  }

  void dense_ffn(std::vector<double>& x, const std::string& p) const {
    // The FFN's width from its down projection's rows (qwen's is half of feed_forward_length).
    const int d = c_.n_embd, ff = static_cast<int>(f_->tensor(p + "ffn_down.weight").ne[0]);
    // phi2 and cohere: one norm; seed_oss and glm4moe name the FFN's post_attention_norm.
    const bool post_named = arch_ == "seed_oss" || arch_ == "glm4moe" || qwen35_;
    const auto h = post_only_ ? x
                              : norm(x, p + (phi2_ || cohere_ || falcon_ || plamo_ ? "attn_norm"
                                             : post_named     ? "post_attention_norm"
                                                              : "ffn_norm"));
    auto gelu = [](double e) { return 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e))); };
    std::vector<double> f;
    if (ungated_) {
      auto u = linear(h, p + "ffn_up", ff);
      if (!xielu_an_.empty()) {
        // xIELU (Huang et al. 2025) with softplus-mapped alphas: alpha_p x^2 + beta x above 0,
        // (expm1(min(x, eps)) - x) (beta + softplus(a_n)) + beta x below.
        const size_t l = static_cast<size_t>(std::stoi(p.substr(4)));
        auto softplus = [](double v) { return std::log1p(std::exp(v)); };
        const double ap = softplus(xielu_ap_[l]), beta = xielu_beta_[l], an = beta + softplus(xielu_an_[l]);
        for (auto& e : u)
          e = e > 0 ? ap * e * e + beta * e : (std::expm1(std::min(e, xielu_eps_[l])) - e) * an + beta * e;
      } else {
        for (auto& e : u) e = relu_sqr_ ? std::max(e, 0.0) * std::max(e, 0.0) : gelu(e);
      }
      f = linear(u, p + "ffn_down", d);
    } else {
      std::vector<double> g, u;
      if (arch_ == "phi3" || arch_ == "glm4" || arch_ == "chatglm") {
        const auto gu = linear(h, p + "ffn_up", 2 * ff);
        g.assign(gu.begin(), gu.begin() + ff);
        u.assign(gu.begin() + ff, gu.end());
      } else {
        g = linear(h, p + "ffn_gate", ff);
        u = linear(h, p + "ffn_up", ff);
      }
      for (int i = 0; i < ff; ++i) u[i] *= gemma_ || gemma1_ || spark_ ? gelu(g[i]) : g[i] / (1 + std::exp(-g[i]));
      f = linear(u, p + "ffn_down", d);
      if (gemma_ || post_only_ || arch_ == "glm4" || afmoe_) f = norm(f, p + "post_ffw_norm");
    }
    for (int i = 0; i < d; ++i) x[i] += residual_mul_ * f[i];
  }

  std::shared_ptr<core::GGUFFile> f_;
  core::ModelConfig c_;
  std::string arch_;
  bool gemma_ = false, gemma2_ = false, qk_norm_ = false, qk_norm_full_ = false, mla_ = false, yarn_ = false;
  bool gpt_oss_ = false;
  bool gemma1_ = false, post_only_ = false, layer_norm_ = false, phi2_ = false, parallel_ = false, ungated_ = false,
       relu_sqr_ = false;
  std::vector<double> xielu_an_, xielu_ap_, xielu_beta_, xielu_eps_;  // apertus: per layer, as read
  double embd_mul_ = 1, residual_mul_ = 1, logit_div_ = 1;  // granite
  int no_rope_step_ = 0;
  bool olmo3_ = false, nope_global_ = false, cohere_ = false;
  double logit_mul_ = 1;  // command-r, cohere2
  double beta_fast_ = 32, beta_slow_ = 1, yarn_log_mul_ = 0, temp_scale_ = 0;  // mistral3
  double softcap_ = 0, attn_softcap_ = 0, base_ = 10000, base_local_ = 10000, factor_ = 1, orig_ctx_ = 0;
  double attn_factor_ = 1, mscale_all_ = 0;
  double q_scale_ = 1;
  bool rope_free_ = false, falcon_ = false, weightless_ = false, rms_bias_ = false, plamo_ = false;
  std::vector<double> slopes_;  // ALiBi's per head (empty: none)
  double clamp_ = 0;            // mpt's clamp_kqv
  std::vector<bool> conv_;      // lfm2: [n_layer] gated short-convolution layers
  bool qwen35_ = false;
  std::vector<bool> recurrent_;  // qwen35: [n_layer] gated DeltaNet layers
  std::vector<bool> mamba2_;     // granitehybrid, mamba2, nemotron_h: [n_layer] Mamba-2 layers
  bool nemotron_h_ = false;
  std::vector<bool> mlp_only_;   // nemotron_h: [n_layer] MLP-only layers
  mutable std::vector<std::vector<double>> gate_;  // qwen35: each token's attention output gate
  bool smallthinker_ = false;
  std::vector<std::vector<double>> layer_in_;  // [T][n_embd] the current layer's input
  int taps_ = 0;                // lfm2: shortconv.l_cache
  int window_ = 0;
  int chunk_ = 0;                // llama4's chunked local layers (8192)
  bool mistral4_ = false;
  bool afmoe_ = false;
  bool spark_ = false;      // spark2_5
  int rope_dims_swa_ = 0;   // spark2_5, maple: rope.dimension_count_swa (0: the windows rotate rope_dims)
  double mla_temp_scale_ = 0, mla_temp_len_ = 0;  // deepseek2, mistral4: attention temperature
  bool llama4_kq_norm_ = false;  // llama4's QK L2 norm
  int context_ = 0;
  std::vector<bool> local_;
  std::vector<bool> still_;  // qwen3vl's unrotated pairs
  const std::vector<std::vector<double>>* mtp_h_ = nullptr;  // run_mtp's hidden rows
  std::vector<std::vector<std::vector<double>>> layer_inputs_;
  std::vector<std::vector<double>> hidden_;                   // the last run's final hidden rows
  std::vector<double> freq_factors_;
};

}  // namespace specmoe::testing
