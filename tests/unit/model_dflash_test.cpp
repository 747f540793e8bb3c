// DFlash drafts (core::Model::dflash_inject / forward_dflash, draft/dflash_drafter.h): the
// injected cache rows and the block's logits against a reference written here from llama.cpp's
// dflash graph (src/models/dflash.cpp), bidirectional and causal blocks, a draft with its own
// vocabulary (d2t) included; injecting a batch equal to one position at a time; the drafter through
// the decoding loop: identical to autoregressive decoding at temperature 0 with drafts accepted,
// its cache the injection of the committed tokens' features after a sampled run, lossless at
// temperature 1 (chi-square of the first two tokens, an always-accept verifier failing it); clear
// errors; the CLI. Token for token against llama.cpp's draft-dflash: scripts/conformance-dflash.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli_runner.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/dflash_drafter.h"
#include "draft/registry.h"
#include "head_reference.h"
#include "lossless.h"
#include "recurrent_model_helpers.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::f32_caches;
using specmoe::testing::linear;
using specmoe::testing::Mat;
using specmoe::testing::rel_error;
using specmoe::testing::rows_of;

namespace {

const std::vector<int32_t>& kIds = specmoe::testing::kRecurrentIds;
const std::vector<std::string> kDrafts = {"dflash-tiny", "dflash-d2t-tiny"};

std::string write_preset(const std::string& preset) { return specmoe::testing::write_preset_file(preset); }

std::string write_agreeing_target() { return specmoe::testing::write_agreeing_tiny("tiny_agreeing_dflash.gguf"); }

std::shared_ptr<Model> load_draft(const std::string& preset) {
  return std::shared_ptr<Model>(Model::load(write_preset(preset), f32_caches()));
}

verify::DecodeOptions decode_options(int max_tokens, int g) {
  verify::DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = g;
  o.stop_at_eog = false;
  o.cost_probe_forwards = 0;
  return o;
}

std::vector<float> download(const Rows& r) { return r.to_host(); }

// llama.cpp's dflash graph in double precision, read from the files' tensors (the target's where
// the draft has none):
//   inject: g = rmsnorm(fc f; enc.output_norm); per layer k = rope(rmsnorm_head(wk g; k_norm)), v = wv g
//   block:  x = embed(t); per layer n = rmsnorm(x; attn_norm), q/k per-head normed and roped (split
//           halves), attention over the injected rows and the block (all of it, or causal),
//           x += wo att; x += down(silu(gate m) * up m), m = rmsnorm(x; ffn_norm);
//           logits = output(rmsnorm(x; output_norm)) through d2t (-inf elsewhere)
struct DFlashReference : specmoe::testing::HeadTensors {
  ModelConfig c;
  DFlashReference(const std::string& draft_path, const std::string& target_path)
      : HeadTensors(draft_path, target_path), c(ModelConfig::from_gguf(*head)) {}

