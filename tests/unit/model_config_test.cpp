// ModelConfig::from_gguf on the shared stories260K model and on small files written with
// GGUFWriter for each architecture, plus every validation error.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model_config.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;

namespace {

std::string scratch_file(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (specmoe::testing::scratch_dir() /
          fmt::format("model_config_test_{}_{}_{}.gguf", ::getpid(), counter++, stem))
      .string();
}

// A tiny llama-style header: n_embd 16, 4 heads (2 kv), 3 layers, vocab of 10 tokens (none
// listed without `tokens`: the vocabulary then comes from other keys).
GGUFWriter base(const std::string& arch, bool tokens = true) {
  GGUFWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "tiny " + arch);
  w.set_u32(arch + ".context_length", 256);
  w.set_u32(arch + ".embedding_length", 16);
  w.set_u32(arch + ".block_count", 3);
  w.set_u32(arch + ".feed_forward_length", 40);
  w.set_u32(arch + ".attention.head_count", 4);
  w.set_u32(arch + ".attention.head_count_kv", 2);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  if (!tokens) return w;
  std::vector<std::string> list;
  for (int i = 0; i < 10; ++i) list.push_back(fmt::format("t{}", i));
  w.set_string_array("tokenizer.ggml.tokens", list);
  std::vector<float> emb(16 * 10, 0.25f);
  w.add_tensor_f32("token_embd.weight", DType::F32, {16, 10}, emb);
  return w;
}

struct Loaded {
  std::string path;
  ModelConfig cfg;
};

Loaded load(const GGUFWriter& w) {
  Loaded l{scratch_file("cfg"), {}};
  w.write(l.path);
  auto f = GGUFFile::open(l.path);
  l.cfg = ModelConfig::from_gguf(*f);
  return l;
}

// Expects from_gguf to fail with `kind` and a message holding the path and `phrase`.
void expect_error(const GGUFWriter& w, ErrorKind kind, const std::string& phrase) {
  const std::string path = scratch_file("bad");
  w.write(path);
  auto f = GGUFFile::open(path);
  try {
    ModelConfig::from_gguf(*f);
    ADD_FAILURE() << "expected an error containing '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ModelConfig, Stories260K) {
  SPECMOE_REQUIRE_DATA("models/stories260K.gguf");
  auto f = GGUFFile::open(specmoe::testing::data_path("models/stories260K.gguf").string());
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.name, "llama");
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_ctx_train, 2048);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 5);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_freq_base, 10000.0f);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_FALSE(c.tied_output);
  EXPECT_FALSE(c.is_moe());
}

TEST(ModelConfig, LlamaDefaultsAndTiedOutput) {
  const auto l = load(base("llama"));
  const ModelConfig& c = l.cfg;
  EXPECT_EQ(c.name, "tiny llama");
  EXPECT_EQ(c.n_vocab, 10);
  EXPECT_EQ(c.head_dim, 4);     // 16 / 4
  EXPECT_EQ(c.rope_dims, 4);    // defaults to head_dim
  EXPECT_EQ(c.n_ff_expert, 40); // defaults to n_ff
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(c.tied_output);   // no output.weight
  EXPECT_TRUE(c.expert_weights_norm);
}

TEST(ModelConfig, MixtralStyleLlamaExperts) {
  GGUFWriter w = base("llama");
  w.set_u32("llama.expert_count", 8);
  w.set_u32("llama.expert_used_count", 2);
  std::vector<float> out(16 * 10, 1.0f);
  w.add_tensor_f32("output.weight", DType::F32, {16, 10}, out);
  const auto c = load(w).cfg;
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_expert, 40);
  EXPECT_TRUE(c.expert_weights_norm);  // Mixtral renormalises the top-k weights
  EXPECT_FALSE(c.tied_output);
}

TEST(ModelConfig, Qwen2MoeFromKeysAndTensorVocab) {
  GGUFWriter w;
  w.set_string("general.architecture", "qwen2moe");
  w.set_u32("qwen2moe.context_length", 32768);
  w.set_u32("qwen2moe.embedding_length", 32);
  w.set_u32("qwen2moe.block_count", 2);
  w.set_u32("qwen2moe.feed_forward_length", 64);
  w.set_u32("qwen2moe.attention.head_count", 4);
  w.set_u32("qwen2moe.attention.head_count_kv", 4);
  w.set_u32("qwen2moe.attention.key_length", 16);  // head_dim != n_embd / n_head
  w.set_u32("qwen2moe.attention.value_length", 16);
  w.set_f32("qwen2moe.rope.freq_base", 1000000.0f);
  w.set_u32("qwen2moe.expert_count", 60);
  w.set_u32("qwen2moe.expert_used_count", 4);
  w.set_u32("qwen2moe.expert_feed_forward_length", 24);
  w.set_u32("qwen2moe.expert_shared_feed_forward_length", 96);
  std::vector<float> emb(32 * 7, 0.5f);
  w.add_tensor_f32("token_embd.weight", DType::F32, {32, 7}, emb);  // no tokenizer: vocab from here
  const auto c = load(w).cfg;
  EXPECT_EQ(c.arch, Arch::Qwen2Moe);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(c.n_vocab, 7);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dims, 16);
  EXPECT_EQ(c.rope_freq_base, 1000000.0f);
  EXPECT_EQ(c.n_expert, 60);
  EXPECT_EQ(c.n_expert_used, 4);
  EXPECT_EQ(c.n_ff_expert, 24);
  EXPECT_EQ(c.n_ff_shared_expert, 96);
  EXPECT_FALSE(c.expert_weights_norm);  // Qwen-MoE: softmax without renormalisation
  EXPECT_TRUE(c.tied_output);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);  // default when the key is absent

  w.set_bool("qwen2moe.expert_weights_norm", true);  // an explicit key wins
  EXPECT_TRUE(load(w).cfg.expert_weights_norm);
}

