// The GGUF metadata reader ModelConfig::from_gguf and the per-architecture readers
// (core/model_config_archs.cpp) share: `<arch>.` keys with llama.cpp's defaults, errors naming the
// file and key. Internal to core/.
#pragma once
#include <climits>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model_config.h"

namespace specmoe::core::detail {

struct Reader {
  const GGUFFile& f;
  std::string prefix;  // "<arch>."

  std::string key(std::string_view suffix) const { return prefix + std::string(suffix); }

  // An int-sized value. A per-layer array (some converters write head_count_kv per layer) is
  // accepted when all layers agree, since specmoe models a uniform stack.
  int get(std::string_view suffix, std::optional<int> def) const {
    const std::string k = key(suffix);
    const GGUFValue* v = f.find(k);
    if (!v) {
      if (!def) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", f.path(), k);
      return *def;
    }
    int64_t x = 0;
    if (v->type == GGUFType::ARRAY) {
      const auto xs = f.get_int_array(k);
      if (xs.empty()) throw_error(ErrorKind::Format, "{}: metadata key '{}' is an empty array", f.path(), k);
      for (int64_t y : xs)
        if (y != xs[0])
          throw_error(ErrorKind::Unsupported, "{}: metadata key '{}' varies per layer ({} vs {}); specmoe needs it uniform",
                      f.path(), k, xs[0], y);
      x = xs[0];
    } else {
      x = f.get_int(k);
    }
    if (x < 0 || x > INT_MAX)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' value {} is out of range", f.path(), k, x);
    return static_cast<int>(x);
  }

  float get_float(std::string_view suffix, float def) const {
    return static_cast<float>(f.get_float(key(suffix), static_cast<double>(def)));
  }
  // A required float.
  float get_float(std::string_view suffix, std::nullopt_t) const {
    const std::string k = key(suffix);
    if (!f.has(k)) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", f.path(), k);
    return static_cast<float>(f.get_float(k, 0.0));
  }
};

// The architecture specifics of gemma2 and gemma3 (embedding scale, sliding windows and their
// pattern, local RoPE base, soft-capping, the 27B's attention scale), of OLMo 3's and EXAONE 4.0
// 32B's windows, of granite (logit,
// residual, embedding and attention scales), of the MoE keys of every
// architecture (expert widths, gating, normalisation, scale, groups, leading dense layers and
// shared experts) and of deepseek2's multi-head latent attention.
void read_gemma(const Reader& r, ModelConfig& c);
void read_olmo3_exaone4_windows(const Reader& r, ModelConfig& c);
void read_cohere(const Reader& r, ModelConfig& c);
void read_gpt_oss(const Reader& r, ModelConfig& c);
void read_exaone_moe(const Reader& r, ModelConfig& c);
void read_lfm2_layers(const Reader& r, ModelConfig& c);
void read_lfm2_windows(const Reader& r, ModelConfig& c);
void read_smallthinker(const Reader& r, ModelConfig& c);
void read_llama4(const Reader& r, ModelConfig& c);
void read_afmoe(const Reader& r, ModelConfig& c);
void read_maple(const Reader& r, ModelConfig& c);
void read_spark25(const Reader& r, ModelConfig& c);
// A float key holding one value for every layer or an array of one per layer (llama.cpp's
// get_key_or_arr); required, finite and at most 1e6 in magnitude.
std::vector<double> read_per_layer_floats(const Reader& r, const std::string& key, int n_layer);
void read_qwen35(const Reader& r, ModelConfig& c);
void read_eagle3(const Reader& r, ModelConfig& c);
void read_dflash(const Reader& r, ModelConfig& c);
void read_granite_hybrid(const Reader& r, ModelConfig& c);
void read_mamba2(const Reader& r, ModelConfig& c);
void read_nemotron_h(const Reader& r, ModelConfig& c);
void read_mrope(const Reader& r, ModelConfig& c);
void read_granite(const Reader& r, ModelConfig& c);
void read_experts(const Reader& r, ModelConfig& c);
void read_mla(const Reader& r, ModelConfig& c);

}  // namespace specmoe::core::detail
