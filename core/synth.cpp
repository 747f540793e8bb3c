// Synthetic model writer. Weights are uniform with the variance a trained model's layer keeps
// activations at unit scale (std 1/sqrt(n_in)); each value is a hash of (seed, tensor name,
// index) (SplitMix64, Steele et al. 2014), so the draft's tensors equal the target's.
// The head favours printable ASCII byte tokens (larger output rows) so greedy text looks like
// text rather than control bytes and padding tokens.
#include "core/synth.h"

#include <cmath>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/tokenizer.h"

#include <cstring>
#include <numeric>

namespace specmoe::core {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// n values uniform in [-sqrt(3) std, sqrt(3) std) (variance std^2), a function of
// (seed, name, index) only.
std::vector<float> random_values(uint64_t seed, const std::string& name, size_t n, float std_dev) {
  std::vector<float> v(n);
  const uint64_t key = splitmix64(seed ^ name_hash(name));
  const float a = std::sqrt(3.0f) * std_dev;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(key + i);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    v[i] = (2.0f * u - 1.0f) * a;
  }
  return v;
}

int head_dim_of(const SynthSpec& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }

bool is_arch(const SynthSpec& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s.arch == n) return true;
  return false;
}

void check_spec(const SynthSpec& s) {
  if (!is_arch(s, {"llama", "qwen2", "qwen2moe", "gpt2", "starcoder", "gpt-oss", "minimax-m2", "qwen3", "gemma3", "qwen3moe", "olmoe", "phi3", "gemma2",
                   "deepseek2", "granite", "granitemoe", "olmo2", "smollm3", "stablelm", "gemma", "starcoder2",
                   "gptneox", "phi2", "ernie4_5", "exaone", "exaone4", "mistral3", "command-r", "cohere2",
                   "internlm2", "qwen2vl", "seed_oss", "minicpm", "glm4", "hunyuan-dense", "qwen3vl", "qwen3vlmoe",
                   "deepseek", "dots1", "glm4moe", "ernie4_5-moe", "bailingmoe2", "hunyuan-moe", "arcee", "nemotron",
                   "bloom", "mpt", "refact", "jais", "falcon", "olmo", "baichuan", "dbrx", "phimoe", "qwen", "xverse",
                   "orion", "codeshell", "plamo", "chatglm", "exaone-moe", "lfm2", "lfm2moe", "smallthinker", "qwen35", "qwen35moe", "granitehybrid", "mamba2", "nemotron_h",
                   "maincoder", "apertus", "qwen3next", "mellum", "bailingmoe", "nanbeige", "llama4", "mistral4", "nemotron_h_moe", "afmoe", "jais2", "maple", "spark2_5"}))
    throw_error(ErrorKind::InvalidArgument,
                "synth: unknown architecture '{}' (llama, qwen2, qwen2moe, gpt2, qwen3, gemma3, qwen3moe, olmoe, phi3, "
                "gemma2, deepseek2, granite, granitemoe, olmo2, smollm3, stablelm, gemma, starcoder2, gptneox, phi2, "
                "ernie4_5, exaone, exaone4, mistral3, command-r, cohere2, internlm2, qwen2vl, seed_oss, minicpm, glm4, "
                "hunyuan-dense, qwen3vl, qwen3vlmoe, deepseek, dots1, glm4moe, ernie4_5-moe, bailingmoe2, hunyuan-moe, "
                "arcee, nemotron, starcoder, gpt-oss, minimax-m2, bloom, mpt, refact, jais, falcon, olmo, baichuan, dbrx, phimoe, qwen, xverse, orion, "
                "codeshell, plamo, chatglm, exaone-moe, lfm2, lfm2moe, smallthinker, qwen35, qwen35moe, granitehybrid, mamba2, nemotron_h, maincoder, apertus, qwen3next, mellum, bailingmoe, nanbeige, llama4, mistral4, nemotron_h_moe, afmoe, jais2, maple, spark2_5)",
                s.arch);
  if (is_arch(s, {"gpt2", "starcoder", "bloom", "mpt", "refact", "jais"}) &&
      (s.head_dim > 0 || !s.rope_scaling.empty() || s.llama3_orig_ctx > 0 || s.rope_dims > 0))
    throw_error(ErrorKind::InvalidArgument, "synth: {} has neither a head_dim key nor RoPE scaling", s.arch);
  if (s.llama3_orig_ctx > 0 && !is_arch(s, {"llama", "llama4"}))
    throw_error(ErrorKind::InvalidArgument, "synth: rope_freqs.weight (llama3_orig_ctx) is llama's and llama4's, not {}'s", s.arch);
  if (s.rope_dims_swa != 0 &&
      (!is_arch(s, {"maple", "spark2_5"}) || s.rope_dims_swa < 0 || s.rope_dims_swa % 2 != 0 || s.rope_dims_swa > head_dim_of(s)))
    throw_error(ErrorKind::InvalidArgument, "synth: rope_dims_swa {} (maple's and spark2_5's, even, at most the head)",
                s.rope_dims_swa);
  if ((s.rope_freq_base_swa > 0.0f && !is_arch(s, {"gemma2", "gemma3", "smallthinker", "afmoe", "maple", "spark2_5"})) ||
      (s.final_logit_softcap > 0.0f && !is_arch(s, {"gemma2", "gemma3"})))
    throw_error(ErrorKind::InvalidArgument,
                "synth: a local RoPE base is gemma's and smallthinker's, logit soft-capping gemma's, not {}'s", s.arch);
  if ((s.n_swa > 0 || s.swa_pattern > 0 || !s.swa_layers.empty()) &&
      !is_arch(s, {"gemma2", "gemma3", "olmo2", "cohere2", "gpt-oss", "exaone-moe", "lfm2", "smallthinker", "mellum", "llama4", "afmoe", "maple", "spark2_5"}) &&
      !(s.arch == "exaone4" && s.n_layer == 64))
    throw_error(ErrorKind::InvalidArgument,
                "synth: sliding windows are gemma2's, gemma3's, olmo2's (OLMo 3), cohere2's and 64-layer exaone4's, not "
                "{}'s",
                s.arch);
  if (!s.conv_layers.empty() && (!is_arch(s, {"lfm2", "lfm2moe"}) || s.conv_layers.size() != static_cast<size_t>(s.n_layer) ||
                                  s.shortconv_l_cache < 2))
    throw_error(ErrorKind::InvalidArgument,
                "synth: short-convolution layers are lfm2's and lfm2moe's, one flag per layer ({} for {} layers), of 2 taps or more "
                "({})", s.conv_layers.size(), s.n_layer, s.shortconv_l_cache);
  if (is_arch(s, {"nemotron_h", "nemotron_h_moe"}) &&
      (s.layer_pattern.size() != static_cast<size_t>(s.n_layer) ||
       s.layer_pattern.find_first_not_of("M*-") != std::string::npos))
    throw_error(ErrorKind::InvalidArgument, "synth: nemotron_h's layer pattern '{}' needs one of M, * or - per layer ({})",
                s.layer_pattern, s.n_layer);
  if ((!s.recurrent_layers.empty() || s.full_attention_interval > 0) &&
      (!is_arch(s, {"qwen35", "qwen35moe", "qwen3next", "granitehybrid"}) || (!s.recurrent_layers.empty() && s.recurrent_layers.size() != static_cast<size_t>(s.n_layer))))
    throw_error(ErrorKind::InvalidArgument, "synth: gated DeltaNet layers are qwen35's, one flag per layer ({} for {} layers)",
                s.recurrent_layers.size(), s.n_layer);
  if (s.n_loops != 1 && (s.arch != "nanbeige" || s.n_loops < 1))
    throw_error(ErrorKind::InvalidArgument, "synth: {} loops over the blocks: nanbeige's (1 or more), not {}'s", s.n_loops, s.arch);
  if (s.ssm_in_legacy && s.arch != "qwen3next")
    throw_error(ErrorKind::InvalidArgument, "synth: ssm_in in place of attn_qkv and attn_gate is qwen3next's, not {}'s", s.arch);
  if (is_arch(s, {"qwen35", "qwen35moe", "qwen3next"}) && (s.ssm_d_conv < 2 || s.ssm_d_state < 1 || s.ssm_n_group < 1 || s.ssm_dt_rank % s.ssm_n_group != 0))
    throw_error(ErrorKind::InvalidArgument, "synth: qwen35's conv kernel {}, state {}, {} key heads and {} value heads",
                s.ssm_d_conv, s.ssm_d_state, s.ssm_n_group, s.ssm_dt_rank);
  if (s.n_nextn < 0 || (s.n_nextn > 0 && (!is_arch(s, {"deepseek2", "glm4moe", "qwen35", "qwen35moe"}) || s.keep_layers >= 0)) ||
      ((s.mtp_own_head || s.mtp_only) && s.n_nextn == 0))
    throw_error(ErrorKind::InvalidArgument, "synth: {} multi-token-prediction blocks{}: deepseek2's, glm4moe's, qwen35's and "
                "qwen35moe's, of a whole model (no keep_layers)", s.n_nextn,
                s.mtp_own_head ? " with their own head" : s.mtp_only ? " alone" : "");
  if (s.arch == "cohere2" && s.n_swa <= 0)
    throw_error(ErrorKind::InvalidArgument, "synth: cohere2 needs a sliding window (n_swa > 0)");
  if (is_arch(s, {"command-r", "cohere2"}) && !s.tied_output)
    throw_error(ErrorKind::InvalidArgument, "synth: {} reads its head from token_embd (tied_output)", s.arch);
  if (!s.swa_layers.empty() && s.swa_layers.size() != static_cast<size_t>(s.n_layer))
    throw_error(ErrorKind::InvalidArgument, "synth: {} sliding-window layer flags for {} layers", s.swa_layers.size(),
                s.n_layer);
  if (s.attn_logit_softcap > 0.0f && s.arch != "gemma2")
    throw_error(ErrorKind::InvalidArgument, "synth: attention soft-capping is gemma2's, not {}'s", s.arch);
  if (s.rope_long_short && !is_arch(s, {"phi3", "phimoe"}))
    throw_error(ErrorKind::InvalidArgument, "synth: LongRoPE factors are phi3's and phimoe's, not {}'s", s.arch);
  if (s.rope_attn_factor > 0.0f && !is_arch(s, {"phi3", "olmo2"}))
    throw_error(ErrorKind::InvalidArgument, "synth: rope.scaling.attn_factor is written for phi3 and olmo2, not {}",
                s.arch);
  const bool ds = s.arch == "deepseek2" || s.arch == "mistral4";  // mistral4: deepseek2 by another name
  // DeepSeek-style MoE: leading dense layers of n_ff_dense, shared experts (n_expert_shared of the
  // expert width; ernie4_5-moe's one of n_ff_shared).
  const bool ds_moe =
      ds || is_arch(s, {"deepseek", "dots1", "glm4moe", "ernie4_5-moe", "bailingmoe", "bailingmoe2", "exaone-moe", "lfm2moe", "llama4", "afmoe"});
  if (ds != (s.kv_lora_rank > 0) || (!ds && (s.q_lora_rank || s.v_head_dim || s.yarn_log_mul != 0.0f)) ||
      (!ds_moe && (s.n_layer_dense_lead || s.n_expert_shared || s.n_ff_dense)))
    throw_error(ErrorKind::InvalidArgument, "synth: latent attention is deepseek2's (which needs kv_lora_rank > 0), "
                "dense lead layers and shared expert counts the DeepSeek-style MoE architectures', not {}'s", s.arch);
  if (s.moe_layer_step != 1 && !is_arch(s, {"ernie4_5-moe", "llama4"}))
    throw_error(ErrorKind::InvalidArgument, "synth: an MoE layer step is ernie4_5-moe's and llama4's, not {}'s", s.arch);
  if (s.arch == "llama4" && (s.n_layer_dense_lead != 0 || s.n_ff_shared != s.n_ff))
    throw_error(ErrorKind::InvalidArgument, "synth: llama4 has no leading dense layers ({}) and one shared expert of the "
                "expert width {} (n_ff_shared {})", s.n_layer_dense_lead, s.n_ff, s.n_ff_shared);
  const bool experts_ok = is_arch(s, {"qwen2moe", "qwen35moe", "qwen3next"})  ? s.n_expert > 0 && s.n_ff_shared > 0
                          : is_arch(s, {"qwen3moe", "olmoe", "granitemoe", "qwen3vlmoe", "gpt-oss", "minimax-m2", "dbrx", "phimoe",
                                        "smallthinker", "mellum", "maple"})
                              ? s.n_expert > 0 && s.n_ff_shared == 0
                          : is_arch(s, {"ernie4_5-moe", "hunyuan-moe", "llama4"}) ? s.n_expert > 0 && s.n_expert_shared == 0
                          : s.arch == "nemotron_h_moe" ? s.n_expert > 0 && s.n_expert_shared == 0 && s.n_ff_shared > 0
                          : s.arch == "granitehybrid" ? s.n_expert >= 0 && s.n_expert_shared == 0 &&
                                                            (s.n_expert > 0 || s.n_ff_shared == 0)
                          : ds_moe                               ? s.n_expert > 0 && s.n_ff_shared == 0
                          : s.arch == "llama"                    ? s.n_expert >= 0 && s.n_ff_shared == 0
                                                                 : s.n_expert == 0 && s.n_ff_shared == 0;
  if (!experts_ok)
    throw_error(ErrorKind::InvalidArgument,
                "synth: experts {} / shared width {}: qwen2moe needs both > 0, the other MoE architectures experts "
                "(shared experts are n_expert_shared, ernie4_5-moe's one shared expert n_ff_shared), llama may have "
                "experts but no shared expert, the others neither", s.n_expert, s.n_ff_shared);
  if (s.n_expert > 0 && (s.n_expert_used < 1 || s.n_expert_used > s.n_expert))
    throw_error(ErrorKind::InvalidArgument, "synth: expert_used {} must be in [1, n_expert {}]", s.n_expert_used,
                s.n_expert);
  if (ds_moe && (s.n_layer_dense_lead > s.n_layer || (s.n_layer_dense_lead > 0 && s.n_ff_dense <= 0) ||
                 s.moe_layer_step < 1 || (s.moe_layer_step > 1 && s.n_ff_dense <= 0)))
    throw_error(ErrorKind::InvalidArgument, "synth: {} needs a dense width for its {} leading dense layers and the "
                "layers between MoE ones (step {})", s.arch, s.n_layer_dense_lead, s.moe_layer_step);
  if (ds && (s.rope_dims <= 0 || s.rope_dims >= head_dim_of(s) || s.v_head_dim <= 0 || s.n_head_kv != 1 ||
             s.n_layer_dense_lead > s.n_layer || (s.n_layer_dense_lead > 0 && s.n_ff_dense <= 0)))
    throw_error(ErrorKind::InvalidArgument,
                "synth: deepseek2 needs 0 < rope dims {} < head_dim {}, v_head_dim {} > 0, one KV head ({}), and a "
                "dense width for its {} leading dense layers", s.rope_dims, head_dim_of(s), s.v_head_dim, s.n_head_kv,
                s.n_layer_dense_lead);
  const int n_head_kv = s.arch == "gpt2" ? s.n_head : s.n_head_kv;
  if (s.n_vocab < 259 || s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || n_head_kv <= 0 ||
      (s.head_dim <= 0 && s.n_embd % s.n_head != 0) || s.head_dim < 0 || s.n_head % n_head_kv != 0 ||
      head_dim_of(s) % 2 != 0 || (s.n_ff <= 0 && s.arch != "mamba2") || s.n_ctx <= 0 || s.keep_layers > s.n_layer || s.keep_layers == 0 ||
      s.rope_dims < 0 || s.rope_dims % 2 != 0 || s.rope_dims > head_dim_of(s))
    throw_error(ErrorKind::InvalidArgument,
                "synth: inconsistent sizes (vocab {} >= 259, embd {} divisible by heads {} into even head dims, "
                "heads divisible by kv heads {}, ff {}, ctx {}, keep_layers {} in 1..{}, even rope dims {})",
                s.n_vocab, s.n_embd, s.n_head, n_head_kv, s.n_ff, s.n_ctx, s.keep_layers, s.n_layer, s.rope_dims);
  // Every matrix row (n_in: the embedding width, attn_output's input, the FFN and shared-expert
  // widths, MLA's ranks and per-head widths) must be whole blocks of the weight type.
  const int64_t block = dtype_info(s.type).block_size;
  const int attn_out_in = ds ? s.n_head * s.v_head_dim : s.n_head * head_dim_of(s);
  for (int width : {s.n_embd, s.n_ff, s.n_ff_shared, attn_out_in, s.q_lora_rank, s.kv_lora_rank, s.n_ff_dense,
                    ds ? head_dim_of(s) - s.rope_dims : 0})
    if (width % block != 0)
      throw_error(ErrorKind::InvalidArgument,
                  "synth: type {} stores rows in blocks of {}, but '{}' has rows of {} (embd {}, ff {}{}); "
                  "tiny-256 has rows of 256",
                  dtype_name(s.type), block, s.name, width, s.n_embd, s.n_ff,
                  s.n_ff_shared ? fmt::format(", shared ff {}", s.n_ff_shared) : std::string());
}

}  // namespace