TEST(ModelConfig, Qwen2AndGpt2) {
  GGUFWriter q = base("qwen2");
  const auto cq = load(q).cfg;
  EXPECT_EQ(cq.arch, Arch::Qwen2);
  EXPECT_EQ(cq.rope_style, RopeStyle::SplitHalves);

  GGUFWriter g = base("gpt2");
  g.set_f32("gpt2.attention.layer_norm_epsilon", 1e-4f);
  const auto cg = load(g).cfg;
  EXPECT_EQ(cg.arch, Arch::Gpt2);
  EXPECT_EQ(cg.rope_style, RopeStyle::None);
  EXPECT_EQ(cg.rope_dims, 0);
  EXPECT_FLOAT_EQ(cg.norm_eps, 1e-4f);
}

TEST(ModelConfig, RopeScaling) {
  GGUFWriter w = base("qwen2");
  w.set_string("qwen2.rope.scaling.type", "linear");
  w.set_f32("qwen2.rope.scaling.factor", 4.0f);
  EXPECT_EQ(load(w).cfg.rope_freq_scale, 0.25f);

  GGUFWriter old = base("llama");
  old.set_f32("llama.rope.scale_linear", 2.0f);  // pre-scaling.type files
  EXPECT_EQ(load(old).cfg.rope_freq_scale, 0.5f);

  GGUFWriter none = base("llama");
  none.set_string("llama.rope.scaling.type", "none");
  EXPECT_EQ(load(none).cfg.rope_freq_scale, 1.0f);

  GGUFWriter longrope = base("qwen2");
  longrope.set_string("qwen2.rope.scaling.type", "longrope");
  expect_error(longrope, ErrorKind::Unsupported, "qwen2.rope.scaling.type 'longrope' is unsupported");
  GGUFWriter llama3 = base("qwen2");  // llama3 factors by keys: llama files only
  llama3.set_string("qwen2.rope.scaling.type", "llama3");
  expect_error(llama3, ErrorKind::Unsupported, "qwen2.rope.scaling.type 'llama3' is unsupported");
}

TEST(ModelConfig, YarnAsLlamaCppResolvesIt) {
  // Qwen3's published YaRN setting: factor 4 over an original context of 32768, base 1e6,
  // head_dim 128 (here 16 heads of 8 would be too small: 2 heads of 128 in an n_embd of 16).
  GGUFWriter w = base("qwen3");
  w.set_u32("qwen3.attention.head_count", 2);
  w.set_u32("qwen3.attention.head_count_kv", 1);
  w.set_u32("qwen3.attention.key_length", 128);
  w.set_u32("qwen3.attention.value_length", 128);
  w.set_f32("qwen3.rope.freq_base", 1000000.0f);
  w.set_string("qwen3.rope.scaling.type", "yarn");
  w.set_f32("qwen3.rope.scaling.factor", 4.0f);
  w.set_u32("qwen3.rope.scaling.original_context_length", 32768);
  const ModelConfig c = load(w).cfg;
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.yarn_ext_factor, 1.0f);
  EXPECT_EQ(c.rope_n_ctx_orig, 32768);
  const LayerRope r = c.rope_at(0);
  // Correction range: d ln(L / (2 pi beta)) / (2 ln base) for beta 32 (floor) and 1 (ceil):
  // 128 ln(32768 / 201.06) / 27.631 = 23.6 -> 23; 128 ln(32768 / 6.283) / 27.631 = 39.7 -> 40.
  EXPECT_EQ(r.corr_low, 23.0f);
  EXPECT_EQ(r.corr_high, 40.0f);
  // Magnitude: 1 + 0.1 ln 4 (llama.cpp's attn_factor cancels its own, the op applies this one).
  EXPECT_NEAR(r.attn_factor, 1.0 + 0.1 * std::log(4.0), 1e-6);
  EXPECT_EQ(r.freq_base, 1000000.0f);
  // Without YaRN nothing of it is set; rope.scaling.attn_factor multiplies either way.
  GGUFWriter lin = base("llama");
  lin.set_f32("llama.rope.scaling.attn_factor", 0.5f);
  const LayerRope rl = load(lin).cfg.rope_at(0);
  EXPECT_EQ(rl.ext_factor, 0.0f);
  EXPECT_EQ(rl.attn_factor, 0.5f);
  EXPECT_EQ(rl.freq_scale, 1.0f);
}

TEST(ModelConfig, Llama3RopeFactors) {
  // By keys (llama only): Meta's formula, for base 500000, head_dim 128, factor 32 (Llama 3.2)
  // over 8192 positions: pair 0 (wavelength 2 pi) is kept, the last pair (~3.1M) divided by 32,
  // and pairs between the 2048 and 8192 wavelengths interpolated.
  GGUFWriter w = base("llama");
  w.set_u32("llama.embedding_length", 256);
  w.set_u32("llama.attention.head_count", 2);
  w.set_u32("llama.attention.head_count_kv", 1);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  w.set_string("llama.rope.scaling.type", "llama3");
  w.set_f32("llama.rope.scaling.factor", 32.0f);
  const ModelConfig c = load(w).cfg;
  EXPECT_EQ(c.rope_scaling, RopeScaling::Llama3);
  EXPECT_TRUE(c.rope_freq_factors);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);  // the factor lives in the per-pair factors
  EXPECT_EQ(c.rope_n_ctx_orig, 8192);
  const std::vector<float> f = c.llama3_rope_factors();
  ASSERT_EQ(f.size(), 64u);
  int kept = 0, divided = 0, smooth = 0;
  for (int i = 0; i < 64; ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * i / 128);
    if (wavelen < 2048) {
      EXPECT_EQ(f[i], 1.0f) << i;
      ++kept;
    } else if (wavelen > 8192) {
      EXPECT_EQ(f[i], 32.0f) << i;
      ++divided;
    } else {
      const double s = (8192 / wavelen - 1) / 3;
      EXPECT_NEAR(f[i], 1 / ((1 - s) / 32 + s), 1e-4) << i;
      ++smooth;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smooth, 0);
  // rope_freqs.weight in a llama file switches the factors on (bind_weights reads the tensor).
  GGUFWriter t = base("llama");
  const std::vector<float> two = {1.0f, 4.0f};
  t.add_tensor_f32("rope_freqs.weight", DType::F32, {2}, two);
  EXPECT_TRUE(load(t).cfg.rope_freq_factors);
  EXPECT_EQ(load(t).cfg.rope_scaling, RopeScaling::None);
}