  std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& w, size_t from = 0,
                          size_t n = 0) const {
    return specmoe::testing::rms_norm(x, w, c.norm_eps, from, n);
  }
  std::vector<double> heads_normed(std::vector<double> v, const std::vector<double>& w) const {
    for (size_t h = 0; h < v.size() / c.head_dim; ++h) v = rms(v, w, h * c.head_dim, c.head_dim);
    return v;
  }
  void rope(std::vector<double>& v, int pos) const {  // split halves (NeoX)
    const int hd = c.head_dim, half = hd / 2;
    for (size_t h = 0; h < v.size() / hd; ++h)
      for (int i = 0; i < half; ++i) {
        const double th = pos * std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / hd);
        double& a = v[h * hd + i];
        double& b = v[h * hd + i + half];
        const double x0 = a, x1 = b;
        a = x0 * std::cos(th) - x1 * std::sin(th);
        b = x0 * std::sin(th) + x1 * std::cos(th);
      }
  }
  std::string blk(int l, const char* name) const { return "blk." + std::to_string(l) + "." + name + ".weight"; }
  size_t kv_dim() const { return static_cast<size_t>(c.n_head_kv) * c.head_dim; }

  // The injected rows of every layer: keys[l][p], values[l][p] for the features' positions 0...
  std::pair<std::vector<Mat>, std::vector<Mat>> inject(const Mat& features) const {
    const auto fc = tensor("fc.weight"), hn = tensor("enc.output_norm.weight");
    std::vector<Mat> keys(c.n_layer), values(c.n_layer);
    for (size_t p = 0; p < features.size(); ++p) {
      const auto g = rms(linear(fc, features[p], c.n_embd), hn);
      for (int l = 0; l < c.n_layer; ++l) {
        auto k = heads_normed(linear(tensor(blk(l, "attn_k")), g, kv_dim()), tensor(blk(l, "attn_k_norm")));
        rope(k, static_cast<int>(p));
        keys[l].push_back(k);
        values[l].push_back(linear(tensor(blk(l, "attn_v")), g, kv_dim()));
      }
    }
    return {keys, values};
  }

  // The block's logits [T][n_vocab], its tokens at positions n .. n+T-1 over n injected rows.
  Mat block(const std::vector<int32_t>& ids, std::vector<Mat> keys, std::vector<Mat> values) const {
    const int T = static_cast<int>(ids.size()), d = c.n_embd, hd = c.head_dim, H = c.n_head;
    const int n = keys.empty() ? 0 : static_cast<int>(keys[0].size());
    const auto emb = tensor("token_embd.weight");
    Mat x(T);
    for (int t = 0; t < T; ++t)
      x[t].assign(emb.begin() + static_cast<size_t>(ids[t]) * d, emb.begin() + static_cast<size_t>(ids[t] + 1) * d);
    for (int l = 0; l < c.n_layer; ++l) {
      Mat q(T);
      for (int t = 0; t < T; ++t) {
        const auto nx = rms(x[t], tensor(blk(l, "attn_norm")));
        q[t] = heads_normed(linear(tensor(blk(l, "attn_q")), nx, static_cast<size_t>(H) * hd), tensor(blk(l, "attn_q_norm")));
        auto k = heads_normed(linear(tensor(blk(l, "attn_k")), nx, kv_dim()), tensor(blk(l, "attn_k_norm")));
        rope(q[t], n + t);
        rope(k, n + t);
        keys[l].push_back(k);
        values[l].push_back(linear(tensor(blk(l, "attn_v")), nx, kv_dim()));
      }
      for (int t = 0; t < T; ++t) {
        const int seen = c.dflash_causal ? n + t + 1 : n + T;
        std::vector<double> att(static_cast<size_t>(H) * hd, 0.0);
        for (int h = 0; h < H; ++h) {
          const int kh = h / (H / c.n_head_kv);
          std::vector<double> s(seen);
          double mx = -1e300, sum = 0;
          for (int j = 0; j < seen; ++j) {
            double dot = 0;
            for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * keys[l][j][kh * hd + i];
            mx = std::max(mx, s[j] = dot / std::sqrt(static_cast<double>(hd)));
          }
          for (int j = 0; j < seen; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int j = 0; j < seen; ++j)
            for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * values[l][j][kh * hd + i];
        }
        const auto o = linear(tensor(blk(l, "attn_output")), att, d);
        for (int i = 0; i < d; ++i) x[t][i] += o[i];
        const auto m = rms(x[t], tensor(blk(l, "ffn_norm")));
        auto gate = linear(tensor(blk(l, "ffn_gate")), m, c.n_ff);
        const auto up = linear(tensor(blk(l, "ffn_up")), m, c.n_ff);
        for (int i = 0; i < c.n_ff; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        const auto down = linear(tensor(blk(l, "ffn_down")), gate, d);
        for (int i = 0; i < d; ++i) x[t][i] += down[i];
      }
    }
    const bool d2t = head->find_tensor("d2t") != nullptr;
    std::vector<int64_t> ids_map;
    if (d2t) {
      const GGUFTensorInfo& m = head->tensor("d2t");
      ids_map.resize(m.n_elements);
      std::memcpy(ids_map.data(), m.data, ids_map.size() * sizeof(int64_t));
    }
    const auto out = tensor("output.weight"), on = tensor("output_norm.weight");
    Mat logits(T, std::vector<double>(c.n_vocab, -INFINITY));
    for (int t = 0; t < T; ++t) {
      const auto y = linear(out, rms(x[t], on), static_cast<size_t>(c.n_draft_vocab));
      for (int j = 0; j < c.n_draft_vocab; ++j) logits[t][d2t ? ids_map[j] : j] = y[j];
    }
    return logits;
  }
};