void synth_write(const std::string& preset, const std::string& path, uint64_t seed) {
  synth_write(synth_spec(preset), path, seed);
}

namespace {

// The head's rows (n_embd, n_vocab) of a model whose embedding is embd.
std::vector<float> head_values(const SynthSpec& s, uint64_t seed, const std::vector<float>& embd) {
  const float inv_sqrt_n = 1.0f / std::sqrt(float(s.n_embd));
  auto v = random_values(seed, "output.weight", static_cast<size_t>(s.n_embd) * s.n_vocab, inv_sqrt_n);
  for (int tok = 0; tok < s.n_vocab; ++tok) {
    const bool printable = tok >= 3 + 0x20 && tok <= 3 + 0x7E;
    const bool newline = tok == 3 + 0x0A;
    const float scale = printable ? 4.0f : newline ? 3.0f : 0.5f;
    for (int i = 0; i < s.n_embd; ++i) {
      const size_t k = static_cast<size_t>(tok) * s.n_embd + i;
      v[k] = v[k] * scale - s.repeat_penalty * inv_sqrt_n * embd[k];
    }
  }
  return v;
}

// An EAGLE-3 or DFlash draft's head and embedding: the target's (none written) or its own, over its
// own draft vocabulary with d2t (SynthSpec::eagle3_draft_vocab > 0).
void write_draft_head(GGUFWriter& w, const SynthSpec& s, uint64_t seed) {
  const int64_t d = s.n_embd, V = s.n_vocab;
  const auto embd = random_values(seed, "token_embd.weight", static_cast<size_t>(d) * V, 1.0f);
  if (!s.eagle3_target_head) {
    const std::vector<float> head = head_values(s, seed, embd);  // the target's rows (same seed and vocabulary)
    const int64_t Vd = s.eagle3_draft_vocab > 0 ? s.eagle3_draft_vocab : V;
    std::vector<int64_t> ids;  // d2t: printable bytes and newline first, then the rest, in id order
    for (int64_t t = 0; t < V; ++t)
      if ((t >= 3 + 0x20 && t <= 3 + 0x7E) || t == 3 + 0x0A) ids.push_back(t);
    for (int64_t t = 0; t < V; ++t)
      if (!((t >= 3 + 0x20 && t <= 3 + 0x7E) || t == 3 + 0x0A)) ids.push_back(t);
    ids.resize(static_cast<size_t>(Vd));
    if (s.eagle3_draft_vocab == 0) std::iota(ids.begin(), ids.end(), int64_t{0});
    std::vector<float> rows(static_cast<size_t>(d * Vd));
    for (int64_t i = 0; i < Vd; ++i)
      std::copy_n(head.begin() + ids[i] * d, d, rows.begin() + i * d);
    w.add_tensor_f32("output.weight", s.type, {d, Vd}, rows);
    if (s.eagle3_draft_vocab > 0) {
      std::vector<uint8_t> bytes(ids.size() * sizeof(int64_t));
      std::memcpy(bytes.data(), ids.data(), bytes.size());
      w.add_tensor("d2t", DType::I64, {Vd}, bytes);
    }
  }
  if (s.eagle3_own_embd) w.add_tensor_f32("token_embd.weight", s.type, {d, V}, embd);
}

// A DFlash draft (SynthSpec::dflash_layers): the keys and tensors of llama.cpp's converter
// (conversion/qwen.py DFlashModel: Qwen3 layers, fc, enc.output_norm, the target's tokenizer with
// its mask token). Its layers' values and outputs pass their input on (diagonal plus noise), q and
// k are random: each block token reads a mix of the cache's fused features and the block.
void write_dflash(const SynthSpec& s, const std::string& path, uint64_t seed) {
  const int64_t d = s.n_embd, V = s.n_vocab, F = static_cast<int64_t>(s.dflash_layers.size()) * d;
  if (s.dflash_layers.empty() || s.n_layer < 1 || d % s.n_head != 0 || s.n_head % s.n_head_kv != 0 ||
      s.dflash_block_size < 2 || s.eagle3_draft_vocab < 0 || s.eagle3_draft_vocab > V ||
      (s.eagle3_target_head && s.eagle3_draft_vocab > 0) || s.dflash_mask_token < 0 || s.dflash_mask_token >= V)
    throw_error(ErrorKind::InvalidArgument, "synth: a DFlash draft reads target layers ({}), has layers ({}), n_head {} "
                "dividing n_embd {} and a multiple of n_head_kv {}, a block of at least 2 ({}), a mask token in the "
                "vocabulary of {} ({}) and a draft vocabulary of at most {} ids (none with the target's head)",
                s.dflash_layers.size(), s.n_layer, s.n_head, d, s.n_head_kv, s.dflash_block_size, V,
                s.dflash_mask_token, V);
  const int64_t hd = d / s.n_head, q_dim = s.n_head * hd, kv_dim = s.n_head_kv * hd;
  const std::string a = "dflash";
  GGUFWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", s.name);
  w.set_u32(a + ".context_length", s.n_ctx);
  w.set_u32(a + ".embedding_length", s.n_embd);
  w.set_u32(a + ".block_count", s.n_layer);
  w.set_u32(a + ".feed_forward_length", s.n_ff);
  w.set_u32(a + ".attention.head_count", s.n_head);
  w.set_u32(a + ".attention.head_count_kv", s.n_head_kv);
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
  w.set_i32_array(a + ".target_layers", s.dflash_layers);
  w.set_u32(a + ".block_size", static_cast<uint32_t>(s.dflash_block_size));
  if (s.dflash_causal) w.set_bool(a + ".attention.causal", true);
  w.set_u64("specmoe.synth.seed", seed);
  write_byte_vocab(w, s.n_vocab);
  w.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(s.dflash_mask_token));
  auto vec = [&](const std::string& name, int64_t n, float base, float noise) {
    auto v = random_values(seed, "dflash." + name, static_cast<size_t>(n), noise);
    for (auto& x : v) x += base;
    w.add_tensor_f32(name, DType::F32, {n}, v);
  };
  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, float noise, float diag) {
    auto v = random_values(seed, "dflash." + name, static_cast<size_t>(n_in * n_out), noise / std::sqrt(float(n_in)));
    for (int64_t j = 0; j < n_out && j < n_in; ++j) v[static_cast<size_t>(j * n_in + j)] += diag;
    w.add_tensor_f32(name, s.type, {n_in, n_out}, v);
  };
  matrix("fc.weight", F, d, 1.0f, 0.0f);
  const bool previous = s.dflash_attend_previous;
  {
    // (attending to the previous token: element 0 of the fused rows is 0, so the cache's keys are)
    auto v = random_values(seed, "dflash.enc.output_norm.weight", static_cast<size_t>(d), 0.3f);
    for (auto& x : v) x += 1.0f;
    if (previous) v[0] = 0.0f;
    w.add_tensor_f32("enc.output_norm.weight", DType::F32, {d}, v);
  }
  vec("output_norm.weight", d, 1.0f, 0.2f);
  if (previous && (!s.eagle3_own_embd || kv_dim != d))
    throw_error(ErrorKind::InvalidArgument, "synth: dflash_attend_previous needs the draft's own embedding and n_head_kv = n_head");
  SynthSpec head_spec = s;
  if (previous) head_spec.eagle3_own_embd = false;  // written below, with the shared component
  write_draft_head(w, head_spec, seed);
  if (previous) {
    auto embd = random_values(seed, "token_embd.weight", static_cast<size_t>(d) * V, 1.0f);
    for (int64_t t = 0; t < V; ++t) {
      float* row = embd.data() + t * d;
      if (t == s.dflash_mask_token) std::fill(row, row + d, 0.0f);
      row[0] += 3.0f;
    }
    w.add_tensor_f32("token_embd.weight", s.type, {d, V}, embd);
  }
  // q, k: element 0 of the normed input alone, k a radian ahead of q in each head's first RoPE pair.
  auto pick_first = [&](const std::string& name, int64_t n_out, bool key) {
    std::vector<float> v(static_cast<size_t>(d * n_out), 0.0f);
    for (int64_t h = 0; h < n_out / hd; ++h) {
      v[static_cast<size_t>((h * hd) * d)] = key ? std::cos(1.0f) : 1.0f;
      if (key) v[static_cast<size_t>((h * hd + hd / 2) * d)] = std::sin(1.0f);
    }
    w.add_tensor_f32(name, s.type, {d, n_out}, v);
  };
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    vec(p + "attn_norm.weight", d, 1.0f, 0.2f);
    if (previous) {
      pick_first(p + "attn_q.weight", q_dim, false);
      pick_first(p + "attn_k.weight", kv_dim, true);
    } else {
      matrix(p + "attn_q.weight", d, q_dim, 1.0f, 0.0f);
      matrix(p + "attn_k.weight", d, kv_dim, 1.0f, 0.0f);
    }
    {
      // v passes its input on (the shared element 0 left out when attending to the previous token)
      auto v = random_values(seed, "dflash." + p + "attn_v.weight", static_cast<size_t>(d * kv_dim), 0.3f / std::sqrt(float(d)));
      for (int64_t j = 0; j < kv_dim && j < d; ++j) v[static_cast<size_t>(j * d + j)] += 1.0f;
      if (previous) std::fill(v.begin(), v.begin() + d, 0.0f);
      w.add_tensor_f32(p + "attn_v.weight", s.type, {d, kv_dim}, v);
    }
    matrix(p + "attn_output.weight", q_dim, d, 0.3f, previous ? 3.0f : 1.0f);
    vec(p + "attn_q_norm.weight", hd, previous ? 3.0f : 1.0f, previous ? 0.0f : 0.2f);
    vec(p + "attn_k_norm.weight", hd, previous ? 3.0f : 1.0f, previous ? 0.0f : 0.2f);
    vec(p + "ffn_norm.weight", d, 1.0f, 0.2f);
    matrix(p + "ffn_gate.weight", d, s.n_ff, 1.0f, 0.0f);
    matrix(p + "ffn_up.weight", d, s.n_ff, 1.0f, 0.0f);
    matrix(p + "ffn_down.weight", s.n_ff, d, 0.3f, 0.0f);
  }
  w.write(path);
}