TEST(ModelConfig, Qwen3AndGemma3) {
  GGUFWriter q = base("qwen3");
  q.set_u32("qwen3.attention.key_length", 8);
  q.set_u32("qwen3.attention.value_length", 8);
  const ModelConfig cq = load(q).cfg;
  EXPECT_EQ(cq.arch, Arch::Qwen3);
  EXPECT_EQ(cq.rope_style, RopeStyle::SplitHalves);
  EXPECT_TRUE(cq.qk_norm);
  EXPECT_FALSE(cq.post_norms);
  EXPECT_EQ(cq.head_dim, 8);  // not 16 / 4
  EXPECT_EQ(cq.rope_dims, 8);
  EXPECT_EQ(cq.n_swa, 0);
  EXPECT_FLOAT_EQ(cq.attention_scale(), 1.0f / std::sqrt(8.0f));

  // gemma3 as llama.cpp's converter writes it: a window, no pattern key (default 6), no
  // freq_base_swa (default 10000).
  GGUFWriter g = base("gemma3");
  g.set_u32("gemma3.block_count", 13);
  g.set_u32("gemma3.attention.sliding_window", 512);
  g.set_f32("gemma3.rope.freq_base", 1000000.0f);
  const ModelConfig cg = load(g).cfg;
  EXPECT_EQ(cg.arch, Arch::Gemma3);
  EXPECT_TRUE(cg.qk_norm);
  EXPECT_TRUE(cg.post_norms);
  EXPECT_EQ(cg.ffn_act, FfnActivation::GeluTanh);
  EXPECT_FLOAT_EQ(cg.embd_scale, 4.0f);  // sqrt(16)
  EXPECT_EQ(cg.n_swa, 512);
  EXPECT_EQ(cg.swa_pattern, 6);
  for (int l = 0; l < 13; ++l) {
    EXPECT_EQ(cg.is_swa(l), l % 6 != 5) << l;
    EXPECT_EQ(cg.window(l), l % 6 != 5 ? 512 : 0) << l;
    EXPECT_EQ(cg.rope_at(l).freq_base, l % 6 != 5 ? 10000.0f : 1000000.0f) << l;
  }
  EXPECT_EQ(cg.final_logit_softcap, 0.0f);
  EXPECT_FLOAT_EQ(cg.attention_scale(), 0.5f);  // 1/sqrt(head_dim 4)

  // Linear scaling (Gemma 3 4B+: factor 8) applies to the global layers only.
  g.set_string("gemma3.rope.scaling.type", "linear");
  g.set_f32("gemma3.rope.scaling.factor", 8.0f);
  g.set_f32("gemma3.rope.freq_base_swa", 5000.0f);
  g.set_f32("gemma3.final_logit_softcapping", 30.0f);
  g.set_u32("gemma3.attention.sliding_window_pattern", 4);
  const ModelConfig cs = load(g).cfg;
  EXPECT_EQ(cs.rope_at(3).freq_scale, 0.125f);
  EXPECT_EQ(cs.rope_at(3).freq_base, 1000000.0f);
  EXPECT_EQ(cs.rope_at(2).freq_scale, 1.0f);
  EXPECT_EQ(cs.rope_at(2).freq_base, 5000.0f);
  EXPECT_EQ(cs.final_logit_softcap, 30.0f);
  for (int l = 0; l < 13; ++l) EXPECT_EQ(cs.is_swa(l), l % 4 != 3) << l;

  // A per-layer pattern (bool array, as newer converters write it).
  GGUFWriter a = base("gemma3");
  a.set_u32("gemma3.attention.sliding_window", 8);
  GGUFValue flags;
  flags.type = GGUFType::ARRAY;
  flags.elem_type = GGUFType::BOOL;
  for (int l = 0; l < 3; ++l) {
    GGUFValue b;
    b.type = GGUFType::BOOL;
    b.i = l != 1;
    flags.items.push_back(b);
  }
  a.set_value("gemma3.attention.sliding_window_pattern", flags);
  const ModelConfig ca = load(a).cfg;
  EXPECT_EQ(ca.swa_pattern, 0);
  EXPECT_TRUE(ca.is_swa(0));
  EXPECT_FALSE(ca.is_swa(1));
  EXPECT_TRUE(ca.is_swa(2));
  flags.items.pop_back();
  a.set_value("gemma3.attention.sliding_window_pattern", flags);
  expect_error(a, ErrorKind::Format, "has 2 entries for 3 layers");

  // The 27B (62 layers) scales queries by 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim).
  GGUFWriter big = base("gemma3");
  big.set_u32("gemma3.block_count", 62);
  big.set_u32("gemma3.attention.key_length", 16);
  big.set_u32("gemma3.attention.value_length", 16);
  EXPECT_FLOAT_EQ(load(big).cfg.attention_scale(), 0.5f);  // 1/sqrt(16 / 4), not 1/sqrt(16)
}