// The target's features of `ids` (host rows), as the loop hands them over.
std::vector<float> features(Model& target, const Model& draft, const std::vector<int32_t>& ids) {
  KVCache kv = target.new_cache(128);
  ForwardOptions o;
  o.hidden_layers = draft.config().head_target_layers;
  return download(target.forward(ids, kv, o).hidden);
}

}  // namespace

TEST(DFlash, ReadsTheDraftsKeys) {
  auto d = load_draft("dflash-d2t-tiny");
  const ModelConfig& c = d->config();
  EXPECT_TRUE(d->is_dflash());
  EXPECT_FALSE(d->is_eagle3());
  EXPECT_EQ(c.head_target_layers, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(c.head_feature_width(), 3 * 64);
  EXPECT_EQ(c.dflash_block_size, 5);
  EXPECT_EQ(c.mask_token_id, 319);
  EXPECT_TRUE(c.dflash_causal);
  EXPECT_EQ(c.n_draft_vocab, 160);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(load_draft("dflash-tiny")->config().n_head_kv, 2);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::SplitHalves);
  auto plain = load_draft("dflash-tiny");
  EXPECT_FALSE(plain->config().dflash_causal);
  EXPECT_EQ(plain->config().dflash_block_size, 8);
  EXPECT_EQ(plain->config().n_draft_vocab, 320);
  // Its own forward is refused, with what to do instead.
  KVCache kv = d->new_cache(16);
  try {
    d->forward(kIds, kv);
    FAIL() << "forward on a DFlash draft";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("-md"), std::string::npos) << e.what();
  }
}

TEST(DFlash, InjectionAndBlockMatchTheReference) {
  const std::string tpath = write_preset("tiny");
  auto target = Model::load(tpath, f32_caches());
  for (const std::string& preset : kDrafts) {
    SCOPED_TRACE(preset);
    auto d = load_draft(preset);
    d->bind_target(*target);
    const ModelConfig& c = d->config();
    const int64_t F = c.head_feature_width(), T = static_cast<int64_t>(kIds.size());
    const std::vector<float> feats = features(*target, *d, kIds);
    DFlashReference ref(write_preset(preset), tpath);
    const auto [keys, values] = ref.inject(rows_of(feats, F));
    RowBuffer fbuf(d->backend());
    d->backend().upload(fbuf.reserve(T, F), feats.data(), feats.size() * sizeof(float));
    // Injected in one batch, and one position at a time: the same block logits as the reference's.
    KVCache kv = d->new_cache(64), kv1 = d->new_cache(64);
    d->dflash_inject(fbuf.view(T, F).data, T, kv);
    for (int64_t t = 0; t < T; ++t) d->dflash_inject(fbuf.view(T, F).row(t), 1, kv1);
    EXPECT_EQ(kv.size(), T);
    EXPECT_EQ(kv1.size(), T);
    for (int b : {1, 3, c.dflash_block_size}) {
      std::vector<int32_t> block(static_cast<size_t>(b), c.mask_token_id);
      block[0] = 72;
      const Mat want = ref.block(block, keys, values);
      for (KVCache* cache : {&kv, &kv1}) {
        const ForwardResult r = d->forward_dflash(block, *cache);
        EXPECT_EQ(r.logits.rows, b);
        EXPECT_EQ(r.logits.cols, 320);
        EXPECT_LT(rel_error(download(r.logits), want), 1e-4) << "block of " << b;
        cache->truncate(static_cast<int>(T));
      }
    }
  }
  // The bidirectional block is not the causal one: a block token's logits depend on later ones.
  auto d = load_draft("dflash-tiny");
  d->bind_target(*target);
  const std::vector<float> feats = features(*target, *d, kIds);
  RowBuffer fbuf(d->backend());
  d->backend().upload(fbuf.reserve(static_cast<int64_t>(kIds.size()), 128), feats.data(), feats.size() * sizeof(float));
  KVCache kv = d->new_cache(64);
  d->dflash_inject(fbuf.view(static_cast<int64_t>(kIds.size()), 128).data, static_cast<int64_t>(kIds.size()), kv);
  const std::vector<float> two = download(d->forward_dflash(std::vector<int32_t>{72, 319}, kv).logits);
  kv.truncate(static_cast<int>(kIds.size()));
  const std::vector<float> four = download(d->forward_dflash(std::vector<int32_t>{72, 319, 319, 319}, kv).logits);
  EXPECT_NE(std::vector<float>(two.begin(), two.begin() + 320), std::vector<float>(four.begin(), four.begin() + 320));
}

