// KV cache element types (f32, f16, q8_0; llama.cpp's --cache-type-k / --cache-type-v): logits
// with f16 and q8_0 caches against the f32 cache, batched = sequential bit for bit with typed rows
// (what greedy speculation relies on), truncate / keep / copies of typed caches bit-exact, the
// Q8_0 head check naming the model and layer, bytes per token, the type names, and the CLI and
// TOML spellings with their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli_runner.h"
#include "core/model.h"
#include "core/synth.h"
#include "experiments/config_hash.h"
#include "experiments/experiment_spec.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::scratch_dir;

namespace {

std::string synth_path(const std::string& preset) {
  const std::string path = (scratch_dir() / ("kvtypes_" + preset + ".gguf")).string();
  synth_write(synth_spec(preset), path, 11);
  return path;
}

std::unique_ptr<Model> load(const std::string& path, KVCacheTypes types) {
  LoadOptions o;
  o.n_threads = 2;
  o.cache_types = types;
  return Model::load(path, o);
}

const KVCacheTypes kF32{DType::F32, DType::F32}, kF16{DType::F16, DType::F16}, kQ8{DType::Q8_0, DType::Q8_0},
    kMixed{DType::F16, DType::Q8_0};

std::vector<int32_t> prompt_ids(int n, int n_vocab, int salt = 0) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((7 * i * i + 13 * i + 3 + salt) % n_vocab));
  return ids;
}

std::vector<float> logits_of(Model& m, KVCache& kv, const std::vector<int32_t>& ids) {
  return m.forward(ids, kv).logits.to_host();
}