TEST(ModelConfig, PerLayerHeadCounts) {
  GGUFWriter w = base("llama");
  w.set_i32_array("llama.attention.head_count_kv", {2, 2, 2});
  EXPECT_EQ(load(w).cfg.n_head_kv, 2);
  w.set_i32_array("llama.attention.head_count_kv", {2, 1, 2});
  expect_error(w, ErrorKind::Unsupported, "'llama.attention.head_count_kv' varies per layer");
}

TEST(ModelConfig, UnknownArchitecture) {
  GGUFWriter w = base("xyz");
  const std::string path = scratch_file("xyz");
  w.write(path);
  auto f = GGUFFile::open(path);
  try {
    ModelConfig::from_gguf(*f);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_EQ(std::string(e.what()),
              path + ": unsupported architecture 'xyz' (supported: llama, qwen2, qwen2moe, gpt2, qwen3, qwen3moe, "
                     "gemma, gemma2, gemma3, olmoe, olmo2, phi2, phi3, deepseek2, granite, granitemoe, smollm3, "
                     "stablelm, starcoder2, gptneox, ernie4_5, exaone, exaone4, mistral3, command-r, cohere2, internlm2, "
                     "qwen2vl, seed_oss, minicpm, glm4, hunyuan-dense, qwen3vl, qwen3vlmoe, deepseek, dots1, glm4moe, "
                     "ernie4_5-moe, bailingmoe2, hunyuan-moe, arcee, nemotron, starcoder, gpt-oss, "
                     "minimax-m2, bloom, mpt, refact, jais, falcon, olmo, baichuan, dbrx, phimoe, qwen, xverse, orion, codeshell, "
                     "plamo, chatglm, exaone-moe, lfm2, lfm2moe, smallthinker, qwen35, qwen35moe, granitehybrid, mamba2, nemotron_h, eagle3, dflash, maincoder, apertus, qwen3next, mellum, bailingmoe, nanbeige, llama4, mistral4, nemotron_h_moe, afmoe, jais2, maple, spark2_5)");
  }
}