TEST(DFlash, DraftingIsIdenticalToAutoregressiveDecodingAtTemperatureZero) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  auto target = Model::load(write_agreeing_target(), f32_caches());
  int accepted = 0;
  for (const std::string& preset : kDrafts) {
    draft::DFlashDrafter drafter(*target, load_draft(preset), 128);
    const verify::GreedyVerifier gv;
    const verify::SpeculativeVerifier sv;
    for (const verify::Verifier* v : {static_cast<const verify::Verifier*>(&gv), static_cast<const verify::Verifier*>(&sv)}) {
      for (int g : {1, 2, 4, 7}) {
        const verify::DecodeOptions o = decode_options(40, g);
        const verify::GenerationResult ar = verify::generate_autoregressive(*target, prompt, greedy, o, 0);
        verify::SpeculativeDecoder dec(*target, drafter, *v, greedy, o);
        const verify::GenerationResult sd = dec.generate(prompt, 0);
        EXPECT_EQ(sd.tokens, ar.tokens) << preset << " g=" << g << " " << v->name();
        EXPECT_LE(sd.metrics.n_drafted, sd.metrics.n_steps * std::min(g, drafter.max_draft())) << preset << " g=" << g;
        accepted += sd.metrics.n_accepted;
        if (g == 4) std::printf("dflash %s g=4: acceptance %.2f\n", preset.c_str(), sd.metrics.acceptance_rate());
      }
    }
  }
  // Random weights agree with the target's argmax now and then (1% here): some drafts accepted.
  EXPECT_GT(accepted, 0);
}

TEST(DFlash, ItsCacheHoldsTheCommittedTokensFeatures) {
  // After a sampled run (drafts accepted and rejected), the draft's cache equals the injection of
  // the target's features of the committed tokens: the next block from both agrees.
  const std::vector<int32_t> prompt = {1, 87, 104, 97, 116, 32};
  auto target = Model::load(write_agreeing_target(), f32_caches());
  for (const std::string& preset : kDrafts) {
    SCOPED_TRACE(preset);
    auto d = load_draft(preset);
    draft::DFlashDrafter drafter(*target, d, 128);
    const SamplingParams sp = specmoe::testing::plain_sampling(1.0f, 7);
    const verify::SpeculativeVerifier sv;
    verify::SpeculativeDecoder dec(*target, drafter, sv, sp, decode_options(30, 3));
    const verify::GenerationResult res = dec.generate(prompt, 3);
    EXPECT_LT(res.metrics.n_accepted, res.metrics.n_drafted);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), res.tokens.begin(), res.tokens.end());
    const int n = static_cast<int>(all.size()) - 1;  // committed: all but the last token
    ASSERT_EQ(drafter.cache().size(), n);
    const std::vector<int32_t> committed(all.begin(), all.begin() + n);
    const std::vector<float> feats = features(*target, *d, committed);
    const int64_t F = d->config().head_feature_width();
    RowBuffer fbuf(d->backend());
    d->backend().upload(fbuf.reserve(n, F), feats.data(), feats.size() * sizeof(float));
    KVCache fresh = d->new_cache(128);
    d->dflash_inject(fbuf.view(n, F).data, n, fresh);
    const std::vector<int32_t> block = {all[static_cast<size_t>(n)], 319, 319};
    const std::vector<float> a = download(d->forward_dflash(block, fresh).logits);
    KVCache kept = drafter.cache();
    const std::vector<float> b = download(d->forward_dflash(block, kept).logits);
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::isfinite(a[i])) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    EXPECT_LT(diff, 1e-3);
  }
}

