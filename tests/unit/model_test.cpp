// The transformer forward: the published greedy output of a real model (stories260K), then the
// forward's contracts (batched = sequential, truncate + recompute, tree masks, KV compaction,
// early exit, cache limits, load errors), and the dense architectures' synthetic models (llama,
// qwen2, gpt2, qwen3, gemma2, gemma3, phi3) against the double-precision reference forward
// (tests/reference_forward.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "kernels/cpu/quant.h"
#include "reference_forward.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::data_path;
using specmoe::testing::ReferenceForward;
using specmoe::testing::scratch_dir;

namespace {

const char* kStories = "models/stories260K.gguf";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<int32_t> read_ids(const std::filesystem::path& p) {
  std::istringstream in(read_text(p));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

int32_t argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Forward one token at a time; returns the logits of each, concatenated [n, n_vocab].
std::vector<float> forward_one_by_one(Model& m, KVCache& kv, std::span<const int32_t> ids,
                                      std::span<const int32_t> positions = {}) {
  std::vector<float> all, l;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::span<const int32_t> pos = positions.empty() ? std::span<const int32_t>() : positions.subspan(i, 1);
    m.forward(core::Batch(ids.subspan(i, 1), pos), kv).logits.to_host(l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// Copies a GGUF file, letting the caller change metadata and tensors on the way.
struct GgufEdit {
  int keep_layers = -1;                    // drop blk.N.* for N >= keep_layers and fix block_count
  std::string drop_tensor;                 // omit this tensor
  std::string transpose_tensor;            // write this 2-D tensor with ne swapped
  std::vector<std::pair<std::string, uint32_t>> set_u32;
  std::string drop_key;                    // omit this metadata key
  std::vector<std::pair<std::string, bool>> set_bool;
  std::vector<std::pair<std::string, float>> set_f32;
  std::string rename_arch;                 // general.architecture and every "<arch>." key renamed to it
  std::vector<std::pair<std::string, std::vector<float>>> add_f32;  // more 1-D F32 tensors
};

void copy_gguf(const std::string& src, const std::string& dst, const GgufEdit& e) {
  auto f = GGUFFile::open(src);
  GGUFWriter w;
  w.set_alignment(static_cast<uint32_t>(f->alignment()));
  const std::string arch = f->get_string("general.architecture");
  for (const auto& [k, v] : f->metadata()) {
    if (k == "general.alignment" || k == e.drop_key) continue;
    std::string key = k;
    if (!e.rename_arch.empty() && key.rfind(arch + ".", 0) == 0) key = e.rename_arch + key.substr(arch.size());
    if (e.keep_layers >= 0 && k == arch + ".block_count")
      w.set_u32(key, e.keep_layers);
    else if (!e.rename_arch.empty() && k == "general.architecture")
      w.set_string(k, e.rename_arch);
    else
      w.set_value(key, v);
  }
  for (const auto& [k, v] : e.set_u32) w.set_u32(k, v);
  for (const auto& [k, v] : e.set_bool) w.set_bool(k, v);
  for (const auto& [k, v] : e.set_f32) w.set_f32(k, v);
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    if (e.keep_layers >= 0 && t.name.rfind("blk.", 0) == 0 && std::stoi(t.name.substr(4)) >= e.keep_layers) continue;
    std::vector<int64_t> ne = t.ne;
    if (t.name == e.transpose_tensor) std::swap(ne[0], ne[1]);
    w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.nbytes));
  }
  for (const auto& [name, values] : e.add_f32)
    w.add_tensor_f32(name, DType::F32, {static_cast<int64_t>(values.size())}, values);
  w.write(dst);
}

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

// The forward's contracts and the references here were written for F32 KV caches (the published
// stories260K text, reference-forward tolerances of 1e-6 of the logit range): every model of this
// file keeps its keys and values in f32; tests/unit/kv_cache_types_test.cpp covers f16 and q8_0.
LoadOptions f32_caches(int threads = 0) {
  LoadOptions o;
  o.n_threads = threads;
  o.cache_types = {DType::F32, DType::F32};
  return o;
}

std::unique_ptr<Model> load_stories(int threads = 2) {
  return Model::load(data_path(kStories).string(), f32_caches(threads));
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The real model

TEST(Stories260K, GreedyFromBosReproducesPublishedOutput) {
  SPECMOE_REQUIRE_DATA(kStories);
  SPECMOE_REQUIRE_DATA("models/stories260K.expected_greedy_200steps.txt");
  SPECMOE_REQUIRE_DATA("models/stories260K.greedy_200_token_ids.txt");
  auto m = load_stories();
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.arch, Arch::Llama);
  ASSERT_EQ(c.n_vocab, 512);
  ASSERT_EQ(c.n_layer, 5);
  const std::vector<int32_t> want = read_ids(data_path("models/stories260K.greedy_200_token_ids.txt"));
  ASSERT_EQ(want.size(), 201u);  // BOS + 200 steps

  KVCache kv = m->new_cache(256);
  std::vector<int32_t> ids = {m->tokenizer().bos()};
  std::vector<float> logits;
  ForwardOptions last;
  last.logits_all = false;
  for (int step = 0; step < 200; ++step) {
    const int32_t tok[1] = {ids.back()};
    m->forward(tok, kv, last).logits.to_host(logits);
    ASSERT_EQ(logits.size(), 512u);
    ids.push_back(argmax(logits.data(), c.n_vocab));
  }
  EXPECT_EQ(ids, want);
  EXPECT_EQ(m->tokenizer().decode(ids), read_text(data_path("models/stories260K.expected_greedy_200steps.txt")));
}

TEST(Stories260K, BatchedForwardEqualsOneTokenForwards) {
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load_stories();
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};
  KVCache a = m->new_cache(64), b = m->new_cache(64);
  std::vector<float> batched;
  m->forward(ids, a).logits.to_host(batched);
  const std::vector<float> single = forward_one_by_one(*m, b, ids);
  ASSERT_EQ(batched.size(), ids.size() * 512);
  ASSERT_EQ(a.size(), 17);
  // Tolerance 0: every kernel computes a token's outputs in an order independent of the batch
  // (ops.h determinism contract), and attention visits the same cache rows in the same order.
  EXPECT_TRUE(same_bits(batched.data(), single.data(), batched.size()));
  // Non-trivial: the logits vary across positions.
  EXPECT_NE(argmax(batched.data(), 512), argmax(batched.data() + 512, 512));

  // logits_all = false returns the last row.
  KVCache c = m->new_cache(64);
  std::vector<float> last;
  ForwardOptions o;
  o.logits_all = false;
  m->forward(ids, c, o).logits.to_host(last);
  ASSERT_EQ(last.size(), 512u);
  EXPECT_TRUE(same_bits(last.data(), batched.data() + 16 * 512, 512));
}

TEST(Stories260K, ThreadCountDoesNotChangeLogits) {
  SPECMOE_REQUIRE_DATA(kStories);
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286};
  std::vector<std::vector<float>> out;
  for (int threads : {1, 2, 3}) {
    auto m = load_stories(threads);
    EXPECT_EQ(m->backend().threads(), threads);
    KVCache kv = m->new_cache(16);
    out.emplace_back();
    m->forward(ids, kv).logits.to_host(out.back());
  }
  EXPECT_TRUE(same_bits(out[0].data(), out[1].data(), out[0].size()));
  EXPECT_TRUE(same_bits(out[0].data(), out[2].data(), out[0].size()));
}

TEST(Stories260K, TruncateAndRecomputeGivesTheSameLogits) {
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load_stories();
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  KVCache kv = m->new_cache(32);
  std::vector<float> first, again;
  m->forward(ids, kv).logits.to_host(first);
  // Overwrite rows 9.. with other tokens, then roll back and recompute the original ones.
  kv.truncate(9);
  const std::vector<int32_t> other = {300, 301, 302};
  m->forward(other, kv).logits.to_host(again);
  kv.truncate(9);
  m->forward(std::span<const int32_t>(ids).subspan(9), kv).logits.to_host(again);
  ASSERT_EQ(kv.size(), 16);
  EXPECT_TRUE(same_bits(again.data(), first.data() + 9 * 512, 7 * 512));  // exact: same rows, same order
}