std::vector<float> one_by_one(Model& m, KVCache& kv, const std::vector<int32_t>& ids) {
  std::vector<float> all, l;
  for (int32_t id : ids) {
    const int32_t one[1] = {id};
    m.forward(one, kv).logits.to_host(l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

struct Error2 {
  double max_rel = 0.0;  // max |a - b| over a row / that row's logit range (of b), worst row
  double nmse = 0.0;     // sum (a - b)^2 / sum b^2
};
Error2 compare(const std::vector<float>& a, const std::vector<float>& b, int n_vocab) {
  Error2 e;
  double err = 0.0, ref = 0.0;
  for (size_t r = 0; r * n_vocab < b.size(); ++r) {
    const float* pb = b.data() + r * n_vocab;
    const float* pa = a.data() + r * n_vocab;
    const auto [lo, hi] = std::minmax_element(pb, pb + n_vocab);
    double worst = 0.0;
    for (int i = 0; i < n_vocab; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(pa[i]) - pb[i]));
      err += (static_cast<double>(pa[i]) - pb[i]) * (static_cast<double>(pa[i]) - pb[i]);
      ref += static_cast<double>(pb[i]) * pb[i];
    }
    e.max_rel = std::max(e.max_rel, worst / (*hi - *lo));
  }
  e.nmse = err / ref;
  return e;
}

// ------------------------------------------------------------------------------------------
// Numerics: typed caches against the f32 cache.

// A 48-token prompt, every position's logits. The f16 cache rounds keys and values to 11
// significant bits (relative RMS error 2^-12 / sqrt(3) ~ 1.4e-4 per element), q8_0 to 8 bits per
// block of 32 (step amax/127, RMS ~ amax/440: ~ 1.7e-3 of a unit-variance element, 4x that of an
// outlier block); through softmax, values and the remaining layers the logits move by about as
// much relative to their spread. Measured worst rows (max |d| / logit range) on these models:
// f16 4e-5 .. 2.4e-4 (nMSE <= 6e-8), q8_0 alone or with f16 / f32 1e-3 .. 7.8e-3 (nMSE <= 6e-5,
// qwen3-tiny's wide heads the largest); the bounds are 10x those or more, far below what a wrong
// row, head or block (errors of order 1) gives. The error must also be non-zero: the cache type
// has to be in effect.
TEST(KVCacheTypes, TypedCachesGiveLogitsCloseToTheF32Cache) {
  struct Case {
    const char* preset;
    KVCacheTypes types;
    double max_rel, nmse;
  };
  for (const char* preset : {"tiny-256", "qwen3-tiny", "gemma3-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string path = synth_path(preset);
    auto ref_model = load(path, kF32);
    const int n_vocab = ref_model->config().n_vocab;
    const std::vector<int32_t> ids = prompt_ids(48, n_vocab);
    KVCache ref_kv = ref_model->new_cache(64);
    const std::vector<float> ref = logits_of(*ref_model, ref_kv, ids);
    for (const Case& c : {Case{preset, kF16, 3e-3, 1e-6}, Case{preset, kQ8, 8e-2, 1e-3}, Case{preset, kMixed, 8e-2, 1e-3},
                          Case{preset, {DType::Q8_0, DType::F32}, 8e-2, 1e-3}}) {
      SCOPED_TRACE(fmt::format("K {} V {}", kv_cache_type_name(c.types.k), kv_cache_type_name(c.types.v)));
      auto m = load(path, c.types);
      KVCache kv = m->new_cache(64);
      EXPECT_EQ(kv.layout(0).k_type, c.types.k);
      EXPECT_EQ(kv.layout(0).v_type, c.types.v);
      const std::vector<float> got = logits_of(*m, kv, ids);
      const Error2 e = compare(got, ref, n_vocab);
      std::printf("[kv types] %-12s K %-4s V %-4s: worst row max|d|/range %.3g, nMSE %.3g\n", preset,
                  kv_cache_type_name(c.types.k), kv_cache_type_name(c.types.v), e.max_rel, e.nmse);
      EXPECT_GT(e.nmse, 0.0) << "the cache type made no difference: is it used?";
      EXPECT_LE(e.max_rel, c.max_rel);
      EXPECT_LE(e.nmse, c.nmse);
    }
  }
}

// Greedy speculative decoding is token-for-token plain decoding only if a token's logits do not
// depend on the batch it is computed in: with typed rows the new keys are converted before
// attention reads them, so a batch sees exactly the rows single steps leave behind.
TEST(KVCacheTypes, BatchedEqualsSequentialBitForBit) {
  for (const char* preset : {"tiny-256", "gemma3-tiny"}) {
    const std::string path = synth_path(preset);
    for (const KVCacheTypes& t : {kF16, kQ8, kMixed}) {
      SCOPED_TRACE(fmt::format("{} K {} V {}", preset, kv_cache_type_name(t.k), kv_cache_type_name(t.v)));
      auto m = load(path, t);
      const std::vector<int32_t> ids = prompt_ids(21, m->config().n_vocab, 5);
      KVCache a = m->new_cache(32), b = m->new_cache(32);
      const std::vector<float> batched = logits_of(*m, a, ids);
      const std::vector<float> single = one_by_one(*m, b, ids);
      ASSERT_EQ(batched.size(), single.size());
      EXPECT_EQ(std::memcmp(batched.data(), single.data(), batched.size() * sizeof(float)), 0);
      for (int l = 0; l < a.n_layer(); ++l) EXPECT_EQ(a.read_layer(l), b.read_layer(l)) << "layer " << l;
    }
  }
}

// truncate + recompute, keep (tree compaction) and copies move typed rows as bytes.
TEST(KVCacheTypes, TruncateKeepAndCopyAreBitExact) {
  const std::string path = synth_path("tiny-256");
  for (const KVCacheTypes& t : {kF16, kQ8, kMixed}) {
    SCOPED_TRACE(fmt::format("K {} V {}", kv_cache_type_name(t.k), kv_cache_type_name(t.v)));
    auto m = load(path, t);
    const int n_vocab = m->config().n_vocab;
    const std::vector<int32_t> ids = prompt_ids(12, n_vocab, 9), more = prompt_ids(4, n_vocab, 40);
    KVCache kv = m->new_cache(32);
    logits_of(*m, kv, ids);
    std::vector<std::vector<uint8_t>> before;
    for (int l = 0; l < kv.n_layer(); ++l) before.push_back(kv.read_layer(l));

    // A copy holds the same bytes and continues identically.
    KVCache copy = kv;
    for (int l = 0; l < kv.n_layer(); ++l) EXPECT_EQ(copy.read_layer(l), before[l]);
    const std::vector<float> next = logits_of(*m, kv, more), next_copy = logits_of(*m, copy, more);
    EXPECT_EQ(std::memcmp(next.data(), next_copy.data(), next.size() * sizeof(float)), 0);

    // Truncate back to 12 tokens and recompute the same 4: same logits, same bytes.
    kv.truncate(12);
    const std::vector<float> again = logits_of(*m, kv, more);
    EXPECT_EQ(std::memcmp(next.data(), again.data(), next.size() * sizeof(float)), 0);
    for (int l = 0; l < kv.n_layer(); ++l) EXPECT_EQ(kv.read_layer(l), copy.read_layer(l));

    // keep: rows 0..7, 10, 13, 15 of 16 in that order, each row's key and value bytes moved.
    const std::vector<int> keep = {0, 1, 2, 3, 4, 5, 6, 7, 10, 13, 15};
    std::vector<std::vector<uint8_t>> full;
    for (int l = 0; l < kv.n_layer(); ++l) full.push_back(kv.read_layer(l));
    kv.keep(keep);
    ASSERT_EQ(kv.size(), static_cast<int>(keep.size()));
    for (int l = 0; l < kv.n_layer(); ++l) {
      const size_t kb = kv.k_row_bytes(l), vb = kv.v_row_bytes(l);
      std::vector<uint8_t> want;
      for (int i : keep) want.insert(want.end(), full[l].begin() + i * kb, full[l].begin() + (i + 1) * kb);
      for (int i : keep)
        want.insert(want.end(), full[l].begin() + 16 * kb + i * vb, full[l].begin() + 16 * kb + (i + 1) * vb);
      EXPECT_EQ(kv.read_layer(l), want) << "layer " << l;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Layouts, sizes, errors.

TEST(KVCacheTypes, F16IsTheDefaultAsInLlamaCpp) {
  EXPECT_EQ(LoadOptions{}.cache_types, kF16);
  auto m = Model::load(synth_path("tiny"));
  EXPECT_EQ(m->cache_types(), kF16);
  EXPECT_EQ(m->new_cache(8).layout(0).k_type, DType::F16);
}

TEST(KVCacheTypes, BytesPerTokenFollowTheType) {
  const std::string path = synth_path("tiny-256");
  auto m = load(path, kF32);
  const ModelConfig& c = m->config();
  const size_t f32 = 2 * static_cast<size_t>(c.n_layer) * c.kv_dim() * 4;
  EXPECT_EQ(m->new_cache(4).bytes_per_token(), f32);
  EXPECT_EQ(m->new_cache(4, kF16).bytes_per_token(), f32 / 2);
  EXPECT_EQ(m->new_cache(4, kQ8).bytes_per_token(), f32 / 4 / 32 * 34);  // 34 bytes per 32 elements
  EXPECT_EQ(m->new_cache(4, kMixed).bytes_per_token(), f32 / 4 + f32 / 4 / 32 * 17);
  // A cache made with other types than the model's runs: the forward takes any cache of its widths.
  KVCache q = m->new_cache(8, kQ8);
  const std::vector<int32_t> ids = prompt_ids(5, c.n_vocab);
  auto q8_model = load(path, kQ8);
  KVCache q2 = q8_model->new_cache(8);
  EXPECT_EQ(logits_of(*m, q, ids), logits_of(*q8_model, q2, ids));
}

// tiny has heads of 16: a Q8_0 block would straddle two heads. llama.cpp refuses that too.
TEST(KVCacheTypes, Q8_0NeedsHeadsOfWholeBlocks) {
  const std::string path = synth_path("tiny");
  for (const KVCacheTypes& t : {kQ8, KVCacheTypes{DType::F16, DType::Q8_0}}) {
    try {
      load(path, t);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      for (const std::string& part : {path, std::string("q8_0"), std::string("layer 0"), std::string("16")})
        EXPECT_NE(msg.find(part), std::string::npos) << msg << " lacks " << part;
    }
  }
  auto m = load(path, kF16);
  EXPECT_THROW(m->new_cache(8, kQ8), Error);
  EXPECT_THROW(m->new_cache(8, KVCacheTypes{DType::Q4_0, DType::F16}), Error);
  // The cache itself checks its rows: no other types, whole blocks.
  EXPECT_THROW(KVCache(host_memory(), {KVLayerLayout{64, 64, DType::Q4_K, DType::F32, 0}}, 4), Error);
  EXPECT_THROW(KVCache(host_memory(), {KVLayerLayout{48, 48, DType::Q8_0, DType::Q8_0, 0}}, 4), Error);
  EXPECT_NO_THROW(KVCache(host_memory(), {KVLayerLayout{64, 64, DType::Q8_0, DType::F16, 0}}, 4));
}

TEST(KVCacheTypes, NamesAreLlamaCppsAndBadOnesAreNamed) {
  EXPECT_EQ(parse_kv_cache_type("f32", "x"), DType::F32);
  EXPECT_EQ(parse_kv_cache_type("F16", "x"), DType::F16);
  EXPECT_EQ(parse_kv_cache_type("q8_0", "x"), DType::Q8_0);
  EXPECT_EQ(parse_kv_cache_type("Q8_0", "x"), DType::Q8_0);
  EXPECT_STREQ(kv_cache_type_name(DType::Q8_0), "q8_0");
  for (const char* bad : {"q4_0", "bf16", "", "f16 "}) {
    try {
      parse_kv_cache_type(bad, "--cache-type-k");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("--cache-type-k '") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("f32, f16, q8_0"), std::string::npos) << msg;
    }
  }
}

// ------------------------------------------------------------------------------------------
// TOML and CLI.

TEST(KVCacheTypes, TomlKeysAreCheckedAndHashed) {
  const std::string base = "[experiment]\nname = \"kv\"\n{}\n[models.t]\nsynth = \"tiny\"\n[prompts]\nlist = [\"a\"]\n"
                           "[[strategy]]\nname = \"ar\"\nkind = \"autoregressive\"\ntarget = \"t\"\n";
  auto parse = [&](const std::string& lines) {
    return exp::parse_experiment_string(fmt::format(fmt::runtime(base), lines), (scratch_dir() / "kv.toml").string());
  };
  const exp::ExperimentSpec def = parse("");
  EXPECT_EQ(def.cache_type_k, "f16");
  EXPECT_EQ(def.cache_type_v, "f16");
  const exp::ExperimentSpec q8 = parse("cache_type_k = \"Q8_0\"\ncache_type_v = \"f32\"");
  EXPECT_EQ(q8.cache_type_k, "q8_0");
  EXPECT_EQ(q8.cache_type_v, "f32");
  const nlohmann::json j = exp::spec_to_json(q8, {});
  EXPECT_EQ(j["experiment"]["cache_type_k"], "q8_0");
  EXPECT_NE(exp::experiment_config_hash(def, {}), exp::experiment_config_hash(q8, {}));
  try {
    parse("seed = 1\ncache_type_v = \"q4_0\"");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kv.toml:4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("experiment.cache_type_v"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'q4_0'"), std::string::npos) << msg;
  }
  EXPECT_THROW(parse("cache_type_k = 8"), Error);
}

TEST(KVCacheTypes, CliFlagsAndTheirErrors) {
  SPECMOE_REQUIRE_CLI();
  using specmoe::testing::run_cli;
  const std::string tiny = synth_path("tiny"), wide = synth_path("tiny-256");
  const auto ok = run_cli({"generate", "-m", wide, "-p", "hello", "-n", "3", "--temp", "0", "-ctk", "q8_0", "-ctv",
                           "f32", "--chat-template", "none", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.describe();
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["cache_type_k"], "q8_0");
  EXPECT_EQ(j["cache_type_v"], "f32");
  const auto def = run_cli({"generate", "-m", wide, "-p", "hello", "-n", "1", "--chat-template", "none", "--json"});
  ASSERT_EQ(def.exit_code, 0) << def.describe();
  EXPECT_EQ(nlohmann::json::parse(def.out)["cache_type_k"], "f16");

  // speculate: the target and a draft model both load with the given types; greedy speculation
  // over them gives the same text as generate with the same types.
  const auto spec = run_cli({"speculate", "-m", wide, "-md", wide, "-p", "hello", "-n", "3", "--temp", "0",
                             "--cache-type-k", "q8_0", "--cache-type-v", "f32", "--chat-template", "none", "--json"});
  ASSERT_EQ(spec.exit_code, 0) << spec.describe();
  const nlohmann::json js = nlohmann::json::parse(spec.out);
  EXPECT_EQ(js["cache_type_k"], "q8_0");
  EXPECT_EQ(js["cache_type_v"], "f32");
  EXPECT_EQ(js["text"], j["text"]) << spec.out;
  // perplexity names the types it ran with.
  const std::string text_file = (scratch_dir() / "kvtypes_ppl.txt").string();
  {
    std::ofstream f(text_file);
    for (int i = 0; i < 40; ++i) f << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const auto ppl = run_cli({"perplexity", "-m", wide, "-f", text_file, "-c", "32", "-ctk", "q8_0", "-ctv", "f16"});
  ASSERT_EQ(ppl.exit_code, 0) << ppl.describe();
  EXPECT_NE(ppl.err.find("KV cache k q8_0, v f16"), std::string::npos) << ppl.describe();

  const auto bad = run_cli({"generate", "-m", tiny, "-p", "hello", "--cache-type-v", "q4_1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--cache-type-v 'q4_1'"), std::string::npos) << bad.describe();
  const auto heads = run_cli({"generate", "-m", tiny, "-p", "hello", "-ctk", "q8_0"});
  EXPECT_NE(heads.exit_code, 0);
  EXPECT_NE(heads.err.find(tiny), std::string::npos) << heads.describe();
  EXPECT_NE(heads.err.find("layer 0"), std::string::npos) << heads.describe();
  EXPECT_EQ(std::count(heads.err.begin(), heads.err.end(), '\n'), 1) << "one line: " << heads.err;
}

// specmoe info prints each type's bytes per token; q8_0 is null where the heads are not whole
// blocks (tiny's heads of 16).
TEST(KVCacheTypes, InfoShowsBytesPerTokenOfEachType) {
  SPECMOE_REQUIRE_CLI();
  using specmoe::testing::run_cli;
  const std::string wide = synth_path("tiny-256"), tiny = synth_path("tiny");
  const ModelConfig c = load(wide, kF32)->config();
  const size_t f32 = 2 * static_cast<size_t>(c.n_layer) * c.kv_dim() * 4;
  const auto a = run_cli({"info", "-m", wide, "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  const nlohmann::json ja = nlohmann::json::parse(a.out)["kv_bytes_per_token_by_type"];
  EXPECT_EQ(ja["f32"], f32);
  EXPECT_EQ(ja["f16"], f32 / 2);
  EXPECT_EQ(ja["q8_0"], f32 / 4 / 32 * 34);
  const auto b = run_cli({"info", "-m", tiny, "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  const nlohmann::json jb = nlohmann::json::parse(b.out)["kv_bytes_per_token_by_type"];
  EXPECT_GT(jb["f16"].get<size_t>(), 0u);
  EXPECT_TRUE(jb["q8_0"].is_null()) << jb;
  const auto text = run_cli({"info", "-m", wide});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find(fmt::format("kv cache:      f32 {} B, f16 {} B, q8_0 {} B per token", f32, f32 / 2,
                                      f32 / 4 / 32 * 34)),
            std::string::npos)
      << text.out;
}

}  // namespace

// --huge-pages (every model-loading command; core::LoadOptions::huge_pages): where the packed
// weights live, never what they hold, so the tokens are the same for each choice; a bad value is
// one error line naming the flag.
TEST(CliModelOptions, HugePagesChoiceKeepsTheTokens) {
  SPECMOE_REQUIRE_CLI();
  using specmoe::testing::run_cli;
  const std::string wide = synth_path("tiny-256");
  std::string first;
  for (const char* hp : {"auto", "on", "off"}) {
    const auto r = run_cli({"generate", "-m", wide, "-p", "hello", "-n", "8", "--temp", "0", "--chat-template", "none",
                            "--huge-pages", hp, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const std::string text = nlohmann::json::parse(r.out)["text"];
    if (first.empty()) first = text;
    EXPECT_EQ(text, first) << hp;
  }
  const auto bad = run_cli({"generate", "-m", wide, "-p", "hello", "--huge-pages", "always"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--huge-pages always: must be auto, on or off"), std::string::npos) << bad.describe();
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << "one line: " << bad.err;
}