TEST(DFlash, SpeculativeSamplingIsLossless) {
  // The joint of the first two tokens at temperature 1 (tests/lossless.h), each draft drafting for
  // the target (the second token's draft comes from the block's second row, drawn without seeing
  // the first draft); an always-accept verifier must fail the same test. dflash-d2t-tiny's first
  // draft is the target's likely next token (SynthSpec::dflash_attend_previous): accepted about
  // half the time; dflash-tiny's random weights are accepted rarely (its test is of rejections).
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing_target(), f32_caches());
  const SamplingParams sp = plain_sampling(1.0f, 35);
  std::vector<double> expect;
  const Tokens prompt = most_uncertain_prompt(*target, sp, expect);
  const verify::SpeculativeVerifier sv;
  for (const std::string& preset : kDrafts) {
    draft::DFlashDrafter drafter(*target, load_draft(preset), 64);
    verify::SpeculativeDecoder dec(*target, drafter, sv, sp, decode_options(60, 3));
    const verify::GenerationResult run = dec.generate(prompt, 1);
    const double first = run.metrics.per_position_acceptance()[0];
    std::printf("dflash %s acceptance (one run of 60 tokens) %.2f, first position %.2f\n", preset.c_str(),
                run.metrics.acceptance_rate(), first);
    if (preset == "dflash-d2t-tiny") {
      EXPECT_GT(first, 0.3) << preset << ": the test must see drafts accepted";
    }
    const auto counts = two_token_counts(*target, drafter, sv, prompt, sp, kModelTrials, 3);
    const ChiSquare cs = pooled_chi_square(counts, expect, kModelTrials);
    std::printf("dflash %s lossless g=3: chi2 %.1f df %d critical %.1f (pooled mass %.3f)\n", preset.c_str(), cs.stat,
                cs.df, chi2_critical_0001(cs.df), cs.pooled_mass);
    EXPECT_EQ(cs.impossible, 0) << preset;
    EXPECT_GE(cs.df, 5) << preset;
    EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << preset;
  }
  draft::DFlashDrafter drafter(*target, load_draft("dflash-d2t-tiny"), 64);
  const AlwaysAcceptVerifier bad;
  const auto bad_counts = two_token_counts(*target, drafter, bad, prompt, sp, kModelTrials, 3);
  const ChiSquare bcs = pooled_chi_square(bad_counts, expect, kModelTrials);
  std::printf("dflash always-accept: chi2 %.1f df %d critical %.1f\n", bcs.stat, bcs.df, chi2_critical_0001(bcs.df));
  EXPECT_TRUE(bcs.stat > chi2_critical_0001(bcs.df) || bcs.impossible > 0);
}

namespace {

// `preset` written with `edit` applied to its spec, or to its file's metadata and tensors: loading
// it must fail with one line naming the file and containing `needle`, of kind `kind`.
void expect_bad_draft(const std::string& tag, const std::function<void(GGUFWriter&)>& add,
                      const std::vector<std::string>& drop, const std::string& needle, ErrorKind kind) {
  const std::string src = write_preset("dflash-tiny");
  const std::string copy = specmoe::testing::scratch_file("bad_dflash_" + tag + ".gguf");
  {
    auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata())
      if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.set_value(k, v);
    for (const auto& t : f->tensors())
      if (std::find(drop.begin(), drop.end(), t.name) == drop.end())
        w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
    add(w);
    w.write(copy);
  }
  try {
    Model::load(copy, f32_caches());
    ADD_FAILURE() << "no error for " << tag;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), kind) << tag << ": " << what;
    EXPECT_NE(what.find(copy), std::string::npos) << tag << ": " << what;
    EXPECT_NE(what.find(needle), std::string::npos) << tag << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << tag << ": " << what;
  }
}

}  // namespace