TEST(Stories260K, TreeMaskHidesNonAncestors) {
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load_stories();
  const std::vector<int32_t> prefix = {1, 403, 407, 261, 378};
  // Tree after the prefix: r (pos 5) -> {c1, c2} (pos 6); c2 -> g (pos 7).
  // Order: r, c1, c2, g. Each node sees its ancestors and itself.
  const std::vector<int32_t> tree = {432, 383, 286, 261};
  const std::vector<int32_t> pos = {5, 6, 6, 7};
  AttentionMask mask;
  mask.n = 4;
  mask.allowed = {1, 0, 0, 0,   //
                  1, 1, 0, 0,   //
                  1, 0, 1, 0,   //
                  1, 0, 1, 1};
  KVCache kv = m->new_cache(32);
  std::vector<float> l;
  m->forward(prefix, kv).logits.to_host(l);
  std::vector<float> tree_logits;
  ForwardOptions o;
  o.mask = &mask;
  m->forward(core::Batch(tree, pos), kv, o).logits.to_host(tree_logits);
  ASSERT_EQ(kv.size(), 9);

  // Reference: the path r, c2, g forwarded as a plain sequence.
  KVCache ref = m->new_cache(32);
  m->forward(prefix, ref).logits.to_host(l);
  const std::vector<int32_t> path = {432, 286, 261};
  std::vector<float> path_logits;
  m->forward(path, ref).logits.to_host(path_logits);
  // Tolerance 0: c2 and g see exactly the rows the sequence has, in the same order.
  EXPECT_TRUE(same_bits(tree_logits.data() + 2 * 512, path_logits.data() + 1 * 512, 512));  // c2
  EXPECT_TRUE(same_bits(tree_logits.data() + 3 * 512, path_logits.data() + 2 * 512, 512));  // g
  EXPECT_TRUE(same_bits(tree_logits.data(), path_logits.data(), 512));                      // r
  // c1 is a different token at the same place, so its logits differ from c2's.
  EXPECT_FALSE(same_bits(tree_logits.data() + 1 * 512, tree_logits.data() + 2 * 512, 512));

  // Accept the branch r, c2, g: compact the cache and continue; the next token's logits equal
  // the plain sequence's.
  const std::vector<int> keep = {0, 1, 2, 3, 4, 5, 7, 8};
  kv.keep(keep);
  ASSERT_EQ(kv.size(), 8);
  EXPECT_EQ(kv.position(6), 6);
  EXPECT_EQ(kv.position(7), 7);
  const int32_t next[1] = {376};
  std::vector<float> a, b;
  m->forward(next, kv).logits.to_host(a);
  m->forward(next, ref).logits.to_host(b);
  EXPECT_TRUE(same_bits(a.data(), b.data(), 512));

  // An explicit causal mask equals the default.
  KVCache k1 = m->new_cache(16), k2 = m->new_cache(16);
  const AttentionMask causal = AttentionMask::causal(5);
  ForwardOptions oc;
  oc.mask = &causal;
  m->forward(prefix, k1, oc).logits.to_host(a);
  m->forward(prefix, k2).logits.to_host(b);
  EXPECT_TRUE(same_bits(a.data(), b.data(), a.size()));
}

TEST(Stories260K, EarlyExitEqualsAModelWithFewerLayers) {
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load_stories();
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432};
  for (int L : {1, 2, 5}) {
    SCOPED_TRACE(L);
    const std::string path = scratch("stories_layers_" + std::to_string(L) + ".gguf");
    GgufEdit e;
    e.keep_layers = L;
    copy_gguf(data_path(kStories).string(), path, e);
    auto small = Model::load(path, f32_caches());
    ASSERT_EQ(small->config().n_layer, L);
    KVCache k1 = m->new_cache(16), k2 = small->new_cache(16);
    std::vector<float> a, b;
    ForwardOptions o;
    o.exit_layer = L;
    m->forward(ids, k1, o).logits.to_host(a);
    small->forward(ids, k2).logits.to_host(b);
    EXPECT_TRUE(same_bits(a.data(), b.data(), a.size()));  // same code path, same weights
  }
  // n_layers = 0: the head applied to the normalised embedding.
  KVCache k = m->new_cache(16);
  std::vector<float> l0, l5;
  ForwardOptions o0;
  o0.exit_layer = 0;
  m->forward(ids, k, o0).logits.to_host(l0);
  k.clear();
  m->forward(ids, k).logits.to_host(l5);
  EXPECT_FALSE(same_bits(l0.data(), l5.data(), l0.size()));
  ForwardOptions too_many;
  too_many.exit_layer = 6;
  k.clear();
  EXPECT_THROW(m->forward(ids, k, too_many).logits.to_host(l0), Error);
}

