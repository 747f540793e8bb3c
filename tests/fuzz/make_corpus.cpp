// Writes the seed corpus of every fuzz target: small valid inputs the fuzzer mutates from.
//   fuzz_corpus OUT_DIR   ->  OUT_DIR/{gguf,model,quant,router,results,tree,tokenizer,toml,prompts,chat_template,kld}/<seed files>
// The text seeds committed in tests/fuzz/corpus/ come from this program (scripts/fuzz.sh --seeds
// regenerates them); the binary ones (gguf, model, quant, router, tree, kld) are not committed: every build writes
// them into build/fuzz-seeds/ (target fuzz_seeds) and scripts/fuzz.sh into its build folder.
// Every file is a few KB (model seeds: tens of KB) at most; files named "valid-*" must be
// accepted by their target (tests/unit/fuzz_regression_test.cpp checks it).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <iostream>

#include <zlib.h>

#include "core/chat_template.h"
#include "core/kl_divergence.h"
#include "core/synth.h"
#include "experiments/result_json.h"
#include "fuzz_entry.h"
#include "fuzz_quant.h"
#include "gguf_mutator.h"

namespace fs = std::filesystem;
using namespace specmoe;
using namespace specmoe::core;
using fuzz::gguf_decode;
using fuzz::gguf_encode;
using fuzz::GgufImage;

namespace {

fs::path g_out;

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  fs::create_directories(g_out / target);
  std::ofstream out(g_out / target / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_gguf(const std::string& name, const GGUFWriter& w) {
  const fs::path tmp = fuzz::scratch_dir() / "seed.gguf";
  w.write(tmp.string());
  put("gguf", name, slurp(tmp));
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i % 17) - 2.0f;
  return v;
}

// A tiny model's metadata: `arch` with the keys ModelConfig::from_gguf reads.
void model_keys(GGUFWriter& w, const std::string& arch, bool moe) {
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "fuzz seed " + arch);
  w.set_u32(arch + ".context_length", 64);
  w.set_u32(arch + ".embedding_length", 32);
  w.set_u32(arch + ".block_count", 1);
  w.set_u32(arch + ".feed_forward_length", 64);
  w.set_u32(arch + ".attention.head_count", 4);
  w.set_u32(arch + ".attention.head_count_kv", 2);
  if (arch == "gpt2") {
    w.set_f32(arch + ".attention.layer_norm_epsilon", 1e-5f);
  } else {
    w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_f32(arch + ".rope.freq_base", 10000.0f);
  }
  if (moe) {
    w.set_u32(arch + ".expert_count", 4);
    w.set_u32(arch + ".expert_used_count", 2);
    w.set_u32(arch + ".expert_feed_forward_length", 16);
  }
}

void gguf_seeds() {
  {  // tensors of every supported type, no vocabulary (n_vocab from <arch>.vocab_size)
    GGUFWriter w;
    model_keys(w, "llama", false);
    w.set_u32("llama.vocab_size", 300);
    w.add_tensor_f32("blk.0.attn_norm.weight", DType::F32, {32}, ramp(32));
    w.add_tensor_f32("blk.0.f16", DType::F16, {17, 3}, ramp(51));
    w.add_tensor_f32("blk.0.bf16", DType::BF16, {5}, ramp(5));
    w.add_tensor_f32("blk.0.q8_0", DType::Q8_0, {32, 2}, ramp(64));
    w.add_tensor_f32("blk.0.q4_0", DType::Q4_0, {32, 1}, ramp(32));
    w.add_tensor_f32("blk.0.q4_1", DType::Q4_1, {32, 1, 1, 1}, ramp(32));
    w.add_tensor_f32("blk.0.q4_k", DType::Q4_K, {256, 1}, ramp(256));
    w.add_tensor_f32("blk.0.q5_k", DType::Q5_K, {256}, ramp(256));
    w.add_tensor_f32("blk.0.q6_k", DType::Q6_K, {256, 1}, ramp(256));
    put_gguf("valid-llama-tensors.gguf", w);
  }
  {  // the synth byte vocabulary
    GGUFWriter w;
    model_keys(w, "llama", false);
    write_byte_vocab(w, 259);
    put_gguf("valid-llama-byte-vocab.gguf", w);
  }
  {  // small SentencePiece and BPE vocabularies
    GGUFWriter w;
    model_keys(w, "qwen2", false);
    write_vocab(w, fuzz::small_bpe_vocab("qwen2"));
    put_gguf("valid-qwen2-bpe-vocab.gguf", w);
  }
  {
    GGUFWriter w;
    model_keys(w, "llama", false);
    write_vocab(w, fuzz::small_spm_vocab());
    put_gguf("valid-llama-spm-vocab.gguf", w);
  }
  {  // MoE and gpt2 configurations, RoPE scaling, per-layer arrays, alignment
    GGUFWriter w;
    model_keys(w, "qwen2moe", true);
    w.set_u32("qwen2moe.vocab_size", 260);
    w.set_u32("qwen2moe.expert_shared_feed_forward_length", 32);
    w.set_string("qwen2moe.rope.scaling.type", "linear");
    w.set_f32("qwen2moe.rope.scaling.factor", 4.0f);
    w.set_alignment(64);
    w.add_tensor_f32("blk.0.ffn_gate_inp.weight", DType::F32, {32, 4}, ramp(128));
    put_gguf("valid-qwen2moe.gguf", w);
  }
  {
    GGUFWriter w;
    model_keys(w, "gpt2", false);
    w.set_i32_array("gpt2.attention.head_count_kv", {4});
    w.set_u32("gpt2.vocab_size", 50);
    put_gguf("valid-gpt2.gguf", w);
  }
  // Whole tiny models (every tensor Model::load binds), so the fuzzer reaches the forward pass.
  // The smallest useful shape: 259 byte tokens, 8-wide, F16 weights, tied head (~11 KB).
  for (const char* arch : {"llama", "gpt2"}) {
    SynthSpec spec;
    spec.arch = arch;
    spec.type = DType::F16;
    spec.n_vocab = 259;
    spec.n_embd = 8;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 8;
    spec.n_ctx = 16;
    spec.tied_output = true;
    const fs::path tmp = fuzz::scratch_dir() / "synth.gguf";
    synth_write(spec, tmp.string(), 1);
    put("gguf", fmt::format("valid-model-{}.gguf", arch), slurp(tmp));
  }
  {  // every metadata value type, nested arrays
    GGUFWriter w;
    w.set_string("general.architecture", "llama");
    const auto scalar = [](GGUFType t, int64_t i, double f) {
      GGUFValue v;
      v.type = t;
      v.i = i;
      v.f = f;
      return v;
    };
    const GGUFType ints[] = {GGUFType::UINT8, GGUFType::INT8, GGUFType::UINT16, GGUFType::INT16, GGUFType::UINT32,
                             GGUFType::INT32, GGUFType::UINT64, GGUFType::INT64, GGUFType::BOOL};
    for (GGUFType t : ints) w.set_value(std::string("test.") + gguf_type_name(t), scalar(t, 1, 0));
    w.set_value("test.FLOAT64", scalar(GGUFType::FLOAT64, 0, 2.5));
    w.set_f32("test.FLOAT32", -1.5f);
    w.set_string("test.STRING", "text");
    GGUFValue inner;
    inner.type = GGUFType::ARRAY;
    inner.elem_type = GGUFType::UINT16;
    inner.items = {scalar(GGUFType::UINT16, 7, 0), scalar(GGUFType::UINT16, 9, 0)};
    GGUFValue outer;
    outer.type = GGUFType::ARRAY;
    outer.elem_type = GGUFType::ARRAY;
    outer.items = {inner, inner};
    w.set_value("test.nested", outer);
    w.set_f32_array("test.f32s", {1.0f, 2.0f});
    w.set_string_array("test.strings", {"a", "", "c"});
    put_gguf("valid-all-value-types.gguf", w);
  }
}