TEST(DFlash, BadDraftFilesGetOneLineErrors) {
  const auto none = [](GGUFWriter&) {};
  expect_bad_draft("no_layers", none, {"dflash.target_layers"}, "dflash.target_layers", ErrorKind::Format);
  expect_bad_draft("no_mask", none, {"tokenizer.ggml.mask_token_id"}, "mask_token_id", ErrorKind::Format);
  expect_bad_draft("far_mask", [](GGUFWriter& w) { w.set_u32("tokenizer.ggml.mask_token_id", 320); },
                   {"tokenizer.ggml.mask_token_id"}, "mask_token_id", ErrorKind::Format);
  expect_bad_draft("block_1", [](GGUFWriter& w) { w.set_u32("dflash.block_size", 1); }, {"dflash.block_size"},
                   "dflash.block_size is 1", ErrorKind::Format);
  // The variants of the architecture specmoe does not run, by name.
  expect_bad_draft("dspark", [](GGUFWriter& w) { w.add_tensor_f32("markov_w1.weight", DType::F32, {4, 320}, std::vector<float>(1280, 0.0f)); },
                   {}, "markov_w1.weight", ErrorKind::Unsupported);
  expect_bad_draft("swa", [](GGUFWriter& w) { w.set_u32("dflash.attention.sliding_window", 64); }, {},
                   "dflash.attention.sliding_window", ErrorKind::Unsupported);
  expect_bad_draft("shared_kv", none, {"blk.0.attn_v.weight", "blk.1.attn_v.weight"}, "attn_v", ErrorKind::Unsupported);
  expect_bad_draft("mrope", [](GGUFWriter& w) { w.set_i32_array("dflash.rope.dimension_sections", {4, 2, 2, 0}); }, {},
                   "dflash.rope.dimension_sections [4, 2, 2, 0]", ErrorKind::Unsupported);
}

TEST(DFlash, AnMRopeTargetsDraftRopesByPosition) {
  // A draft for a Qwen3.5 target carries sections [n_rot / 2, 0, 0, 0] (llama.cpp's converter):
  // all of its RoPE follows the text position, so its blocks are the plain draft's, bit for bit.
  const std::string plain = write_preset("dflash-tiny");
  const std::string with = specmoe::testing::scratch_file("dflash_mrope_sections.gguf");
  {
    auto f = GGUFFile::open(plain);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata()) w.set_value(k, v);
    w.set_i32_array("dflash.rope.dimension_sections", {8, 0, 0, 0});
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
    w.write(with);
  }
  auto target = Model::load(write_preset("tiny"), f32_caches());
  std::vector<std::vector<float>> logits;
  for (const std::string& path : {plain, with}) {
    auto d = std::shared_ptr<Model>(Model::load(path, f32_caches()));
    d->bind_target(*target);
    const std::vector<float> feats = features(*target, *d, kIds);
    const int64_t T = static_cast<int64_t>(kIds.size()), F = d->config().head_feature_width();
    RowBuffer fbuf(d->backend());
    d->backend().upload(fbuf.reserve(T, F), feats.data(), feats.size() * sizeof(float));
    KVCache kv = d->new_cache(64);
    d->dflash_inject(fbuf.view(T, F).data, T, kv);
    logits.push_back(download(d->forward_dflash(std::vector<int32_t>{72, 319, 319, 319}, kv).logits));
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(DFlash, ClearErrors) {
  auto target = Model::load(write_preset("tiny"), f32_caches());
  // A draft reading past the target's layers, and one of another width.
  {
    SynthSpec s = synth_spec("dflash-tiny");
    s.dflash_layers = {1, 7};
    const std::string path = specmoe::testing::scratch_file("dflash_l7.gguf");
    synth_write(s, path, 42);
    EXPECT_THROW(draft::DFlashDrafter(*target, std::shared_ptr<Model>(Model::load(path)), 64), Error);
    s = synth_spec("dflash-d2t-tiny");
    s.n_embd = 32;
    const std::string narrow = specmoe::testing::scratch_file("dflash_w32.gguf");
    synth_write(s, narrow, 42);
    try {
      draft::DFlashDrafter d(*target, std::shared_ptr<Model>(Model::load(narrow)), 64);
      FAIL() << "a draft of another width";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("DFlash"), std::string::npos) << e.what();
    }
  }
  // Not a DFlash draft; none given; a vocabulary limit.
  EXPECT_THROW(draft::DFlashDrafter(*target, std::shared_ptr<Model>(Model::load(write_preset("eagle3-tiny"))), 64), Error);
  draft::DrafterOptions o;
  o.target = target.get();
  EXPECT_THROW(draft::make_drafter("dflash", o), Error);
  o.draft_model_path = write_preset("dflash-tiny");
  o.draft_vocab = 100;
  EXPECT_THROW(draft::make_drafter("dflash", o), Error);
  o.draft_vocab = 0;
  EXPECT_EQ(draft::make_drafter("dflash", o)->name(), "dflash");
  // An unbound draft without its own embedding and head; options a block does not take.
  auto d = load_draft("dflash-tiny");
  KVCache kv = d->new_cache(16);
  EXPECT_THROW(d->forward_dflash(std::vector<int32_t>{72, 319}, kv), Error);
  d->bind_target(*target);
  ForwardOptions early;
  early.exit_layer = 1;
  EXPECT_THROW(d->forward_dflash(std::vector<int32_t>{72, 319}, kv, early), Error);
  ForwardOptions hidden;
  hidden.hidden = true;
  EXPECT_THROW(d->forward_dflash(std::vector<int32_t>{72, 319}, kv, hidden), Error);
  // A proposal before the loop handed over the context's features.
  draft::DFlashDrafter drafter(*target, load_draft("dflash-tiny"), 64);
  const std::vector<int32_t> prompt = {1, 72, 101};
  drafter.begin(prompt);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const Sampler sampler(greedy);
  Rng rng(1, 0);
  draft::DraftParams p;
  p.sampler = &sampler;
  p.rng = &rng;
  draft::Draft out;
  EXPECT_THROW(drafter.propose(prompt, p, out), Error);
}