TEST(Stories260K, ForwardBeyondCacheCapacityThrowsLimit) {
  SPECMOE_REQUIRE_DATA(kStories);
  auto m = load_stories();
  KVCache kv = m->new_cache(8);
  std::vector<float> l;
  const std::vector<int32_t> five = {1, 403, 407, 261, 378}, four = {432, 383, 286, 261};
  m->forward(five, kv).logits.to_host(l);
  try {
    m->forward(four, kv).logits.to_host(l);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("capacity 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.size(), 5);  // unchanged
  m->forward(std::span<const int32_t>(four).first(3), kv).logits.to_host(l);
  EXPECT_EQ(kv.size(), 8);
  // Bad inputs.
  kv.clear();
  const std::vector<int32_t> bad = {512};
  EXPECT_THROW(m->forward(bad, kv).logits.to_host(l), Error);
  EXPECT_THROW(m->forward({}, kv).logits.to_host(l), Error);
  KVCache wrong(3, 8, 32);
  EXPECT_THROW(m->forward(five, wrong).logits.to_host(l), Error);
}

// ------------------------------------------------------------------------------------------
// KV cache bookkeeping

TEST(KVCache, TruncateKeepAndAppendCheckTheirArguments) {
  KVCache kv(2, 4, 3);
  const std::vector<int32_t> pos = {0, 1, 2};
  kv.append(pos);
  EXPECT_EQ(kv.size(), 3);
  for (int t = 0; t < 3; ++t)
    for (int l = 0; l < 2; ++l) kv.k(l, t)[0] = static_cast<float>(10 * l + t);
  EXPECT_THROW(kv.truncate(4), Error);
  EXPECT_THROW(kv.keep(std::vector<int>{1, 1}), Error);  // not strictly increasing
  EXPECT_THROW(kv.keep(std::vector<int>{0, 3}), Error);  // past size
  kv.keep(std::vector<int>{0, 2});
  EXPECT_EQ(kv.size(), 2);
  EXPECT_EQ(kv.position(1), 2);
  EXPECT_EQ(kv.k(1, 1)[0], 12.0f);
  const std::vector<int32_t> three = {5, 6, 7};
  try {
    kv.append(three);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
  }
  EXPECT_EQ(kv.size(), 2);
  EXPECT_THROW(KVCache(0, 4, 3), Error);
}

// ------------------------------------------------------------------------------------------
// Load errors

TEST(ModelLoad, ErrorsNameTheFileAndTensor) {
  const std::string base = scratch("model_test_tiny.gguf");
  synth_write("tiny", base, 1);
  auto expect_error = [](const std::string& path, ErrorKind kind, const std::string& needle) {
    try {
      Model::load(path, f32_caches());
      ADD_FAILURE() << "no throw for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GgufEdit drop;
  drop.drop_tensor = "blk.1.ffn_up.weight";
  copy_gguf(base, scratch("model_test_missing.gguf"), drop);
  expect_error(scratch("model_test_missing.gguf"), ErrorKind::Format, "blk.1.ffn_up.weight");

  GgufEdit transpose;
  transpose.transpose_tensor = "blk.0.attn_k.weight";  // [64, 32] stored as [32, 64]
  copy_gguf(base, scratch("model_test_shape.gguf"), transpose);
  expect_error(scratch("model_test_shape.gguf"), ErrorKind::Format, "blk.0.attn_k.weight");

  GgufEdit moe;
  moe.set_u32 = {{"llama.expert_count", 4}, {"llama.expert_used_count", 2}};
  copy_gguf(base, scratch("model_test_moe.gguf"), moe);
  // A dense file claiming experts: the MoE block's router tensor is missing.
  expect_error(scratch("model_test_moe.gguf"), ErrorKind::Format, "blk.0.ffn_gate_inp.weight");
}

// ------------------------------------------------------------------------------------------
// Architectures against a plain reference forward

namespace {

// The largest difference between the logits of two synth files for the test's prompt, over the
// largest logit: what a key the model reads changes.
double logit_change(const std::string& a, const std::string& b) {
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  std::vector<float> la, lb;
  for (const auto& [path, out] : {std::pair{a, &la}, std::pair{b, &lb}}) {
    auto m = Model::load(path, f32_caches());
    KVCache kv = m->new_cache(32);
    m->forward(ids, kv).logits.to_host(*out);
  }
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(la[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(la[i]) - lb[i]));
  }
  return max_diff / max_ref;
}

// max |logit - reference| over the largest reference logit for the file at `path` (the model's
// logits of the test's prompt in `logits` when given).
double reference_rel_error(const std::string& path, std::vector<float>* logits = nullptr) {
  auto m = Model::load(path, f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  KVCache kv = m->new_cache(32);
  std::vector<float> got;
  m->forward(ids, kv).logits.to_host(got);
  const auto ref = ReferenceForward(path).run(ids);
  const int V = m->config().n_vocab;
  double max_ref = 0, max_diff = 0;
  for (size_t t = 0; t < ids.size(); ++t)
    for (int j = 0; j < V; ++j) {
      max_ref = std::max(max_ref, std::fabs(ref[t][j]));
      max_diff = std::max(max_diff, std::fabs(ref[t][j] - got[t * V + j]));
      EXPECT_TRUE(std::isfinite(got[t * V + j])) << path;
    }
  EXPECT_GT(max_ref, 1.0) << path;  // logits are not trivially small
  if (logits) *logits = std::move(got);
  return max_ref > 0 ? max_diff / max_ref : 1.0;
}

// rel_tol: allowed max |logit - reference| as a fraction of max |reference logit|.
void check_against_reference(const SynthSpec& spec, const std::string& file, double rel_tol = 1e-4) {
  const std::string path = scratch(file);
  synth_write(spec, path, 42);
  // float32 activations through a few layers of dot products over <= 192 terms: relative error
  // well below 1e-4 of the logit range; a wrong op (RoPE pairing, bias, norm) gives O(1).
  std::vector<float> logits;
  EXPECT_LE(reference_rel_error(path, &logits), rel_tol) << path;
  // And the cached path agrees with the batch: last token re-run alone after truncation.
  auto m = Model::load(path, f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  const int V = m->config().n_vocab;
  KVCache kv = m->new_cache(32);
  m->forward(ids, kv);
  kv.truncate(static_cast<int>(ids.size()) - 1);
  std::vector<float> last;
  m->forward(std::span<const int32_t>(ids).last(1), kv).logits.to_host(last);
  EXPECT_TRUE(same_bits(last.data(), logits.data() + (ids.size() - 1) * V, V));
}

}  // namespace

TEST(Architectures, LlamaMatchesReference) {
  SynthSpec s = synth_spec("tiny");
  check_against_reference(s, "arch_llama.gguf");
  s.type = DType::Q8_0;
  s.tied_output = true;
  // On AVX2 CPUs Q8_0 weights are multiplied with activations quantized to 8 bits per block of
  // 32 (llama.cpp's scheme): each element moves by up to 1/254 of its block's largest, about
  // 0.1-0.3% of a matmul output per layer; through 4 layers and the head that is ~0.5% of the
  // logit range (measured 0.47%). 1.5% still catches any wrong op, which gives O(1).
  check_against_reference(s, "arch_llama_q8.gguf", 1.5e-2);
}

TEST(Architectures, Qwen2MatchesReference) {
  SynthSpec s = synth_spec("tiny");
  s.arch = "qwen2";
  s.rope_freq_base = 1000000.0f;
  check_against_reference(s, "arch_qwen2.gguf");
}

TEST(Architectures, Gpt2MatchesReference) {
  SynthSpec s = synth_spec("tiny");
  s.arch = "gpt2";
  s.type = DType::F16;
  check_against_reference(s, "arch_gpt2.gguf");
}

TEST(Architectures, StarcoderMultiQueryMatchesReference) {
  // gpt2's block with one KV head for four query heads (StarCoder's multi-query attention), F32 and
  // F16; its context is bounded by the learned positions as gpt2's is.
  for (DType t : {DType::F32, DType::F16}) {
    SynthSpec s = synth_spec("starcoder-tiny");
    s.type = t;
    check_against_reference(s, fmt::format("arch_starcoder_{}.gguf", dtype_name(t)));
  }
  auto m = Model::load(scratch("arch_starcoder_F32.gguf"), f32_caches());
  EXPECT_EQ(m->config().n_head_kv, 1);
  EXPECT_TRUE(m->config().learned_positions());
  EXPECT_EQ(m->config().rope_style, RopeStyle::None);
  EXPECT_THROW(m->new_cache(m->config().n_ctx_train + 1), Error);
}

TEST(Architectures, Qwen3MatchesReference) {
  // QK-norm per head, no QKV biases, heads of 32 while n_embd / n_head is 16.
  const SynthSpec s = synth_spec("qwen3-tiny");
  check_against_reference(s, "arch_qwen3.gguf");
  auto m = Model::load(scratch("arch_qwen3.gguf"), f32_caches());
  EXPECT_EQ(m->config().arch, Arch::Qwen3);
  EXPECT_EQ(m->config().head_dim, 32);
  EXPECT_TRUE(m->config().qk_norm);
}

TEST(Architectures, Qwen3WithYarnMatchesReference) {
  // YaRN: factor 4, original context 64 (the fast pairs extrapolate, the slow ones interpolate,
  // cos/sin scaled by 1 + 0.1 ln 4).
  check_against_reference(synth_spec("qwen3-yarn-tiny"), "arch_qwen3_yarn.gguf");
}

TEST(Architectures, Gemma3MatchesReference) {
  // Embedding scale, QK-norm, post-norms, GeGLU, tied head, window 4 (shorter than the 11 test
  // tokens) on layers 0-4 with base 10000 and a global layer 5 with base 1e6.
  SynthSpec s = synth_spec("gemma3-tiny");
  check_against_reference(s, "arch_gemma3.gguf");
  {
    auto m = Model::load(scratch("arch_gemma3.gguf"), f32_caches());
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.n_swa, 4);
    EXPECT_EQ(c.swa_pattern, 6);
    for (int l = 0; l < 6; ++l) EXPECT_EQ(c.is_swa(l), l != 5) << l;
    EXPECT_EQ(c.rope_freq_base_swa, 10000.0f);
    EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);
  }
  // The pattern, local base and soft-capping from keys: layers 0, 1, 3, 4 local, 2 and 5 global.
  s.swa_pattern = 3;
  s.rope_freq_base_swa = 500.0f;
  s.final_logit_softcap = 30.0f;  // below the largest logits (~60), so capping changes them
  check_against_reference(s, "arch_gemma3_keys.gguf");
  // Quantized: Q8_0 weights with 8-bit activations (see LlamaMatchesReference).
  s = synth_spec("gemma3-tiny");
  s.type = DType::Q8_0;
  check_against_reference(s, "arch_gemma3_q8.gguf", 1.5e-2);
}

TEST(Architectures, Gemma3WindowHoldsInTreesAndSingleTokenSteps) {
  // The window is over positions: a tree's siblings share one, and decoding one token at a time
  // must see exactly the rows a batch sees (bit for bit, as for llama above).
  const std::string path = scratch("arch_gemma3_tree.gguf");
  synth_write("gemma3-tiny", path, 7);
  auto m = Model::load(path, f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3};
  KVCache a = m->new_cache(32), b = m->new_cache(32);
  std::vector<float> batched;
  m->forward(ids, a).logits.to_host(batched);
  const std::vector<float> single = forward_one_by_one(*m, b, ids);
  const int V = m->config().n_vocab;
  EXPECT_TRUE(same_bits(batched.data(), single.data(), batched.size()));
  EXPECT_EQ(a.layout(0).window, 4);
  EXPECT_EQ(a.layout(5).window, 0);

  // A tree after 6 tokens: r -> {c1, c2}, c2 -> g -> h; the path r, c2, g, h as a sequence.
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 6);
  const std::vector<int32_t> tree = {90, 3, 17, 44, 120};
  const std::vector<int32_t> parents = {-1, 0, 0, 2, 3};
  KVCache t = m->new_cache(32), s = m->new_cache(32);
  std::vector<float> l, tree_logits, path_logits;
  m->forward(prefix, t).logits.to_host(l);
  m->forward(prefix, s).logits.to_host(l);
  core::Batch tb;
  tb.tokens = tree;
  tb.parents = parents;
  m->forward(tb, t).logits.to_host(tree_logits);
  const std::vector<int32_t> chain = {90, 17, 44, 120};
  m->forward(chain, s).logits.to_host(path_logits);
  EXPECT_TRUE(same_bits(tree_logits.data() + 2 * V, path_logits.data() + 1 * V, V));  // c2
  EXPECT_TRUE(same_bits(tree_logits.data() + 4 * V, path_logits.data() + 3 * V, V));  // h: window over depth
  EXPECT_FALSE(same_bits(tree_logits.data() + 1 * V, tree_logits.data() + 2 * V, V));
}

TEST(Architectures, Llama3RopeFactorsMatchReference) {
  // rope_freqs.weight divides the slow pairs' frequencies (original context 32, so they turn
  // visibly within the test tokens); the head is tied.
  check_against_reference(synth_spec("llama3-tiny"), "arch_llama3.gguf");
  // The same factors given by rope.scaling.type = llama3 keys instead of the tensor: same logits.
  const std::string with_tensor = scratch("arch_llama3.gguf"), with_keys = scratch("arch_llama3_keys.gguf");
  GgufEdit e;
  e.drop_tensor = "rope_freqs.weight";
  copy_gguf(with_tensor, with_keys, e);
  {
    auto f = GGUFFile::open(with_keys);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata())
      if (k != "general.alignment") w.set_value(k, v);
    w.set_string("llama.rope.scaling.type", "llama3");
    w.set_f32("llama.rope.scaling.factor", 8.0f);
    w.set_u32("llama.rope.scaling.original_context_length", 32);
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
    w.write(with_keys);
  }
  auto a = Model::load(with_tensor, f32_caches()), b = Model::load(with_keys, f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  KVCache ka = a->new_cache(16), kb = b->new_cache(16);
  std::vector<float> la, lb;
  a->forward(ids, ka).logits.to_host(la);
  b->forward(ids, kb).logits.to_host(lb);
  double max_diff = 0;
  for (size_t i = 0; i < la.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(la[i]) - lb[i]));
  // The converter's float32 factors vs ours rounded from double: equal to a few ulps.
  EXPECT_LT(max_diff, 1e-4);
  // Without the factors the positions are wrong: the logits move.
  GgufEdit plain;
  plain.drop_tensor = "rope_freqs.weight";
  copy_gguf(with_tensor, scratch("arch_llama3_plain.gguf"), plain);
  auto c = Model::load(scratch("arch_llama3_plain.gguf"), f32_caches());
  KVCache kc = c->new_cache(16);
  std::vector<float> lc;
  c->forward(ids, kc).logits.to_host(lc);
  double moved = 0;
  for (size_t i = 0; i < la.size(); ++i) moved = std::max(moved, std::fabs(double(la[i]) - lc[i]));
  EXPECT_GT(moved, 1e-2);
}

TEST(Architectures, Phi3FusedProjectionsAndLongRopeMatchReference) {
  // One attn_qkv, ffn_up = [gate | up], LongRoPE factors for an original context of 64 and the
  // converter's attn_factor: a cache of 32 positions runs the short factors, one of 128 the long
  // ones (llama.cpp picks by the context, n_ctx_seq > n_ctx_orig_yarn); each matches the
  // reference given the same context, and the two differ.
  const std::string path = scratch("arch_phi3.gguf");
  synth_write("phi3-tiny", path, 42);
  auto m = Model::load(path, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Phi3);
  EXPECT_TRUE(c.ffn_gate_up_fused);
  EXPECT_TRUE(c.rope_long_short_factors);
  EXPECT_EQ(c.rope_n_ctx_orig, 64);
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1.0 + std::log(8.0) / std::log(64.0)), 1e-6);
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  const int V = c.n_vocab;
  std::vector<float> by_ctx[2];
  for (int i = 0; i < 2; ++i) {
    const int n_ctx = i == 0 ? 32 : 128;
    KVCache kv = m->new_cache(n_ctx);
    m->forward(ids, kv).logits.to_host(by_ctx[i]);
    ReferenceForward ref(path);
    ref.set_context(n_ctx);
    const auto want = ref.run(ids);
    double max_ref = 0, max_diff = 0;
    for (size_t t = 0; t < ids.size(); ++t)
      for (int j = 0; j < V; ++j) {
        max_ref = std::max(max_ref, std::fabs(want[t][j]));
        max_diff = std::max(max_diff, std::fabs(want[t][j] - by_ctx[i][t * V + j]));
      }
    ASSERT_GT(max_ref, 1.0);
    EXPECT_LE(max_diff, 1e-4 * max_ref) << "context " << n_ctx;  // as check_against_reference
  }
  double moved = 0;
  for (size_t j = 0; j < by_ctx[0].size(); ++j) moved = std::max(moved, std::fabs(double(by_ctx[0][j]) - by_ctx[1][j]));
  EXPECT_GT(moved, 1e-2);  // the long factors turn the slow pairs visibly slower
  // Fused tensors in the file, no separate q/k/v or gate.
  EXPECT_NE(m->file().find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(m->file().find_tensor("blk.0.ffn_gate.weight"), nullptr);
}