// ---------------------------------------------------------------------------------------------
// Whole models (fuzz_model): every `specmoe synth` preset, shrunk to a few KB with its
// architecture's specifics kept (experts, shared expert, head width, RoPE scaling, llama3
// factors, sliding window, tied head, draft depth), in several tensor types; then the keys and
// tensors synth does not write (sigmoid and group-limited routing, llama3 and YaRN by keys, the
// old linear-scaling key, per-layer arrays, window patterns as flags, optional biases) and the
// K-quant types, whose 256-element blocks fit the FFN's down projection.

// The preset's shape at the smallest size its features still show.
SynthSpec shrink(SynthSpec s) {
  const bool draft = s.keep_layers > 0;
  s.n_vocab = 259;
  s.n_embd = 32;
  s.n_head = 2;
  // An EAGLE-3 head's synth layer has as many KV heads as heads, as a DFlash draft's that attends to
  // the previous token.
  s.n_head_kv = s.arch == "eagle3" || s.dflash_attend_previous ? 2 : 1;
  if (s.arch == "dflash") {  // a draft for a target of this width, its mask and draft vocabulary within the ids
    s.dflash_mask_token = 258;
    if (s.eagle3_draft_vocab > 0) s.eagle3_draft_vocab = 100;
  }
  if (s.arch == "eagle3") {  // a head for a target of this width, its draft vocabulary within the ids
    s.n_layer = 1;
    s.head_target_width = 32;
    if (s.eagle3_draft_vocab > 0) s.eagle3_draft_vocab = 100;
  }
  // Wider than n_embd / n_head, as the preset's; deepseek2 keeps its split of the query/key head
  // into RoPE and non-RoPE parts (48 = 32 + 16), whose rows must fit the block types.
  if (s.head_dim > 0 && s.arch != "deepseek2") s.head_dim = 32;
  s.n_layer = std::min(s.n_layer, s.arch == "smollm3" ? 4 : 2);  // smollm3's NoPE layer is its fourth
  s.keep_layers = draft ? 1 : -1;
  s.n_ff = 32;
  s.n_ctx = 16;
  s.n_full_layers = std::min(s.n_full_layers, 1);
  if (s.n_expert > 0) {
    s.n_expert = std::min(s.n_expert, 4);
    s.n_expert_used = std::min(s.n_expert_used, 2);
  }
  if (s.n_ff_shared > 0) s.n_ff_shared = 32;
  if (s.rope_orig_ctx > 0) s.rope_orig_ctx = 8;
  if (s.llama3_orig_ctx > 0) s.llama3_orig_ctx = 8;
  if (!s.conv_layers.empty()) s.conv_layers = {1, 0};  // lfm2: a short convolution, then attention
  if (!s.recurrent_layers.empty()) s.recurrent_layers = {1, 0};  // qwen35: a DeltaNet, then attention
  if (!s.layer_pattern.empty()) s.layer_pattern = "M-";            // nemotron_h: Mamba-2, then an MLP
  if (s.n_swa > 0) {
    s.n_swa = 2;
    s.swa_pattern = 2;  // layer 0 local, layer 1 global
    if (!s.swa_layers.empty()) {
      s.swa_pattern = 0;
      s.swa_layers = {1, 0};  // the same, as one flag per layer
    }
  }
  return s;
}