TEST(DFlash, TheCliDraftsAndBenchesWithADraft) {
  // speculate --drafter dflash -md DRAFT: the target's own greedy output (generate's); bench -md
  // DRAFT: the draft's cost ratio c; info: the draft's keys.
  SPECMOE_REQUIRE_CLI();
  using nlohmann::json;
  const std::string target = write_agreeing_target(), draft = write_preset("dflash-d2t-tiny");
  const specmoe::testing::CliRun sp = specmoe::testing::run_cli(
      {"speculate", "-m", target, "-md", draft, "--drafter", "dflash", "--temp", "0", "-p", "Hello world", "-n", "24",
       "--draft-max", "4", "-t", "1", "--json"});
  ASSERT_EQ(sp.exit_code, 0) << sp.describe();
  const specmoe::testing::CliRun ar = specmoe::testing::run_cli(
      {"generate", "-m", target, "--temp", "0", "-p", "Hello world", "-n", "24", "-t", "1", "--json"});
  ASSERT_EQ(ar.exit_code, 0) << ar.describe();
  const json js = json::parse(sp.out), ja = json::parse(ar.out);
  EXPECT_EQ(js.at("tokens"), ja.at("tokens"));
  EXPECT_GT(js.at("metrics").at("n_drafted").get<int>(), 0);
  const specmoe::testing::CliRun b = specmoe::testing::run_cli(
      {"bench", "-m", target, "-md", draft, "-t", "1", "-n", "2", "-p", "0", "-r", "2", "--max-batch", "2", "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  const double c = json::parse(b.out).at("draft").at("cost_ratio").at("median").get<double>();
  EXPECT_GT(c, 0.0);
  EXPECT_LT(c, 10.0);
  const specmoe::testing::CliRun info = specmoe::testing::run_cli({"info", "-m", draft, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.describe();
  const json e = json::parse(info.out).at("dflash");
  EXPECT_EQ(e.at("target_layers"), json::array({0, 2, 3}));
  EXPECT_EQ(e.at("block_size").get<int>(), 5);
  EXPECT_EQ(e.at("mask_token_id").get<int>(), 319);
  EXPECT_TRUE(e.at("causal").get<bool>());
  // A run without -md names what is missing.
  const specmoe::testing::CliRun no_md = specmoe::testing::run_cli(
      {"speculate", "-m", target, "--drafter", "dflash", "-p", "Hello", "-n", "4"});
  EXPECT_NE(no_md.exit_code, 0);
  EXPECT_NE(no_md.err.find("DFlash"), std::string::npos) << no_md.describe();
}