TEST(ModelConfig, InvalidFilesAreRejected) {
  struct Case {
    const char* what;
    std::function<void(GGUFWriter&)> edit;
    ErrorKind kind;
    const char* phrase;
  };
  const Case cases[] = {
      {"kv heads", [](GGUFWriter& w) { w.set_u32("llama.attention.head_count_kv", 3); }, ErrorKind::Format,
       "n_head 4 is not a multiple of n_head_kv 3"},
      {"experts used", [](GGUFWriter& w) { w.set_u32("llama.expert_count", 2); w.set_u32("llama.expert_used_count", 3); },
       ErrorKind::Format, "n_expert_used is 3 (must be 1 to 2)"},
      {"layers", [](GGUFWriter& w) { w.set_u32("llama.block_count", 5000); }, ErrorKind::Format,
       "n_layer is 5000 (must be 1 to 1024)"},
      {"embd", [](GGUFWriter& w) { w.set_u32("llama.embedding_length", 100000); }, ErrorKind::Format,
       "n_embd is 100000"},
      {"zero ff", [](GGUFWriter& w) { w.set_u32("llama.feed_forward_length", 0); }, ErrorKind::Format,
       "n_ff is 0"},
      {"head split", [](GGUFWriter& w) { w.set_u32("llama.attention.head_count", 3); w.set_u32("llama.attention.head_count_kv", 3); },
       ErrorKind::Format, "embedding_length 16 is not a multiple of head_count 3"},
      {"zero heads", [](GGUFWriter& w) { w.set_u32("llama.attention.head_count", 0); }, ErrorKind::Format,
       "llama.attention.head_count is 0"},
      {"huge value", [](GGUFWriter& w) { w.set_u64("llama.context_length", 1ull << 40); }, ErrorKind::Format,
       "'llama.context_length' value 1099511627776 is out of range"},
      {"wrong type", [](GGUFWriter& w) { w.set_string("llama.block_count", "three"); }, ErrorKind::Format,
       "'llama.block_count' has type STRING"},
      {"odd rope", [](GGUFWriter& w) { w.set_u32("llama.rope.dimension_count", 3); }, ErrorKind::Format,
       "rope_dims 3 is odd"},
      {"bad eps", [](GGUFWriter& w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", -1.0f); }, ErrorKind::Format,
       "norm_eps -1 is not in (0, 1)"},
      {"vocab", [](GGUFWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {}); }, ErrorKind::Format,
       "n_vocab is 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    GGUFWriter w = base("llama");
    c.edit(w);
    expect_error(w, c.kind, c.phrase);
  }
}

// Found by fuzz_model (tests/regression/model/gemma3-block-count-2g.gguf): the layer count was
// range-checked only after the gemma readers had sized their per-layer sliding-window flags by
// it, so a block_count of 2^31 - 1 was a 2 GiB allocation (and a loop as long) before the error.
TEST(ModelConfig, HugeLayerCountIsRefusedBeforeAnyPerLayerArray) {
  for (const char* arch : {"gemma2", "gemma3", "llama"}) {
    GGUFWriter w = base(arch);
    w.set_u32(std::string(arch) + ".block_count", 0x7fffffffu);
    w.set_u32(std::string(arch) + ".attention.sliding_window", 512);
    expect_error(w, ErrorKind::Format, "n_layer is 2147483647 (must be 1 to 1024)");
  }
}

// Found by fuzz_model in CI: deepseek2's latent width kv_lora_rank + rope dims was summed as int,
// each in range alone, so a rank near 2^31 overflowed (UBSan) before the width check.
TEST(ModelConfig, Deepseek2LatentWidthThatOverflowsIntIsRefused) {
  GGUFWriter w = base("deepseek2");
  w.set_u32("deepseek2.attention.kv_lora_rank", 0x7fffffffu);
  w.set_u32("deepseek2.attention.key_length_mla", 48);
  w.set_u32("deepseek2.attention.value_length_mla", 32);
  w.set_u32("deepseek2.rope.dimension_count", 16);
  expect_error(w, ErrorKind::Format, "deepseek2.attention.kv_lora_rank 2147483647 + deepseek2.rope.dimension_count 16 is out of range");
}

// A deepseek2 header with MLA and experts (no tensors beyond the embedding: ModelConfig only).
// The vocabulary from vocab_size (no token list), as llama.cpp reads it first.
GGUFWriter deepseek2_base(const std::string& arch, uint32_t layers, uint32_t vocab) {
  GGUFWriter w = base(arch, false);
  w.set_u32(arch + ".block_count", layers);
  w.set_u32(arch + ".vocab_size", vocab);
  w.set_u32(arch + ".attention.kv_lora_rank", 32);
  w.set_u32(arch + ".attention.key_length_mla", 48);
  w.set_u32(arch + ".attention.value_length_mla", 32);
  w.set_u32(arch + ".attention.head_count_kv", 1);
  w.set_u32(arch + ".rope.dimension_count", 16);
  w.set_u32(arch + ".expert_count", 8);
  w.set_u32(arch + ".expert_used_count", 2);
  w.set_u32(arch + ".expert_feed_forward_length", 16);
  w.set_u32(arch + ".expert_shared_count", 1);
  return w;
}

TEST(ModelConfig, Deepseek2GatingTemperatureAndMistral4) {
  // Without expert_gating_func, softmax, but sigmoid for GLM-4.7-Flash's shape (47 or 48 layers and
  // 154880 tokens), as llama.cpp decides for its older files; a key always wins.
  GGUFWriter w = deepseek2_base("deepseek2", 47, 10);
  EXPECT_EQ(load(w).cfg.expert_gating, ExpertGating::Softmax);
  w.set_u32("deepseek2.vocab_size", 154880);
  EXPECT_EQ(load(w).cfg.expert_gating, ExpertGating::Sigmoid);
  w.set_u32("deepseek2.expert_gating_func", 1);
  EXPECT_EQ(load(w).cfg.expert_gating, ExpertGating::Softmax);
  // Mistral Large 3's temperature: scale over length (offset 0, every layer); a scale without a
  // length is refused (llama.cpp asserts).
  GGUFWriter t = deepseek2_base("deepseek2", 3, 10);
  t.set_f32("deepseek2.attention.temperature_scale", 0.25f);
  expect_error(t, ErrorKind::Format, "deepseek2.attention.temperature_length is 0");
  t.set_u32("deepseek2.attention.temperature_length", 4096);
  const ModelConfig c = load(t).cfg;
  EXPECT_FLOAT_EQ(c.attn_temp_scale, 0.25f);
  EXPECT_EQ(c.attn_temp_floor, 4096);
  EXPECT_FLOAT_EQ(c.attn_temp_offset, 0.0f);
  // mistral4: deepseek2 by another name.
  const ModelConfig m = load(deepseek2_base("mistral4", 3, 10)).cfg;
  EXPECT_EQ(m.arch, Arch::Deepseek2);
  EXPECT_TRUE(m.is_mla());
  EXPECT_EQ(m.kv_lora_rank, 32);
}

TEST(ModelConfig, MapleNeedsItsWindowFlagsAndClamps) {
  // maple: experts, the window, one window flag per layer (an array) and swiglu_clamp_exp (a value
  // for every layer or one per layer) are required, as llama.cpp's loader reads them.
  GGUFWriter w = base("maple");
  w.set_u32("maple.expert_count", 4);
  w.set_u32("maple.expert_used_count", 2);
  w.set_u32("maple.expert_feed_forward_length", 8);
  expect_error(w, ErrorKind::Format, "maple.attention.sliding_window");
  w.set_u32("maple.attention.sliding_window", 8);
  expect_error(w, ErrorKind::Format, "maple.attention.sliding_window_pattern' is missing");
  w.set_u32("maple.attention.sliding_window_pattern", 2);
  expect_error(w, ErrorKind::Format, "must be an array of one flag per layer");
  w.set_i32_array("maple.attention.sliding_window_pattern", {1, 0, 1});
  expect_error(w, ErrorKind::Format, "maple.swiglu_clamp_exp");
  w.set_f32_array("maple.swiglu_clamp_exp", {7.0f, 7.0f});
  expect_error(w, ErrorKind::Format, "2 values for 3 layers");
  w.set_f32_array("maple.swiglu_clamp_exp", {7.0f, -1.0f, 7.0f});
  expect_error(w, ErrorKind::Format, "layer 1's limit -1 is negative");
  w.set_f32("maple.swiglu_clamp_exp", 10.0f);
  const ModelConfig c = load(w).cfg;
  EXPECT_EQ(c.arch, Arch::Maple);
  EXPECT_EQ(c.swiglu_clamp, std::vector<float>(3, 10.0f));
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(c.window(l), l == 1 ? 0 : 8) << l;
    EXPECT_EQ(c.has_rope(l), l != 1) << l;
  }
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, c.rope_freq_base);
}

// Found by fuzz_model (tests/regression/model/qwen3vl-rope-dims-1g-slow.gguf): the interleaved
// M-RoPE reader sized a per-pair table by rope.dimension_count before ModelConfig::validate
// checked it, so a count near 2^30 was a 43 s loop (under the sanitizers) before the error.
TEST(ModelConfig, HugeRopeDimsAreRefusedBeforeTheMRopeTable) {
  GGUFWriter w = base("qwen3vl");
  w.set_u32("qwen3vl.rope.dimension_count", 1u << 30);
  w.set_i32_array("qwen3vl.rope.dimension_sections", {2, 1, 1, 0});
  expect_error(w, ErrorKind::Format, "qwen3vl.rope.dimension_count is 1073741824 (must be 2 to 4096)");
}