// An EAGLE-3 head (SynthSpec::eagle3_layers): the keys and tensors of llama.cpp's converter.
void write_eagle3(const SynthSpec& s, const std::string& path, uint64_t seed) {
  const int64_t d = s.n_embd, V = s.n_vocab, F = static_cast<int64_t>(s.eagle3_layers.size()) * s.head_target_width;
  const int64_t head_dim = d / s.n_head;
  if (s.eagle3_layers.size() != 3 || s.head_target_width < 1 || d % s.n_head != 0 || s.n_head_kv != s.n_head ||
      s.eagle3_draft_vocab < 0 || s.eagle3_draft_vocab > V || (s.eagle3_target_head && s.eagle3_draft_vocab > 0) ||
      (s.eagle3_target_head && s.type != DType::F32 && false))
    throw_error(ErrorKind::InvalidArgument, "synth: an EAGLE-3 head reads 3 target layers ({}), of width {} > 0, with "
                "n_head {} = n_head_kv {} dividing n_embd {}, and a draft vocabulary of at most {} ids (none with the "
                "target's head)", s.eagle3_layers.size(), s.head_target_width, s.n_head, s.n_head_kv, d, V);
  const std::string a = "eagle3";
  GGUFWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", s.name);
  w.set_u32(a + ".context_length", s.n_ctx);
  w.set_u32(a + ".embedding_length", s.n_embd);
  w.set_u32(a + ".block_count", 1);
  w.set_u32(a + ".feed_forward_length", s.n_ff);
  w.set_u32(a + ".attention.head_count", s.n_head);
  w.set_u32(a + ".attention.head_count_kv", s.n_head_kv);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
  w.set_u32(a + ".vocab_size", s.n_vocab);
  w.set_i32_array(a + ".target_layers", s.eagle3_layers);
  w.set_u32(a + ".target_hidden_size", s.head_target_width);
  w.set_bool(a + ".norm_before_residual", s.eagle3_norm_before_residual);
  if (s.eagle3_norm_before_fc) w.set_bool(a + ".norm_before_fc", true);
  w.set_u64("specmoe.synth.seed", seed);
  write_byte_vocab(w, s.n_vocab);
  auto vec = [&](const std::string& name, int64_t n, float base, float noise) {
    auto v = random_values(seed, "eagle3." + name, static_cast<size_t>(n), noise);
    for (auto& x : v) x += base;
    w.add_tensor_f32(name, DType::F32, {n}, v);
  };
  // (n_in -> n_out) with `diag` on the first n_out inputs' diagonal (a pass-through) plus noise.
  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, float noise, float diag) {
    auto v = random_values(seed, "eagle3." + name, static_cast<size_t>(n_in * n_out), noise / std::sqrt(float(n_in)));
    for (int64_t j = 0; j < n_out && j < n_in; ++j) v[static_cast<size_t>(j * n_in + j)] += diag;
    w.add_tensor_f32(name, s.type, {n_in, n_out}, v);
  };
  matrix("fc.weight", F, d, 0.3f, 0.0f);
  if (s.eagle3_norm_before_fc) vec("enc.output_norm.weight", F, 1.0f, 0.3f);
  vec("output_norm.weight", d, 1.0f, 0.2f);
  write_draft_head(w, s, seed);
  const std::string p = "blk.0.";
  vec(p + "attn_norm.weight", d, 1.0f, 0.2f);
  vec(p + "attn_norm_2.weight", d, 1.0f, 0.2f);
  // q = k = 3 x the embedding half: each token attends mostly to itself; v and o pass it on.
  matrix(p + "attn_q.weight", 2 * d, d, 0.3f, 3.0f);
  {
    auto v = random_values(seed, "eagle3." + p + "attn_q.weight", static_cast<size_t>(2 * d * d), 0.3f / std::sqrt(float(2 * d)));
    for (int64_t j = 0; j < d; ++j) v[static_cast<size_t>(j * 2 * d + j)] += 3.0f;
    w.add_tensor_f32(p + "attn_k.weight", s.type, {2 * d, d}, v);
  }
  matrix(p + "attn_v.weight", 2 * d, d, 0.2f, 1.0f);
  matrix(p + "attn_output.weight", d, d, 0.2f, 1.0f);
  vec(p + "ffn_norm.weight", d, 1.0f, 0.2f);
  matrix(p + "ffn_gate.weight", d, s.n_ff, 1.0f, 0.0f);
  matrix(p + "ffn_up.weight", d, s.n_ff, 1.0f, 0.0f);
  matrix(p + "ffn_down.weight", s.n_ff, d, 0.3f, 0.0f);
  w.write(path);
}

}  // namespace

