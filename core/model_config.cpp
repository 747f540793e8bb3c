// ModelConfig from GGUF metadata, using llama.cpp's key names (llama-arch.cpp LLM_KV_NAMES) and
// its per-architecture conventions (llama-model.cpp: llama_model_rope_type, build_moe_ffn's
// weight normalisation).
#include "core/model_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model_config_reader.h"

namespace specmoe::core {
namespace {

using detail::Reader;

// Limits well above any published model, so a corrupt header cannot make later code allocate
// absurd buffers (checked, never silent).
constexpr int kMaxLayers = 1024;
constexpr int kMaxEmbd = 65536;
constexpr int kMaxVocab = 1 << 22;
constexpr int kMaxHeads = 1024;
constexpr int kMaxHeadDim = 4096;
constexpr int kMaxFF = 1 << 20;
constexpr int kMaxCtx = 1 << 24;
constexpr int kMaxExperts = 1024;


// RoPE scaling as llama.cpp reads it (llama-model.cpp load_hparams, llama-context.cpp): the type
// (default linear), the factor (rope.scaling.factor, else the older rope.scale_linear; 0 = none),
// the original context of YaRN and the attn_factor that multiplies cos/sin. llama3 is accepted
// for llama files that give Llama 3.1's factors by keys (llama.cpp's converter writes the tensor
// rope_freqs.weight instead, which bind_weights reads for every llama file that has it).
void read_rope_scaling(const GGUFFile& file, const Reader& r, ModelConfig& c) {
  const std::string type_key = r.key("rope.scaling.type");
  const std::string type = file.get_string(type_key, "linear");
  float factor = r.get_float("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = r.get_float("rope.scale_linear", 0.0f);  // older files
  if (!std::isfinite(factor) || factor < 0.0f)
    throw_error(ErrorKind::Format, "{}: {} is {} (must be a positive number or 0)", file.path(),
                r.key("rope.scaling.factor"), factor);
  c.rope_scaling_factor = factor;
  c.rope_n_ctx_orig = r.get("rope.scaling.original_context_length", c.n_ctx_train);
  c.rope_attn_factor = r.get_float("rope.scaling.attn_factor", 1.0f);
  if (type == "none") {
    c.rope_scaling = RopeScaling::None;  // llama.cpp never scales then, whatever the factor says
  } else if (type == "linear" || type == "yarn") {
    c.rope_scaling = type == "yarn" ? RopeScaling::Yarn : (factor != 0.0f ? RopeScaling::Linear : RopeScaling::None);
    if (factor != 0.0f) c.rope_freq_scale = 1.0f / factor;  // llama.cpp treats factor 0 as none
  } else if (type == "llama3" && (c.arch == Arch::Llama || c.arch == Arch::Eagle3 || c.arch == Arch::Llama4)) {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_freq_factors = true;
    if (c.rope_scaling_factor == 0.0f) c.rope_scaling_factor = 8.0f;  // Meta's defaults (Llama 3.1)
    c.rope_n_ctx_orig = r.get("rope.scaling.original_context_length", 8192);
    c.llama3_low_freq_factor = r.get_float("rope.scaling.low_freq_factor", 1.0f);
    c.llama3_high_freq_factor = r.get_float("rope.scaling.high_freq_factor", 4.0f);
  } else {
    throw_error(ErrorKind::Unsupported, "{}: {} '{}' is unsupported (supported: none, linear, yarn{})", file.path(),
                type_key, type, c.arch == Arch::Llama ? ", llama3" : "");
  }
  // llama.cpp reads rope_freqs.weight for llama, llama4, granite, exaone and exaone4; its converter writes it for
// Llama 3.1+.
  const bool reads_freqs = c.arch == Arch::Llama || c.arch == Arch::Granite || c.arch == Arch::GraniteMoe ||
                           c.arch == Arch::MiniCpm || c.arch == Arch::HunyuanDense ||
                           c.arch == Arch::Exaone || c.arch == Arch::Exaone4 || c.arch == Arch::Mistral3 ||
                           c.arch == Arch::Arcee || c.arch == Arch::ExaoneMoe || c.arch == Arch::Eagle3 ||
                           c.arch == Arch::Apertus || c.arch == Arch::Nanbeige || c.arch == Arch::Llama4;
  if (reads_freqs && file.find_tensor("rope_freqs.weight")) c.rope_freq_factors = true;

  // YaRN (llama_context's defaults for every architecture that does not read its own keys, which
  // none of specmoe's do): ext_factor 1, beta_fast 32, beta_slow 1, and an
  // attn_factor of get_mscale(factor) / (1 + 0.1 ln factor) (the rope op multiplies by
  // 1 + 0.1 ln(1/freq_scale) again, see rope_at) times rope.scaling.attn_factor.
  float attn = 1.0f;
  if (c.rope_scaling == RopeScaling::Yarn) {
    c.yarn_ext_factor = 1.0f;
    const float f = 1.0f / c.rope_freq_scale;
    auto mscale = [f](float m) { return f <= 1.0f ? 1.0f : 0.1f * m * std::log(f) + 1.0f; };
    if (c.rope_yarn_log_mul != 0.0f) {
      // llama_context with rope.scaling.yarn_log_multiplier (mscale_all_dim): mscale 1 over
      // mscale_all_dim, except deepseek2, whose mscale equals mscale_all_dim (DeepSeek-V2's
      // config), so the ratio is 1 there; deepseek2 applies the magnitude to the scores instead.
      // llama.cpp tests the architecture, not the graph: mistral4 (deepseek2's graph) keeps mscale 1.
      const bool ds2 = c.arch == Arch::Deepseek2 && c.arch_name == "deepseek2";
      const float m = ds2 && c.rope_yarn_log_mul != 1.0f ? c.rope_yarn_log_mul : 1.0f;
      attn = mscale(m) / mscale(c.rope_yarn_log_mul);
    } else {
      attn = mscale(1.0f);
    }
    attn *= 1.0f / (1.0f + 0.1f * std::log(f));
  }
  c.yarn_attn_factor = attn * c.rope_attn_factor;
}

}  // namespace

LayerRope ModelConfig::rope_at(int layer) const {
  LayerRope r;
  const bool local = is_swa(layer);
  r.freq_base = local ? rope_freq_base_swa : rope_freq_base;
  r.freq_scale = local ? rope_freq_scale_swa : rope_freq_scale;
  r.ext_factor = yarn_ext_factor;
  r.attn_factor = yarn_attn_factor;
  if (local && swa_plain_rope) {  // OLMo 3's local layers: plain RoPE, whatever the file's scaling
    r.ext_factor = 0.0f;
    r.attn_factor = 1.0f;
  }
  if (r.ext_factor != 0.0f) {
    // ggml's rope_yarn multiplies the magnitude by 1 + 0.1 ln(1/freq_scale) whenever ext_factor is
    // set; the correction range is ggml_rope_yarn_corr_dims (pair indices whose wavelength turns
    // beta_fast and beta_slow times over the original context).
    r.attn_factor *= 1.0f + 0.1f * std::log(1.0f / r.freq_scale);
    const int n_dims = rope_dims_at(layer);
    auto corr_dim = [&](float n_rot) {
      return static_cast<float>(n_dims) *
             std::log(static_cast<float>(rope_n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
             (2.0f * std::log(r.freq_base));
    };
    r.corr_low = std::max(0.0f, std::floor(corr_dim(yarn_beta_fast)));
    r.corr_high = std::min(static_cast<float>(n_dims - 1), std::ceil(corr_dim(yarn_beta_slow)));
  }
  return r;
}

std::vector<float> ModelConfig::llama3_rope_factors() const {
  // Meta's Llama 3.1 scaling: wavelengths shorter than orig / high_freq_factor keep their
  // frequency, longer than orig / low_freq_factor are divided by the factor, and those between
  // are interpolated smoothly.
  const int half = rope_dims / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const double orig = rope_n_ctx_orig, factor = rope_scaling_factor;
  const double lo = llama3_low_freq_factor, hi = llama3_high_freq_factor;
  const double low_wavelen = orig / lo, high_wavelen = orig / hi;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(static_cast<double>(rope_freq_base), -2.0 * i / rope_dims);
    const double wavelen = 2.0 * M_PI / freq;
    double ff;
    if (wavelen < high_wavelen) {
      ff = 1.0;
    } else if (wavelen > low_wavelen) {
      ff = factor;
    } else {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      ff = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(ff);
  }
  return out;
}

ModelConfig ModelConfig::from_gguf(const GGUFFile& file) {
  ModelConfig c;
  c.arch_name = file.get_string("general.architecture");
  // llama.cpp's rope type per architecture (llama_model_rope_type: NORM = adjacent pairs, NEOX =
  // split halves) and the flags its graph for the architecture applies.
  struct ArchInfo {
    const char* name;
    Arch arch;
    RopeStyle rope;
  };
  static constexpr ArchInfo kArchs[] = {
      {"llama", Arch::Llama, RopeStyle::Adjacent},          {"qwen2", Arch::Qwen2, RopeStyle::SplitHalves},
      {"qwen2moe", Arch::Qwen2Moe, RopeStyle::SplitHalves}, {"gpt2", Arch::Gpt2, RopeStyle::None},
      {"qwen3", Arch::Qwen3, RopeStyle::SplitHalves},       {"gemma3", Arch::Gemma3, RopeStyle::SplitHalves},
      {"qwen3moe", Arch::Qwen3Moe, RopeStyle::SplitHalves}, {"olmoe", Arch::Olmoe, RopeStyle::SplitHalves},
      {"phi3", Arch::Phi3, RopeStyle::SplitHalves},         {"gemma2", Arch::Gemma2, RopeStyle::SplitHalves},
      {"deepseek2", Arch::Deepseek2, RopeStyle::Adjacent},   {"granite", Arch::Granite, RopeStyle::Adjacent},
      {"granitemoe", Arch::GraniteMoe, RopeStyle::Adjacent}, {"olmo2", Arch::Olmo2, RopeStyle::SplitHalves},
      {"smollm3", Arch::Smollm3, RopeStyle::Adjacent},       {"stablelm", Arch::StableLm, RopeStyle::SplitHalves},
      {"gemma", Arch::Gemma, RopeStyle::SplitHalves},        {"starcoder2", Arch::Starcoder2, RopeStyle::SplitHalves},
      {"gptneox", Arch::GptNeox, RopeStyle::SplitHalves},    {"phi2", Arch::Phi2, RopeStyle::SplitHalves},
      {"ernie4_5", Arch::Ernie45, RopeStyle::Adjacent},      {"exaone", Arch::Exaone, RopeStyle::SplitHalves},
      {"exaone4", Arch::Exaone4, RopeStyle::SplitHalves},    {"mistral3", Arch::Mistral3, RopeStyle::Adjacent},
      {"command-r", Arch::CommandR, RopeStyle::Adjacent},    {"cohere2", Arch::Cohere2, RopeStyle::Adjacent},
      {"internlm2", Arch::Internlm2, RopeStyle::Adjacent},   {"qwen2vl", Arch::Qwen2Vl, RopeStyle::SplitHalves},
      {"seed_oss", Arch::SeedOss, RopeStyle::SplitHalves},   {"minicpm", Arch::MiniCpm, RopeStyle::Adjacent},
      {"glm4", Arch::Glm4, RopeStyle::Adjacent},             {"hunyuan-dense", Arch::HunyuanDense, RopeStyle::SplitHalves},
      {"qwen3vl", Arch::Qwen3Vl, RopeStyle::SplitHalves},     {"qwen3vlmoe", Arch::Qwen3VlMoe, RopeStyle::SplitHalves},
      {"deepseek", Arch::Deepseek, RopeStyle::Adjacent},     {"dots1", Arch::Dots1, RopeStyle::SplitHalves},
      {"glm4moe", Arch::Glm4Moe, RopeStyle::SplitHalves},    {"ernie4_5-moe", Arch::Ernie45Moe, RopeStyle::Adjacent},
      {"bailingmoe2", Arch::BailingMoe2, RopeStyle::SplitHalves}, {"hunyuan-moe", Arch::HunyuanMoe, RopeStyle::SplitHalves},
      {"arcee", Arch::Arcee, RopeStyle::Adjacent},           {"nemotron", Arch::Nemotron, RopeStyle::SplitHalves},
      {"starcoder", Arch::Starcoder, RopeStyle::None},       {"gpt-oss", Arch::GptOss, RopeStyle::SplitHalves},
      {"minimax-m2", Arch::MinimaxM2, RopeStyle::SplitHalves}, {"bloom", Arch::Bloom, RopeStyle::None},
      {"mpt", Arch::Mpt, RopeStyle::None},                   {"refact", Arch::Refact, RopeStyle::None},
      {"jais", Arch::Jais, RopeStyle::None},                 {"falcon", Arch::Falcon, RopeStyle::SplitHalves},
      {"olmo", Arch::Olmo, RopeStyle::Adjacent},             {"baichuan", Arch::Baichuan, RopeStyle::Adjacent},
      {"dbrx", Arch::Dbrx, RopeStyle::SplitHalves},          {"phimoe", Arch::PhiMoe, RopeStyle::SplitHalves},
      {"qwen", Arch::Qwen, RopeStyle::SplitHalves},          {"xverse", Arch::Xverse, RopeStyle::Adjacent},
      {"orion", Arch::Orion, RopeStyle::SplitHalves},        {"codeshell", Arch::Codeshell, RopeStyle::SplitHalves},
      {"plamo", Arch::Plamo, RopeStyle::SplitHalves},        {"chatglm", Arch::ChatGlm, RopeStyle::Adjacent},
      {"exaone-moe", Arch::ExaoneMoe, RopeStyle::SplitHalves}, {"lfm2", Arch::Lfm2, RopeStyle::SplitHalves},
      {"lfm2moe", Arch::Lfm2Moe, RopeStyle::SplitHalves},
      {"smallthinker", Arch::SmallThinker, RopeStyle::SplitHalves},
      {"qwen35", Arch::Qwen35, RopeStyle::SplitHalves},      {"qwen35moe", Arch::Qwen35Moe, RopeStyle::SplitHalves},
      {"granitehybrid", Arch::GraniteHybrid, RopeStyle::Adjacent}, {"mamba2", Arch::Mamba2, RopeStyle::None},
      {"nemotron_h", Arch::NemotronH, RopeStyle::None},      {"eagle3", Arch::Eagle3, RopeStyle::Adjacent},
      {"dflash", Arch::DFlash, RopeStyle::SplitHalves},      {"maincoder", Arch::Maincoder, RopeStyle::Adjacent},
      {"apertus", Arch::Apertus, RopeStyle::SplitHalves},    {"qwen3next", Arch::Qwen3Next, RopeStyle::SplitHalves},
      {"mellum", Arch::Mellum, RopeStyle::SplitHalves},      {"bailingmoe", Arch::BailingMoe, RopeStyle::Adjacent},
      {"nanbeige", Arch::Nanbeige, RopeStyle::Adjacent},     {"llama4", Arch::Llama4, RopeStyle::Adjacent},
      // mistral4 (Mistral Small 4): llama.cpp's deepseek2 model, loader and graph under another
      // name; the one difference is llama_context's YaRN magnitude (read_rope_scaling).
      {"mistral4", Arch::Deepseek2, RopeStyle::Adjacent},
      // nemotron_h_moe (Nemotron 3 Nano): llama.cpp's nemotron_h loader and graph, whose MLP layers
      // hold experts when the file has them (read_experts).
      {"nemotron_h_moe", Arch::NemotronH, RopeStyle::None},
      {"afmoe", Arch::Afmoe, RopeStyle::SplitHalves},
      // jais2 (Jais 2): llama.cpp's nemotron graph (LayerNorms with biases, NEOX RoPE, the ungated
      // squared-ReLU MLP) with the attention output and MLP biases required and a head that may be
      // tied (src/models/jais2.cpp; read_weights checks the differences by name).
      {"jais2", Arch::Nemotron, RopeStyle::SplitHalves},
      {"maple", Arch::Maple, RopeStyle::SplitHalves},        {"spark2_5", Arch::Spark25, RopeStyle::SplitHalves},
  };
  const ArchInfo* info = nullptr;
  for (const ArchInfo& a : kArchs)
    if (c.arch_name == a.name) info = &a;
  if (!info)
    throw_error(ErrorKind::Unsupported,
                "{}: unsupported architecture '{}' (supported: llama, qwen2, qwen2moe, gpt2, qwen3, qwen3moe, gemma, "
                "gemma2, gemma3, olmoe, olmo2, phi2, phi3, deepseek2, granite, granitemoe, smollm3, stablelm, "
                "starcoder2, gptneox, ernie4_5, exaone, exaone4, mistral3, command-r, cohere2, internlm2, qwen2vl, "
                "seed_oss, minicpm, glm4, hunyuan-dense, qwen3vl, qwen3vlmoe, deepseek, dots1, glm4moe, ernie4_5-moe, "
                "bailingmoe2, hunyuan-moe, arcee, nemotron, starcoder, gpt-oss, minimax-m2, bloom, mpt, refact, jais, "
                "falcon, olmo, baichuan, dbrx, phimoe, qwen, xverse, orion, codeshell, plamo, chatglm, exaone-moe, lfm2, lfm2moe, smallthinker, qwen35, qwen35moe, granitehybrid, mamba2, nemotron_h, eagle3, dflash, maincoder, apertus, qwen3next, mellum, bailingmoe, nanbeige, llama4, mistral4, nemotron_h_moe, afmoe, jais2, maple, spark2_5)",
                file.path(), c.arch_name);
  c.arch = info->arch;
  c.rope_style = info->rope;
  c.qk_norm = c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe || c.arch == Arch::Gemma3 || c.arch == Arch::Exaone4 ||
              c.arch == Arch::HunyuanDense || c.arch == Arch::Qwen3Vl || c.arch == Arch::Qwen3VlMoe ||
              c.arch == Arch::Dots1 || c.arch == Arch::BailingMoe2 || c.arch == Arch::HunyuanMoe || c.arch == Arch::ExaoneMoe ||
              c.arch == Arch::Lfm2 || c.arch == Arch::Lfm2Moe || c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe ||
              c.arch == Arch::DFlash || c.arch == Arch::Maincoder || c.arch == Arch::Apertus ||
              c.arch == Arch::Qwen3Next || c.arch == Arch::Mellum || c.arch == Arch::Afmoe ||
              c.arch == Arch::Maple;
  // glm4moe: per-head QK-norm where the file has it (GLM-4.5 355B; llama.cpp binds it optionally).
  if (c.arch == Arch::Glm4Moe) c.qk_norm = file.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.qk_norm_after_rope = c.arch == Arch::HunyuanDense || c.arch == Arch::HunyuanMoe || c.arch == Arch::Maincoder;
  c.qk_norm_full = c.arch == Arch::Olmoe || c.arch == Arch::Olmo2 || c.arch == Arch::MinimaxM2;
  c.post_norms = c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3 || c.arch == Arch::Olmo2 || c.arch == Arch::Exaone4 ||
                 c.arch == Arch::Glm4 || c.arch == Arch::Afmoe;
  c.pre_norms = c.arch != Arch::Olmo2 && c.arch != Arch::Exaone4;
  const bool cohere = c.arch == Arch::CommandR || c.arch == Arch::Cohere2;
  c.position_embd = c.arch == Arch::Mpt && file.find_tensor("position_embd.weight") != nullptr;
  c.layer_norm = c.learned_positions() || c.arch == Arch::Bloom || c.arch == Arch::Mpt || c.arch == Arch::Jais ||
                 c.arch == Arch::Falcon || c.arch == Arch::Olmo || c.arch == Arch::Dbrx || c.arch == Arch::Orion ||
                 c.arch == Arch::Codeshell || c.arch == Arch::StableLm || c.arch == Arch::Starcoder2 ||
                 c.arch == Arch::GptNeox || c.arch == Arch::Phi2 || c.arch == Arch::Nemotron || cohere;
  c.parallel_residual = c.arch == Arch::Phi2 || c.arch == Arch::Falcon || c.arch == Arch::Plamo ||
                        cohere;  // gptneox: its key, read below
  if (c.arch == Arch::Gemma || c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3 || c.arch == Arch::Spark25)
    c.ffn_act = FfnActivation::GeluTanh;
  if (c.arch == Arch::Arcee || c.arch == Arch::Nemotron || c.arch == Arch::NemotronH)
    c.ffn_act = FfnActivation::ReluSqr;  // ungated
  if (c.arch == Arch::Apertus) c.ffn_act = FfnActivation::XIelu;  // ungated
  if (c.arch == Arch::Smollm3) c.no_rope_step = 4;  // llama.cpp's n_no_rope_layer_step for it
  c.ffn_gate_up_fused = c.arch == Arch::Phi3 || c.arch == Arch::Glm4 || c.arch == Arch::ChatGlm;
  c.name = file.get_string("general.name", "");
  const Reader r{file, c.arch_name + "."};

  c.n_ctx_train = r.get("context_length", std::nullopt);
  c.n_embd = r.get("embedding_length", std::nullopt);
  c.n_layer = r.get("block_count", std::nullopt);
  // Multi-token-prediction layers (GLM's NextN) follow the model's own: block_count counts them,
  // the forward runs the first block_count - nextn_predict_layers (llama.cpp's n_layer()).
  const int n_nextn = r.get("nextn_predict_layers", 0);
  if (n_nextn != 0 && (n_nextn < 0 || n_nextn >= c.n_layer))
    throw_error(ErrorKind::Format, "{}: {} is {} for {} blocks", file.path(), r.key("nextn_predict_layers"), n_nextn,
                c.n_layer);
  c.n_layer -= n_nextn;
  c.n_nextn = n_nextn;
  c.mtp_only = n_nextn > 0 && file.find_tensor("blk.0.attn_norm.weight") == nullptr;
  // Checked now, not only in validate(): the architecture readers below size per-layer arrays
  // by it (a block_count of 2^31 - 1 made gemma's sliding-window flags a 2 GiB allocation; found
  // by fuzz_model).
  if (c.n_layer < 1 || c.n_layer > kMaxLayers)
    throw_error(ErrorKind::Format, "{}: n_layer is {} (must be 1 to {}): metadata key '{}'", file.path(), c.n_layer,
                kMaxLayers, r.key("block_count"));
  if (c.arch == Arch::Nanbeige) {
    // nanbeige (Nanbeige 4.2): the blocks run num_loops times (llama.cpp's llama_model_nanbeige),
    // sharing their weights; every pass but the last ends in output_norm unless
    // skip_loop_final_norm says otherwise.
    const int loops = r.get("num_loops", 1);
    if (loops < 1 || static_cast<int64_t>(loops) * c.n_layer > kMaxLayers)
      throw_error(ErrorKind::Format, "{}: {} is {} for {} blocks (at most {} layers in all)", file.path(),
                  r.key("num_loops"), loops, c.n_layer, kMaxLayers);
    c.loop_final_norm = !file.get_bool(r.key("skip_loop_final_norm"), false);
    if (loops > 1) c.n_layer_phys = c.n_layer, c.n_layer *= loops;
  }
  c.n_ff = c.arch == Arch::NemotronH ? 0 : r.get("feed_forward_length", 0);  // nemotron_h: per layer, below
  if (c.arch == Arch::Qwen) {
    // Qwen (1): feed_forward_length is the MLP's two projections together; each is half of it.
    if (c.n_ff % 2 != 0)
      throw_error(ErrorKind::Format, "{}: {} is {}, not even (qwen's MLP is half of it)", file.path(),
                  r.key("feed_forward_length"), c.n_ff);
    c.n_ff /= 2;
  }
  c.n_head = r.get("attention.head_count", c.arch == Arch::Mamba2 ? std::optional<int>(0) : std::nullopt);
  if (c.arch == Arch::Mamba2) {
    // Mamba-2 only: no attention (its converter writes head_count 0); one placeholder head, never
    // used, keeps the attention sizes well formed.
    detail::read_mamba2(r, c);
  } else if (c.arch == Arch::Lfm2 || c.arch == Arch::Lfm2Moe)
    detail::read_lfm2_layers(r, c);  // head_count_kv per layer, 0 for the convolution layers
  else if (c.arch == Arch::GraniteHybrid)
    detail::read_granite_hybrid(r, c);  // head_count_kv per layer, 0 for the Mamba-2 layers
  else if (c.arch == Arch::NemotronH)
    detail::read_nemotron_h(r, c);  // head_count_kv and feed_forward_length per layer
  else
    c.n_head_kv = r.get("attention.head_count_kv", c.n_head);
  if (c.n_head <= 0) throw_error(ErrorKind::Format, "{}: {} is {}", file.path(), r.key("attention.head_count"), c.n_head);
  if (c.arch == Arch::Deepseek2) {
    detail::read_mla(r, c);  // head_dim from key_length_mla; key_length is the latent's width
  } else if (file.has(r.key("attention.key_length"))) {
    c.head_dim = r.get("attention.key_length", std::nullopt);
    const int v_len = r.get("attention.value_length", c.head_dim);
    if (v_len != c.head_dim)
      throw_error(ErrorKind::Unsupported, "{}: {} {} differs from {} {}; specmoe needs equal key and value heads",
                  file.path(), r.key("attention.value_length"), v_len, r.key("attention.key_length"), c.head_dim);
  } else {
    if (c.n_embd % c.n_head != 0)
      throw_error(ErrorKind::Format, "{}: embedding_length {} is not a multiple of head_count {}", file.path(), c.n_embd,
                  c.n_head);
    c.head_dim = c.n_embd / c.n_head;
  }

  // mpt's and olmo's clamp of q, k and v; dbrx's, whose key llama.cpp requires.
  if (c.arch == Arch::Mpt || c.arch == Arch::Olmo) c.clamp_kqv = r.get_float("attention.clamp_kqv", 0.0f);
  if (c.arch == Arch::Dbrx) c.clamp_kqv = r.get_float("attention.clamp_kqv", std::nullopt);
  c.rms_norm_bias = c.arch == Arch::PhiMoe;
  if (!(c.clamp_kqv >= 0.0f))
    throw_error(ErrorKind::Format, "{}: {} is {}", file.path(), r.key("attention.clamp_kqv"), c.clamp_kqv);
  if (c.rope_free()) {
    c.rope_style = RopeStyle::None;  // baichuan past 32 layers
    c.norm_eps = c.layer_norm ? r.get_float("attention.layer_norm_epsilon", 1e-5f)
                              : r.get_float("attention.layer_norm_rms_epsilon", 1e-5f);
    if (c.arch == Arch::NemotronH)  // llama.cpp requires layer_norm_epsilon, the RMS one defaults to it
      c.norm_eps = r.get_float("attention.layer_norm_rms_epsilon", r.get_float("attention.layer_norm_epsilon", std::nullopt));
    c.rope_dims = 0;
    // ALiBi as llama.cpp's loaders set it (src/models/{bloom,refact,baichuan,mpt,jais}.cpp).
    if (c.arch == Arch::Bloom || c.arch == Arch::Refact || (c.arch == Arch::Baichuan && c.n_layer == 40))
      c.alibi_max_bias = 8.0f;
    if (c.arch == Arch::Mpt || c.arch == Arch::Jais) c.alibi_max_bias = r.get_float("attention.max_alibi_bias", 0.0f);
    if (!(c.alibi_max_bias >= 0.0f && c.alibi_max_bias < 1e4f))
      throw_error(ErrorKind::Format, "{}: {} is {}", file.path(), r.key("attention.max_alibi_bias"), c.alibi_max_bias);
    c.embd_norm = c.arch == Arch::Bloom;
    if (c.arch == Arch::Jais) c.attn_scale = 1.0f / static_cast<float>(c.head_dim);  // jais scales by 1/d, not 1/sqrt(d)
  } else {
    c.norm_eps = c.layer_norm ? r.get_float("attention.layer_norm_epsilon", 1e-5f)
                              : r.get_float("attention.layer_norm_rms_epsilon", 1e-5f);
    c.rope_dims = r.get("rope.dimension_count", c.head_dim);
    // bailingmoe (Ling): llama.cpp sizes its heads by rope.dimension_count (n_rot), not n_embd / n_head.
    if (c.arch == Arch::BailingMoe && !file.has(r.key("attention.key_length"))) c.head_dim = c.rope_dims;
    if (c.arch == Arch::Plamo) c.rope_dims = c.head_dim;  // llama.cpp's plamo graph rotates whole heads
    c.rope_freq_base = r.get_float("rope.freq_base", 10000.0f);
    if (c.arch == Arch::Deepseek2 && file.has(r.key("rope.scaling.yarn_log_multiplier")))
      c.rope_yarn_log_mul = r.get_float("rope.scaling.yarn_log_multiplier", 0.0f) / 0.1f;  // the converter's 0.1 x
    if (c.arch == Arch::Mistral3) {  // llama_model_mistral3: the YaRN keys as they are
      c.rope_yarn_log_mul = r.get_float("rope.scaling.yarn_log_multiplier", 0.0f);
      c.yarn_beta_fast = r.get_float("rope.scaling.yarn_beta_fast", c.yarn_beta_fast);
      c.yarn_beta_slow = r.get_float("rope.scaling.yarn_beta_slow", c.yarn_beta_slow);
    }
    read_rope_scaling(file, r, c);
    if (c.arch == Arch::Mistral3) {
      c.attn_temp_scale = r.get_float("attention.temperature_scale", 0.0f);
      c.attn_temp_floor = c.rope_n_ctx_orig > 0 ? c.rope_n_ctx_orig : c.n_ctx_train;
      if (c.attn_temp_scale != 0.0f && c.attn_temp_floor <= 0)
        throw_error(ErrorKind::Format, "{}: {} is set but the original context is 0", file.path(),
                    r.key("attention.temperature_scale"));
    }
  }
  if (c.arch == Arch::Deepseek2) {
    // Mistral Large 3 (deepseek2): Llama 4's attention temperature by attention.temperature_scale
    // over attention.temperature_length positions, on every layer's queries (offset 0); llama.cpp
    // asserts on a scale without a length.
    c.attn_temp_scale = r.get_float("attention.temperature_scale", 0.0f);
    if (c.attn_temp_scale != 0.0f) {
      c.attn_temp_floor = r.get("attention.temperature_length", 0);
      if (c.attn_temp_floor <= 0 || !std::isfinite(c.attn_temp_scale))
        throw_error(ErrorKind::Format, "{}: {} is {} but {} is {} (must be a positive length)", file.path(),
                    r.key("attention.temperature_scale"), c.attn_temp_scale, r.key("attention.temperature_length"),
                    c.attn_temp_floor);
    }
  }
  if (c.is_mla()) {
    // llama.cpp's deepseek2 graph: kq_scale = mscale^2 / sqrt(key_length_mla) with mscale =
    // attn_factor (1 + 0.1 ln(1/freq_scale)) (1 + 0.1 yarn_log_mul ln(1/freq_scale)): YaRN's
    // magnitude goes into the scores, and the file's rope.scaling.attn_factor twice.
    const float ln = std::log(1.0f / c.rope_freq_scale);
    const float mscale = c.yarn_attn_factor * (1.0f + 0.1f * ln) * (1.0f + 0.1f * c.rope_yarn_log_mul * ln);
    c.attn_scale = mscale * mscale / std::sqrt(static_cast<float>(c.head_dim));
  }
  if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) detail::read_gemma(r, c);
  if (c.arch == Arch::Gemma) c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  if (c.arch == Arch::GptNeox) {  // required, as llama.cpp reads it
    const std::string k = r.key("use_parallel_residual");
    if (!file.has(k)) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", file.path(), k);
    c.parallel_residual = file.get_bool(k, false);
  }
  if (c.arch == Arch::Granite || c.arch == Arch::GraniteMoe || c.arch == Arch::MiniCpm || c.arch == Arch::GraniteHybrid)
    detail::read_granite(r, c);
  if (c.arch == Arch::Olmo2 || c.arch == Arch::Exaone4 || c.arch == Arch::Mellum) detail::read_olmo3_exaone4_windows(r, c);
  if (cohere) detail::read_cohere(r, c);
  if (c.arch == Arch::Apertus) {
    // xIELU's scalars (global keys, as llama.cpp's converter writes them): one value for every layer
    // or one per layer; mapped as ggml_xielu does (softplus(x) = log(1 + e^x), x past 20 as it is).
    // Apertus's LongRoPE form (rope_factors_long) is not supported.
    if (file.find_tensor("rope_factors_long.weight") != nullptr)
      throw_error(ErrorKind::Unsupported, "{}: tensor 'rope_factors_long.weight': apertus with LongRoPE factors is not supported",
                  file.path());
    auto per_layer = [&](const char* key) { return detail::read_per_layer_floats(r, key, c.n_layer); };
    const auto an = per_layer("xielu.alpha_n"), ap = per_layer("xielu.alpha_p"), be = per_layer("xielu.beta"),
               ep = per_layer("xielu.eps");
    auto softplus = [](float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); };
    c.xielu.resize(static_cast<size_t>(c.n_layer));
    for (size_t l = 0; l < c.xielu.size(); ++l) {
      const float beta = static_cast<float>(be[l]);
      c.xielu[l] = {beta + softplus(static_cast<float>(an[l])), softplus(static_cast<float>(ap[l])), beta,
                    static_cast<float>(ep[l])};
    }
  }
  if (c.arch == Arch::Llama4) detail::read_llama4(r, c);
  if (c.arch == Arch::Afmoe) detail::read_afmoe(r, c);
  if (c.arch == Arch::Maple) detail::read_maple(r, c);
  if (c.arch == Arch::Spark25) detail::read_spark25(r, c);
  if (c.arch == Arch::GptOss) detail::read_gpt_oss(r, c);
  if (c.arch == Arch::ExaoneMoe) detail::read_exaone_moe(r, c);
  if (c.arch == Arch::Lfm2) detail::read_lfm2_windows(r, c);
  if (c.arch == Arch::SmallThinker) detail::read_smallthinker(r, c);
  if (c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next) detail::read_qwen35(r, c);
  if (c.arch == Arch::Eagle3) detail::read_eagle3(r, c);
  if (c.arch == Arch::DFlash) detail::read_dflash(r, c);
  if (c.arch == Arch::HunyuanDense) {
    // Hunyuan's NTK-aware alpha (rope.scaling.alpha): base = freq_base * alpha^(d / (d - 2)) over
    // the head width d, as llama.cpp's hunyuan loader sets it.
    const float alpha = r.get_float("rope.scaling.alpha", 0.0f);
    if (alpha > 0.0f) {
      const float d = static_cast<float>(c.head_dim);
      c.rope_freq_base *= std::pow(alpha, d / (d - 2.0f));
    }
  }
  if (c.arch == Arch::Qwen2Vl || c.arch == Arch::Qwen3Vl || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::Qwen35 ||
      c.arch == Arch::Qwen35Moe || c.arch == Arch::Glm4 ||
      c.arch == Arch::Glm4Moe || c.arch == Arch::HunyuanDense)
    detail::read_mrope(r, c);
  if (c.arch == Arch::Phi3 || c.arch == Arch::PhiMoe) {
    // llama.cpp reads phi3's attention.sliding_window but disables SWA (llama-model.cpp, phi3);
    // phimoe (phi3's graph) reads no window.
    c.rope_long_short_factors = file.find_tensor("rope_factors_long.weight") != nullptr;
  }

  // Vocabulary: the tokenizer's token list, else <arch>.vocab_size, else the embedding's rows.
  if (file.has("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(std::min<size_t>(file.get_string_array("tokenizer.ggml.tokens").size(), INT_MAX));
  } else if (file.has(r.key("vocab_size"))) {
    c.n_vocab = r.get("vocab_size", std::nullopt);
  } else if (const GGUFTensorInfo* emb = file.find_tensor("token_embd.weight"); emb && emb->ne.size() >= 2) {
    c.n_vocab = static_cast<int>(std::min<int64_t>(emb->ne[1], INT_MAX));
  } else {
    throw_error(ErrorKind::Format, "{}: cannot tell the vocabulary size (no tokenizer.ggml.tokens, {} or token_embd.weight)",
                file.path(), r.key("vocab_size"));
  }
  // gemma, gemma2, command-r and cohere2 always read their head from token_embd (llama.cpp binds no
  // output.weight for them).
  c.tied_output = c.arch == Arch::Gemma || c.arch == Arch::Gemma2 || cohere || file.find_tensor("output.weight") == nullptr;
  // An EAGLE-3 head without output.weight reads its target's head (Model::bind_target), not its embedding.
  if (c.reads_target_features()) {
    c.tied_output = false;
    if (c.n_draft_vocab == 0) c.n_draft_vocab = c.n_vocab;
  }
  if (c.is_dflash()) {
    const int64_t mask = file.has("tokenizer.ggml.mask_token_id") ? file.get_int("tokenizer.ggml.mask_token_id") : -1;
    if (mask < 0 || mask >= c.n_vocab)
      throw_error(ErrorKind::Format, "{}: a DFlash draft needs tokenizer.ggml.mask_token_id in [0, {}) (the token its "
                  "block is filled with){}", file.path(), c.n_vocab,
                  mask < 0 ? ", and the file has none" : fmt::format(", and the file says {}", mask));
    c.mask_token_id = static_cast<int>(mask);
  }

  detail::read_experts(r, c);

  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", file.path(), e.what()));
  }
  return c;
}

void ModelConfig::validate() const {
  auto check_range = [](const char* what, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) throw_error(ErrorKind::Format, "model config: {} is {} (must be {} to {})", what, v, lo, hi);
  };
  check_range("n_vocab", n_vocab, 1, kMaxVocab);
  check_range("n_ctx_train", n_ctx_train, 1, kMaxCtx);
  check_range("n_embd", n_embd, 1, kMaxEmbd);
  check_range("n_layer", n_layer, 1, kMaxLayers);
  check_range("n_head", n_head, 1, kMaxHeads);
  check_range("n_head_kv", n_head_kv, 1, kMaxHeads);
  check_range("head_dim", head_dim, 1, kMaxHeadDim);
  if (n_head % n_head_kv != 0)
    throw_error(ErrorKind::Format, "model config: n_head {} is not a multiple of n_head_kv {}", n_head, n_head_kv);
  check_range("n_expert", n_expert, 0, kMaxExperts);
  if (n_expert > 0) {
    check_range("n_expert_used", n_expert_used, 1, n_expert);
    check_range("n_ff_expert", n_ff_expert, 1, kMaxFF);
    check_range("n_ff_shared_expert", n_ff_shared_expert, 0, kMaxFF);
    check_range("n_ff", n_ff, 0, kMaxFF);  // MoE layers may have no dense FFN
    if (expert_gating != ExpertGating::Softmax && expert_gating != ExpertGating::Sigmoid)
      throw_error(ErrorKind::Format, "model config: expert_gating {} is not softmax (1) or sigmoid (2)",
                  static_cast<int>(expert_gating));
    if (!(expert_weights_scale > 0.0f) || !std::isfinite(expert_weights_scale))
      throw_error(ErrorKind::Format, "model config: expert_weights_scale {} is not a positive number",
                  expert_weights_scale);
    check_range("n_expert_group", n_expert_group, 1, n_expert);
    if (n_expert % n_expert_group != 0)
      throw_error(ErrorKind::Format, "model config: n_expert_group {} does not divide n_expert {}", n_expert_group,
                  n_expert);
    check_range("n_expert_group_used", n_expert_group_used, 1, n_expert_group);
    // Group-limited routing keeps n_expert_group_used groups: k must fit in them.
    check_range("n_expert_used", n_expert_used, 1, n_expert_group_used * (n_expert / n_expert_group));
    check_range("n_layer_dense_lead", n_layer_dense_lead, 0, n_layer);
    check_range("n_moe_layer_step", n_moe_layer_step, 1, n_layer);
    check_range("n_expert_shared", n_expert_shared, 0, kMaxExperts);
    if (n_layer_dense_lead > 0) check_range("n_ff", n_ff, 1, kMaxFF);  // the leading dense layers
  } else {
    if (n_expert_used != 0)
      throw_error(ErrorKind::Format, "model config: n_expert_used is {} but the model has no experts", n_expert_used);
    check_range("n_ff", n_ff, any_ffn() ? 1 : 0, kMaxFF);
  }
  if (rope_style != RopeStyle::None) {
    check_range("rope_dims", rope_dims, 2, head_dim);
    if (rope_dims % 2 != 0) throw_error(ErrorKind::Format, "model config: rope_dims {} is odd", rope_dims);
    if (rope_dims_swa != 0) {
      check_range("rope_dims_swa", rope_dims_swa, 2, head_dim);
      if (rope_dims_swa % 2 != 0) throw_error(ErrorKind::Format, "model config: rope_dims_swa {} is odd", rope_dims_swa);
    }
    if (!(rope_freq_base > 0.0f) || !std::isfinite(rope_freq_base))
      throw_error(ErrorKind::Format, "model config: rope_freq_base {} is not a positive number", rope_freq_base);
    if (!(rope_freq_scale > 0.0f) || !std::isfinite(rope_freq_scale))
      throw_error(ErrorKind::Format, "model config: rope_freq_scale {} is not a positive number", rope_freq_scale);
  }
  if (is_mla()) {
    check_range("kv_lora_rank", kv_lora_rank, 1, kMaxHeadDim);
    check_range("q_lora_rank", q_lora_rank, 0, kMaxEmbd);
    check_range("mla_v_head_dim", mla_v_head_dim, 1, kMaxHeadDim);
    if (rope_dims >= head_dim)
      throw_error(ErrorKind::Format, "model config: MLA rope dims {} leave no non-RoPE part of the {}-wide key head",
                  rope_dims, head_dim);
    if (n_head_kv != 1)
      throw_error(ErrorKind::Format, "model config: MLA has one latent KV head (head_count_kv 1), not {}", n_head_kv);
  }
  if (!(attn_logit_softcap >= 0.0f) || !std::isfinite(attn_logit_softcap))
    throw_error(ErrorKind::Format, "model config: attn_logit_softcap {} is not 0 or a positive number",
                attn_logit_softcap);
  if (!(norm_eps > 0.0f) || !(norm_eps < 1.0f))
    throw_error(ErrorKind::Format, "model config: norm_eps {} is not in (0, 1)", norm_eps);
  auto check_positive = [](const char* what, float v) {
    if (!(v > 0.0f) || !std::isfinite(v))
      throw_error(ErrorKind::Format, "model config: {} {} is not a positive number", what, v);
  };
  if (!(attn_scale >= 0.0f) || !std::isfinite(attn_scale))
    throw_error(ErrorKind::Format, "model config: attn_scale {} is not 0 (default) or a positive number", attn_scale);
  check_positive("embd_scale", embd_scale);
  check_positive("residual_scale", residual_scale);
  check_positive("logit_scale", logit_scale);
  if (!std::isfinite(logit_mult)) throw_error(ErrorKind::Format, "model config: logit multiplier {} is not finite", logit_mult);
  check_range("no_rope_step", no_rope_step, 0, kMaxLayers);
  check_range("no_rope_step_first", no_rope_step_first, 0, kMaxLayers);
  if (!(final_logit_softcap >= 0.0f) || !std::isfinite(final_logit_softcap))
    throw_error(ErrorKind::Format, "model config: final_logit_softcap {} is not 0 or a positive number",
                final_logit_softcap);
  if (!conv_layers.empty()) {
    if (conv_layers.size() != static_cast<size_t>(n_layer))
      throw_error(ErrorKind::Format, "model config: {} short-convolution flags for {} layers", conv_layers.size(), n_layer);
    if (has_conv_layers()) check_range("shortconv_l_cache", shortconv_l_cache, 2, kMaxShortConvTaps);
  }
  if (!recurrent_layers.empty()) {
    if (recurrent_layers.size() != static_cast<size_t>(n_layer))
      throw_error(ErrorKind::Format, "model config: {} recurrent-layer flags for {} layers", recurrent_layers.size(),
                  n_layer);
    if (n_recurrent_layers() > 0) {
      check_range("ssm_d_conv", ssm_d_conv, 1, kMaxShortConvTaps);
      check_range("ssm_d_state", ssm_d_state, 1, 1024);
      check_range("ssm_n_group", ssm_n_group, 1, 1024);
      check_range("ssm_dt_rank", ssm_dt_rank, 1, 1024);
      check_range("ssm_d_inner", ssm_d_inner, 1, 1 << 20);
      if (ssm_dt_rank % ssm_n_group != 0)
        throw_error(ErrorKind::Format, "model config: {} {}heads (ssm.time_step_rank) are not a multiple of {} {} "
                    "(ssm.group_count)", ssm_dt_rank, recurrent_mixer == RecurrentMixer::Mamba2 ? "" : "value ",
                    ssm_n_group, recurrent_mixer == RecurrentMixer::Mamba2 ? "groups" : "key heads");
      if (recurrent_mixer == RecurrentMixer::Mamba2) {
        if (ssm_d_inner % ssm_dt_rank != 0)
          throw_error(ErrorKind::Format, "model config: ssm.inner_size {} is not a multiple of {} heads "
                      "(ssm.time_step_rank)", ssm_d_inner, ssm_dt_rank);
      } else if (static_cast<int64_t>(ssm_d_inner) != static_cast<int64_t>(ssm_dt_rank) * ssm_d_state)
        throw_error(ErrorKind::Unsupported, "model config: ssm.inner_size {} is not {} value heads x state size {} "
                    "(value heads as wide as key heads)", ssm_d_inner, ssm_dt_rank, ssm_d_state);
    }
  }
  check_range("n_swa", n_swa, 0, kMaxCtx);
  if (n_swa > 0) {
    if (swa_layers.size() != static_cast<size_t>(n_layer))
      throw_error(ErrorKind::Format, "model config: {} sliding-window layer flags for {} layers", swa_layers.size(),
                  n_layer);
    check_positive("rope_freq_base_swa", rope_freq_base_swa);
    check_positive("rope_freq_scale_swa", rope_freq_scale_swa);
  }
  if (rope_style != RopeStyle::None) {
    check_positive("rope attn_factor", yarn_attn_factor);
    if (!std::isfinite(yarn_ext_factor))
      throw_error(ErrorKind::Format, "model config: yarn ext_factor {} is not finite", yarn_ext_factor);
    if (yarn_ext_factor != 0.0f) {
      check_range("rope_n_ctx_orig", rope_n_ctx_orig, 1, kMaxCtx);
      check_positive("yarn_beta_fast", yarn_beta_fast);
      check_positive("yarn_beta_slow", yarn_beta_slow);
    }
    if (rope_scaling == RopeScaling::Llama3) {
      check_range("rope_n_ctx_orig", rope_n_ctx_orig, 1, kMaxCtx);
      check_positive("rope scaling factor", rope_scaling_factor);
      check_positive("llama3 low_freq_factor", llama3_low_freq_factor);
      check_positive("llama3 high_freq_factor", llama3_high_freq_factor);
      if (!(llama3_high_freq_factor > llama3_low_freq_factor))
        throw_error(ErrorKind::Format, "model config: llama3 high_freq_factor {} is not above low_freq_factor {}",
                    llama3_high_freq_factor, llama3_low_freq_factor);
    }
    // What each layer's rope op gets: the factors above can each be finite while their product
    // (YaRN's magnitude 1 + 0.1 ln(1/freq_scale) times attn_factor) or the correction range
    // overflows, and a model that loads must run.
    for (int l = 0; l < n_layer; ++l) {
      const LayerRope r = rope_at(l);
      if (!(r.attn_factor > 0.0f) || !std::isfinite(r.attn_factor))
        throw_error(ErrorKind::Format,
                    "model config: layer {}'s rope attn_factor {} (YaRN's magnitude included) is not a positive "
                    "finite number",
                    l, r.attn_factor);
      if (!std::isfinite(r.corr_low) || !std::isfinite(r.corr_high))
        throw_error(ErrorKind::Format, "model config: layer {}'s YaRN correction range [{}, {}] is not finite", l,
                    r.corr_low, r.corr_high);
    }
  }
}

}  // namespace specmoe::core