TEST(ModelConfig, MissingRequiredKey) {
  // base() sets block_count; build the same header without it.
  GGUFWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 256);
  w.set_u32("llama.embedding_length", 16);
  w.set_u32("llama.attention.head_count", 4);
  w.set_u32("llama.feed_forward_length", 40);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  expect_error(w, ErrorKind::Format, "metadata key 'llama.block_count' is missing");
}

TEST(ModelConfig, ValidateOnPlainStruct) {
  ModelConfig c;
  c.n_vocab = 32;
  c.n_ctx_train = 64;
  c.n_embd = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = 4;
  c.head_dim = 4;
  c.n_ff = 32;
  c.rope_dims = 4;
  EXPECT_NO_THROW(c.validate());
  c.n_expert = 4;
  c.n_expert_used = 0;
  c.n_ff_expert = 8;
  EXPECT_THROW(c.validate(), Error);  // experts but none used
  c.n_expert_used = 2;
  EXPECT_NO_THROW(c.validate());
  c.n_vocab = (1 << 22) + 1;
  EXPECT_THROW(c.validate(), Error);
}

// The keys of the dense architectures added beside llama's (llama.cpp's load_arch_hparams for each):
// what each reads, its defaults, and the forms specmoe refuses with the key named.
TEST(ModelConfig, GraniteOlmo2Smollm3StableLmStarcoder2GemmaGptNeoxPhi2) {
  {
    GGUFWriter w = base("granite");
    w.set_f32("granite.logit_scale", 8.0f);
    w.set_f32("granite.embedding_scale", 12.0f);
    w.set_f32("granite.residual_scale", 0.22f);
    w.set_f32("granite.attention.scale", 0.015625f);
    const ModelConfig c = load(w).cfg;
    EXPECT_EQ(c.arch, Arch::Granite);
    EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
    EXPECT_FLOAT_EQ(c.logit_scale, 8.0f);
    EXPECT_FLOAT_EQ(c.embd_scale, 12.0f);
    EXPECT_FLOAT_EQ(c.residual_scale, 0.22f);
    EXPECT_FLOAT_EQ(c.attention_scale(), 0.015625f);
    // Absent (or 0) multipliers mean none, as llama.cpp's zero defaults do; logit_scale is required.
    GGUFWriter d = base("granite");
    d.set_f32("granite.logit_scale", 1.0f);
    d.set_f32("granite.residual_scale", 0.0f);
    const ModelConfig cd = load(d).cfg;
    EXPECT_FLOAT_EQ(cd.residual_scale, 1.0f);
    EXPECT_FLOAT_EQ(cd.embd_scale, 1.0f);
    EXPECT_FLOAT_EQ(cd.attention_scale(), 0.5f);  // 1/sqrt(16 / 4)
    expect_error(base("granite"), ErrorKind::Format, "metadata key 'granite.logit_scale' is missing");
  }
  {
    GGUFWriter w = base("olmo2");
    const ModelConfig c = load(w).cfg;
    EXPECT_FALSE(c.pre_norms);
    EXPECT_TRUE(c.post_norms && c.qk_norm_full);
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    EXPECT_EQ(c.n_swa, 0);
    EXPECT_FALSE(c.swa_plain_rope);
  }
  {
    // OLMo 3: olmo2 with windows on every layer but each fourth (the default period), its local
    // layers rotating with the global base and no scaling or YaRN (llama.cpp ignores
    // rope.freq_base_swa there), the global ones with the file's YaRN.
    GGUFWriter w = base("olmo2");
    w.set_u32("olmo2.block_count", 8);
    w.set_u32("olmo2.attention.sliding_window", 4096);
    w.set_f32("olmo2.rope.freq_base", 500000.0f);
    w.set_f32("olmo2.rope.freq_base_swa", 10000.0f);
    w.set_string("olmo2.rope.scaling.type", "yarn");
    w.set_f32("olmo2.rope.scaling.factor", 8.0f);
    w.set_u32("olmo2.rope.scaling.original_context_length", 64);
    const ModelConfig c = load(w).cfg;
    EXPECT_EQ(c.n_swa, 4096);
    EXPECT_TRUE(c.swa_plain_rope);
    EXPECT_FALSE(c.nope_global);
    for (int l = 0; l < 8; ++l) {
      SCOPED_TRACE(l);
      EXPECT_EQ(c.is_swa(l), l % 4 != 3);
      EXPECT_TRUE(c.has_rope(l));
      const LayerRope r = c.rope_at(l);
      EXPECT_FLOAT_EQ(r.freq_base, 500000.0f);
      EXPECT_FLOAT_EQ(r.freq_scale, c.is_swa(l) ? 1.0f : 0.125f);
      EXPECT_FLOAT_EQ(r.ext_factor, c.is_swa(l) ? 0.0f : 1.0f);
      // The global layers' magnitude: mscale(8) / (1 + 0.1 ln 8), times 1 + 0.1 ln 8 in the op.
      EXPECT_NEAR(r.attn_factor, c.is_swa(l) ? 1.0f : 1.0f + 0.1f * std::log(8.0f), 1e-6);
    }
    // The converter's form: one flag per layer.
    GGUFWriter a = base("olmo2");
    a.set_u32("olmo2.attention.sliding_window", 16);
    GGUFValue flags;
    flags.type = GGUFType::ARRAY;
    flags.elem_type = GGUFType::BOOL;
    for (bool b : {false, true, true}) {
      GGUFValue e;
      e.type = GGUFType::BOOL;
      e.i = b;
      flags.items.push_back(e);
    }
    a.set_value("olmo2.attention.sliding_window_pattern", flags);
    const ModelConfig ca = load(a).cfg;
    EXPECT_TRUE(!ca.is_swa(0) && ca.is_swa(1) && ca.is_swa(2));
  }
  {
    // EXAONE 4.0 32B (exaone4 with 64 layers): windows of 4096 unless the key says otherwise on
    // every layer but each fourth, which has no RoPE; the local layers rotate as usual.
    GGUFWriter w = base("exaone4");
    w.set_u32("exaone4.block_count", 64);
    const ModelConfig c = load(w).cfg;
    EXPECT_EQ(c.n_swa, 4096);
    EXPECT_TRUE(c.nope_global);
    EXPECT_FALSE(c.swa_plain_rope);
    for (int l = 0; l < 64; ++l) {
      EXPECT_EQ(c.is_swa(l), l % 4 != 3) << l;
      EXPECT_EQ(c.has_rope(l), l % 4 != 3) << l;
    }
    w.set_u32("exaone4.attention.sliding_window", 0);
    expect_error(w, ErrorKind::Format, "exaone4.attention.sliding_window is 0");
    // Below 64 layers llama.cpp gives exaone4 no windows, whatever the keys say.
    GGUFWriter s = base("exaone4");
    s.set_u32("exaone4.attention.sliding_window", 16);
    const ModelConfig cs = load(s).cfg;
    EXPECT_EQ(cs.n_swa, 0);
    EXPECT_TRUE(cs.has_rope(3 - 1));
  }
  {
    // command-r: LayerNorm (its key), a parallel residual, the head from token_embd, logits times
    // an optional logit_scale; Command R+ (64 layers: per-head q/k LayerNorms) is refused.
    GGUFWriter w = base("command-r");
    w.set_f32("command-r.attention.layer_norm_epsilon", 1e-5f);
    const ModelConfig c = load(w).cfg;
    EXPECT_TRUE(c.layer_norm && c.parallel_residual && c.tied_output);
    EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
    EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
    EXPECT_FLOAT_EQ(c.logit_mult, 1.0f);
    EXPECT_EQ(c.n_swa, 0);
    w.set_f32("command-r.logit_scale", 0.0625f);
    EXPECT_FLOAT_EQ(load(w).cfg.logit_mult, 0.0625f);
    w.set_u32("command-r.block_count", 64);
    expect_error(w, ErrorKind::Unsupported, "command-r with 64 layers (Command R+");
    // cohere2: logit_scale and the window are required; every fourth layer is global, without RoPE.
    GGUFWriter g = base("cohere2");
    g.set_u32("cohere2.block_count", 8);
    g.set_f32("cohere2.logit_scale", 0.25f);
    expect_error(g, ErrorKind::Format, "metadata key 'cohere2.attention.sliding_window' is missing");
    g.set_u32("cohere2.attention.sliding_window", 4096);
    const ModelConfig c2 = load(g).cfg;
    EXPECT_FLOAT_EQ(c2.logit_mult, 0.25f);
    EXPECT_EQ(c2.n_swa, 4096);
    EXPECT_TRUE(c2.nope_global);
    for (int l = 0; l < 8; ++l) {
      EXPECT_EQ(c2.is_swa(l), l % 4 != 3) << l;
      EXPECT_EQ(c2.has_rope(l), l % 4 != 3) << l;
    }
    GGUFWriter n = base("cohere2");
    n.set_u32("cohere2.attention.sliding_window", 64);
    expect_error(n, ErrorKind::Format, "metadata key 'cohere2.logit_scale' is missing");
  }
  {
    // qwen2vl: the M-RoPE sections are required; a fourth section (vision positions, 0 for text)
    // with pairs is refused, as text would leave those pairs unrotated.
    GGUFWriter w = base("qwen2vl");
    expect_error(w, ErrorKind::Format, "metadata key 'qwen2vl.rope.dimension_sections' is missing");
    w.set_i32_array("qwen2vl.rope.dimension_sections", {0, 1, 1, 0});
    const ModelConfig c = load(w).cfg;
    EXPECT_EQ(c.arch, Arch::Qwen2Vl);
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    w.set_i32_array("qwen2vl.rope.dimension_sections", {0, 1, 0, 1});
    expect_error(w, ErrorKind::Unsupported, "fourth M-RoPE section 1 pairs");
  }
  {
    // glm4: adjacent pairs; with M-RoPE sections (GLM-4.1V) split halves for text; a fourth section
    // with pairs refused. nextn_predict_layers (any architecture) takes the last blocks off the
    // forward, and cannot take them all.
    GGUFWriter w = base("glm4");
    EXPECT_EQ(load(w).cfg.rope_style, RopeStyle::Adjacent);
    w.set_i32_array("glm4.rope.dimension_sections", {0, 0, 0, 0});
    EXPECT_EQ(load(w).cfg.rope_style, RopeStyle::Adjacent);
    w.set_i32_array("glm4.rope.dimension_sections", {1, 1, 0, 0});
    EXPECT_EQ(load(w).cfg.rope_style, RopeStyle::SplitHalves);
    w.set_i32_array("glm4.rope.dimension_sections", {1, 0, 0, 1});
    EXPECT_EQ(load(w).cfg.rope_style, RopeStyle::Adjacent);  // not M-RoPE (llama.cpp's use_mrope)
    w.set_i32_array("glm4.rope.dimension_sections", {1, 1, 0, 1});
    expect_error(w, ErrorKind::Unsupported, "fourth M-RoPE section 1 pairs");
    GGUFWriter n = base("glm4");
    n.set_u32("glm4.nextn_predict_layers", 1);
    EXPECT_EQ(load(n).cfg.n_layer, 2);
    n.set_u32("glm4.nextn_predict_layers", 3);
    expect_error(n, ErrorKind::Format, "glm4.nextn_predict_layers is 3 for 3 blocks");
  }
  {
    // hunyuan-dense: QK-norm after RoPE; rope.scaling.alpha scales the base by alpha^(d / (d - 2));
    // an expert_count of 1 is dense; M-RoPE sections (Hunyuan-VL's) are refused.
    GGUFWriter w = base("hunyuan-dense");
    w.set_f32("hunyuan-dense.rope.freq_base", 10000.0f);
    w.set_f32("hunyuan-dense.rope.scaling.alpha", 1000.0f);
    w.set_u32("hunyuan-dense.expert_count", 1);
    w.set_u32("hunyuan-dense.attention.key_length", 8);
    w.set_u32("hunyuan-dense.attention.value_length", 8);
    const ModelConfig c = load(w).cfg;
    EXPECT_TRUE(c.qk_norm && c.qk_norm_after_rope);
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    EXPECT_EQ(c.n_expert, 0);
    EXPECT_NEAR(c.rope_freq_base, 1e8, 1e8 * 1e-6);  // 10000 x 1000^(8 / 6), in float as llama.cpp
    w.set_i32_array("hunyuan-dense.rope.dimension_sections", {1, 1, 1, 1});
    expect_error(w, ErrorKind::Unsupported, "hunyuan-dense with M-RoPE sections");
  }
  {
    // apertus: xIELU's four scalars are required, one value or one per layer, finite; LongRoPE refused.
    GGUFWriter w = base("apertus");
    expect_error(w, ErrorKind::Format, "metadata key 'xielu.alpha_n' is missing");
    w.set_f32("xielu.alpha_n", 0.8f);
    w.set_f32_array("xielu.alpha_p", std::vector<float>(size_t{3}, 0.9f));
    w.set_f32("xielu.beta", 0.5f);
    w.set_f32("xielu.eps", -1e-6f);
    const ModelConfig c = load(w).cfg;
    EXPECT_EQ(c.ffn_act, FfnActivation::XIelu);
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
    ASSERT_EQ(c.xielu.size(), size_t{3});
    EXPECT_FLOAT_EQ(c.xielu.back().alpha_n, 0.5f + std::log(1.0f + std::exp(0.8f)));
    w.set_f32_array("xielu.alpha_p", {0.9f});
    expect_error(w, ErrorKind::Format, "xielu.alpha_p: 1 values for");
    w.set_f32_array("xielu.alpha_p", std::vector<float>(size_t{3}, 0.9f));
    w.set_f32("xielu.beta", std::numeric_limits<float>::infinity());
    expect_error(w, ErrorKind::Format, "xielu.beta: value inf out of range");
  }
  {
    // qwen3vl: the interleaved M-RoPE sections are required and bounded by the rotated dims.
    GGUFWriter w = base("qwen3vl");
    expect_error(w, ErrorKind::Format, "metadata key 'qwen3vl.rope.dimension_sections' is missing");
    w.set_i32_array("qwen3vl.rope.dimension_sections", {1, 1, 0, 0});  // 2 pairs: both rotate
    EXPECT_TRUE(load(w).cfg.rope_still_pairs.empty());
    w.set_i32_array("qwen3vl.rope.dimension_sections", {1, 0, 0, 1});  // pair 1: the fourth section
    const ModelConfig c = load(w).cfg;
    ASSERT_EQ(c.rope_still_pairs.size(), 2u);
    EXPECT_TRUE(!c.rope_still_pairs[0] && c.rope_still_pairs[1]);
    w.set_i32_array("qwen3vl.rope.dimension_sections", {3, 1, 1, 0});
    expect_error(w, ErrorKind::Format, "sums to 5 for 4 RoPE dims");
  }
  {
    const ModelConfig c = load(base("smollm3")).cfg;
    EXPECT_EQ(c.no_rope_step, 4);
    EXPECT_TRUE(c.has_rope(0) && c.has_rope(1) && !c.has_rope(3));
  }
  for (const char* arch : {"stablelm", "starcoder2"}) {
    GGUFWriter w = base(arch);
    w.set_f32(std::string(arch) + ".attention.layer_norm_epsilon", 1e-5f);  // LayerNorm's key, not the RMS one
    w.set_u32(std::string(arch) + ".rope.dimension_count", 2);
    const ModelConfig c = load(w).cfg;
    EXPECT_TRUE(c.layer_norm) << arch;
    EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f) << arch;
    EXPECT_EQ(c.rope_dims, 2) << arch;
    EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves) << arch;
  }
  {
    GGUFWriter w = base("gptneox");
    w.set_bool("gptneox.use_parallel_residual", true);
    EXPECT_TRUE(load(w).cfg.parallel_residual);
    EXPECT_TRUE(load(w).cfg.layer_norm);
    expect_error(base("gptneox"), ErrorKind::Format, "metadata key 'gptneox.use_parallel_residual' is missing");
    const ModelConfig p = load(base("phi2")).cfg;
    EXPECT_TRUE(p.parallel_residual && p.layer_norm);
    EXPECT_EQ(p.rope_style, RopeStyle::SplitHalves);
  }
  {
    GGUFWriter w = base("gemma");
    w.add_tensor_f32("output.weight", DType::F32, {16, 10}, std::vector<float>(160, 0.5f));
    const ModelConfig c = load(w).cfg;
    EXPECT_FLOAT_EQ(c.embd_scale, 4.0f);
    EXPECT_EQ(c.ffn_act, FfnActivation::GeluTanh);
    EXPECT_TRUE(c.tied_output);  // llama.cpp reads gemma's head from token_embd even beside an output.weight
  }
}
