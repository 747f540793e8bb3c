// Structure-aware mutation of GGUF files (libFuzzer's LLVMFuzzerCustomMutator in
// tests/fuzz/model_fuzz.cpp). Byte-level mutation of a model file mostly hits tensor data and
// breaks the length-prefixed metadata; to reach the code behind the parser (ModelConfig's
// per-architecture keys, tensor binding, the forward) a mutation here decodes the file, changes
// one thing a hostile or broken converter could write — a metadata value (interesting integers
// and floats, another type, a per-layer array, another architecture or RoPE scaling type), a
// missing or extra key, a tensor's shape, type, name or data — and encodes it again with
// GGUFWriter. Files that do not decode, and a share of those that do, get libFuzzer's byte
// mutations instead, so the parser's own checks stay under attack too.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

namespace specmoe::fuzz {

// A decoded GGUF file that can be edited and encoded again.
struct GgufImage {
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, core::GGUFValue>> kv;
  std::vector<Tensor> tensors;

  core::GGUFValue* find(const std::string& key) {
    for (auto& [k, v] : kv)
      if (k == key) return &v;
    return nullptr;
  }
  std::string arch() {
    const core::GGUFValue* a = find("general.architecture");
    return a && a->type == core::GGUFType::STRING ? a->s : "llama";
  }
  int64_t get_int(const std::string& key, int64_t def) {
    const core::GGUFValue* v = find(key);
    return v && v->is_integer() ? v->i : def;
  }
};

inline std::optional<GgufImage> gguf_decode(std::span<const uint8_t> bytes) {
  std::shared_ptr<core::GGUFFile> f;
  try {
    f = core::GGUFFile::open_memory(bytes, "mutator-input.gguf");
  } catch (const Error&) {
    return std::nullopt;
  }
  GgufImage img;
  img.kv = f->metadata();
  for (const auto& t : f->tensors())
    img.tensors.push_back({t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  return img;
}

// nullopt when GGUFWriter refuses the image (a tensor whose bytes do not match its shape).
inline std::optional<std::vector<uint8_t>> gguf_encode(const GgufImage& img) {
  try {
    core::GGUFWriter w;
    for (const auto& [k, v] : img.kv) {
      if (k == "general.alignment" && v.is_integer() && v.i >= 8 && v.i <= (1 << 16) && (v.i & (v.i - 1)) == 0)
        w.set_alignment(static_cast<uint32_t>(v.i));
      else
        w.set_value(k, v);
    }
    for (const auto& t : img.tensors) w.add_tensor(t.name, t.type, t.ne, t.bytes);
    return w.bytes();
  } catch (const Error&) {
    return std::nullopt;
  }
}

class GgufMutator {
 public:
  GgufMutator(GgufImage& img, unsigned seed, size_t max_size, size_t (*byte_mutate)(uint8_t*, size_t, size_t))
      : img_(img), rng_(seed), max_size_(max_size), byte_mutate_(byte_mutate) {}

  // One to three edits.
  void mutate() {
    const int n = 1 + static_cast<int>(pick(3) == 0) + static_cast<int>(pick(6) == 0);
    for (int i = 0; i < n; ++i) {
      switch (pick(12)) {
        case 0: case 1: set_int_key(); break;
        case 2: set_float_key(); break;
        case 3: set_string_key(); break;
        case 4: retype_key(); break;
        case 5: remove_key(); break;
        case 6: reshape_tensor(); break;
        case 7: retype_tensor(); break;
        case 8: rename_or_add_tensor(); break;
        case 9: remove_tensor(); break;
        case 10: special_values(); break;
        default: tensor_bytes(); break;
      }
    }
  }

 private:
  size_t pick(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <class T, size_t N>
  const T& pick_of(const T (&xs)[N]) { return xs[pick(N)]; }

  // Keys ModelConfig and the tokenizer read (llama.cpp's names), under the file's architecture.
  std::string model_key() {
    static constexpr const char* kArchKeys[] = {
        "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
        "attention.head_count_kv", "attention.key_length", "attention.value_length",
        "attention.layer_norm_epsilon", "attention.layer_norm_rms_epsilon", "rope.dimension_count",
        "rope.freq_base", "rope.scale_linear", "rope.scaling.type", "rope.scaling.factor",
        "rope.scaling.original_context_length", "rope.scaling.attn_factor", "rope.scaling.low_freq_factor",
        "rope.scaling.high_freq_factor", "attention.sliding_window", "attention.sliding_window_pattern",
        "rope.freq_base_swa", "final_logit_softcapping", "vocab_size", "expert_count", "expert_used_count",
        "expert_feed_forward_length", "expert_shared_feed_forward_length", "expert_weights_norm",
        "expert_gating_func", "expert_weights_scale", "expert_group_count", "expert_group_used_count",
        "shortconv.l_cache"};
    static constexpr const char* kGlobalKeys[] = {
        "general.architecture", "general.alignment", "tokenizer.ggml.model", "tokenizer.ggml.pre",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.eot_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template"};
    if (pick(3) == 0 && !img_.kv.empty()) return img_.kv[pick(img_.kv.size())].first;
    if (pick(5) == 0) return pick_of(kGlobalKeys);
    return img_.arch() + "." + pick_of(kArchKeys);
  }

  // An integer near the sizes a model has, at the edges of the types, or another key's value.
  int64_t interesting_int(int64_t current) {
    static constexpr int64_t kValues[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 62, 63, 64, 65,
                                          127, 128, 255, 256, 257, 258, 259, 1024, 4096, 65535, 65536,
                                          (1 << 24) + 1, INT32_MAX, int64_t{1} << 31, int64_t{1} << 32, -1, -2,
                                          INT64_MIN, INT64_MAX};
    // Wrapping arithmetic: the current value may be INT64_MIN or INT64_MAX already.
    const auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
    switch (pick(5)) {
      case 0: return wrap(static_cast<uint64_t>(current) + 1);
      case 1: return wrap(static_cast<uint64_t>(current) - 1);
      case 2: return wrap(static_cast<uint64_t>(current) * 2);
      case 3:
        if (!img_.kv.empty()) {
          const auto& kv = img_.kv[pick(img_.kv.size())].second;
          if (kv.is_integer()) return kv.i;
        }
        [[fallthrough]];
      default: return pick_of(kValues);
    }
  }
  double interesting_float() {
    static constexpr double kValues[] = {0.0,  -0.0, 1.0,    -1.0, 0.5,    2.0,  4.0,  8.0,    1e-5, 1e-6, 1e-30,
                                         1e-45, 1e30, 3.4e38, 1e39, 10000.0, 1e6, 32.0, 64.0, 0.1, 1.0 + 1e-7};
    switch (pick(6)) {
      case 0: return std::numeric_limits<double>::infinity();
      case 1: return -std::numeric_limits<double>::infinity();
      case 2: return std::numeric_limits<double>::quiet_NaN();
      default: return pick_of(kValues);
    }
  }

  static core::GGUFValue int_value(core::GGUFType t, int64_t i) {
    core::GGUFValue v;
    v.type = t;
    v.i = i;
    return v;
  }

  void put(const std::string& key, core::GGUFValue v) {
    if (core::GGUFValue* old = img_.find(key)) *old = std::move(v);
    else img_.kv.emplace_back(key, std::move(v));
  }

  void set_int_key() {
    const std::string key = model_key();
    const core::GGUFValue* old = img_.find(key);
    const int64_t x = interesting_int(old && old->is_integer() ? old->i : 0);
    static constexpr core::GGUFType kTypes[] = {core::GGUFType::UINT32, core::GGUFType::UINT32, core::GGUFType::INT32,
                                                core::GGUFType::UINT64, core::GGUFType::INT64, core::GGUFType::UINT8,
                                                core::GGUFType::INT16, core::GGUFType::BOOL};
    if (pick(5) == 0) {
      // A per-layer array, as some converters write head_count_kv or the window pattern: one
      // entry per layer (sometimes one too many or few), equal or not.
      core::GGUFValue a;
      a.type = core::GGUFType::ARRAY;
      a.elem_type = pick(2) ? core::GGUFType::INT32 : core::GGUFType::BOOL;
      const int64_t layers = std::clamp<int64_t>(img_.get_int(img_.arch() + ".block_count", 1), 0, 64);
      const int64_t count = std::max<int64_t>(0, layers + static_cast<int64_t>(pick(3)) - 1);
      for (int64_t l = 0; l < count; ++l)
        a.items.push_back(int_value(a.elem_type, pick(3) == 0 ? interesting_int(x) : x));
      put(key, std::move(a));
      return;
    }
    put(key, int_value(pick_of(kTypes), x));
  }

  void set_float_key() {
    core::GGUFValue v;
    v.type = pick(4) ? core::GGUFType::FLOAT32 : core::GGUFType::FLOAT64;
    v.f = interesting_float();
    if (v.type == core::GGUFType::FLOAT32) v.f = static_cast<float>(v.f);
    put(model_key(), std::move(v));
  }

  void set_string_key() {
    static constexpr const char* kArchs[] = {"llama",   "qwen2",   "qwen2moe", "gpt2",  "qwen3", "gemma3", "qwen3moe",
                                             "olmoe",   "deepseek2", "phi3",  "gemma2", "mistral", ""};
    static constexpr const char* kScaling[] = {"none", "linear", "yarn", "llama3", "longrope", ""};
    static constexpr const char* kTokenizers[] = {"llama", "gpt2", "bert", ""};
    core::GGUFValue v;
    v.type = core::GGUFType::STRING;
    switch (pick(4)) {
      case 0: {
        // Another architecture: the keys under the old prefix move to the new one.
        const std::string from = img_.arch() + ".", to = std::string(pick_of(kArchs)) + ".";
        for (auto& [k, val] : img_.kv)
          if (k.rfind(from, 0) == 0 && !img_.find(to + k.substr(from.size()))) k = to + k.substr(from.size());
        v.s = to.substr(0, to.size() - 1);
        put("general.architecture", std::move(v));
        return;
      }
      case 1: v.s = pick_of(kScaling); put(img_.arch() + ".rope.scaling.type", std::move(v)); return;
      case 2: v.s = pick_of(kTokenizers); put("tokenizer.ggml.model", std::move(v)); return;
      default: v.s = std::string(pick(64), static_cast<char>('a' + pick(26))); put(model_key(), std::move(v)); return;
    }
  }

  // An existing key with another value type: an integer as a float or string, a scalar as an
  // array, an array as a scalar.
  void retype_key() {
    if (img_.kv.empty()) return;
    auto& [key, v] = img_.kv[pick(img_.kv.size())];
    core::GGUFValue out;
    switch (pick(4)) {
      case 0: out.type = core::GGUFType::FLOAT32; out.f = v.is_integer() ? static_cast<double>(v.i) : 1.5; break;
      case 1: out.type = core::GGUFType::STRING; out.s = "1"; break;
      case 2:
        out.type = core::GGUFType::ARRAY;
        out.elem_type = v.type == core::GGUFType::ARRAY ? core::GGUFType::UINT32 : v.type;
        if (out.elem_type == core::GGUFType::STRING) out.strings = {v.s, v.s};
        else if (out.elem_type != core::GGUFType::ARRAY) out.items = {v, v};
        break;
      default:
        if (v.type == core::GGUFType::ARRAY && !v.strings.empty()) {
          // A vocabulary array one entry short or long, or emptied.
          if (pick(3) == 0) v.strings.clear();
          else if (pick(2)) v.strings.pop_back();
          else v.strings.push_back(v.strings.back() + "x");
          return;
        }
        if (v.type == core::GGUFType::ARRAY && !v.items.empty()) {
          if (pick(3) == 0) v.items.clear();
          else if (pick(2)) v.items.pop_back();
          else v.items.push_back(v.items.back());
          return;
        }
        out = int_value(core::GGUFType::UINT32, 1);
        break;
    }
    v = std::move(out);
  }

  void remove_key() {
    if (img_.kv.empty()) return;
    img_.kv.erase(img_.kv.begin() + static_cast<std::ptrdiff_t>(pick(img_.kv.size())));
  }

  GgufImage::Tensor* some_tensor() { return img_.tensors.empty() ? nullptr : &img_.tensors[pick(img_.tensors.size())]; }

  size_t image_bytes() const {
    size_t n = 0;
    for (const auto& t : img_.tensors) n += t.bytes.size() + 64;
    return n;
  }

  // Resizes a tensor's data for a new shape or type: kept where it overlaps, random beyond.
  bool resize_bytes(GgufImage::Tensor& t, DType type, const std::vector<int64_t>& ne) {
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d)
      if (ne[d] < 0 || __builtin_mul_overflow(rows, ne[d], &rows)) return false;
    if (ne.empty() || ne[0] < 0 || ne[0] % dtype_info(type).block_size != 0) return false;
    const size_t want = dtype_row_bytes(type, ne[0]) * static_cast<size_t>(rows);
    if (want > max_size_ || image_bytes() - t.bytes.size() + want > max_size_) return false;
    const size_t old = t.bytes.size();
    t.bytes.resize(want);
    for (size_t i = old; i < want; ++i) t.bytes[i] = static_cast<uint8_t>(rng_());
    t.type = type;
    t.ne = ne;
    return true;
  }

  void reshape_tensor() {
    GgufImage::Tensor* t = some_tensor();
    if (!t || t->ne.empty()) return;
    std::vector<int64_t> ne = t->ne;
    switch (pick(4)) {
      case 0: if (ne.size() >= 2) std::swap(ne[0], ne[1]); break;  // transposed
      case 1: if (ne.size() < 4) ne.push_back(1 + static_cast<int64_t>(pick(3))); break;
      case 2: if (ne.size() > 1) ne.pop_back(); break;
      default: {
        int64_t& d = ne[pick(ne.size())];
        static constexpr int64_t kDims[] = {0, 1, 2, 3, 8, 16, 17, 31, 32, 33, 64, 256, 259, 260};
        d = pick(3) ? pick_of(kDims) : (pick(2) ? d + 1 : std::max<int64_t>(0, d - 1));
        break;
      }
    }
    resize_bytes(*t, t->type, ne);
  }

  // Another tensor type: the rows dequantized and quantized again, so the values stay the
  // model's (a type whose block does not divide the row is skipped).
  void retype_tensor() {
    GgufImage::Tensor* t = some_tensor();
    if (!t) return;
    static constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,   DType::Q3_K,
                                       DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                                       DType::MXFP4};
    if (t->ne.empty()) return;
    if (dtype_is_integer(t->type)) {
      // Integer tensors (an EAGLE-3 head's d2t) are no float data: I64 <-> I32, the values kept
      // (truncated to 32 bits).
      const bool wide = t->type == DType::I64;
      const size_t n = t->bytes.size() / (wide ? 8 : 4);
      std::vector<uint8_t> out(n * (wide ? 4 : 8));
      for (size_t i = 0; i < n; ++i) {
        int64_t v = 0;
        if (wide) {
          std::memcpy(&v, t->bytes.data() + 8 * i, 8);
          const auto v32 = static_cast<int32_t>(v);
          std::memcpy(out.data() + 4 * i, &v32, 4);
        } else {
          int32_t v32 = 0;
          std::memcpy(&v32, t->bytes.data() + 4 * i, 4);
          v = v32;
          std::memcpy(out.data() + 8 * i, &v, 8);
        }
      }
      t->type = wide ? DType::I32 : DType::I64;
      t->bytes = std::move(out);
      return;
    }
    const DType to = pick_of(kTypes);
    // A row longer than the file could hold has no data (a shape with a zero dimension): nothing
    // to convert, and a row buffer of its length could be gigabytes.
    const int64_t n0 = t->ne[0];
    if (n0 <= 0 || static_cast<uint64_t>(n0) > max_size_ || n0 % dtype_info(to).block_size != 0) return;
    const size_t from_row = dtype_row_bytes(t->type, n0), to_row = dtype_row_bytes(to, n0);
    const size_t rows = from_row ? t->bytes.size() / from_row : 0;
    if (rows == 0 || to_row * rows > max_size_) return;
    std::vector<float> row(static_cast<size_t>(n0));
    std::vector<uint8_t> out(to_row * rows);
    for (size_t r = 0; r < rows; ++r) {
      kernels::cpu::dequantize_row(t->type, t->bytes.data() + r * from_row, row.data(), n0);
      for (float& x : row)
        if (!std::isfinite(x)) x = 0.0f;  // the quantizers take finite values
      kernels::cpu::quantize_row(to, row.data(), out.data() + r * to_row, n0);
    }
    t->type = to;
    t->bytes = std::move(out);
  }

  // A tensor under another name (another layer's, or an optional tensor a binder looks for), or
  // a copy of one under such a name.
  void rename_or_add_tensor() {
    GgufImage::Tensor* t = some_tensor();
    if (!t) return;
    static constexpr const char* kNames[] = {
        "rope_freqs.weight", "output.weight", "position_embd.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias",
        "blk.0.attn_v.bias", "blk.0.attn_output.bias", "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight",
        "blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "blk.0.exp_probs_b.bias",
        "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp_shexp.weight", "blk.0.ffn_gate.0.weight",
        "blk.1.attn_norm.weight", "blk.0.attn_qkv.weight", "token_embd.weight"};
    std::string name;
    if (pick(2)) {
      name = pick_of(kNames);
    } else {
      name = t->name;
      const size_t dot = name.find('.', 4);
      if (name.rfind("blk.", 0) == 0 && dot != std::string::npos) name = fmt::format("blk.{}", pick(3)) + name.substr(dot);
    }
    for (const auto& other : img_.tensors)
      if (other.name == name) return;
    if (pick(2)) {
      t->name = name;
    } else if (image_bytes() + t->bytes.size() <= max_size_) {
      GgufImage::Tensor copy = *t;
      copy.name = name;
      img_.tensors.push_back(std::move(copy));
    }
  }

  void remove_tensor() {
    if (img_.tensors.empty()) return;
    img_.tensors.erase(img_.tensors.begin() + static_cast<std::ptrdiff_t>(pick(img_.tensors.size())));
  }

  // Values the forward must survive: NaN, infinities, huge and subnormal floats, zero scales.
  void special_values() {
    GgufImage::Tensor* t = some_tensor();
    if (!t || t->bytes.size() < 4) return;
    static constexpr uint32_t kF32[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x00000001u, 0u, 0x80000000u};
    static constexpr uint16_t kF16[] = {0x7e00, 0x7c00, 0xfc00, 0x7bff, 0x0001, 0x0000, 0x8000};
    const size_t at = pick(t->bytes.size() / 2) * 2;
    if (t->type == DType::F32 && at + 4 <= t->bytes.size()) {
      const uint32_t x = pick_of(kF32);
      std::memcpy(t->bytes.data() + (at & ~size_t{3}), &x, 4);
    } else {
      // A half at an even offset: a value of F16/BF16 tensors, or (often) a block scale.
      const uint16_t x = pick_of(kF16);
      std::memcpy(t->bytes.data() + at, &x, 2);
    }
  }

  void tensor_bytes() {
    GgufImage::Tensor* t = some_tensor();
    if (!t || t->bytes.empty()) return;
    // libFuzzer's own byte mutations, on the tensor's data alone and at its size.
    std::vector<uint8_t> buf = t->bytes;
    const size_t n = byte_mutate_(buf.data(), buf.size(), buf.size());
    if (n == t->bytes.size()) t->bytes = std::move(buf);
  }

  GgufImage& img_;
  std::mt19937 rng_;
  size_t max_size_;
  size_t (*byte_mutate_)(uint8_t*, size_t, size_t);
};

// The custom mutator: one structured edit of a file that decodes, libFuzzer's byte mutation
// otherwise (and for one input in four). Returns the new size (at most max_size).
inline size_t gguf_custom_mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                                 size_t (*byte_mutate)(uint8_t*, size_t, size_t)) {
  if (seed % 4 != 0) {
    if (std::optional<GgufImage> img = gguf_decode({data, size})) {
      GgufMutator(*img, seed, max_size, byte_mutate).mutate();
      if (auto out = gguf_encode(*img); out && out->size() <= max_size) {
        std::memcpy(data, out->data(), out->size());
        return out->size();
      }
    }
  }
  return byte_mutate(data, size, max_size);
}

}  // namespace specmoe::fuzz