void synth_write(const SynthSpec& s, const std::string& path, uint64_t seed) {
  if (s.arch == "eagle3") {
    write_eagle3(s, path, seed);
    return;
  }
  if (s.arch == "dflash") {
    write_dflash(s, path, seed);
    return;
  }
  check_spec(s);
  const std::string& a = s.arch;
  // gpt2 and starcoder (gpt2's block with KV heads of their own): learned positions, no RoPE.
  const bool gpt2 = a == "gpt2" || a == "starcoder", qwen2 = a == "qwen2" || a == "qwen2moe" || a == "qwen2vl";
  const bool qk_norm =
      is_arch(s, {"qwen3", "gemma3", "qwen3moe", "exaone4", "hunyuan-dense", "qwen3vl", "qwen3vlmoe", "dots1", "bailingmoe2",
                  "hunyuan-moe", "exaone-moe", "lfm2", "lfm2moe", "qwen35", "qwen35moe", "maincoder", "apertus", "qwen3next", "mellum",
                  "afmoe", "maple"});
  // qwen3next: qwen35moe's layers with plain split-halves RoPE and ssm_ba (or the older ssm_in)
  const bool qwen3next = a == "qwen3next";
  const bool qwen35 = a == "qwen35" || a == "qwen35moe" || qwen3next;
  const bool post_norms = is_arch(s, {"gemma2", "gemma3", "glm4", "afmoe"}), glm4 = a == "glm4";
  const bool olmoe = a == "olmoe", phi3 = a == "phi3", ds = a == "deepseek2" || a == "mistral4";
  const bool ds_moe =
      ds || is_arch(s, {"deepseek", "dots1", "glm4moe", "ernie4_5-moe", "bailingmoe", "bailingmoe2", "exaone-moe", "lfm2moe", "llama4", "afmoe"});
  // falcon: fused attn_qkv, one LayerNorm for both sublayers of a parallel residual (with more than
  // one KV head, Falcon-40B's form: attn_norm_2 for the attention), an ungated MLP, no biases.
  // olmo: LayerNorms without parameters (no norm tensors at all), q/k/v clamped.
  // dbrx: fused attn_qkv, LayerNorms without biases, the FFN's named attn_output_norm, q/k/v clamped.
  // phimoe: RMSNorms with biases, q/k/v and output biases, a logit bias.
  const bool falcon = a == "falcon", olmo = a == "olmo", dbrx = a == "dbrx", phimoe = a == "phimoe";
  // qwen (1): attn_qkv with a bias, feed_forward_length twice the MLP's width; codeshell: LayerNorm
  // biases, q/k/v and output biases, gpt2's MLP; plamo: one RMSNorm for a parallel residual;
  // chatglm: attn_qkv with a bias, ffn_up = [gate | up], RoPE on half of each head.
  const bool qwen1 = a == "qwen", codeshell = a == "codeshell", plamo = a == "plamo", chatglm = a == "chatglm";
  // llama4: ernie4_5-moe's interleaved experts and one shared expert (of the expert width), no
  // leading dense layers.
  const bool ernie_moe = a == "ernie4_5-moe" || a == "llama4",
             fused_qkv = phi3 || a == "bailingmoe2" || falcon || dbrx || qwen1 || chatglm;
  // hunyuan-moe: experts of feed_forward_length (its expert_feed_forward_length the same), one
  // ungated shared expert of n_ff_shared (expert_shared_feed_forward_length).
  const bool hunyuan_moe = a == "hunyuan-moe";
  const int n_ff_dense = s.n_ff_dense > 0 ? s.n_ff_dense : s.n_ff;  // dense layers of the DeepSeek-style ones
  const bool granite = a == "granite" || a == "granitemoe" || a == "granitehybrid", starcoder2 = a == "starcoder2";
  const bool hybrid = a == "granitehybrid";  // Mamba-2 layers where recurrent_layers says
  const bool mamba2 = a == "mamba2";          // Mamba-2 layers only, no FFN, no attention
  // one sublayer per layer, by layer_pattern; nemotron_h_moe: its MLP layers experts (ungated squared
  // ReLUs and one such shared expert, sigmoid scores with a selection bias)
  const bool nemotron_h = a == "nemotron_h" || a == "nemotron_h_moe";
  const int64_t m2_inner = s.ssm_d_inner > 0 ? s.ssm_d_inner : int64_t{s.ssm_dt_rank} * s.ssm_d_state;
  const bool post_only = a == "olmo2" || a == "exaone4";  // post-norms only (exaone4 with per-head QK-norm)
  const bool neox = a == "gptneox", phi2 = a == "phi2";
  const bool cohere = a == "command-r" || a == "cohere2";  // LayerNorm without biases, phi2's one norm
  // LayerNorm with biases (gpt2's apart, with zero biases)
  const bool layer_norm =
      is_arch(s, {"stablelm", "starcoder2", "gptneox", "phi2", "nemotron", "jais2", "bloom", "jais", "falcon", "orion", "codeshell"});
  // ALiBi in place of RoPE: bloom (with the embedding's LayerNorm), mpt (gpt2's block without biases,
  // LayerNorms without biases, q/k/v clamped), jais (gpt2's attention, a SwiGLU with biases), refact
  // (llama's block).
  const bool alibi = is_arch(s, {"bloom", "mpt", "refact", "jais"});
  const bool bloom = a == "bloom", mpt = a == "mpt", jais = a == "jais";
  // ungated squared-ReLU MLPs (jais2: nemotron's block)
  const bool nemotron = a == "nemotron" || a == "jais2", arcee = a == "arcee";
  const bool apertus = a == "apertus";                            // an ungated xIELU MLP
  const bool gpt_oss = a == "gpt-oss";  // sinks, biases everywhere, experts with biases
  const bool qkv_bias = qwen2 || (layer_norm && !falcon) || glm4 || a == "glm4moe" || gpt_oss || phimoe;
  const int n_head_kv = a == "gpt2" ? s.n_head : s.n_head_kv;
  const int head_dim = head_dim_of(s);
  const int rope_dims = s.rope_dims > 0 ? s.rope_dims : head_dim;
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * head_dim, kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  const int n_write = s.keep_layers > 0 ? s.keep_layers : s.n_layer;

  GGUFWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", s.name);
  w.set_u32(a + ".context_length", s.n_ctx);
  w.set_u32(a + ".embedding_length", s.n_embd);
  w.set_u32(a + ".block_count", n_write + s.n_nextn);
  if (s.n_nextn > 0) w.set_u32(a + ".nextn_predict_layers", s.n_nextn);
  // qwen35moe: qwen2moe's shared expert under its sigmoid gate
  const bool moe = s.n_expert > 0, qwen2moe = a == "qwen2moe" || a == "qwen35moe" || qwen3next;
  const bool expert_width_key =
      qwen2moe || a == "qwen3moe" || a == "qwen3vlmoe" || ds_moe || a == "gpt-oss" || a == "smallthinker" || a == "mellum" || a == "maple";
  // llama (Mixtral), olmoe: feed_forward_length is the expert width. qwen2moe, qwen3moe: expert
  // widths have their own keys; feed_forward_length is the dense-equivalent k * expert width
  // (llama.cpp's default expert width is feed_forward_length / expert_used_count). deepseek2: the
  // leading dense layers' width.
  const int ff_key = ds_moe && s.n_ff_dense > 0 ? s.n_ff_dense
                     : expert_width_key         ? s.n_ff * s.n_expert_used
                                                : s.n_ff;
  if (!nemotron_h) w.set_u32(a + ".feed_forward_length", mamba2 ? 0 : qwen1 ? 2 * ff_key : ff_key);
  if (moe) {
    w.set_u32(a + ".expert_count", s.n_expert);
    w.set_u32(a + ".expert_used_count", s.n_expert_used);
  }
  if (expert_width_key || hunyuan_moe || a == "minimax-m2") w.set_u32(a + ".expert_feed_forward_length", s.n_ff);
  if (a == "nemotron_h_moe" && moe) {
    w.set_u32(a + ".expert_feed_forward_length", s.n_ff);
    w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared);
  }
  if ((hunyuan_moe || a == "granitehybrid") && s.n_ff_shared > 0)
    w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared);
  if (qwen2moe) w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared);
  if (a == "maple") {  // a clamp per layer, none (0) on every third from layer 1
    std::vector<float> limits(static_cast<size_t>(n_write));
    for (int l = 0; l < n_write; ++l) limits[l] = l % 3 == 1 ? 0.0f : 0.75f + 0.25f * static_cast<float>(l);
    w.set_f32_array(a + ".swiglu_clamp_exp", limits);
  }
  if (ds_moe && a != "llama4") w.set_u32(a + ".leading_dense_block_count", s.n_layer_dense_lead);
  if (ds_moe && !ernie_moe && a != "lfm2moe") w.set_u32(a + ".expert_shared_count", s.n_expert_shared);
  if (ernie_moe) {
    w.set_u32(a + ".interleave_moe_layer_step", s.moe_layer_step);
    if (s.n_ff_shared > 0 && a != "llama4") w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared);
  }
  if (s.expert_weights_norm >= 0) w.set_bool(a + ".expert_weights_norm", s.expert_weights_norm != 0);
  if (s.expert_weights_scale != 0.0f) w.set_f32(a + ".expert_weights_scale", s.expert_weights_scale);
  if (s.n_loops > 1) w.set_u32(a + ".num_loops", s.n_loops);
  if (a == "apertus") {
    // xIELU's scalars (global keys): alpha_n and alpha_p per layer, beta and eps one value for all,
    // the two forms llama.cpp's loader accepts; values of Apertus-8B's size.
    std::vector<float> an, ap;
    for (int l = 0; l < s.n_layer; ++l) an.push_back(0.6f + 0.15f * l), ap.push_back(1.0f - 0.1f * l);
    w.set_f32_array("xielu.alpha_n", an);
    w.set_f32_array("xielu.alpha_p", ap);
    w.set_f32("xielu.beta", 0.5f);
    w.set_f32("xielu.eps", -1e-6f);
  }
  if (s.expert_gating > 0) w.set_u32(a + ".expert_gating_func", s.expert_gating);
  if (s.n_expert_group > 0) {
    w.set_u32(a + ".expert_group_count", s.n_expert_group);
    w.set_u32(a + ".expert_group_used_count", s.n_expert_group_used);
  }
  w.set_u32(a + ".attention.head_count", mamba2 ? 0 : s.n_head);  // as mamba2's converter writes it
  if (gpt2) {
    w.set_f32(a + ".attention.layer_norm_epsilon", 1e-5f);
    if (a == "starcoder") w.set_u32(a + ".attention.head_count_kv", n_head_kv);  // multi-query
  } else {
    if (nemotron_h) {  // the layer kinds as per-layer arrays, the norm epsilon llama.cpp requires
      std::vector<int32_t> heads, ffs;
      for (char k : s.layer_pattern) {
        heads.push_back(k == '*' ? n_head_kv : 0);
        ffs.push_back(k == '-' ? s.n_ff * std::max(1, s.n_expert_used) : 0);
      }
      w.set_i32_array(a + ".attention.head_count_kv", heads);
      w.set_i32_array(a + ".feed_forward_length", ffs);
      w.set_f32(a + ".attention.layer_norm_epsilon", 1e-5f);
    }
    if (mamba2 || nemotron_h) {
      w.set_u32(a + ".ssm.conv_kernel", s.ssm_d_conv);
      w.set_u32(a + ".ssm.state_size", s.ssm_d_state);
      w.set_u32(a + ".ssm.group_count", s.ssm_n_group);
      w.set_u32(a + ".ssm.time_step_rank", s.ssm_dt_rank);
      w.set_u32(a + ".ssm.inner_size", static_cast<uint32_t>(m2_inner));
    } else if (hybrid && !s.recurrent_layers.empty()) {  // granitehybrid: per layer, 0 for the Mamba-2 layers
      std::vector<int32_t> heads(s.recurrent_layers.size());
      for (size_t l = 0; l < heads.size(); ++l) heads[l] = s.recurrent_layers[l] ? 0 : n_head_kv;
      w.set_i32_array(a + ".attention.head_count_kv", heads);
      w.set_u32(a + ".ssm.conv_kernel", s.ssm_d_conv);
      w.set_u32(a + ".ssm.state_size", s.ssm_d_state);
      w.set_u32(a + ".ssm.group_count", s.ssm_n_group);
      w.set_u32(a + ".ssm.time_step_rank", s.ssm_dt_rank);
      w.set_u32(a + ".ssm.inner_size", static_cast<uint32_t>(m2_inner));
      if (!s.rope_finetuned) w.set_bool(a + ".rope.scaling.finetuned", false);
    } else if (!s.conv_layers.empty()) {  // lfm2: per layer, 0 for the short-convolution layers
      std::vector<int32_t> heads(s.conv_layers.size());
      for (size_t l = 0; l < heads.size(); ++l) heads[l] = s.conv_layers[l] ? 0 : n_head_kv;
      w.set_i32_array(a + ".attention.head_count_kv", heads);
      w.set_u32(a + ".shortconv.l_cache", s.shortconv_l_cache);
    } else {
      w.set_u32(a + ".attention.head_count_kv", n_head_kv);
    }
    w.set_f32(a + (layer_norm || cohere || mpt || olmo || dbrx ? ".attention.layer_norm_epsilon"
                                                                : ".attention.layer_norm_rms_epsilon"),
              1e-5f);
    if (olmo || dbrx) w.set_f32(a + ".attention.clamp_kqv", dbrx ? 2.0f : 1.5f);
    if (mpt || jais) w.set_f32(a + ".attention.max_alibi_bias", 8.0f);  // bloom and refact: llama.cpp's fixed 8
    if (mpt) w.set_f32(a + ".attention.clamp_kqv", 1.5f);              // clips ~13% of unit-scale q/k/v
    if (cohere) w.set_f32(a + ".logit_scale", 0.5f);  // a multiplier here (Command R: 0.0625)
    if (a == "qwen2vl") {  // M-RoPE sections as Qwen2-VL's [16, 24, 24, 0], scaled to the head
      const int pairs = rope_dims / 2, t = pairs / 4, hw = (pairs - t) / 2;
      w.set_i32_array(a + ".rope.dimension_sections", {t, hw, pairs - t - hw, 0});
    }
    if (qwen35) {  // the DeltaNet sizes; recurrent layers by flags or by interval
      w.set_u32(a + ".ssm.conv_kernel", s.ssm_d_conv);
      w.set_u32(a + ".ssm.state_size", s.ssm_d_state);
      w.set_u32(a + ".ssm.group_count", s.ssm_n_group);
      w.set_u32(a + ".ssm.time_step_rank", s.ssm_dt_rank);
      w.set_u32(a + ".ssm.inner_size", s.ssm_dt_rank * s.ssm_d_state);
      if (s.full_attention_interval > 0) w.set_u32(a + ".full_attention_interval", s.full_attention_interval);
      if (!s.recurrent_layers.empty()) {
        GGUFValue flags;
        flags.type = GGUFType::ARRAY;
        flags.elem_type = GGUFType::BOOL;
        std::vector<int32_t> all = s.recurrent_layers;
        all.resize(all.size() + static_cast<size_t>(s.n_nextn), 0);  // the MTP blocks are attention layers
        for (int32_t f : all) {
          GGUFValue item;
          item.type = GGUFType::BOOL;
          item.i = f != 0;
          flags.items.push_back(item);
        }
        w.set_value(a + ".attention.recurrent_layers", flags);
      }
    }
    if (a == "qwen3vl" || a == "qwen3vlmoe" || (qwen35 && !qwen3next)) {  // interleaved M-RoPE as Qwen3-VL's [24, 20, 20, 0]: some pairs still for text
      const int pairs = rope_dims / 2, t = pairs * 3 / 8, hw = pairs / 4;
      w.set_i32_array(a + ".rope.dimension_sections", {t, hw, hw, 0});
    }
    if (neox) w.set_bool(a + ".use_parallel_residual", true);
    if (a == "mistral3") {  // YaRN with its own keys and Llama 4's attention temperature
      w.set_f32(a + ".rope.scaling.yarn_beta_fast", 16.0f);
      w.set_f32(a + ".rope.scaling.yarn_beta_slow", 2.0f);
      w.set_f32(a + ".rope.scaling.yarn_log_multiplier", 1.0f);
      w.set_f32(a + ".attention.temperature_scale", 0.5f);
    }
    if (granite) {
      // Granite's multipliers, of the kind its configs have (embedding 12, residual 0.22, logits
      // 8 at 2B), sized for these small widths.
      w.set_f32(a + ".embedding_scale", 2.0f);
      w.set_f32(a + ".residual_scale", 0.5f);
      w.set_f32(a + ".attention.scale", 0.75f / std::sqrt(static_cast<float>(head_dim)));
      w.set_f32(a + ".logit_scale", 2.0f);
    }
    if (!alibi && !mamba2 && !nemotron_h) {
      w.set_u32(a + ".rope.dimension_count", rope_dims);
      if (s.rope_dims_swa > 0) w.set_u32(a + ".rope.dimension_count_swa", s.rope_dims_swa);
      w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
    }
    if (ds) {
      // The converter's MLA keys: the latent as one MQA head, and the decompressed heads.
      w.set_u32(a + ".attention.q_lora_rank", s.q_lora_rank);
      w.set_u32(a + ".attention.kv_lora_rank", s.kv_lora_rank);
      w.set_u32(a + ".attention.key_length", s.kv_lora_rank + rope_dims);
      w.set_u32(a + ".attention.value_length", s.kv_lora_rank);
      w.set_u32(a + ".attention.key_length_mla", head_dim);
      w.set_u32(a + ".attention.value_length_mla", s.v_head_dim);
      if (s.yarn_log_mul != 0.0f) w.set_f32(a + ".rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
      if (a == "mistral4") {  // Mistral Large 3's attention temperature, from position 4 on
        w.set_f32(a + ".attention.temperature_scale", 0.5f);
        w.set_u32(a + ".attention.temperature_length", 4);
      }
    } else if (s.head_dim > 0) {
      w.set_u32(a + ".attention.key_length", head_dim);
      w.set_u32(a + ".attention.value_length", head_dim);
    }
    if (!s.rope_scaling.empty()) w.set_string(a + ".rope.scaling.type", s.rope_scaling);
    if (s.rope_scaling_factor != 0.0f) w.set_f32(a + ".rope.scaling.factor", s.rope_scaling_factor);
    if (s.rope_orig_ctx > 0) w.set_u32(a + ".rope.scaling.original_context_length", s.rope_orig_ctx);
    if (s.rope_attn_factor > 0.0f) w.set_f32(a + ".rope.scaling.attn_factor", s.rope_attn_factor);
    if (s.n_swa > 0) w.set_u32(a + ".attention.sliding_window", s.n_swa);
    if (s.swa_pattern > 0) w.set_u32(a + ".attention.sliding_window_pattern", s.swa_pattern);
    if (!s.swa_layers.empty()) w.set_i32_array(a + ".attention.sliding_window_pattern", s.swa_layers);
    if (s.rope_freq_base_swa > 0.0f) w.set_f32(a + ".rope.freq_base_swa", s.rope_freq_base_swa);
    if (s.attn_logit_softcap > 0.0f) w.set_f32(a + ".attn_logit_softcapping", s.attn_logit_softcap);
    if (s.final_logit_softcap > 0.0f) w.set_f32(a + ".final_logit_softcapping", s.final_logit_softcap);
  }
  w.set_u64("specmoe.synth.seed", seed);
  write_byte_vocab(w, s.n_vocab);  // core/tokenizer.h: <unk> <s> </s>, 256 byte tokens, padding

  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, float scale) {
    // (n_in -> n_out): std 1/sqrt(n_in) keeps the output at the input's scale.
    const auto v = random_values(seed, name, static_cast<size_t>(n_in * n_out), scale / std::sqrt(float(n_in)));
    w.add_tensor_f32(name, s.type, {n_in, n_out}, v);
  };
  // (n_in, n_out, n) stacked matrices: experts, or MLA's per-head projections.
  const auto stacked = [&](const std::string& name, int64_t n_in, int64_t n_out, int64_t n, float scale) {
    const auto v = random_values(seed, name, static_cast<size_t>(n_in * n_out * n), scale / std::sqrt(float(n_in)));
    w.add_tensor_f32(name, s.type, {n_in, n_out, n}, v);
  };
  auto vec = [&](const std::string& name, int64_t n, float base, float noise) {
    auto v = random_values(seed, name, static_cast<size_t>(n), noise);
    for (auto& x : v) x += base;
    w.add_tensor_f32(name, DType::F32, {n}, v);
  };

  // One MoE block (llama-model.cpp shapes). Router logits of a unit-RMS input have std 1, so
  // routing is spread over the experts but not uniform; each expert is a SwiGLU initialised like
  // a dense one. (n_in, n_out, n_expert) for the stacked expert tensors.
  auto write_experts = [&](const std::string& p, float rs) {
    const int64_t d = s.n_embd, ff = s.n_ff, E = s.n_expert;
    w.add_tensor_f32(p + "ffn_gate_inp.weight", DType::F32, {d, E},
                     random_values(seed, p + "ffn_gate_inp.weight", static_cast<size_t>(d * E), 1.0f / std::sqrt(float(d))));
    stacked(p + "ffn_gate_exps.weight", d, ff, E, 1.0f);
    stacked(p + "ffn_up_exps.weight", d, ff, E, 1.0f);
    stacked(p + "ffn_down_exps.weight", ff, d, E, rs);
    if (qwen2moe) {
      matrix(p + "ffn_gate_shexp.weight", d, s.n_ff_shared, 1.0f);
      matrix(p + "ffn_up_shexp.weight", d, s.n_ff_shared, 1.0f);
      matrix(p + "ffn_down_shexp.weight", s.n_ff_shared, d, rs);
      w.add_tensor_f32(p + "ffn_gate_inp_shexp.weight", DType::F32, {d},
                       random_values(seed, p + "ffn_gate_inp_shexp.weight", static_cast<size_t>(d), 1.0f / std::sqrt(float(d))));
    }
    if ((ds_moe && s.n_expert_shared > 0) || ((ernie_moe || hunyuan_moe || hybrid) && s.n_ff_shared > 0)) {  // one ungated SwiGLU
      const int64_t sh = ernie_moe || hunyuan_moe || hybrid ? s.n_ff_shared : static_cast<int64_t>(s.n_expert_shared) * ff;
      matrix(p + "ffn_gate_shexp.weight", d, sh, 1.0f);
      matrix(p + "ffn_up_shexp.weight", d, sh, 1.0f);
      matrix(p + "ffn_down_shexp.weight", sh, d, rs);
    }
    if (gpt_oss) {  // biases of the router logits and of each expert's rows ({rows, n_expert})
      vec(p + "ffn_gate_inp.bias", E, 0.0f, 0.5f);
      for (const auto& [name, rows] : {std::pair{"ffn_gate_exps.bias", ff}, std::pair{"ffn_up_exps.bias", ff},
                                       std::pair{"ffn_down_exps.bias", d}}) {
        const std::string n = p + name;
        w.add_tensor_f32(n, DType::F32, {rows, E},
                         random_values(seed, n, static_cast<size_t>(rows * E), std::string(name) == "ffn_down_exps.bias" ? 0.1f * rs : 0.3f));
      }
    }
    if (s.exp_probs_bias)  // a selection bias of the scores' scale (softmax scores are ~1/E)
      vec(p + "exp_probs_b.bias", E, 0.0f, s.expert_gating == 2 ? 0.3f : 0.5f / static_cast<float>(E));
  };

  // Token embedding: unit-variance rows. (n_embd, n_vocab)
  const auto embd = random_values(seed, "token_embd.weight", static_cast<size_t>(s.n_embd) * s.n_vocab, 1.0f);
  w.add_tensor_f32("token_embd.weight", s.type, {s.n_embd, s.n_vocab}, embd);
  if (gpt2) w.add_tensor_f32("position_embd.weight", s.type, {s.n_embd, s.n_ctx},
                             random_values(seed, "position_embd.weight", static_cast<size_t>(s.n_embd) * s.n_ctx, 0.3f));
  const bool lfm2 = is_arch(s, {"lfm2", "lfm2moe"});  // the final norm named token_embd_norm
  if (!olmo) vec(lfm2 ? "token_embd_norm.weight" : "output_norm.weight", s.n_embd, 1.0f, lfm2 ? 0.3f : 0.0f);
  if (gpt2) vec("output_norm.bias", s.n_embd, 0.0f, 0.0f);
  if (bloom) {  // the embedding's LayerNorm
    vec("token_embd_norm.weight", s.n_embd, 1.0f, 0.3f);
    vec("token_embd_norm.bias", s.n_embd, 0.0f, 0.1f);
  }
  if (layer_norm || phimoe) vec("output_norm.bias", s.n_embd, 0.0f, 0.1f);
  if (s.llama3_orig_ctx > 0) {
    // Llama 3.1's frequency factors, computed as llama.cpp's converter does (LlamaModel
    // generate_extra_tensors) with factor 8 and low/high frequency factors 1 and 4.
    const double factor = 8.0, lo = 1.0, hi = 4.0, orig = s.llama3_orig_ctx;
    std::vector<float> ff(static_cast<size_t>(head_dim / 2));
    for (int i = 0; i < head_dim / 2; ++i) {
      const double wavelen = 2.0 * M_PI * std::pow(static_cast<double>(s.rope_freq_base), 2.0 * i / head_dim);
      if (wavelen < orig / hi) {
        ff[i] = 1.0f;
      } else if (wavelen > orig / lo) {
        ff[i] = static_cast<float>(factor);
      } else {
        const double smooth = (orig / wavelen - lo) / (hi - lo);
        ff[i] = static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth));
      }
    }
    w.add_tensor_f32("rope_freqs.weight", DType::F32, {head_dim / 2}, ff);
  }
  if (s.rope_long_short) {
    // Phi-3's LongRoPE factors have this shape: short ones near 1, long ones growing to tens
    // for the slow pairs (the file holds the divisors of each pair's frequency).
    const int half = rope_dims / 2;
    std::vector<float> lf(static_cast<size_t>(half)), sf(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) {
      const float u = static_cast<float>(i) / static_cast<float>(std::max(1, half - 1));
      sf[i] = 1.0f + 0.25f * u;
      lf[i] = 1.0f + 24.0f * u * u;
    }
    w.add_tensor_f32("rope_factors_long.weight", DType::F32, {half}, lf);
    w.add_tensor_f32("rope_factors_short.weight", DType::F32, {half}, sf);
  }
  if (!s.tied_output) {
    // Head rows: std 4 for printable ASCII bytes (byte b is token 3 + b) and 3 for newline, 0.5
    // for the rest: logits of a unit-RMS hidden state then have those spreads, so printable
    // bytes win most argmaxes and the distribution is peaked but not one-hot. Each row also
    // gets minus its token's embedding (scaled like the row), which lowers the logit of the
    // token just read: random models otherwise fall into repeating one token ("NNNN...").
    // (n_embd, n_vocab)
    w.add_tensor_f32("output.weight", s.type, {s.n_embd, s.n_vocab}, head_values(s, seed, embd));
    if (phi2 || phimoe || a == "qwen2vl") vec("output.bias", s.n_vocab, 0.0f, 0.5f);  // qwen2vl's is left unused
  }

  // The feed-forward after a recurrent mixer (qwen35, granitehybrid): experts, or a SwiGLU of n_ff.
  auto recurrent_ffn = [&](const std::string& p, float rs, bool moe_layer) {
    if (moe_layer) {
      write_experts(p, rs);
      return;
    }
    matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, 1.0f);
    matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
    matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, rs);
  };

  for (int l = s.mtp_only ? n_write : 0; l < n_write + s.n_nextn; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    // Residual branches of the layers the draft does not have are scaled down, and the
    // multi-token-prediction block's.
    const float rs = l >= n_write                                      ? 0.3f
                     : (s.n_full_layers >= 0 && l >= s.n_full_layers) ? s.deep_residual_scale
                                                                      : 1.0f;
    if (nemotron_h && s.layer_pattern[l] != 'M') {  // attention or an MLP, under attn_norm
      vec(p + "attn_norm.weight", s.n_embd, 1.0f, 0.3f);
      if (s.layer_pattern[l] == '*') {
        matrix(p + "attn_q.weight", s.n_embd, q_dim, 1.0f);
        matrix(p + "attn_k.weight", s.n_embd, kv_dim, 1.0f);
        matrix(p + "attn_v.weight", s.n_embd, kv_dim, 1.0f);
        matrix(p + "attn_output.weight", q_dim, s.n_embd, rs);
      } else if (moe) {  // nemotron_h_moe: ungated experts and shared expert
        const int64_t d = s.n_embd, E = s.n_expert;
        w.add_tensor_f32(p + "ffn_gate_inp.weight", DType::F32, {d, E},
                         random_values(seed, p + "ffn_gate_inp.weight", static_cast<size_t>(d * E), 1.0f / std::sqrt(float(d))));
        vec(p + "exp_probs_b.bias", E, 0.0f, 0.3f);
        stacked(p + "ffn_up_exps.weight", d, s.n_ff, E, 1.0f);
        stacked(p + "ffn_down_exps.weight", s.n_ff, d, E, rs);
        matrix(p + "ffn_up_shexp.weight", d, s.n_ff_shared, 1.0f);
        matrix(p + "ffn_down_shexp.weight", s.n_ff_shared, d, rs);
      } else {
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
        matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, rs);
      }
      continue;
    }
    const bool moe_layer = moe && l >= s.n_layer_dense_lead && (l + 1) % s.moe_layer_step == 0;
    if (!post_only && !olmo) {  // olmo2, exaone4 normalise the sublayers' outputs only; phi2, cohere, falcon have one norm
      vec(p + "attn_norm.weight", s.n_embd, 1.0f, cohere || falcon ? 0.3f : 0.0f);
      // seed_oss and glm4moe name the FFN's pre-norm post_attention_norm
      const bool post_named = a == "seed_oss" || a == "glm4moe" || a == "gpt-oss" || qwen35;
      if (!phi2 && !cohere && !falcon && !plamo && !mamba2 && !nemotron_h)
        vec(p + (post_named ? "post_attention_norm.weight" : dbrx ? "attn_output_norm.weight" : "ffn_norm.weight"),
            s.n_embd, 1.0f, dbrx ? 0.3f : 0.0f);
    }
    if (falcon && n_head_kv > 1) {  // Falcon-40B: the attention's own norm
      vec(p + "attn_norm_2.weight", s.n_embd, 1.0f, 0.3f);
      vec(p + "attn_norm_2.bias", s.n_embd, 0.0f, 0.1f);
    }
    if (layer_norm || phimoe) {  // biases with a spread, so a skipped one shows
      vec(p + "attn_norm.bias", s.n_embd, 0.0f, 0.1f);
      if (!phi2 && !falcon) vec(p + "ffn_norm.bias", s.n_embd, 0.0f, 0.1f);
    }
    const bool conv_layer = l < static_cast<int>(s.conv_layers.size()) && s.conv_layers[l] != 0;
    if (conv_layer) {
      // lfm2's gated short convolution: [B | C | x] = in_proj xn; y = C * conv(B * x); out_proj y.
      // The taps (F32, as the converter keeps them) have std 0.6: B * x has unit scale, the sum
      // of three taps about 1.
      matrix(p + "shortconv.in_proj.weight", s.n_embd, 3 * static_cast<int64_t>(s.n_embd), 1.0f);
      w.add_tensor_f32(p + "shortconv.conv.weight", DType::F32, {s.shortconv_l_cache, s.n_embd},
                       random_values(seed, p + "shortconv.conv.weight",
                                     static_cast<size_t>(s.shortconv_l_cache) * s.n_embd, 0.6f));
      matrix(p + "shortconv.out_proj.weight", s.n_embd, s.n_embd, rs);
      if (moe_layer) {  // lfm2moe past its leading dense layers
        write_experts(p, rs);
      } else {
        matrix(p + "ffn_gate.weight", s.n_embd, n_ff_dense, 1.0f);
        matrix(p + "ffn_up.weight", s.n_embd, n_ff_dense, 1.0f);
        matrix(p + "ffn_down.weight", n_ff_dense, s.n_embd, rs);
      }
      continue;
    }
    if (mamba2 || nemotron_h || (hybrid && l < static_cast<int>(s.recurrent_layers.size()) && s.recurrent_layers[l] != 0)) {
      // granitehybrid's Mamba-2 mixer: [z | xBC | dt] = ssm_in xn; the convolution's taps and bias,
      // the dt bias, A = -exp(A_log) (A_log in [-1, 0.5]), D and the grouped norm F32 as the
      // converter keeps them.
      const int64_t ng = s.ssm_n_group, nh = s.ssm_dt_rank, conv_dim = m2_inner + 2 * ng * s.ssm_d_state;
      matrix(p + "ssm_in.weight", s.n_embd, m2_inner + conv_dim + nh, 1.0f);
      w.add_tensor_f32(p + "ssm_conv1d.weight", DType::F32, {s.ssm_d_conv, conv_dim},
                       random_values(seed, p + "ssm_conv1d.weight", static_cast<size_t>(s.ssm_d_conv * conv_dim), 0.6f));
      vec(p + "ssm_conv1d.bias", conv_dim, 0.0f, 0.2f);
      vec(p + "ssm_dt.bias", nh, 0.5f, 0.5f);
      std::vector<float> a_log = random_values(seed, p + "ssm_a", static_cast<size_t>(nh), 0.75f);
      for (float& x : a_log) x = -std::exp(x - 0.25f);
      w.add_tensor_f32(p + "ssm_a", DType::F32, {1, nh}, a_log);
      w.add_tensor_f32(p + "ssm_d", DType::F32, {1, nh}, random_values(seed, p + "ssm_d", static_cast<size_t>(nh), 1.0f));
      w.add_tensor_f32(p + "ssm_norm.weight", DType::F32, {m2_inner / ng, ng}, [&] {
        auto v = random_values(seed, p + "ssm_norm.weight", static_cast<size_t>(m2_inner), 0.5f);
        for (float& x : v) x += 1.0f;
        return v;
      }());
      matrix(p + "ssm_out.weight", m2_inner, s.n_embd, rs);
      if (mamba2 || nemotron_h) continue;  // the mixer is the layer
      recurrent_ffn(p, rs, moe_layer);
      continue;
    }
    const int interval = s.full_attention_interval > 0 ? s.full_attention_interval : 4;
    const bool recurrent = qwen35 && l < n_write &&
                           (s.recurrent_layers.empty() ? (l + 1) % interval != 0 : s.recurrent_layers[l] != 0);
    if (recurrent) {
      // qwen35's gated DeltaNet: [q | k | v] and z from xn, alpha and beta per value head; the
      // convolution's taps and the gates F32 as the converter keeps them. ssm_a = -exp(A_log) with
      // A_log in [-1, 0.5] and dt_bias around 0.5 decay the state by exp(-0.1 .. -3) per token.
      const int64_t key_dim = static_cast<int64_t>(s.ssm_n_group) * s.ssm_d_state;
      const int64_t value_dim = static_cast<int64_t>(s.ssm_dt_rank) * s.ssm_d_state, conv_dim = 2 * key_dim + value_dim;
      if (s.ssm_in_legacy) {
        matrix(p + "ssm_in.weight", s.n_embd, conv_dim + value_dim, 1.0f);  // [q | k | v | z] per query/key head
      } else {
        matrix(p + "attn_qkv.weight", s.n_embd, conv_dim, 1.0f);
        matrix(p + "attn_gate.weight", s.n_embd, value_dim, 1.0f);
      }
      if (qwen3next) {
        matrix(p + "ssm_ba.weight", s.n_embd, 2 * static_cast<int64_t>(s.ssm_dt_rank), 1.0f);  // [beta | alpha] per q/k head
      } else {
        matrix(p + "ssm_alpha.weight", s.n_embd, s.ssm_dt_rank, 1.0f);
        matrix(p + "ssm_beta.weight", s.n_embd, s.ssm_dt_rank, 1.0f);
      }
      w.add_tensor_f32(p + "ssm_conv1d.weight", DType::F32, {s.ssm_d_conv, conv_dim},
                       random_values(seed, p + "ssm_conv1d.weight", static_cast<size_t>(s.ssm_d_conv * conv_dim), 0.6f));
      vec(p + "ssm_dt.bias", s.ssm_dt_rank, 0.5f, 0.5f);
      std::vector<float> a_log = random_values(seed, p + "ssm_a", static_cast<size_t>(s.ssm_dt_rank), 0.75f);
      for (float& x : a_log) x = -std::exp(x - 0.25f);
      w.add_tensor_f32(p + "ssm_a", DType::F32, {s.ssm_dt_rank}, a_log);
      vec(p + "ssm_norm.weight", s.ssm_d_state, 1.0f, 0.5f);
      matrix(p + "ssm_out.weight", value_dim, s.n_embd, rs);
      recurrent_ffn(p, rs, moe_layer);  // qwen35moe's experts
      continue;
    }
    if (gpt2 || neox || bloom || mpt || jais) {
      if (gpt2) {
        vec(p + "attn_norm.bias", s.n_embd, 0.0f, 0.0f);
        vec(p + "ffn_norm.bias", s.n_embd, 0.0f, 0.0f);
      }
      matrix(p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim, 1.0f);
      if (!mpt) {  // mpt-7b's no_bias
        vec(p + "attn_qkv.bias", q_dim + 2 * kv_dim, 0.0f, 0.1f);
        vec(p + "attn_output.bias", s.n_embd, 0.0f, 0.1f * rs);
      }
      if (jais) {
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, 1.0f);
        vec(p + "ffn_gate.bias", s.n_ff, 0.0f, 0.1f);
      }
      matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
      if (!mpt) {
        vec(p + "ffn_up.bias", s.n_ff, 0.0f, 0.1f);
        vec(p + "ffn_down.bias", s.n_embd, 0.0f, 0.1f * rs);
      }
    } else if (ds) {
      // Multi-head latent attention (norm weights around 1 with a spread, so a skipped norm shows).
      const int64_t rank = s.kv_lora_rank, nope = head_dim - rope_dims;
      if (s.q_lora_rank > 0) {
        matrix(p + "attn_q_a.weight", s.n_embd, s.q_lora_rank, 1.0f);
        vec(p + "attn_q_a_norm.weight", s.q_lora_rank, 1.0f, 0.5f);
        matrix(p + "attn_q_b.weight", s.q_lora_rank, q_dim, 1.0f);
      } else {
        matrix(p + "attn_q.weight", s.n_embd, q_dim, 1.0f);
      }
      matrix(p + "attn_kv_a_mqa.weight", s.n_embd, rank + rope_dims, 1.0f);
      vec(p + "attn_kv_a_norm.weight", rank, 1.0f, 0.5f);
      stacked(p + "attn_k_b.weight", nope, rank, s.n_head, 1.0f);
      stacked(p + "attn_v_b.weight", rank, s.v_head_dim, s.n_head, 1.0f);
      if (moe_layer) {
        write_experts(p, rs);
      } else {
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff_dense, 1.0f);
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff_dense, 1.0f);
        matrix(p + "ffn_down.weight", s.n_ff_dense, s.n_embd, rs);
      }
      matrix(p + "attn_output.weight", static_cast<int64_t>(s.n_head) * s.v_head_dim, s.n_embd, rs);
      continue;
    } else {
      if (fused_qkv || phi2) {
        matrix(p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim, 1.0f);
        if (phi2 || qwen1 || chatglm) vec(p + "attn_qkv.bias", q_dim + 2 * kv_dim, 0.0f, 0.1f);
      } else {
        matrix(p + "attn_q.weight", s.n_embd, qwen35 ? 2 * q_dim : q_dim, 1.0f);  // qwen35: [q_h | gate_h] per head
        matrix(p + "attn_k.weight", s.n_embd, kv_dim, 1.0f);
        matrix(p + "attn_v.weight", s.n_embd, kv_dim, 1.0f);
        if (a == "afmoe") matrix(p + "attn_gate.weight", s.n_embd, q_dim, 1.0f);  // its attention output gate
        if (a == "spark2_5") matrix(p + "attn_gate.weight", s.n_embd, s.n_head, 1.0f);  // a gate per head
      }
      if (qkv_bias) {
        vec(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
        vec(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
        vec(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
      }
      if (qk_norm) {  // weights around 1 with a spread, so a norm that is skipped shows
        vec(p + "attn_q_norm.weight", head_dim, 1.0f, 0.5f);
        vec(p + "attn_k_norm.weight", head_dim, 1.0f, 0.5f);
      }
      if (apertus) {  // head norms' biases, which llama.cpp's graph (and specmoe) leave unused
        vec(p + "attn_q_norm.bias", head_dim, 0.0f, 0.3f);
        vec(p + "attn_k_norm.bias", head_dim, 0.0f, 0.3f);
      }
      if (starcoder2 || phi2 || nemotron || gpt_oss || phimoe || codeshell)
        vec(p + "attn_output.bias", s.n_embd, 0.0f, 0.1f * rs);
      if (gpt_oss) vec(p + "attn_sinks.weight", s.n_head, 0.0f, 1.0f);  // sink logits of the scores' scale
      if (olmoe || a == "olmo2" || a == "minimax-m2") {  // over the whole projections
        vec(p + "attn_q_norm.weight", q_dim, 1.0f, 0.5f);
        vec(p + "attn_k_norm.weight", kv_dim, 1.0f, 0.5f);
      }
      if (post_norms || post_only) {  // gemma's files hold 1 + w (llama.cpp's converter adds the 1)
        vec(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.5f);
        vec(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.5f);
      }
      if (moe_layer) {
        write_experts(p, rs);
      } else if (ds_moe) {  // a leading dense layer, or one between ernie4_5-moe's MoE layers
        matrix(p + "ffn_gate.weight", s.n_embd, n_ff_dense, 1.0f);
        matrix(p + "ffn_up.weight", s.n_embd, n_ff_dense, 1.0f);
        matrix(p + "ffn_down.weight", n_ff_dense, s.n_embd, rs);
      } else if (phi3 || glm4 || chatglm) {
        matrix(p + "ffn_up.weight", s.n_embd, 2 * static_cast<int64_t>(s.n_ff), 1.0f);  // [gate | up]
      } else if (arcee || falcon || apertus) {  // ungated, no biases
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
      } else if (starcoder2 || phi2 || nemotron || codeshell) {  // gpt2's ungated MLP with biases
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
        vec(p + "ffn_up.bias", s.n_ff, 0.0f, 0.1f);
        vec(p + "ffn_down.bias", s.n_embd, 0.0f, 0.1f * rs);
      } else {
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, 1.0f);
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, 1.0f);
      }
    }
    matrix(p + "attn_output.weight", q_dim, s.n_embd, rs);
    if (!moe_layer && !ds_moe) matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, rs);
  }
  for (int l = n_write; l < n_write + s.n_nextn; ++l) {
    // The multi-token-prediction block's own tensors (its layer was written above): norms with a
    // spread, so a skipped one shows.
    const std::string p = fmt::format("blk.{}.nextn.", l);
    // eh_proj passes the token's normed embedding on (identity on that half, small noise on both):
    // with the layer's branches scaled down (below), the block's guess is near the head over the
    // token's own embedding, which a random model's next token often is, so drafts get accepted.
    {
      const int64_t d = s.n_embd;
      auto v = random_values(seed, p + "eh_proj.weight", static_cast<size_t>(2 * d * d), 0.2f / std::sqrt(float(2 * d)));
      for (int64_t j = 0; j < d; ++j) v[static_cast<size_t>(j * 2 * d + j)] += 1.0f;  // row j = output j
      w.add_tensor_f32(p + "eh_proj.weight", s.type, {2 * d, d}, v);
    }
    vec(p + "enorm.weight", s.n_embd, 1.0f, 0.5f);
    vec(p + "hnorm.weight", s.n_embd, 1.0f, 0.5f);
    vec(p + "shared_head_norm.weight", s.n_embd, 1.0f, 0.3f);
    if (s.mtp_own_head) {
      matrix(p + "embed_tokens.weight", s.n_embd, s.n_vocab, std::sqrt(float(s.n_embd)));
      matrix(p + "shared_head_head.weight", s.n_embd, s.n_vocab, 2.0f);
    }
  }
  w.write(path);
}

double synth_greedy_agreement(Model& target, Model& draft, const std::vector<std::string>& prompts, int n_tokens) {
  int64_t matches = 0, total = 0;
  ForwardOptions last_only;
  last_only.logits_all = false;
  for (const std::string& prompt : prompts) {
    std::vector<int32_t> ids = target.tokenizer().encode(prompt, true);
    KVCache tkv = target.new_cache(static_cast<int>(ids.size()) + n_tokens);
    KVCache dkv = draft.new_cache(static_cast<int>(ids.size()) + n_tokens);
    int32_t t = target.forward(ids, tkv, last_only).logits.argmax()[0];
    int32_t d = draft.forward(ids, dkv, last_only).logits.argmax()[0];
    for (int step = 0; step < n_tokens; ++step) {
      matches += d == t;
      ++total;
      if (step + 1 == n_tokens) break;
      const int32_t one[1] = {t};
      t = target.forward(one, tkv, last_only).logits.argmax()[0];
      d = draft.forward(one, dkv, last_only).logits.argmax()[0];
    }
  }
  return total ? static_cast<double>(matches) / static_cast<double>(total) : 0.0;
}

}  // namespace specmoe::core
