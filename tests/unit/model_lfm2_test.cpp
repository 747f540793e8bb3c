// lfm2 (Liquid AI's LFM2): gated short-convolution layers beside attention layers. The logits
// against the double-precision reference forward (tests/reference_forward.h, which reads the
// layer pattern and taps from the file itself); the convolution's state carried in the KV cache:
// batches equal one token at a time, trees equal each root-to-leaf path run as a chain, and the
// cache after truncate / keep equals a fresh run over the kept tokens, all bit for bit; the keys
// llama.cpp reads for it, and clear errors for files that break them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "reference_forward.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::ReferenceForward;
using specmoe::testing::scratch_dir;

namespace {

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

LoadOptions f32_caches() {
  LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  return o;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

const std::vector<int32_t> kIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};

std::string write_preset(const std::string& preset, DType type = DType::F32) {
  SynthSpec s = synth_spec(preset);
  s.type = type;
  const std::string path = scratch(fmt::format("lfm2_{}_{}.gguf", preset, dtype_name(type)));
  synth_write(s, path, 42);
  return path;
}

// max |logit - reference| / max |reference logit| over kIds.
double reference_rel_error(const std::string& path) {
  auto m = Model::load(path, f32_caches());
  KVCache kv = m->new_cache(32);
  std::vector<float> got;
  m->forward(kIds, kv).logits.to_host(got);
  const auto ref = ReferenceForward(path).run(kIds);
  const int V = m->config().n_vocab;
  double max_ref = 0, max_diff = 0;
  for (size_t t = 0; t < kIds.size(); ++t)
    for (int j = 0; j < V; ++j) {
      max_ref = std::max(max_ref, std::fabs(ref[t][j]));
      max_diff = std::max(max_diff, std::fabs(ref[t][j] - got[t * V + j]));
    }
  EXPECT_GT(max_ref, 1.0) << path;
  return max_diff / max_ref;
}

// Rewrites one metadata key of a GGUF file (an int32 array or a u32), or drops it.
void copy_with(const std::string& src, const std::string& dst, const std::string& key,
               const std::vector<int32_t>& array, std::optional<uint32_t> u32, bool drop = false) {
  auto f = GGUFFile::open(src);
  GGUFWriter w;
  for (const auto& [k, v] : f->metadata()) {
    if (k == key) continue;
    w.set_value(k, v);
  }
  if (!drop) {
    if (u32)
      w.set_u32(key, *u32);
    else
      w.set_i32_array(key, array);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  w.write(dst);
}

}  // namespace

TEST(Lfm2, ReadsItsLayerPatternAndTaps) {
  auto m = Model::load(write_preset("lfm2-tiny"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Lfm2);
  ASSERT_EQ(c.conv_layers.size(), 6u);
  const std::vector<uint8_t> pattern = {1, 1, 0, 1, 0, 1};
  EXPECT_EQ(c.conv_layers, pattern);
  EXPECT_EQ(c.shortconv_l_cache, 3);
  EXPECT_EQ(c.n_head_kv, 2);  // the attention layers' count, not the convolution layers' 0
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(c.n_swa, 0);
  // A convolution layer caches B * x (n_embd F32) per token whatever the cache types; an attention
  // layer keys and values of the asked type.
  LoadOptions f16;
  f16.cache_types = {DType::F16, DType::F16};
  auto h = Model::load(write_preset("lfm2-tiny"), f16);
  KVCache kv = h->new_cache(16);
  EXPECT_EQ(kv.layout(0), (KVLayerLayout{64, 0, DType::F32, DType::F32, 0}));
  EXPECT_EQ(kv.layout(2), (KVLayerLayout{32, 32, DType::F16, DType::F16, 0}));
  EXPECT_EQ(c.kv_bytes_per_token(), 4 * 64 * 4 + 2 * (32 + 32) * 4);
  // Windows go to the attention layers only.
  auto w = Model::load(write_preset("lfm2-swa-tiny"), f32_caches());
  EXPECT_EQ(w->config().n_swa, 4);
  for (int l = 0; l < 6; ++l) EXPECT_EQ(w->config().is_swa(l), pattern[l] == 0) << l;
  KVCache wkv = w->new_cache(16);
  EXPECT_EQ(wkv.layout(2).window, 4);
  EXPECT_EQ(wkv.layout(3).window, 0);
}

TEST(Lfm2, MatchesReference) {
  // float32 activations through 6 layers of dot products over <= 192 terms: relative error well
  // below 1e-4 of the logit range; a wrong tap order, a missing gate or a norm on the wrong
  // tensor gives O(1).
  for (const char* preset : {"lfm2-tiny", "lfm2-swa-tiny"})
    for (DType t : {DType::F32, DType::F16}) EXPECT_LE(reference_rel_error(write_preset(preset, t)), 1e-4) << preset;
}

TEST(Lfm2, EachPartOfTheConvolutionMatters) {
  // The taps, the gate C and the state (a token sees its predecessors' B * x) all move the logits:
  // a model whose first convolution layer forgets its state (taps of the past zeroed) is not the same.
  const std::string path = write_preset("lfm2-tiny");
  auto f = GGUFFile::open(path);
  GGUFWriter w;
  for (const auto& [k, v] : f->metadata()) w.set_value(k, v);
  for (const auto& t : f->tensors()) {
    if (t.name != "blk.0.shortconv.conv.weight") {
      w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
      continue;
    }
    std::vector<float> taps(t.n_elements);
    std::memcpy(taps.data(), t.data, t.nbytes);
    for (size_t i = 0; i < taps.size(); ++i)
      if (i % 3 != 2) taps[i] = 0.0f;  // only the current token's tap left
    w.add_tensor_f32(t.name, DType::F32, t.ne, taps);
  }
  const std::string memoryless = scratch("lfm2_memoryless.gguf");
  w.write(memoryless);
  EXPECT_LE(reference_rel_error(memoryless), 1e-4);
  std::vector<float> a, b;
  for (const auto& [p, out] : {std::pair{path, &a}, std::pair{memoryless, &b}}) {
    auto m = Model::load(p, f32_caches());
    KVCache kv = m->new_cache(32);
    m->forward(kIds, kv).logits.to_host(*out);
  }
  const int V = 320;
  // The first token has no past: the same logits; later tokens differ.
  EXPECT_TRUE(same_bits(a.data(), b.data(), V));
  EXPECT_FALSE(same_bits(a.data() + 5 * V, b.data() + 5 * V, V));
}

TEST(Lfm2, StateFollowsTheCacheBitForBit) {
  auto m = Model::load(write_preset("lfm2-swa-tiny"), f32_caches());
  const int V = m->config().n_vocab;
  // A batch equals one token at a time.
  KVCache a = m->new_cache(32), b = m->new_cache(32);
  std::vector<float> batched, single, l;
  m->forward(kIds, a).logits.to_host(batched);
  for (size_t i = 0; i < kIds.size(); ++i) {
    m->forward(std::span<const int32_t>(kIds).subspan(i, 1), b).logits.to_host(l);
    single.insert(single.end(), l.begin(), l.end());
  }
  EXPECT_TRUE(same_bits(batched.data(), single.data(), batched.size()));

  // Rolling back: truncate to 7 and feed other tokens = a fresh run over the 7 and those.
  const std::vector<int32_t> other = {61, 62, 63};
  a.truncate(7);
  std::vector<float> rolled, fresh;
  m->forward(other, a).logits.to_host(rolled);
  KVCache c = m->new_cache(32);
  std::vector<int32_t> seq(kIds.begin(), kIds.begin() + 7);
  m->forward(seq, c);
  m->forward(other, c).logits.to_host(fresh);
  EXPECT_TRUE(same_bits(rolled.data(), fresh.data(), fresh.size()));

  // A tree after 6 tokens: r -> {c1, c2}, c2 -> g -> h. Each node's logits equal its path run as
  // a chain (the convolution reads its ancestors, not its batch neighbours), and keeping the
  // accepted path r, c2, g leaves the cache a fresh chain run makes, every layer's rows.
  const std::vector<int32_t> prefix(kIds.begin(), kIds.begin() + 6);
  const std::vector<int32_t> tree = {90, 3, 17, 44, 120};
  const std::vector<int32_t> parents = {-1, 0, 0, 2, 3};
  KVCache t = m->new_cache(32), s = m->new_cache(32);
  std::vector<float> tree_logits, path_logits;
  m->forward(prefix, t);
  m->forward(prefix, s);
  Batch tb;
  tb.tokens = tree;
  tb.parents = parents;
  m->forward(tb, t).logits.to_host(tree_logits);
  const std::vector<int32_t> chain = {90, 17, 44, 120};
  m->forward(chain, s).logits.to_host(path_logits);
  for (int node : {0, 2, 3, 4}) {
    const int depth = node == 0 ? 0 : node - 1;
    EXPECT_TRUE(same_bits(tree_logits.data() + node * V, path_logits.data() + depth * V, V)) << node;
  }
  EXPECT_FALSE(same_bits(tree_logits.data() + 1 * V, tree_logits.data() + 2 * V, V));
  t.keep(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 8, 9});  // the prefix, r, c2, g
  KVCache want = m->new_cache(32);
  m->forward(prefix, want);
  m->forward(std::vector<int32_t>{90, 17, 44}, want);
  ASSERT_EQ(t.size(), want.size());
  for (int layer = 0; layer < 6; ++layer) EXPECT_EQ(t.read_layer(layer), want.read_layer(layer)) << layer;

  // The same tree drafted level by level (its earlier levels cached, Batch::cached_parents).
  KVCache lv = m->new_cache(32);
  m->forward(prefix, lv);
  std::vector<float> level1, level2;
  const std::vector<int32_t> l1 = {90}, l2 = {3, 17};
  m->forward(l1, lv);
  Batch b2;
  b2.tokens = l2;
  const std::vector<int32_t> cached = {-1}, p2 = {0, 0};
  b2.cached_parents = cached;
  b2.parents = p2;
  m->forward(b2, lv).logits.to_host(level2);
  EXPECT_TRUE(same_bits(level2.data() + V, tree_logits.data() + 2 * V, V));
}

TEST(Lfm2, BadKeysGetClearErrors) {
  const std::string path = write_preset("lfm2-tiny");
  auto expect_error = [&](const std::string& file, const std::string& needle) {
    try {
      Model::load(file, f32_caches());
      ADD_FAILURE() << "no error for " << file;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  const std::string varying = scratch("lfm2_varying_heads.gguf");
  copy_with(path, varying, "lfm2.attention.head_count_kv", {0, 0, 2, 0, 1, 0}, std::nullopt);
  expect_error(varying, "varies between attention layers");
  const std::string short_array = scratch("lfm2_short_array.gguf");
  copy_with(path, short_array, "lfm2.attention.head_count_kv", {0, 0, 2}, std::nullopt);
  expect_error(short_array, "has 3 entries for 6 layers");
  const std::string no_taps = scratch("lfm2_no_taps.gguf");
  copy_with(path, no_taps, "lfm2.shortconv.l_cache", {}, std::nullopt, true);
  expect_error(no_taps, "'lfm2.shortconv.l_cache' is missing");
  const std::string one_tap = scratch("lfm2_one_tap.gguf");
  copy_with(path, one_tap, "lfm2.shortconv.l_cache", {}, 1u);
  expect_error(one_tap, "lfm2.shortconv.l_cache is 1 (must be 2 to 64)");
  // The taps' shape must follow l_cache.
  const std::string four = scratch("lfm2_four_taps.gguf");
  copy_with(path, four, "lfm2.shortconv.l_cache", {}, 4u);
  expect_error(four, "blk.0.shortconv.conv.weight");
}