TEST(Architectures, Gemma2SoftCappingAndWindowsMatchReference) {
  // gemma3's block without QK-norm; every second layer local (default pattern 2) with the global
  // base; attention scores capped at 2 and logits at 5 (tight enough to bite on random weights).
  SynthSpec s = synth_spec("gemma2-tiny");
  check_against_reference(s, "arch_gemma2.gguf");
  auto m = Model::load(scratch("arch_gemma2.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Gemma2);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.swa_pattern, 2);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.is_swa(l), l % 2 == 0) << l;
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, c.rope_freq_base);
  EXPECT_FLOAT_EQ(c.attn_logit_softcap, 2.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 5.0f);
  EXPECT_TRUE(c.tied_output);
  KVCache kv = m->new_cache(32);
  std::vector<float> logits;
  m->forward(std::vector<int32_t>{1, 72, 105}, kv).logits.to_host(logits);
  for (float v : logits) ASSERT_LE(std::fabs(v), 5.0f);
  // Without the keys: llama.cpp's defaults, 50 for the scores and 30 for the logits.
  s.attn_logit_softcap = 0.0f;
  s.final_logit_softcap = 0.0f;
  check_against_reference(s, "arch_gemma2_defaults.gguf");
  auto d = Model::load(scratch("arch_gemma2_defaults.gguf"), f32_caches());
  EXPECT_FLOAT_EQ(d->config().attn_logit_softcap, 50.0f);
  EXPECT_FLOAT_EQ(d->config().final_logit_softcap, 30.0f);
  EXPECT_EQ(d->config().n_swa, 4);
  // Q8_0 weights with 8-bit activations (see LlamaMatchesReference), logits capped at 30: a cap
  // of 5 would make the largest logit, the bound's unit, 5 while uncapped errors of the small
  // logits pass through tanh's linear part unchanged.
  s = synth_spec("gemma2-tiny");
  s.type = DType::Q8_0;
  s.final_logit_softcap = 30.0f;
  check_against_reference(s, "arch_gemma2_q8.gguf", 1.5e-2);
}

// The dense architectures llama.cpp runs that specmoe reads alongside the others: each preset
// against the double-precision reference (which reads the architecture's keys itself), with the
// specifics that set it apart read back from the file.
TEST(Architectures, GraniteMultipliersMatchReference) {
  // Embedding times 2, each sublayer's output times 0.5 before its residual add, scores times
  // 0.75 / sqrt(head_dim), logits divided by 2.
  check_against_reference(synth_spec("granite-tiny"), "arch_granite.gguf");
  auto m = Model::load(scratch("arch_granite.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Granite);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  EXPECT_FLOAT_EQ(c.embd_scale, 2.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.5f);
  EXPECT_FLOAT_EQ(c.logit_scale, 2.0f);
  EXPECT_FLOAT_EQ(c.attention_scale(), 0.75f / 4.0f);
  SynthSpec q8 = synth_spec("granite-tiny");
  q8.type = DType::Q8_0;
  check_against_reference(q8, "arch_granite_q8.gguf", 1.5e-2);  // 8-bit activations, as LlamaMatchesReference
  // rope.scaling.finetuned = false switches RoPE off in every layer (llama.cpp's granite loader).
  GgufEdit no_rope;
  no_rope.set_bool = {{"granite.rope.scaling.finetuned", false}};
  copy_gguf(scratch("arch_granite.gguf"), scratch("arch_granite_norope.gguf"), no_rope);
  {
    auto m2 = Model::load(scratch("arch_granite_norope.gguf"), f32_caches());
    for (int l = 0; l < m2->config().n_layer; ++l) EXPECT_FALSE(m2->config().has_rope(l)) << l;
  }
  EXPECT_LE(reference_rel_error(scratch("arch_granite_norope.gguf")), 1e-4);
  EXPECT_GT(logit_change(scratch("arch_granite.gguf"), scratch("arch_granite_norope.gguf")), 1e-3);
  // logit_scale is required (llama.cpp reads it without a default).
  GgufEdit e;
  e.drop_key = "granite.logit_scale";
  copy_gguf(scratch("arch_granite.gguf"), scratch("arch_granite_nologit.gguf"), e);
  try {
    Model::load(scratch("arch_granite_nologit.gguf"));
    FAIL() << "a granite file without logit_scale loaded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("granite.logit_scale"), std::string::npos) << err.what();
  }
}

TEST(Architectures, Olmo2PostNormsOnlyMatchReference) {
  check_against_reference(synth_spec("olmo2-tiny"), "arch_olmo2.gguf");
  auto m = Model::load(scratch("arch_olmo2.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Olmo2);
  EXPECT_FALSE(c.pre_norms);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.qk_norm_full);
  EXPECT_EQ(c.ffn_act, FfnActivation::Silu);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(m->file().find_tensor("blk.0.attn_norm.weight"), nullptr);
}

TEST(Architectures, Smollm3NoRopeLayersMatchReference) {
  check_against_reference(synth_spec("smollm3-tiny"), "arch_smollm3.gguf");
  auto m = Model::load(scratch("arch_smollm3.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Smollm3);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.has_rope(l), l != 3) << l;
  // The same weights read as llama (RoPE on every layer) give other logits.
  GgufEdit e;
  e.rename_arch = "llama";
  copy_gguf(scratch("arch_smollm3.gguf"), scratch("arch_smollm3_as_llama.gguf"), e);
  auto l = Model::load(scratch("arch_smollm3_as_llama.gguf"), f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44};
  KVCache ka = m->new_cache(16), kb = l->new_cache(16);
  std::vector<float> a, b;
  m->forward(ids, ka).logits.to_host(a);
  l->forward(ids, kb).logits.to_host(b);
  double moved = 0;
  for (size_t i = 0; i < a.size(); ++i) moved = std::max(moved, std::fabs(double(a[i]) - b[i]));
  EXPECT_GT(moved, 1e-2);
}

TEST(Architectures, StableLmLayerNormAndPartialRopeMatchReference) {
  check_against_reference(synth_spec("stablelm-tiny"), "arch_stablelm.gguf");
  auto m = Model::load(scratch("arch_stablelm.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::StableLm);
  EXPECT_TRUE(c.layer_norm);
  EXPECT_EQ(c.rope_dims, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  // StableLM 2 12B's form (parallel residual: no ffn_norm) is refused with the layer named.
  GgufEdit e;
  e.drop_tensor = "blk.1.ffn_norm.weight";
  copy_gguf(scratch("arch_stablelm.gguf"), scratch("arch_stablelm_parallel.gguf"), e);
  try {
    Model::load(scratch("arch_stablelm_parallel.gguf"));
    FAIL() << "a stablelm file without ffn_norm loaded";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(err.what()).find("layer 1 has no ffn_norm"), std::string::npos) << err.what();
  }
}

TEST(Architectures, GemmaMatchesReference) {
  check_against_reference(synth_spec("gemma-tiny"), "arch_gemma.gguf");
  auto m = Model::load(scratch("arch_gemma.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Gemma);
  EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);  // sqrt(64)
  EXPECT_EQ(c.ffn_act, FfnActivation::GeluTanh);
  EXPECT_FALSE(c.post_norms);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.n_swa, 0);
}

TEST(Architectures, Starcoder2MatchesReference) {
  check_against_reference(synth_spec("starcoder2-tiny"), "arch_starcoder2.gguf");
  auto m = Model::load(scratch("arch_starcoder2.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Starcoder2);
  EXPECT_TRUE(c.layer_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(m->file().find_tensor("blk.0.ffn_gate.weight"), nullptr);
}

TEST(Architectures, GptNeoxAndPhi2ParallelResidualMatchReference) {
  check_against_reference(synth_spec("gptneox-tiny"), "arch_gptneox.gguf");
  check_against_reference(synth_spec("phi2-tiny"), "arch_phi2.gguf");
  auto n = Model::load(scratch("arch_gptneox.gguf"), f32_caches());
  EXPECT_EQ(n->config().arch, Arch::GptNeox);
  EXPECT_TRUE(n->config().parallel_residual);
  EXPECT_TRUE(n->config().layer_norm);
  EXPECT_EQ(n->config().rope_dims, 4);
  auto p = Model::load(scratch("arch_phi2.gguf"), f32_caches());
  EXPECT_EQ(p->config().arch, Arch::Phi2);
  EXPECT_TRUE(p->config().parallel_residual);
  EXPECT_EQ(p->file().find_tensor("blk.0.ffn_norm.weight"), nullptr);
  EXPECT_NE(p->file().find_tensor("output.bias"), nullptr);
  // gptneox with use_parallel_residual false: the sequential block, which the reference follows too.
  {
    GgufEdit seq;
    seq.drop_key = "gptneox.use_parallel_residual";
    seq.set_bool = {{"gptneox.use_parallel_residual", false}};
    const std::string path = scratch("arch_gptneox_seq.gguf");
    copy_gguf(scratch("arch_gptneox.gguf"), path, seq);
    auto m = Model::load(path, f32_caches());
    EXPECT_FALSE(m->config().parallel_residual);
    const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44};
    KVCache kv = m->new_cache(16);
    std::vector<float> got, par;
    m->forward(ids, kv).logits.to_host(got);
    const auto want = ReferenceForward(path).run(ids);
    KVCache kp = n->new_cache(16);
    n->forward(ids, kp).logits.to_host(par);
    const int V = m->config().n_vocab;
    double max_ref = 0, max_diff = 0, moved = 0;
    for (size_t t = 0; t < ids.size(); ++t)
      for (int j = 0; j < V; ++j) {
        max_ref = std::max(max_ref, std::fabs(want[t][j]));
        max_diff = std::max(max_diff, std::fabs(want[t][j] - got[t * V + j]));
        moved = std::max(moved, std::fabs(double(got[t * V + j]) - par[t * V + j]));
      }
    EXPECT_LE(max_diff, 1e-4 * max_ref);
    EXPECT_GT(moved, 1e-2);  // the two blocks differ
  }
  GgufEdit e;
  e.drop_key = "gptneox.use_parallel_residual";
  copy_gguf(scratch("arch_gptneox.gguf"), scratch("arch_gptneox_nokey.gguf"), e);
  try {
    Model::load(scratch("arch_gptneox_nokey.gguf"));
    FAIL() << "a gptneox file without use_parallel_residual loaded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("gptneox.use_parallel_residual"), std::string::npos) << err.what();
  }
}

TEST(Architectures, Ernie45AndExaoneMatchReference) {
  // llama's block under their own names: ernie4_5 with adjacent-pair RoPE (llama.cpp's NORM) and
  // exaone with split halves (NEOX); an attn_output.bias in an ernie4_5 file is not used, as in
  // llama.cpp's graph.
  check_against_reference(synth_spec("ernie4_5-tiny"), "arch_ernie4_5.gguf");
  check_against_reference(synth_spec("exaone-tiny"), "arch_exaone.gguf");
  auto e = Model::load(scratch("arch_ernie4_5.gguf"), f32_caches());
  EXPECT_EQ(e->config().arch, Arch::Ernie45);
  EXPECT_EQ(e->config().rope_style, RopeStyle::Adjacent);
  auto x = Model::load(scratch("arch_exaone.gguf"), f32_caches());
  EXPECT_EQ(x->config().arch, Arch::Exaone);
  EXPECT_EQ(x->config().rope_style, RopeStyle::SplitHalves);
}

TEST(Architectures, Exaone4MatchesReference) {
  // olmo2's post-norms only, with an RMSNorm of every q and k head (qwen3's), split-halves RoPE.
  check_against_reference(synth_spec("exaone4-tiny"), "arch_exaone4.gguf");
  auto m = Model::load(scratch("arch_exaone4.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Exaone4);
  EXPECT_FALSE(c.pre_norms);
  EXPECT_TRUE(c.post_norms && c.qk_norm);
  EXPECT_FALSE(c.qk_norm_full);
  EXPECT_EQ(c.n_swa, 0);
}



TEST(Architectures, Olmo3WindowsAndUnscaledLocalRopeMatchReference) {
  // OLMo 3: olmo2 with windows of 4 on layers 0-2 (one flag per layer) and YaRN with
  // rope.scaling.attn_factor that only the global layer 3 applies; the test's 11 tokens reach past
  // the window.
  check_against_reference(synth_spec("olmo3-tiny"), "arch_olmo3.gguf");
  auto m = Model::load(scratch("arch_olmo3.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Olmo2);
  EXPECT_EQ(c.n_swa, 4);
  EXPECT_TRUE(c.swa_plain_rope);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.is_swa(l), l < 3) << l;
  EXPECT_FLOAT_EQ(c.rope_at(0).ext_factor, 0.0f);
  EXPECT_FLOAT_EQ(c.rope_at(0).attn_factor, 1.0f);  // not the file's rope.scaling.attn_factor
  EXPECT_FLOAT_EQ(c.rope_at(3).ext_factor, 1.0f);
  // mscale(4) / (1 + 0.1 ln 4) x 1.25, times the op's 1 + 0.1 ln 4
  EXPECT_FLOAT_EQ(c.rope_at(3).attn_factor, 1.25f * (1.0f + 0.1f * std::log(4.0f)));
  // Both forms matter to these logits: wider windows than the prompt (YaRN everywhere but the
  // local layers' RoPE still plain) and no windows at all (plain olmo2: YaRN on every layer).
  GgufEdit wide;
  wide.set_u32 = {{"olmo2.attention.sliding_window", 64}};
  copy_gguf(scratch("arch_olmo3.gguf"), scratch("arch_olmo3_wide.gguf"), wide);
  EXPECT_GT(logit_change(scratch("arch_olmo3.gguf"), scratch("arch_olmo3_wide.gguf")), 0.01);
  GgufEdit none;
  none.set_u32 = {{"olmo2.attention.sliding_window", 0}};
  copy_gguf(scratch("arch_olmo3_wide.gguf"), scratch("arch_olmo3_none.gguf"), none);
  EXPECT_GT(logit_change(scratch("arch_olmo3_wide.gguf"), scratch("arch_olmo3_none.gguf")), 0.01);
}

TEST(Architectures, Exaone4With64LayersWindowsAndNoPEGlobalLayersMatchReference) {
  // EXAONE 4.0 32B's form: 64 layers, windows of 4 on every layer but each fourth, whose
  // attention has no RoPE.
  check_against_reference(synth_spec("exaone4-32b-tiny"), "arch_exaone4_64.gguf");
  auto m = Model::load(scratch("arch_exaone4_64.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Exaone4);
  EXPECT_EQ(c.n_layer, 64);
  EXPECT_EQ(c.n_swa, 4);
  EXPECT_TRUE(c.nope_global);
  for (int l = 0; l < 64; ++l) EXPECT_EQ(c.has_rope(l), l % 4 != 3) << l;
  // The windows matter to these logits.
  GgufEdit wide;
  wide.set_u32 = {{"exaone4.attention.sliding_window", 64}};
  copy_gguf(scratch("arch_exaone4_64.gguf"), scratch("arch_exaone4_64_wide.gguf"), wide);
  EXPECT_GT(logit_change(scratch("arch_exaone4_64.gguf"), scratch("arch_exaone4_64_wide.gguf")), 0.01);
}

TEST(Architectures, CommandRAndCohere2MatchReference) {
  // LayerNorm without biases, one attn_norm feeding a parallel residual, the head from token_embd,
  // logits times logit_scale; cohere2 with windows of 4 on layers 0-2 and no RoPE on layer 3.
  check_against_reference(synth_spec("command-r-tiny"), "arch_command_r.gguf");
  check_against_reference(synth_spec("cohere2-tiny"), "arch_cohere2.gguf");
  auto m = Model::load(scratch("arch_cohere2.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Cohere2);
  EXPECT_TRUE(c.layer_norm && c.parallel_residual && c.tied_output && c.nope_global);
  EXPECT_FLOAT_EQ(c.logit_mult, 0.5f);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.has_rope(l), l < 3) << l;
  // The multiplier and the windows both reach these logits.
  GgufEdit mult;
  mult.set_f32 = {{"cohere2.logit_scale", 1.0f}};
  copy_gguf(scratch("arch_cohere2.gguf"), scratch("arch_cohere2_mult.gguf"), mult);
  EXPECT_GT(logit_change(scratch("arch_cohere2.gguf"), scratch("arch_cohere2_mult.gguf")), 0.5);
  GgufEdit wide;
  wide.set_u32 = {{"cohere2.attention.sliding_window", 64}};
  copy_gguf(scratch("arch_cohere2.gguf"), scratch("arch_cohere2_wide.gguf"), wide);
  EXPECT_GT(logit_change(scratch("arch_cohere2.gguf"), scratch("arch_cohere2_wide.gguf")), 0.01);
}

TEST(Architectures, Internlm2Qwen2VlAndSeedOssMatchReference) {
  // internlm2: llama's block; qwen2vl: qwen2 whose M-RoPE sections rotate text as split halves;
  // seed_oss: llama's block with split-halves RoPE and the FFN's norm named post_attention_norm.
  check_against_reference(synth_spec("internlm2-tiny"), "arch_internlm2.gguf");
  check_against_reference(synth_spec("qwen2vl-tiny"), "arch_qwen2vl.gguf");
  check_against_reference(synth_spec("seed_oss-tiny"), "arch_seed_oss.gguf");
  EXPECT_EQ(Model::load(scratch("arch_internlm2.gguf"))->config().rope_style, RopeStyle::Adjacent);
  EXPECT_EQ(Model::load(scratch("arch_qwen2vl.gguf"))->config().rope_style, RopeStyle::SplitHalves);
  EXPECT_EQ(Model::load(scratch("arch_seed_oss.gguf"))->config().arch, Arch::SeedOss);
  // The qwen2vl file's logits are qwen2's: the same weights under the other name (its output.bias
  // unused by both, as llama.cpp's graphs leave it).
  GgufEdit as_qwen2;
  as_qwen2.rename_arch = "qwen2";
  copy_gguf(scratch("arch_qwen2vl.gguf"), scratch("arch_qwen2vl_as_qwen2.gguf"), as_qwen2);
  EXPECT_EQ(logit_change(scratch("arch_qwen2vl.gguf"), scratch("arch_qwen2vl_as_qwen2.gguf")), 0.0);
}

TEST(Architectures, MiniCpmDefaultMultipliersMatchReference) {
  // granite's multipliers at MiniCPM's defaults: the file has none of their keys.
  check_against_reference(synth_spec("minicpm-tiny"), "arch_minicpm.gguf");
  auto m = Model::load(scratch("arch_minicpm.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::MiniCpm);
  EXPECT_FLOAT_EQ(c.embd_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.7f);  // 1.4 / sqrt(4)
  EXPECT_FLOAT_EQ(c.logit_scale, 4.0f);     // 256 / 64: the logits times 1/4
  // The keys, when a file has them, win.
  GgufEdit keys;
  keys.set_f32 = {{"minicpm.logit_scale", 1.0f}};
  copy_gguf(scratch("arch_minicpm.gguf"), scratch("arch_minicpm_keys.gguf"), keys);
  EXPECT_FLOAT_EQ(Model::load(scratch("arch_minicpm_keys.gguf"))->config().logit_scale, 1.0f);
  EXPECT_GT(logit_change(scratch("arch_minicpm.gguf"), scratch("arch_minicpm_keys.gguf")), 1.0);
}

TEST(Architectures, Glm4MatchesReference) {
  // Pre- and post-norms around both sublayers, q/k/v biases, ffn_up holding [gate | up], RoPE on
  // the first half of each head (adjacent pairs).
  check_against_reference(synth_spec("glm4-tiny"), "arch_glm4.gguf");
  auto m = Model::load(scratch("arch_glm4.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Glm4);
  EXPECT_TRUE(c.pre_norms && c.post_norms && c.ffn_gate_up_fused);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  EXPECT_EQ(c.rope_dims, 8);
  // A NextN (multi-token prediction) block after the model's own is counted by block_count and not
  // run: the file with one more block and nextn_predict_layers 1 gives the same logits.
  GgufEdit nextn;
  nextn.set_u32 = {{"glm4.nextn_predict_layers", 1}};
  copy_gguf(scratch("arch_glm4.gguf"), scratch("arch_glm4_nextn.gguf"), nextn);
  auto three = Model::load(scratch("arch_glm4_nextn.gguf"));
  EXPECT_EQ(three->config().n_layer, 3);
  GgufEdit cut;
  cut.keep_layers = 3;
  copy_gguf(scratch("arch_glm4.gguf"), scratch("arch_glm4_3.gguf"), cut);
  EXPECT_EQ(logit_change(scratch("arch_glm4_nextn.gguf"), scratch("arch_glm4_3.gguf")), 0.0);
}

TEST(Architectures, HunyuanDenseQkNormAfterRopeMatchesReference) {
  // Split-halves RoPE, then an RMSNorm of every q and k head (qwen3 norms before RoPE).
  check_against_reference(synth_spec("hunyuan-dense-tiny"), "arch_hunyuan.gguf");
  auto m = Model::load(scratch("arch_hunyuan.gguf"), f32_caches());
  EXPECT_TRUE(m->config().qk_norm && m->config().qk_norm_after_rope);
  // The order matters to these logits: the same weights read as qwen3 give others.
  GgufEdit as_qwen3;
  as_qwen3.rename_arch = "qwen3";
  copy_gguf(scratch("arch_hunyuan.gguf"), scratch("arch_hunyuan_as_qwen3.gguf"), as_qwen3);
  EXPECT_GT(logit_change(scratch("arch_hunyuan.gguf"), scratch("arch_hunyuan_as_qwen3.gguf")), 0.01);
}

TEST(Architectures, MaincoderQkNormAfterAdjacentRopeMatchesReference) {
  // Adjacent-pair RoPE, then an RMSNorm of every q and k head; a separate head.
  check_against_reference(synth_spec("maincoder-tiny"), "arch_maincoder.gguf");
  auto m = Model::load(scratch("arch_maincoder.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.qk_norm && c.qk_norm_after_rope);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  EXPECT_FALSE(c.tied_output);
  // Both the order and the pairing matter to these logits: the same weights read as hunyuan-dense
  // (split halves) and as qwen3 (norms before split-halves RoPE) give others.
  for (const char* other : {"hunyuan-dense", "qwen3"}) {
    GgufEdit as_other;
    as_other.rename_arch = other;
    const std::string path = scratch(fmt::format("arch_maincoder_as_{}.gguf", other));
    copy_gguf(scratch("arch_maincoder.gguf"), path, as_other);
    EXPECT_GT(logit_change(scratch("arch_maincoder.gguf"), path), 0.01) << other;
  }
}

TEST(Architectures, ApertusXieluMatchesReference) {
  // QK-norm before split-halves RoPE (the norms' biases in the file, unused as in llama.cpp's
  // graph), an ungated xIELU MLP with per-layer scalars (alpha_n and alpha_p per layer, beta and eps
  // one value), a separate head.
  check_against_reference(synth_spec("apertus-tiny"), "arch_apertus.gguf");
  auto m = Model::load(scratch("arch_apertus.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ffn_act, FfnActivation::XIelu);
  ASSERT_EQ(c.xielu.size(), 4u);
  // Layer 1: alpha_n 0.75, alpha_p 0.9, beta 0.5, mapped as ggml_xielu maps them.
  EXPECT_FLOAT_EQ(c.xielu[1].alpha_n, 0.5f + std::log(1.0f + std::exp(0.75f)));
  EXPECT_FLOAT_EQ(c.xielu[1].alpha_p, std::log(1.0f + std::exp(0.9f)));
  EXPECT_FLOAT_EQ(c.xielu[1].beta, 0.5f);
  EXPECT_FLOAT_EQ(c.xielu[1].eps, -1e-6f);
  // The scalars matter to these logits; the norms' biases do not.
  GgufEdit no_bias;
  no_bias.drop_tensor = "blk.0.attn_q_norm.bias";
  copy_gguf(scratch("arch_apertus.gguf"), scratch("arch_apertus_nobias.gguf"), no_bias);
  EXPECT_EQ(logit_change(scratch("arch_apertus.gguf"), scratch("arch_apertus_nobias.gguf")), 0.0);
  GgufEdit other_beta;
  other_beta.set_f32 = {{"xielu.beta", 0.3f}};
  copy_gguf(scratch("arch_apertus.gguf"), scratch("arch_apertus_beta.gguf"), other_beta);
  EXPECT_GT(logit_change(scratch("arch_apertus.gguf"), scratch("arch_apertus_beta.gguf")), 0.01);
}

TEST(Architectures, NanbeigeLoopsOverItsBlocksMatchesReference) {
  // 3 blocks run twice: 6 layers, each with a cache of its own and the weights of block l % 3, and
  // output_norm between the passes; with skip_loop_final_norm, none.
  check_against_reference(synth_spec("nanbeige-tiny"), "arch_nanbeige.gguf");
  auto m = Model::load(scratch("arch_nanbeige.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.n_layer, 6);
  EXPECT_EQ(c.n_layer_phys, 3);
  EXPECT_TRUE(c.loop_final_norm);
  GgufEdit skip;
  skip.set_bool = {{"nanbeige.skip_loop_final_norm", true}};
  copy_gguf(scratch("arch_nanbeige.gguf"), scratch("arch_nanbeige_skip.gguf"), skip);
  EXPECT_GT(logit_change(scratch("arch_nanbeige.gguf"), scratch("arch_nanbeige_skip.gguf")), 0.01);
  EXPECT_LE(reference_rel_error(scratch("arch_nanbeige_skip.gguf")), 1e-4);
  // One pass (num_loops 1) is another model.
  GgufEdit once;
  once.set_u32 = {{"nanbeige.num_loops", 1}};
  copy_gguf(scratch("arch_nanbeige.gguf"), scratch("arch_nanbeige_once.gguf"), once);
  EXPECT_EQ(Model::load(scratch("arch_nanbeige_once.gguf"), f32_caches())->config().n_layer, 3);
}

TEST(Architectures, Qwen3VlInterleavedMropeMatchesReference) {
  // qwen3's block with interleaved M-RoPE sections [6, 4, 4, 0] over 16 pairs: pair 13 falls in the
  // fourth section, where text positions are 0, and keeps its values.
  check_against_reference(synth_spec("qwen3vl-tiny"), "arch_qwen3vl.gguf");
  auto m = Model::load(scratch("arch_qwen3vl.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.rope_still_pairs.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(c.rope_still_pairs[i] != 0, i == 13) << i;
  // The still pair matters to these logits: the same weights read as qwen3 rotate it.
  GgufEdit as_qwen3;
  as_qwen3.rename_arch = "qwen3";
  copy_gguf(scratch("arch_qwen3vl.gguf"), scratch("arch_qwen3vl_as_qwen3.gguf"), as_qwen3);
  EXPECT_GT(logit_change(scratch("arch_qwen3vl.gguf"), scratch("arch_qwen3vl_as_qwen3.gguf")), 1e-3);
}

TEST(Architectures, SquaredReluMlpsMatchReference) {
  // arcee: llama's attention over down(relu(up x)^2); nemotron: the same MLP with biases under
  // LayerNorms with biases, partial split-halves RoPE. F32 and F16 weights.
  for (const char* preset : {"arcee-tiny", "nemotron-tiny"})
    for (DType t : {DType::F32, DType::F16}) {
      SynthSpec s = synth_spec(preset);
      s.type = t;
      check_against_reference(s, fmt::format("arch_{}_{}.gguf", preset, dtype_name(t)));
    }
  auto m = Model::load(scratch("arch_nemotron-tiny_F32.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ffn_act, FfnActivation::ReluSqr);
  EXPECT_TRUE(c.layer_norm);
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  // The activation matters: the same file read as starcoder2 (the same tensors under GELU) differs.
  GgufEdit as_starcoder2;
  as_starcoder2.rename_arch = "starcoder2";
  copy_gguf(scratch("arch_nemotron-tiny_F32.gguf"), scratch("arch_nemotron_as_starcoder2.gguf"), as_starcoder2);
  EXPECT_GT(logit_change(scratch("arch_nemotron-tiny_F32.gguf"), scratch("arch_nemotron_as_starcoder2.gguf")), 1e-3);
  // nemotron's head is required (llama.cpp's loader); without output.weight the file is refused.
  GgufEdit no_head;
  no_head.drop_tensor = "output.weight";
  copy_gguf(scratch("arch_nemotron-tiny_F32.gguf"), scratch("arch_nemotron_no_head.gguf"), no_head);
  EXPECT_THROW(Model::load(scratch("arch_nemotron_no_head.gguf"), f32_caches()), Error);
}

TEST(Architectures, Jais2IsNemotronsBlockWithRequiredBiasesAndATiedHead) {
  // jais2 (Jais 2): nemotron's graph, RoPE over whole heads, its head tied to token_embd (which
  // nemotron may not do), the attention output and MLP biases required.
  for (DType t : {DType::F32, DType::F16}) {
    SynthSpec s = synth_spec("jais2-tiny");
    s.type = t;
    check_against_reference(s, fmt::format("arch_jais2-tiny_{}.gguf", dtype_name(t)));
  }
  const std::string file = scratch("arch_jais2-tiny_F32.gguf");
  auto m = Model::load(file, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Nemotron);
  EXPECT_EQ(c.arch_name, "jais2");
  EXPECT_TRUE(c.tied_output);
  EXPECT_TRUE(c.layer_norm);
  EXPECT_EQ(c.ffn_act, FfnActivation::ReluSqr);
  EXPECT_EQ(c.rope_dims, c.head_dim);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  // The biases matter, and each one llama.cpp requires is required here, by name.
  for (const char* bias : {"blk.1.attn_output.bias", "blk.2.ffn_up.bias", "blk.3.ffn_down.bias"}) {
    GgufEdit drop;
    drop.drop_tensor = bias;
    const std::string edited = scratch(fmt::format("arch_jais2_without_{}.gguf", bias));
    copy_gguf(file, edited, drop);
    try {
      Model::load(edited, f32_caches());
      ADD_FAILURE() << bias << " was not required";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bias), std::string::npos) << e.what();
    }
  }
  // The same file read as nemotron is refused for its tied head.
  GgufEdit as_nemotron;
  as_nemotron.rename_arch = "nemotron";
  copy_gguf(file, scratch("arch_jais2_as_nemotron.gguf"), as_nemotron);
  EXPECT_THROW(Model::load(scratch("arch_jais2_as_nemotron.gguf"), f32_caches()), Error);
}

TEST(ModelLoad, PerTensorWeightScalesAreRefused) {
  // A weight's X.scale beside X.weight is a factor llama.cpp applies to its products (NVFP4
  // conversions, talkie); specmoe does not, so it refuses the file and names the tensor. A .scale
  // tensor of no weight is left to the architecture's own binding.
  SynthSpec s = synth_spec("tiny");
  s.type = DType::F32;
  const std::string file = scratch("scale_base.gguf");
  synth_write(s, file, 42);
  GgufEdit scaled;
  scaled.add_f32 = {{"blk.1.attn_output.scale", {0.5f}}};
  copy_gguf(file, scratch("scale_attn_output.gguf"), scaled);
  try {
    Model::load(scratch("scale_attn_output.gguf"), f32_caches());
    ADD_FAILURE() << "a weight scale was ignored";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'blk.1.attn_output.scale'"), std::string::npos) << e.what();
  }
  GgufEdit stray;
  stray.add_f32 = {{"blk.1.unrelated.scale", {0.5f}}};
  copy_gguf(file, scratch("scale_stray.gguf"), stray);
  EXPECT_NO_THROW(Model::load(scratch("scale_stray.gguf"), f32_caches()));
}

TEST(Architectures, Spark25GatesEachHeadAndRotatesItsWindowsOwnDims) {
  // spark2_5 (Spark-X 2.5): llama's block with a sigmoid gate per head (attn_gate, n_embd -> n_head)
  // on the attention's output, windows of 4 on the flagged layers rotating rope.dimension_count_swa
  // dims with their own base, a GELU-gated MLP, a tied head; F32 and F16 weights against the reference.
  for (DType t : {DType::F32, DType::F16}) {
    SynthSpec s = synth_spec("spark2_5-tiny");
    s.type = t;
    check_against_reference(s, fmt::format("arch_spark2_5-tiny_{}.gguf", dtype_name(t)));
  }
  const std::string file = scratch("arch_spark2_5-tiny_F32.gguf");
  auto m = Model::load(file, f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Spark25);
  EXPECT_TRUE(c.attn_gate_per_head);
  EXPECT_EQ(c.ffn_act, FfnActivation::GeluTanh);
  EXPECT_TRUE(c.tied_output);
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 1000.0f);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(c.window(l), l == 1 ? 0 : 4) << l;
    EXPECT_EQ(c.rope_dims_at(l), l == 1 ? 16 : 8) << l;
    EXPECT_TRUE(c.has_rope(l)) << l;
  }
  // The local layers' own dims matter: without the key they rotate all 16.
  GgufEdit whole;
  whole.drop_key = "spark2_5.rope.dimension_count_swa";
  copy_gguf(file, scratch("arch_spark2_5_whole_rope.gguf"), whole);
  EXPECT_GT(logit_change(file, scratch("arch_spark2_5_whole_rope.gguf")), 1e-3);
  // The gate is required, and so are the window and its per-layer flags.
  GgufEdit no_gate;
  no_gate.drop_tensor = "blk.2.attn_gate.weight";
  copy_gguf(file, scratch("arch_spark2_5_no_gate.gguf"), no_gate);
  EXPECT_THROW(Model::load(scratch("arch_spark2_5_no_gate.gguf"), f32_caches()), Error);
  GgufEdit period;
  period.set_u32 = {{"spark2_5.attention.sliding_window_pattern", 4}};
  copy_gguf(file, scratch("arch_spark2_5_period.gguf"), period);
  try {
    Model::load(scratch("arch_spark2_5_period.gguf"), f32_caches());
    ADD_FAILURE() << "a period in place of the flags was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be an array of one flag per layer"), std::string::npos) << e.what();
  }
}

TEST(Architectures, AlibiArchitecturesMatchReference) {
  // bloom (the embedding's LayerNorm, a tied head), mpt (no biases, q/k/v clamped to +-1.5, 6 heads:
  // the interleaved slopes), refact (llama's block, heads 4/1) and jais (a SwiGLU with biases, scores
  // scaled by 1/head_dim), ALiBi in every layer and no RoPE; F32 and F16 weights. The batch and the
  // cached path agree (check_against_reference), which needs the cache rows' positions.
  for (const char* preset : {"bloom-tiny", "mpt-tiny", "refact-tiny", "jais-tiny"})
    for (DType t : {DType::F32, DType::F16}) {
      SynthSpec s = synth_spec(preset);
      s.type = t;
      check_against_reference(s, fmt::format("arch_{}_{}.gguf", preset, dtype_name(t)));
    }
  auto bloom = Model::load(scratch("arch_bloom-tiny_F32.gguf"), f32_caches());
  EXPECT_EQ(bloom->config().arch, Arch::Bloom);
  EXPECT_FLOAT_EQ(bloom->config().alibi_max_bias, 8.0f);  // llama.cpp's fixed bias, no key
  EXPECT_TRUE(bloom->config().embd_norm);
  EXPECT_EQ(bloom->config().rope_style, RopeStyle::None);
  EXPECT_FALSE(bloom->config().learned_positions());
  auto mpt = Model::load(scratch("arch_mpt-tiny_F32.gguf"), f32_caches());
  EXPECT_FLOAT_EQ(mpt->config().clamp_kqv, 1.5f);
  EXPECT_FLOAT_EQ(mpt->config().alibi_max_bias, 8.0f);
  auto jais = Model::load(scratch("arch_jais-tiny_F32.gguf"), f32_caches());
  EXPECT_FLOAT_EQ(jais->config().attention_scale(), 1.0f / 16.0f);
  // Each part matters to these logits: ALiBi (mpt without its bias key), the clamp, the embedding's
  // norm (bloom's file read as mpt, whose graph has none and no fixed bias).
  for (const auto& [key, src, dst] :
       {std::tuple{"mpt.attention.max_alibi_bias", "arch_mpt-tiny_F32.gguf", "arch_mpt_no_alibi.gguf"},
        std::tuple{"mpt.attention.clamp_kqv", "arch_mpt-tiny_F32.gguf", "arch_mpt_no_clamp.gguf"}}) {
    GgufEdit e;
    e.drop_key = key;
    copy_gguf(scratch(src), scratch(dst), e);
    EXPECT_GT(logit_change(scratch(src), scratch(dst)), 1e-3) << key;
  }
  GgufEdit as_mpt;
  as_mpt.rename_arch = "mpt";
  copy_gguf(scratch("arch_bloom-tiny_F32.gguf"), scratch("arch_bloom_as_mpt.gguf"), as_mpt);
  EXPECT_GT(logit_change(scratch("arch_bloom-tiny_F32.gguf"), scratch("arch_bloom_as_mpt.gguf")), 1e-3);
}

TEST(Architectures, FalconOlmoBaichuanMatchReference) {
  // falcon: a parallel residual under one LayerNorm (Falcon-7B, heads 4/1), or with the attention's
  // own norm (Falcon-40B, heads 4/2); olmo: LayerNorms without parameters, q/k/v clamped; baichuan:
  // RoPE with 32 layers, ALiBi with 40, as llama.cpp decides by the layer count. F32 and F16 weights.
  for (const char* preset : {"falcon-tiny", "falcon40b-tiny", "olmo-tiny", "baichuan-tiny", "baichuan13b-tiny"})
    for (DType t : {DType::F32, DType::F16}) {
      SynthSpec s = synth_spec(preset);
      s.type = t;
      check_against_reference(s, fmt::format("arch_{}_{}.gguf", preset, dtype_name(t)));
    }
  auto falcon = Model::load(scratch("arch_falcon40b-tiny_F32.gguf"), f32_caches());
  EXPECT_TRUE(falcon->config().parallel_residual);
  EXPECT_EQ(falcon->config().rope_style, RopeStyle::SplitHalves);
  auto olmo = Model::load(scratch("arch_olmo-tiny_F32.gguf"), f32_caches());
  EXPECT_FLOAT_EQ(olmo->config().clamp_kqv, 1.5f);
  auto b7 = Model::load(scratch("arch_baichuan-tiny_F32.gguf"), f32_caches());
  EXPECT_EQ(b7->config().rope_style, RopeStyle::Adjacent);
  EXPECT_FALSE(b7->config().alibi());
  auto b13 = Model::load(scratch("arch_baichuan13b-tiny_F32.gguf"), f32_caches());
  EXPECT_EQ(b13->config().rope_style, RopeStyle::None);
  EXPECT_FLOAT_EQ(b13->config().alibi_max_bias, 8.0f);
  // Falcon-40B's second norm matters: without it layer 1's attention reads attn_norm (Falcon-7B's way).
  GgufEdit no_norm2;
  no_norm2.drop_tensor = "blk.1.attn_norm_2.weight";
  copy_gguf(scratch("arch_falcon40b-tiny_F32.gguf"), scratch("arch_falcon40b_no_norm2.gguf"), no_norm2);
  EXPECT_GT(logit_change(scratch("arch_falcon40b-tiny_F32.gguf"), scratch("arch_falcon40b_no_norm2.gguf")), 1e-3);
  // A 40-layer baichuan read with 32 layers' rules (its first 32 layers) rotates and has no ALiBi.
  GgufEdit first32;
  first32.keep_layers = 32;
  copy_gguf(scratch("arch_baichuan13b-tiny_F32.gguf"), scratch("arch_baichuan13b_32.gguf"), first32);
  auto cut = Model::load(scratch("arch_baichuan13b_32.gguf"), f32_caches());
  EXPECT_EQ(cut->config().rope_style, RopeStyle::Adjacent);
  EXPECT_FALSE(cut->config().alibi());
}

TEST(Architectures, LlamaLikeFamiliesMatchReference) {
  // qwen (Qwen 1: attn_qkv with a bias, an MLP of half of feed_forward_length), xverse, orion
  // (LayerNorms with biases), codeshell (LayerNorms, biases, gpt2's MLP), plamo (one RMSNorm for a
  // parallel residual) and chatglm (fused gate-up, RoPE on half of each head); F32 and F16 weights.
  for (const char* preset : {"qwen-tiny", "xverse-tiny", "orion-tiny", "codeshell-tiny", "plamo-tiny", "chatglm-tiny"})
    for (DType t : {DType::F32, DType::F16}) {
      SynthSpec s = synth_spec(preset);
      s.type = t;
      check_against_reference(s, fmt::format("arch_{}_{}.gguf", preset, dtype_name(t)));
    }
  auto qwen = Model::load(scratch("arch_qwen-tiny_F32.gguf"), f32_caches());
  EXPECT_EQ(qwen->config().n_ff, 192);  // feed_forward_length 384
  EXPECT_EQ(qwen->config().rope_style, RopeStyle::SplitHalves);
  auto plamo = Model::load(scratch("arch_plamo-tiny_F32.gguf"), f32_caches());
  EXPECT_TRUE(plamo->config().parallel_residual);
  auto chatglm = Model::load(scratch("arch_chatglm-tiny_F32.gguf"), f32_caches());
  EXPECT_TRUE(chatglm->config().ffn_gate_up_fused);
  EXPECT_EQ(chatglm->config().rope_dims, 8);
  // codeshell without token_embd reads its embedding rows from output.weight, as llama.cpp does.
  GgufEdit no_embd;
  no_embd.drop_tensor = "token_embd.weight";
  copy_gguf(scratch("arch_codeshell-tiny_F32.gguf"), scratch("arch_codeshell_no_embd.gguf"), no_embd);
  EXPECT_LE(reference_rel_error(scratch("arch_codeshell_no_embd.gguf")), 1e-4);
  EXPECT_GT(logit_change(scratch("arch_codeshell-tiny_F32.gguf"), scratch("arch_codeshell_no_embd.gguf")), 1e-3);
  // An odd feed_forward_length cannot be qwen's two halves.
  GgufEdit odd;
  odd.set_u32 = {{"qwen.feed_forward_length", 383}};
  copy_gguf(scratch("arch_qwen-tiny_F32.gguf"), scratch("arch_qwen_odd.gguf"), odd);
  EXPECT_THROW(Model::load(scratch("arch_qwen_odd.gguf"), f32_caches()), Error);
}

TEST(Architectures, Mistral3YarnKeysAndTemperatureMatchReference) {
  // YaRN over an original context of 8 with beta_fast 16, beta_slow 2 and yarn_log_multiplier 1
  // from the file, and the attention temperature 0.5 scaling the queries of positions 8 and on
  // (the test's 11 tokens reach it).
  check_against_reference(synth_spec("mistral3-tiny"), "arch_mistral3.gguf");
  auto m = Model::load(scratch("arch_mistral3.gguf"), f32_caches());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Mistral3);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.yarn_beta_fast, 16.0f);
  EXPECT_FLOAT_EQ(c.yarn_beta_slow, 2.0f);
  EXPECT_FLOAT_EQ(c.rope_yarn_log_mul, 1.0f);
  EXPECT_FLOAT_EQ(c.attn_temp_scale, 0.5f);
  EXPECT_EQ(c.attn_temp_floor, 8);
  // Without the temperature key the logits of positions 8 and on move, the earlier ones do not.
  GgufEdit e;
  e.drop_key = "mistral3.attention.temperature_scale";
  copy_gguf(scratch("arch_mistral3.gguf"), scratch("arch_mistral3_notemp.gguf"), e);
  auto n = Model::load(scratch("arch_mistral3_notemp.gguf"), f32_caches());
  const std::vector<int32_t> ids = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};
  KVCache ka = m->new_cache(16), kb = n->new_cache(16);
  std::vector<float> a, b;
  m->forward(ids, ka).logits.to_host(a);
  n->forward(ids, kb).logits.to_host(b);
  const int V = c.n_vocab;
  for (int t = 0; t < 11; ++t) {
    double moved = 0;
    for (int j = 0; j < V; ++j) moved = std::max(moved, std::fabs(double(a[t * V + j]) - b[t * V + j]));
    if (t < 8)
      EXPECT_EQ(moved, 0.0) << t;
    else
      EXPECT_GT(moved, 1e-3) << t;
  }
}