GgufImage synth_image(const SynthSpec& spec) {
  const fs::path tmp = fuzz::scratch_dir() / "synth.gguf";
  synth_write(spec, tmp.string(), 1);
  const std::string bytes = slurp(tmp);
  auto img = gguf_decode({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!img) throw std::runtime_error("synth file does not decode: " + spec.name);
  return *img;
}

void put_image(const std::string& target, const std::string& name, const GgufImage& img) {
  const auto bytes = gguf_encode(img);
  if (!bytes) throw std::runtime_error("cannot encode seed " + name);
  put(target, name, std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
}

// Converts a tensor to `type` (dequantized, quantized again).
void retype(GgufImage::Tensor& t, DType type) {
  const int64_t n0 = t.ne[0];
  const size_t from_row = dtype_row_bytes(t.type, n0), to_row = dtype_row_bytes(type, n0);
  const size_t rows = t.bytes.size() / from_row;
  std::vector<float> row(static_cast<size_t>(n0));
  std::vector<uint8_t> out(to_row * rows);
  for (size_t r = 0; r < rows; ++r) {
    kernels::cpu::dequantize_row(t.type, t.bytes.data() + r * from_row, row.data(), n0);
    kernels::cpu::quantize_row(type, row.data(), out.data() + r * to_row, n0);
  }
  t.type = type;
  t.bytes = std::move(out);
}

void set_u32(GgufImage& img, const std::string& key, uint32_t v) {
  GGUFValue x;
  x.type = GGUFType::UINT32;
  x.i = v;
  if (GGUFValue* old = img.find(key)) *old = x;
  else img.kv.emplace_back(key, x);
}
void set_f32(GgufImage& img, const std::string& key, float v) {
  GGUFValue x;
  x.type = GGUFType::FLOAT32;
  x.f = v;
  if (GGUFValue* old = img.find(key)) *old = x;
  else img.kv.emplace_back(key, x);
}
void set_str(GgufImage& img, const std::string& key, const std::string& v) {
  GGUFValue x;
  x.type = GGUFType::STRING;
  x.s = v;
  if (GGUFValue* old = img.find(key)) *old = x;
  else img.kv.emplace_back(key, x);
}
void set_array(GgufImage& img, const std::string& key, GGUFType elem, const std::vector<int64_t>& xs) {
  GGUFValue a;
  a.type = GGUFType::ARRAY;
  a.elem_type = elem;
  for (int64_t x : xs) {
    GGUFValue e;
    e.type = elem;
    e.i = x;
    a.items.push_back(e);
  }
  if (GGUFValue* old = img.find(key)) *old = a;
  else img.kv.emplace_back(key, a);
}
void add_f32_tensor(GgufImage& img, const std::string& name, std::vector<int64_t> ne, float base) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = base + 0.01f * static_cast<float>(i % 7);
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  img.tensors.push_back({name, DType::F32, std::move(ne), std::move(bytes)});
}
int layers_of(GgufImage& img) { return static_cast<int>(img.get_int(img.arch() + ".block_count", 1)); }

void model_seeds() {
  // The 32-element block types keep the 32-wide rows compact (F16 would double a seed, F32
  // quadruple it); the float types come once each, with a tied head and one layer.
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL};
  int k = 0;
  for (const std::string& line : synth_presets()) {
    const std::string preset = line.substr(0, line.find(':'));
    // EXAONE 4.0 32B's windows need 64 layers, a seed of a quarter megabyte; the 4-layer exaone4
    // seed covers the architecture's tensors.
    if (preset == "exaone4-32b-tiny") continue;
    const SynthSpec base = shrink(synth_spec(preset));
    for (int variant = 0; variant < 2; ++variant, ++k) {
      SynthSpec s = base;
      s.type = types[k % std::size(types)];
      GgufImage img;
      try {
        img = synth_image(s);
      } catch (const Error&) {
        // A preset whose shrunk rows do not fit the block type (synth names the row): F16 fits any.
        s.type = DType::F16;
        img = synth_image(s);
      }
      put_image("model", fmt::format("valid-{}-{}.gguf", preset, dtype_name(s.type)), img);
    }
  }
  // The dense architectures without a preset of their own.
  for (const char* arch : {"qwen2", "gpt2"})
    for (DType type : {DType::Q8_0, DType::Q4_0}) {
      SynthSpec s = shrink(synth_spec("tiny"));
      s.arch = arch;
      s.type = type;
      if (std::string(arch) == "gpt2") s.n_head_kv = s.n_head;
      put_image("model", fmt::format("valid-{}-{}.gguf", arch, dtype_name(type)), synth_image(s));
    }
  for (const auto& [preset, type] : {std::pair{"tiny", DType::F32}, std::pair{"qwen3-tiny", DType::F16},
                                     std::pair{"gemma3-tiny", DType::BF16}}) {
    SynthSpec s = shrink(synth_spec(preset));
    s.type = type;
    s.n_layer = 1;
    s.tied_output = true;
    if (s.n_swa > 0) s.swa_pattern = 1;  // its one layer global
    put_image("model", fmt::format("valid-{}-{}-tied-1-layer.gguf", preset, dtype_name(type)), synth_image(s));
  }

  // K-quants and IQ4_XS: ffn_down has rows of n_ff = 256; the rest in 32-element types.
  const DType k_types[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  const DType row32[] = {DType::Q4_0, DType::Q5_1, DType::IQ4_NL, DType::Q8_0, DType::Q4_1, DType::Q5_0};
  for (size_t i = 0; i < std::size(k_types); ++i) {
    SynthSpec s = shrink(synth_spec(i % 2 ? "qwen3-tiny" : "tiny"));
    s.n_layer = 1;
    s.n_ff = 256;
    s.type = DType::F32;
    GgufImage img = synth_image(s);
    for (auto& t : img.tensors) {
      if (t.ne.size() != 2) continue;  // norms, biases and factors stay F32
      retype(t, t.ne[0] == 256 ? k_types[i] : row32[i]);
    }
    put_image("model", fmt::format("valid-{}-ffn-down-{}.gguf", s.arch, dtype_name(k_types[i])), img);
  }

  // Sigmoid gating with group-limited routing, a weights scale and a selection bias (DeepSeek-V3's
  // keys, on the Mixtral layout and on qwen2moe).
  for (const char* preset : {"moe-tiny", "qwen2moe-tiny"}) {
    SynthSpec s = shrink(synth_spec(preset));
    s.type = DType::Q4_0;
    GgufImage img = synth_image(s);
    const std::string a = img.arch() + ".";
    set_u32(img, a + "expert_gating_func", 2);
    set_f32(img, a + "expert_weights_scale", 2.5f);
    set_u32(img, a + "expert_group_count", 2);
    set_u32(img, a + "expert_group_used_count", 1);
    GGUFValue norm;
    norm.type = GGUFType::BOOL;
    norm.i = std::string(preset) == "moe-tiny";
    img.kv.emplace_back(a + "expert_weights_norm", norm);
    for (int l = 0; l < layers_of(img); ++l) add_f32_tensor(img, fmt::format("blk.{}.exp_probs_b.bias", l), {4}, -0.05f);
    put_image("model", fmt::format("valid-{}-sigmoid-groups.gguf", preset), img);
  }
  {  // softmax gating written explicitly, with k = n_expert
    GgufImage img = synth_image([] { SynthSpec s = shrink(synth_spec("moe-tiny")); s.type = DType::Q4_0; return s; }());
    set_u32(img, "llama.expert_gating_func", 1);
    set_u32(img, "llama.expert_used_count", 4);
    put_image("model", "valid-moe-tiny-softmax-all-experts.gguf", img);
  }
  {  // Llama 3.1's scaling by keys (no rope_freqs.weight), and the old linear key
    GgufImage img = synth_image([] { SynthSpec s = shrink(synth_spec("tiny")); s.type = DType::Q5_0; return s; }());
    set_str(img, "llama.rope.scaling.type", "llama3");
    set_f32(img, "llama.rope.scaling.factor", 8.0f);
    set_f32(img, "llama.rope.scaling.low_freq_factor", 1.0f);
    set_f32(img, "llama.rope.scaling.high_freq_factor", 4.0f);
    set_u32(img, "llama.rope.scaling.original_context_length", 8);
    put_image("model", "valid-llama3-by-keys.gguf", img);
    GgufImage old = synth_image([] { SynthSpec s = shrink(synth_spec("tiny")); s.type = DType::Q4_1; return s; }());
    set_f32(old, "llama.rope.scale_linear", 2.0f);
    put_image("model", "valid-llama-scale-linear.gguf", old);
  }
  {  // YaRN on qwen2 with an attn_factor and a partial rotary dimension
    SynthSpec s = shrink(synth_spec("tiny"));
    s.arch = "qwen2";
    s.type = DType::Q5_1;
    s.rope_scaling = "yarn";
    s.rope_scaling_factor = 4.0f;
    s.rope_orig_ctx = 8;
    GgufImage img = synth_image(s);
    set_f32(img, "qwen2.rope.scaling.attn_factor", 0.9f);
    set_u32(img, "qwen2.rope.dimension_count", 8);
    put_image("model", "valid-qwen2-yarn-attn-factor.gguf", img);
  }
  {  // gemma3: the window pattern as per-layer flags, soft-capping, a local RoPE base
    SynthSpec s = shrink(synth_spec("gemma3-tiny"));
    s.type = DType::Q8_0;
    s.final_logit_softcap = 30.0f;
    s.rope_freq_base_swa = 5000.0f;
    GgufImage img = synth_image(s);
    set_array(img, "gemma3.attention.sliding_window_pattern", GGUFType::BOOL, {1, 0});
    put_image("model", "valid-gemma3-pattern-flags-softcap.gguf", img);
  }
  {  // llama: head_count_kv per layer (all equal), optional q/k/v/o biases
    SynthSpec s = shrink(synth_spec("tiny"));
    s.type = DType::IQ4_NL;
    GgufImage img = synth_image(s);
    set_array(img, "llama.attention.head_count_kv", GGUFType::INT32, {1, 1});
    for (int l = 0; l < layers_of(img); ++l) {
      add_f32_tensor(img, fmt::format("blk.{}.attn_q.bias", l), {32}, 0.0f);
      add_f32_tensor(img, fmt::format("blk.{}.attn_k.bias", l), {16}, 0.1f);
      add_f32_tensor(img, fmt::format("blk.{}.attn_v.bias", l), {16}, -0.1f);
      add_f32_tensor(img, fmt::format("blk.{}.attn_output.bias", l), {32}, 0.0f);
    }
    put_image("model", "valid-llama-per-layer-kv-biases.gguf", img);
  }
  {  // the old Mixtral layout (one tensor per expert): rejected with a clear message
    GgufImage img = synth_image([] { SynthSpec s = shrink(synth_spec("moe-tiny")); s.type = DType::Q4_0; return s; }());
    for (auto& t : img.tensors)
      if (t.name == "blk.0.ffn_gate_exps.weight") t.name = "blk.0.ffn_gate.0.weight";
    put_image("model", "bad-mixtral-per-expert-tensors.gguf", img);
  }
}

// ---------------------------------------------------------------------------------------------
// Quantized blocks (fuzz_quant): byte 0 type, byte 1 shape, byte 2 activations (fuzz_quant.h),
// then rows quantized from smooth values, so every type starts from valid blocks.

void quant_seeds() {
  for (size_t ti = 0; ti < std::size(fuzz::kQuantTypes); ++ti) {
    const DType type = fuzz::kQuantTypes[ti];
    const DTypeInfo& info = dtype_info(type);
    for (int shape : {0, 1}) {
      // Float types: rows of 17 or 64 elements; block types: 1 or 2 blocks; 1 or 3 tokens.
      const int units = info.block_size == 1 ? (shape ? 64 : 17) : (shape ? 2 : 1);
      const int T = shape ? 3 : 1;
      const int64_t n_in = info.block_size == 1 ? units : info.block_size * units;
      const int n_out = shape ? 3 : 2;
      std::string bytes;
      bytes += static_cast<char>(ti);
      bytes += static_cast<char>(((units - 1) << 2) | (T - 1));
      bytes += static_cast<char>(shape ? 0x12 : 0x20);
      std::vector<float> v(static_cast<size_t>(n_in));
      std::vector<uint8_t> row(dtype_row_bytes(type, n_in));
      for (int r = 0; r < n_out; ++r) {
        if (dtype_is_read_only(type)) {
          // Nothing writes these formats: pseudo-random codes under scales of 0.01 (IQ1_M's d in
          // the top nibbles of its scale words).
          uint32_t state = 2654435761u * static_cast<uint32_t>(ti * 7 + shape * 3 + r + 1);
          for (auto& b : row) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
          const uint16_t h = fp32_to_fp16(0.01f);
          for (size_t blk = 0; blk < row.size(); blk += info.block_bytes) {
            for (size_t off : fuzz::fp16_scale_offsets(type)) std::memcpy(&row[blk + off], &h, 2);
            if (type == DType::IQ1_M) fuzz::set_iq1_m_half(&row[blk], h);
          }
        } else {
          for (int64_t i = 0; i < n_in; ++i) v[i] = std::sin(0.37f * static_cast<float>(i + 11 * r)) * (1.0f + r);
          kernels::cpu::quantize_row(type, v.data(), row.data(), n_in);
        }
        bytes.append(reinterpret_cast<const char*>(row.data()), row.size());
      }
      put("quant", fmt::format("valid-{}-{}.bin", info.name, shape ? "3x2" : "1x1"), bytes);
    }
    // Every byte 0xFF: NaN scales for the block types, NaN values for the float types.
    std::string ff(3, '\0');
    ff[0] = static_cast<char>(ti);
    ff += std::string(info.block_bytes * (info.block_size == 1 ? 8 : 1), '\xff');
    put("quant", fmt::format("valid-{}-all-ones.bin", info.name), ff);
  }
}

// ---------------------------------------------------------------------------------------------
// MoE routers (fuzz_router): 9 header bytes (fuzz_router.h), then the logits, bias, hidden state
// and noise weights as floats; each checkpoint family's routing, a capacity limit, ties and NaN.

void router_seeds() {
  struct Seed {
    const char* name;
    uint8_t flags, experts_minus_1, k, groups, T, capacity, scale, set_k, embd_minus_1;
    int n_floats;
    float (*value)(int);
  };
  const auto smooth = [](int i) { return 3.0f * std::sin(0.71f * static_cast<float>(i)); };
  const Seed seeds[] = {
      // flags: bits 0-1 family (0 softmax_topk, 1 raw, 2 noisy, 3 sigmoid_group; bit 5:
      // softmax_group), 2 normalize, 3 bias, 4 capacity limit; groups: bits 0-2 n_group - 1, bits 3-5 topk_group.
      {"valid-mixtral-8x2", 0x00, 7, 2, 0, 3, 0, 0, 1, 0, 24, smooth},
      {"valid-qwen2moe-raw-60x4", 0x01, 59, 4, 0, 2, 0, 0, 8, 0, 120, smooth},
      {"valid-noisy-4x1", 0x02, 3, 1, 0, 2, 0, 0, 2, 3, 32, smooth},
      {"valid-deepseek3-groups-64x8", 0x0f, 63, 8, 7 | (4 << 3), 2, 0, 1, 8, 0, 192, smooth},
      {"valid-deepseek2-softmax-groups-64x6", 0x24, 63, 6, 7 | (3 << 3), 2, 0, 0, 6, 0, 128, smooth},
      {"valid-sigmoid-no-groups-bias", 0x0b, 15, 4, 0 | (1 << 3), 4, 0, 0, 3, 0, 80, smooth},
      {"valid-capacity-4x2-t8", 0x10, 3, 2, 0, 8, 4, 0, 1, 0, 32, smooth},
      {"valid-capacity-half", 0x11, 7, 2, 0, 8, 3, 0, 2, 0, 64, smooth},
      {"valid-ties", 0x00, 7, 3, 0, 2, 0, 0, 3, 0, 16, [](int) { return 0.0f; }},
      {"valid-nan-logits", 0x00, 3, 2, 0, 2, 0, 0, 2, 0, 8,
       [](int i) { return i % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f * i; }},
      {"valid-inf-logits", 0x0b, 3, 2, 1 | (1 << 3), 2, 0, 0, 2, 0, 12,
       [](int i) { return i % 2 ? std::numeric_limits<float>::infinity() : -1.0f; }},
      {"valid-huge-logits", 0x01, 3, 1, 0, 1, 0, 0, 1, 0, 4, [](int i) { return i ? 3e38f : -3e38f; }},
      {"bad-k-zero", 0x00, 7, 0, 0, 1, 0, 0, 1, 0, 8, smooth},
      {"bad-groups-do-not-divide", 0x07, 5, 2, 3 | (1 << 3), 1, 0, 0, 1, 0, 6, smooth},
  };
  for (const Seed& s : seeds) {
    std::string bytes = {static_cast<char>(s.flags), static_cast<char>(s.experts_minus_1), static_cast<char>(s.k),
                         static_cast<char>(s.groups), static_cast<char>(s.T), static_cast<char>(s.capacity),
                         static_cast<char>(s.scale), static_cast<char>(s.set_k), static_cast<char>(s.embd_minus_1)};
    for (int i = 0; i < s.n_floats; ++i) {
      const float v = s.value(i);
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
    put("router", std::string(s.name) + ".bin", bytes);
  }
}

// ---------------------------------------------------------------------------------------------
// Result files (fuzz_results): byte 0 the reader (0 run file, 1 experiment file, 2 journal of run
// "r" with config hash "h", 3 the JSON text helpers), then the file as specmoe writes it.

exp::PromptRecord sample_record(int prompt_index, int repeat, std::string text) {
  exp::PromptRecord r;
  r.run = "r";
  r.prompt_index = prompt_index;
  r.prompt_id = fmt::format("p{}", prompt_index);
  r.category = prompt_index % 2 ? "coding" : "";
  r.repeat = repeat;
  r.n_prompt_tokens = 7;
  r.tokens = {5, 17, 258};
  r.text = std::move(text);
  r.n_generated = 3;
  r.n_drafted = 4;
  r.n_accepted = 2;
  r.n_steps = 2;
  r.position_drafted = {2, 2};
  r.position_accepted = {2, 0};
  r.accept_length_histogram = {0, 0, 2};
  r.wall_s = 0.125;
  r.prefill_s = 0.025;
  r.n_decoded = 3;
  r.ttft_ms = 30.0;
  if (repeat == 1) {
    exp::MoeRecord moe;
    moe.expert_tokens = {{3, 1, 0, 2}};
    r.moe = moe;
  }
  return r;
}

void results_seeds() {
  const auto with = [](char reader, const std::string& body) { return std::string(1, reader) + body; };
  exp::RunFile run;
  run.name = "r";
  run.config_hash = "h";
  run.experiment_hash = "e";
  run.run = {{"name", "r"}, {"strategy", "spec"}};
  run.environment = {{"cpu", "x"}};
  run.started = "2026-12-01T00:00:00Z";
  run.finished = "2026-12-01T00:00:01Z";
  run.records = {sample_record(0, 0, "Hello"), sample_record(1, 1, "\xe6\x98\xa5\xe5"), sample_record(2, 0, "")};
  const std::string run_json = exp::dump_json(exp::run_file_to_json(run), 1);
  put("results", "valid-run-file.json", with('\0', run_json));
  put("results", "bad-run-file-truncated.json", with('\0', run_json.substr(0, run_json.size() / 2)));
  put("results", "bad-run-file-wrong-format.json", with('\0', "{\"format\": \"specmoe-run/0\", \"records\": []}"));

  exp::ExperimentFile ex;
  ex.config = {{"runs", {"r"}}};
  ex.config_hash = "e";
  ex.toml = "[models.m]\nsynth = \"tiny\"\n";
  ex.command = "specmoe run x.toml";
  ex.shard_i = 1;
  ex.shard_n = 3;
  put("results", "valid-experiment-file.json", with('\x01', exp::dump_json(exp::experiment_file_to_json(ex), 1)));
  ex.merge = {{"shards", 3}};
  put("results", "valid-experiment-file-merged.json", with('\x01', exp::dump_json(exp::experiment_file_to_json(ex))));

  // Journals: complete, with a torn last line (a kill mid-write), a duplicate record, another
  // run's record, a damaged line, and another config's header.
  const std::string header = R"({"config_hash":"h","format":"specmoe-journal/1","run":"r"})";
  std::string lines;
  for (int i = 0; i < 3; ++i) lines += exp::dump_json(exp::record_to_json(sample_record(i, i % 2, "t"))) + "\n";
  const std::string other = exp::dump_json(exp::record_to_json([] {
    exp::PromptRecord r = sample_record(4, 0, "o");
    r.run = "other";
    return r;
  }()));
  put("results", "valid-journal.jsonl", with('\x02', header + "\n" + lines));
  put("results", "valid-journal-torn-last-line.jsonl", with('\x02', header + "\n" + lines + lines.substr(0, 40)));
  put("results", "valid-journal-duplicate-other-run-damaged.jsonl",
      with('\x02', header + "\n" + lines + lines.substr(0, lines.find('\n') + 1) + other + "\n{\"run\": \"r\", 1}\n"));
  put("results", "bad-journal-other-config.jsonl",
      with('\x02', R"({"config_hash":"x","format":"specmoe-journal/1","run":"r"})" "\n" + lines));

  put("results", "valid-text-utf8.txt", with('\x03', "caf\xc3\xa9 \xf0\x9f\x8c\xb8 \xe6\x98\xa5"));
  put("results", "valid-text-invalid-utf8.txt", with('\x03', "\xe6\x98 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf \xff"));
  put("results", "valid-text-base64.txt", with('\x03', "aGVsbG8gd29ybGQ="));
}

// ---------------------------------------------------------------------------------------------
// Token trees (fuzz_tree): byte 0 the mode (0 TokenTree, 1 TreeSpec, 2 the n-gram trie), then
// the layout of fuzz_tree.h.

void tree_seeds() {
  const auto bytes = [](std::initializer_list<int> xs) {
    std::string s;
    for (int x : xs) s += static_cast<char>(static_cast<uint8_t>(x));
    return s;
  };
  // TokenTree: vocab 32, a tree / a chain, truncate(4, 2), root 7; pairs (token + 1, parent).
  put("tree", "valid-tree-4-2-1.bin", bytes({0, 31, 0, 4, 2, 7, 4, -1, 5, -1, 6, 0, 7, 0, 8, 1, 9, 2, 10, 4}));
  put("tree", "valid-chain.bin", bytes({0, 31, 1, 2, 9, 7, 4, 0, 5, 0, 6, 0, 7, 0}));
  put("tree", "valid-tree-all-root-children.bin", bytes({0, 255, 0, 71, 19, 0, 1, -1, 2, -1, 3, -1, 4, -1}));
  put("tree", "bad-tree-forward-parent.bin", bytes({0, 31, 0, 4, 2, 7, 4, 1, 5, -1}));
  put("tree", "bad-tree-token-out-of-vocab.bin", bytes({0, 3, 0, 4, 2, 7, 5, -1}));
  // TreeSpec: sampling name, widths text, then nodes / depth / top-k.
  put("tree", "valid-spec-static-4-2-2-1.bin", std::string("\x01\x04topk4,2,2,1\x1e\x00\x00\x00", 17));
  put("tree", "valid-spec-dynamic.bin", std::string("\x01\x0astochastic\x1e\x10\x04\x04", 16));
  put("tree", "valid-spec-noreplace.bin", std::string("\x01\x14stochastic-noreplace2,2\x1e\x00\x00\x00", 29));
  put("tree", "bad-spec-width-65.bin", std::string("\x01\x04topk65,1\x1e", 11));
  put("tree", "bad-spec-both.bin", std::string("\x01\x04topk2\x1e\x08", 9));
  // The n-gram trie: min 1, max 3, depth 4, 8 nodes, widths {3, 2}, then a repetitive context.
  std::string ctx;
  for (int i = 0; i < 40; ++i) ctx += static_cast<char>("\x01\x02\x03\x01\x02\x04\x01\x02\x03\x05"[i % 10]);
  put("tree", "valid-ngram-trie.bin", bytes({2, 0, 2, 4, 8, 2, 2, 1}) + ctx);
  put("tree", "valid-ngram-trie-no-widths.bin", bytes({2, 1, 1, 6, 30, 0}) + ctx);
  put("tree", "valid-ngram-trie-one-token-alphabet.bin", bytes({2, 0, 3, 19, 127, 0}) + std::string(64, '\0'));
}

// ---------------------------------------------------------------------------------------------
// Chat templates (fuzz_chat_template): byte 0 format and flags, then fields separated by 0x1E
// (fuzz_chat_template.h): the template text, then messages led by their role byte.

void chat_template_seeds() {
  const std::string sep = "\x1e";
  const auto msg = [&](int role, const std::string& text) { return sep + std::string(1, static_cast<char>(role)) + text; };
  const std::string conversation = msg(0, "You are terse.") + msg(1, "  Hello there \n") + msg(2, " Hi! ") +
                                   msg(1, "Translate: \xe6\x98\xa5\xe5\xa4\xa9 \xf0\x9f\x8c\xb8");
  // Template texts with the markers of common families (as GGUF files carry them).
  const std::pair<const char*, const char*> templates[] = {
      {"chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}"},
      {"llama3", "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
                 "<|end_header_id|>\\n\\n{{ message['content'] | trim }}<|eot_id|>{% endfor %}"},
      {"gemma", "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ role }}\\n{{ message['content'] | trim }}"
                "<end_of_turn>\\n{% endfor %}"},
      {"mistral", "{{ bos_token }}{% for message in messages %}[INST] {{ message['content'] }} [/INST]{% endfor %}"},
      {"llama2-sys", "[INST] <<SYS>>\\n{{ system }}\\n<</SYS>>\\n\\n{{ content.strip() }} [/INST]"},
      {"phi3", "{% for message in messages %}<|{{ message['role'] }}|>\\n{{ message['content'] }}<|end|>\\n{% endfor %}"
               "<|assistant|>"},
      {"deepseek3", "<｜User｜>{{ content }}<｜Assistant｜>{{ reply }}<｜end▁of▁sentence｜>"},
      {"vicuna", "SYSTEM: {{ system }}\\nUSER: {{ content }}\\nASSISTANT: "},
      {"unknown", "{{ messages | my_filter }}"},
      {"kimi-k2-unrendered", "<|im_assistant|>assistant<|im_middle|>"},
  };
  for (const auto& [name, text] : templates)
    put("chat_template", fmt::format("valid-detect-{}", name), std::string(1, '\x7f') + text + conversation);
  // Every renderable format by index, with and without the generation prompt and both tokenizers.
  const auto formats = renderable_chat_formats();
  for (size_t i = 0; i < formats.size(); ++i) {
    const uint8_t sel = static_cast<uint8_t>((i << 1) | (i % 2) | ((i % 3 == 0) ? 0x80 : 0));
    put("chat_template", fmt::format("valid-render-{}", formats[i]), std::string(1, static_cast<char>(sel)) + "auto" +
        conversation);
  }
  // A format name as the template text, a custom role, invalid UTF-8, one raw user message.
  put("chat_template", "valid-name-llama2", std::string(1, '\x7e') + "llama2" + conversation);
  put("chat_template", "valid-custom-role", std::string(1, '\x01') + "none" + msg(1, "q") +
      sep + "\x05tool\x1f{\"result\": 42}" + msg(2, "done"));
  put("chat_template", "valid-invalid-utf8", std::string(1, '\x03') + "<|im_start|>\xff\xfe" + msg(0, "\xc3") +
      msg(1, "caf\xc3\xa9 \xed\xa0\x80 \xf4\x90\x80\x80 \xe6\x98"));
  put("chat_template", "valid-raw-one-user", std::string(1, '\x7f') + "" + msg(1, "Just text <s> and </s>"));
  put("chat_template", "valid-empty-conversation", std::string(1, '\x05') + "<start_of_turn>");
}

void tokenizer_seeds() {
  // Byte 0: low nibble = vocabulary index, high nibble = flags (see fuzz_entry.h run_tokenizer).
  const std::string texts[] = {"Hello world", " the cat's 123 thing\n\n", "<s>x</s><|endoftext|><tool>",
                               "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80", "  \t\r\n  ab ab"};
  int n = 0;
  for (int vocab = 0; vocab < 15; ++vocab) {
    for (int k : {vocab % 5, (vocab + 2) % 5}) {
      const uint8_t flags = static_cast<uint8_t>((n % 4) << 4);  // add_bos / parse_special variations
      put("tokenizer", fmt::format("text-{:02}", n++), std::string(1, static_cast<char>(vocab | flags)) + texts[k]);
    }
  }
  // Id sequences for decode (flag 4), in range mod n_vocab+2 and raw (flag 8).
  std::vector<int32_t> ids = {1, 5, 300, 2, 0, -1, 259, 260, 100000, 7};
  const std::string id_bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
  put("tokenizer", "ids-mod", std::string(1, static_cast<char>(0x40 | 1)) + id_bytes);
  put("tokenizer", "ids-raw", std::string(1, static_cast<char>(0xC0 | 3)) + id_bytes);
}

void toml_seeds() {
  put("toml", "valid-minimal.toml", R"([models.m]
synth = "tiny"

[prompts]
list = ["Hello"]

[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
)");
  put("toml", "valid-sweep.toml", R"(# A sweep over draft length and temperature.
[experiment]
name = "sweep-demo"
description = "draft length x temperature"
seed = 42
repeats = 2
warmup = 0
schedule = "interleaved"
threads = 1
output = "out/sweep"

[models.target]
path = "target.gguf"
[models.draft]
synth = "tiny-draft"
seed = 3

[prompts]
file = "prompts.txt"
jsonl = "questions.jsonl"
categories = ["writing", "coding"]
turn = 1
limit = 3

[sampling]
temperature = 0.7
top_k = 40
top_p = 0.9
min_p = 0.05
max_tokens = 32
repeat_penalty = 1.1

[[strategy]]
name = "baseline"
kind = "autoregressive"
target = "target"

[[strategy]]
name = "model"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
verifier = "speculative"
draft_max = 4
draft_min = 1
draft_p_min = 0.1

[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"
ngram_min = 1
ngram_max = 3

[sweep]
draft_max = [2, 4, 8]
temperature = [0.0, 0.7]
only = ["model"]
)");
  put("toml", "valid-jsonl.toml", R"([models.t]
path = "/models/t.gguf"
[prompts]
jsonl = "questions.jsonl"
[[strategy]]
name = "a"
kind = "autoregressive"
target = "t"
[[strategy]]
name = "s"
kind = "speculative"
target = "t"
drafter = "layerskip"
exit_layer = 2
verifier = "greedy"
)");
  put("toml", "bad-unknown-key.toml", "[models.m]\nsynth = \"tiny\"\ncolour = 1\n");
  // The keys added since: [experiment] device, [prompts] chat_template / system /
  // history_max_tokens with a later turn, exit_layer and its deprecated spelling.
  put("toml", "valid-device-chat-template.toml", R"([experiment]
device = "cpu"
threads = 0
[models.t]
synth = "qwen3-tiny"
[models.d]
synth = "tiny-draft-q8_0"
[prompts]
jsonl = "questions.jsonl"
turn = 1
chat_template = "chatml"
system = "Answer briefly."
history_max_tokens = 16
[[strategy]]
name = "skip"
kind = "speculative"
target = "t"
drafter = "layerskip"
exit_layer = 1
draft_max = 3
[[strategy]]
name = "model"
kind = "speculative"
target = "t"
drafter = "model"
draft = "d"
[sweep]
exit_layer = [1, 2]
only = ["skip"]
)");
  put("toml", "valid-deprecated-layerskip-layers.toml", R"([models.m]
synth = "gemma3-tiny"
[prompts]
list = ["Hi"]
chat_template = "auto"
[[strategy]]
name = "ls"
kind = "speculative"
target = "m"
drafter = "layerskip"
layerskip_layers = 2
)");
  // Token trees: static widths as an array and as text, a dynamic tree, the sampling names, a
  // sweep over widths, and both shapes at once.
  put("toml", "valid-trees.toml", R"([models.t]
synth = "tiny"
[models.d]
synth = "tiny-draft-q8_0"
[prompts]
list = ["Hi", "Tell me"]
[[strategy]]
name = "static"
kind = "speculative"
target = "t"
drafter = "model"
draft = "d"
tree_widths = [2, 1, 1]
tree_sampling = "stochastic-noreplace"
[[strategy]]
name = "dynamic"
kind = "speculative"
target = "t"
drafter = "layerskip"
exit_layer = 1
tree_nodes = 6
tree_depth = 4
tree_top_k = 2
tree_sampling = "stochastic"
[[strategy]]
name = "trie"
kind = "speculative"
target = "t"
drafter = "ngram"
tree_widths = "3,2"
[sweep]
tree_widths = ["2,1", "4,2,2,1"]
only = ["static"]
)");
  put("toml", "bad-tree-widths-and-nodes.toml", "[models.m]\nsynth = \"tiny\"\n[prompts]\nlist = [\"a\"]\n[[strategy]]\n"
      "name = \"a\"\nkind = \"speculative\"\ntarget = \"m\"\ndrafter = \"ngram\"\ntree_widths = [2]\ntree_nodes = 4\n");
  put("toml", "bad-device.toml", "[experiment]\ndevice = \"cuda:x\"\n[models.m]\nsynth = \"tiny\"\n[prompts]\nlist = [\"a\"]\n"
      "[[strategy]]\nname = \"a\"\nkind = \"autoregressive\"\ntarget = \"m\"\n");
  put("toml", "bad-chat-template-none-with-system.toml", "[models.m]\nsynth = \"tiny\"\n[prompts]\nlist = [\"a\"]\n"
      "chat_template = \"none\"\nsystem = \"s\"\n[[strategy]]\nname = \"a\"\nkind = \"autoregressive\"\ntarget = \"m\"\n");
  put("toml", "bad-exit-layer-twice.toml", "[models.m]\nsynth = \"tiny\"\n[prompts]\nlist = [\"a\"]\n[[strategy]]\n"
      "name = \"a\"\nkind = \"speculative\"\ntarget = \"m\"\ndrafter = \"layerskip\"\nexit_layer = 1\nlayerskip_layers = 1\n");
}

// gzip data as `gzip -n` writes it (no name, no time stamp), so the seed is the same on every build.
std::string gzip(const std::string& text) {
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, text.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

void prompts_seeds() {
  // Byte 0: bit 0 = text file (else JSONL), bit 1 = turn, bits 2-3 = limit, bits 4-5 = filter,
  // bit 6 = gzip.
  const std::string mt_bench =
      "{\"question_id\": 81, \"category\": \"writing\", \"turns\": [\"Compose a blog post.\", \"Rewrite it.\"]}\n"
      "{\"question_id\": 101, \"category\": \"math\", \"turns\": [\"What is 2+2?\", \"And 3+3?\"]}\n"
      "{\"question_id\": \"q3\", \"category\": \"coding\", \"turns\": [\"Sort\\u00e9 a list.\", \"In C.\"]}\r\n";
  const std::string humaneval =
      "{\"task_id\": \"HumanEval/0\", \"prompt\": \"def add(a, b):\\n    \\\"\\\"\\\"Add.\\\"\\\"\\\"\\n\", "
      "\"entry_point\": \"add\"}\n\n";
  put("prompts", "valid-mt-bench.jsonl", std::string(1, '\x00') + mt_bench);
  put("prompts", "valid-mt-bench-turn2-writing.jsonl", std::string(1, '\x12') + mt_bench);
  put("prompts", "valid-mt-bench-coding-math-limit1.jsonl", std::string(1, '\x24') + mt_bench);
  put("prompts", "valid-humaneval.jsonl", std::string(1, '\x00') + humaneval);
  put("prompts", "valid-text.txt", std::string(1, '\x01') + "First prompt\n# comment\n\n  Second\\nline\\\\\r\nThird\n");
  put("prompts", "bad-json.jsonl", std::string(1, '\x00') + "{\"turns\": [\"a\"]\n");
  put("prompts", "valid-mt-bench-gzip.jsonl.gz", std::string(1, '\x42') + gzip(mt_bench));
  put("prompts", "bad-gzip-truncated.jsonl.gz", std::string(1, '\x40') + gzip(mt_bench).substr(0, 30));
  // More gzip: concatenated members (gzip -c a b), a gzip'd text file and HumanEval, an empty
  // member, a zlib stream (accepted too: inflateInit2 with 32 detects both), trailing garbage.
  put("prompts", "valid-gzip-two-members.jsonl.gz", std::string(1, '\x40') + gzip(mt_bench) + gzip(humaneval));
  put("prompts", "valid-gzip-text.txt.gz", std::string(1, '\x41') + gzip("One\n# two\nThree\\nlines\n"));
  put("prompts", "valid-gzip-humaneval-limit1.jsonl.gz", std::string(1, '\x44') + gzip(humaneval + mt_bench));
  put("prompts", "valid-gzip-empty-member-first.jsonl.gz", std::string(1, '\x40') + gzip("") + gzip(mt_bench));
  {
    z_stream zs{};
    std::string out(1024, '\0');
    deflateInit(&zs, 6);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(humaneval.data()));
    zs.avail_in = static_cast<uInt>(humaneval.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    put("prompts", "valid-zlib-stream.jsonl.gz", std::string(1, '\x40') + out);
  }
  put("prompts", "bad-gzip-trailing-garbage.jsonl.gz", std::string(1, '\x40') + gzip(mt_bench) + "garbage");
}

// ---------------------------------------------------------------------------------------------
// KL-divergence base files (fuzz_kld): llama.cpp's "_logits_" layout (core/kl_divergence.h) for
// the tiny synth model's 320-token vocabulary, with records encoded from made-up logits.

std::string kld_file(int n_ctx, int n_chunk, int n_vocab = 320, int32_t bad_token = -1) {
  std::vector<int32_t> tokens(static_cast<size_t>(n_ctx) * n_chunk);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 37) % 250);
  if (bad_token >= 0) tokens[1] = bad_token;  // never a scored position's target
  const fs::path tmp = fuzz::scratch_dir() / "seed.kld";
  LogProbWriter w(tmp.string());
  w.begin(n_ctx, n_vocab, tokens, n_chunk);
  std::vector<float> logits(static_cast<size_t>(n_ctx) * n_vocab);
  for (int c = 0; c < n_chunk; ++c) {
    for (int i = 0; i < n_ctx; ++i)
      for (int v = 0; v < n_vocab; ++v)
        logits[static_cast<size_t>(i) * n_vocab + v] = std::sin(0.37f * static_cast<float>(v * (i + 1) + c)) * 6.0f;
    w.add_chunk(c, logits);
  }
  w.finish();
  return slurp(tmp);
}

void kld_seeds() {
  put("kld", "valid-ctx8.kld", kld_file(8, 1));
  put("kld", "valid-ctx8-2-chunks.kld", kld_file(8, 2));
  put("kld", "valid-ctx16.kld", kld_file(16, 1));
  put("kld", "bad-vocab-size.kld", kld_file(8, 1, 321));
  put("kld", "bad-token-out-of-vocab.kld", kld_file(8, 1, 320, 320));
  const std::string ok = kld_file(8, 1);
  put("kld", "bad-truncated-record.kld", ok.substr(0, ok.size() - 5));
  put("kld", "bad-magic.kld", "_logitz_" + ok.substr(8));
  std::string huge = ok;  // a header that promises 2^28 tokens
  const uint32_t ctx = 1u << 20, chunks = 256;
  std::memcpy(huge.data() + 8, &ctx, 4);
  std::memcpy(huge.data() + 16, &chunks, 4);
  put("kld", "bad-header-promises-gigabytes.kld", huge);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_corpus OUT_DIR\n";
    return 2;
  }
  g_out = argv[1];
  try {
    gguf_seeds();
    model_seeds();
    quant_seeds();
    router_seeds();
    results_seeds();
    tree_seeds();
    chat_template_seeds();
    tokenizer_seeds();
    toml_seeds();
    prompts_seeds();
    kld_seeds();
  } catch (const std::exception& e) {
    std::cerr << "fuzz_corpus: " << e.what() << "\n";
    return 1;
  }
  std::error_code ec;
  fs::remove_all(fuzz::scratch_dir(), ec);
  return 0;
}
