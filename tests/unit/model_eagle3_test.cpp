// EAGLE-3 draft heads (core::Model::forward_eagle3, draft/eagle3_drafter.h): a target's captured
// layer rows (ForwardOptions::hidden_layers) against the double-precision reference's layer inputs,
// the head's fusion and decoder layer against a reference written here from llama.cpp's eagle3
// graph (src/models/eagle3.cpp), the head in a batch equal to one token at a time, and the drafter
// through the decoding loop: identical to autoregressive decoding at temperature 0 for chains and
// trees with drafts accepted, lossless at temperature 1 (chi-square of the first two tokens, an
// always-accept verifier failing it; trees drawn with and without replacement and top-k, against the
// exact joint of three tokens), a head with its own draft vocabulary (d2t) included; clear
// errors. Token for token against llama.cpp's draft-eagle3: scripts/conformance-eagle3.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli_runner.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/eagle3_drafter.h"
#include "draft/registry.h"
#include "head_reference.h"
#include "lossless.h"
#include "recurrent_model_helpers.h"
#include "reference_forward.h"
#include "tree_lossless.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::f32_caches;
using specmoe::testing::linear;
using specmoe::testing::rel_error;
using specmoe::testing::rows_of;

namespace {

const std::vector<int32_t>& kIds = specmoe::testing::kRecurrentIds;
const std::vector<std::string> kHeads = {"eagle3-tiny", "eagle3-d2t-tiny", "eagle3-final-tiny"};

// The presets, and eagle3-final-tiny: eagle3-d2t-tiny reading layers 0, 2 and the target's final
// hidden row (layer 4 of 4, after the output norm).
std::string write_preset(const std::string& preset) {
  if (preset != "eagle3-final-tiny") return specmoe::testing::write_preset_file(preset);
  const std::string path = specmoe::testing::scratch_file("eagle3-final-tiny.gguf");
  SynthSpec s = synth_spec("eagle3-d2t-tiny");
  s.eagle3_layers = {0, 2, 4};
  synth_write(s, path, 42);
  return path;
}

std::string write_agreeing_target() { return specmoe::testing::write_agreeing_tiny("tiny_agreeing_eagle3.gguf"); }

std::shared_ptr<Model> load_head(const std::string& preset) {
  return std::shared_ptr<Model>(Model::load(write_preset(preset), f32_caches()));
}

verify::DecodeOptions decode_options(int max_tokens, int g, const draft::TreeSpec& tree = {}) {
  verify::DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = g;
  o.tree = tree;
  o.stop_at_eog = false;
  o.cost_probe_forwards = 0;
  return o;
}

std::vector<float> download(const Rows& r) { return r.to_host(); }

// The EAGLE-3 head of llama.cpp's graph in double precision, read from the files' tensors: the
// fusion g = fc(rmsnorm(f; enc.output_norm) when norm_before_fc), and the decoder over a fresh
// cache (positions 0..T-1, causal): cat = [rmsnorm(embed(t); attn_norm) | rmsnorm(g; attn_norm_2)],
// x = (norm_before_residual ? rmsnorm(g) : g) + wo attention(rope(wq cat), rope(wk cat), wv cat),
// x += down(silu(gate n) * up n) with n = rmsnorm(x; ffn_norm); logits = output(rmsnorm(x;
// output_norm)) scattered through d2t (-inf elsewhere). Adjacent-pair RoPE, as llama's.
struct Eagle3Reference : specmoe::testing::HeadTensors {
  ModelConfig c;
  Eagle3Reference(const std::string& head_path, const std::string& target_path)
      : HeadTensors(head_path, target_path), c(ModelConfig::from_gguf(*head)) {}

  std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& w) const {
    return specmoe::testing::rms_norm(x, w, c.norm_eps);
  }
  std::vector<std::vector<double>> fuse(const std::vector<std::vector<double>>& f) const {
    const auto fc = tensor("fc.weight");
    std::vector<std::vector<double>> g;
    for (const auto& row : f)
      g.push_back(linear(fc, c.eagle3_norm_before_fc ? rms(row, tensor("enc.output_norm.weight")) : row, c.n_embd));
    return g;
  }
  void rope(std::vector<double>& v, int pos) const {
    const int hd = c.head_dim;
    for (size_t h = 0; h < v.size() / hd; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const double th = pos * std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / hd);
        double& a = v[h * hd + 2 * i];
        double& b = v[h * hd + 2 * i + 1];
        const double x0 = a, x1 = b;
        a = x0 * std::cos(th) - x1 * std::sin(th);
        b = x0 * std::sin(th) + x1 * std::cos(th);
      }
  }
  // logits [T][n_vocab] and the pre-norm rows [T][n_embd]
  std::pair<std::vector<std::vector<double>>, std::vector<std::vector<double>>> decode(
      const std::vector<int32_t>& ids, const std::vector<std::vector<double>>& g) const {
    const int T = static_cast<int>(ids.size()), d = c.n_embd, hd = c.head_dim, H = c.n_head;
    const auto emb = tensor("token_embd.weight");
    const auto wq = tensor("blk.0.attn_q.weight"), wk = tensor("blk.0.attn_k.weight"), wv = tensor("blk.0.attn_v.weight");
    const auto wo = tensor("blk.0.attn_output.weight");
    const auto n1 = tensor("blk.0.attn_norm.weight"), n2 = tensor("blk.0.attn_norm_2.weight");
    std::vector<std::vector<double>> q(T), k(T), v(T), x(T);
    for (int t = 0; t < T; ++t) {
      std::vector<double> e(emb.begin() + static_cast<size_t>(ids[t]) * d, emb.begin() + static_cast<size_t>(ids[t] + 1) * d);
      auto cat = rms(e, n1);
      const auto gn = rms(g[t], n2);
      cat.insert(cat.end(), gn.begin(), gn.end());
      q[t] = linear(wq, cat, static_cast<size_t>(H) * hd);
      k[t] = linear(wk, cat, static_cast<size_t>(c.n_head_kv) * hd);
      v[t] = linear(wv, cat, static_cast<size_t>(c.n_head_kv) * hd);
      rope(q[t], t);
      rope(k[t], t);
      x[t] = c.eagle3_norm_before_residual ? gn : g[t];
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<size_t>(H) * hd, 0.0);
      for (int h = 0; h < H; ++h) {
        const int kh = h / (H / c.n_head_kv);
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
          mx = std::max(mx, s[j] = dot / std::sqrt(static_cast<double>(hd)));
        }
        for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][kh * hd + i];
      }
      const auto o = linear(wo, att, d);
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
      const auto n = rms(x[t], tensor("blk.0.ffn_norm.weight"));
      auto gate = linear(tensor("blk.0.ffn_gate.weight"), n, c.n_ff);
      const auto up = linear(tensor("blk.0.ffn_up.weight"), n, c.n_ff);
      for (int i = 0; i < c.n_ff; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const auto down = linear(tensor("blk.0.ffn_down.weight"), gate, d);
      for (int i = 0; i < d; ++i) x[t][i] += down[i];
    }
    const bool d2t = head->find_tensor("d2t") != nullptr;
    std::vector<int64_t> ids_map;
    if (d2t) {
      const GGUFTensorInfo& m = head->tensor("d2t");
      ids_map.resize(m.n_elements);
      std::memcpy(ids_map.data(), m.data, ids_map.size() * sizeof(int64_t));
    }
    const auto out = tensor("output.weight");
    const auto on = tensor("output_norm.weight");
    std::vector<std::vector<double>> logits(T, std::vector<double>(c.n_vocab, -INFINITY));
    for (int t = 0; t < T; ++t) {
      const auto y = linear(out, rms(x[t], on), static_cast<size_t>(c.n_draft_vocab));
      for (int j = 0; j < c.n_draft_vocab; ++j) logits[t][d2t ? ids_map[j] : j] = y[j];
    }
    return {logits, x};
  }
};

}  // namespace

TEST(Eagle3, ReadsTheHeadsKeys) {
  auto head = load_head("eagle3-d2t-tiny");
  const ModelConfig& c = head->config();
  EXPECT_TRUE(head->is_eagle3());
  EXPECT_EQ(c.head_target_layers, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(c.head_target_width, 64);
  EXPECT_EQ(c.head_feature_width(), 192);
  EXPECT_EQ(c.n_draft_vocab, 160);
  EXPECT_TRUE(c.eagle3_norm_before_fc);
  EXPECT_TRUE(c.eagle3_norm_before_residual);
  auto plain = load_head("eagle3-tiny");
  EXPECT_EQ(plain->config().n_draft_vocab, 320);
  EXPECT_FALSE(plain->config().eagle3_norm_before_fc);
  // Its own forward is refused, with what to do instead.
  KVCache kv = head->new_cache(16);
  try {
    head->forward(kIds, kv);
    FAIL() << "forward on an EAGLE-3 head";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("-md"), std::string::npos) << e.what();
  }
}

TEST(Eagle3, LayerRowsAreTheReferencesLayerInputs) {
  const std::string path = write_preset("tiny");
  auto target = Model::load(path, f32_caches());
  specmoe::testing::ReferenceForward ref(path);
  ref.run(kIds);
  const auto& inputs = ref.layer_inputs();
  const auto hidden = ref.hidden();
  ASSERT_EQ(inputs.size(), 4u);
  const std::vector<int> layers = {0, 2, 4, 3};
  for (bool last_only : {false, true}) {
    KVCache kv = target->new_cache(64);
    ForwardOptions o;
    o.hidden_layers = layers;
    o.logits_all = !last_only;
    const ForwardResult r = target->forward(kIds, kv, o);
    ASSERT_EQ(r.hidden.rows, static_cast<int64_t>(kIds.size()));
    ASSERT_EQ(r.hidden.cols, 4 * 64);
    const std::vector<float> got = download(r.hidden);
    double diff = 0, scale = 0;
    for (size_t t = 0; t < kIds.size(); ++t)
      for (size_t k = 0; k < layers.size(); ++k) {
        const std::vector<double>& want = layers[k] == 4 ? hidden[t] : inputs[static_cast<size_t>(layers[k])][t];
        for (int i = 0; i < 64; ++i) {
          diff = std::max(diff, std::fabs(got[t * 256 + k * 64 + i] - want[i]));
          scale = std::max(scale, std::fabs(want[i]));
        }
      }
    EXPECT_LT(diff / scale, 1e-5) << "logits_all " << !last_only;
  }
  // Rows past an early exit, and with `hidden` together: errors.
  KVCache kv = target->new_cache(64);
  ForwardOptions bad;
  bad.hidden_layers = layers;
  bad.exit_layer = 2;
  EXPECT_THROW(target->forward(kIds, kv, bad), Error);
  bad.exit_layer = -1;
  bad.hidden = true;
  EXPECT_THROW(target->forward(kIds, kv, bad), Error);
}

TEST(Eagle3, TheHeadMatchesTheReference) {
  const std::string tpath = write_preset("tiny");
  auto target = Model::load(tpath, f32_caches());
  for (const std::string& preset : kHeads) {
    SCOPED_TRACE(preset);
    auto head = load_head(preset);
    head->bind_target(*target);
    const ModelConfig& c = head->config();
    // The target's features of kIds (host), fused by the head and by the reference.
    KVCache tkv = target->new_cache(64);
    ForwardOptions fo;
    fo.hidden_layers = c.head_target_layers;
    const std::vector<float> feats = download(target->forward(kIds, tkv, fo).hidden);
    Eagle3Reference ref(write_preset(preset), tpath);
    const auto g_ref = ref.fuse(rows_of(feats, c.head_feature_width()));
    RowBuffer fbuf(head->backend());
    const int64_t T = static_cast<int64_t>(kIds.size());
    head->backend().upload(fbuf.reserve(T, c.head_feature_width()), feats.data(), feats.size() * sizeof(float));
    const std::vector<float> g = download(head->eagle3_fuse(fbuf.view(T, c.head_feature_width()).data, T));
    EXPECT_LT(rel_error(g, g_ref), 1e-5) << "fusion";
    // The decoder over kIds with those g rows.
    const auto [logits_ref, x_ref] = ref.decode(kIds, g_ref);
    RowBuffer gbuf(head->backend());
    head->backend().upload(gbuf.reserve(T, c.n_embd), g.data(), g.size() * sizeof(float));
    KVCache kv = head->new_cache(64);
    ForwardOptions o;
    o.hidden = true;
    const ForwardResult r = head->forward_eagle3(kIds, gbuf.view(T, c.n_embd).data, kv, o);
    EXPECT_EQ(r.logits.cols, 320);
    EXPECT_LT(rel_error(download(r.logits), logits_ref), 1e-4) << "logits";
    EXPECT_LT(rel_error(download(r.hidden), x_ref), 1e-4) << "pre-norm rows";
    // The same batch one token at a time, each against the cache of the ones before.
    KVCache kv1 = head->new_cache(64);
    std::vector<float> one;
    for (int64_t t = 0; t < T; ++t) {
      const ForwardResult rt = head->forward_eagle3(std::span<const int32_t>(&kIds[t], 1), gbuf.view(T, c.n_embd).row(t), kv1);
      const std::vector<float> l = download(rt.logits);
      one.insert(one.end(), l.begin(), l.end());
    }
    EXPECT_LT(rel_error(one, logits_ref), 1e-4) << "one at a time";
  }
}

TEST(Eagle3, DraftingIsIdenticalToAutoregressiveDecodingAtTemperatureZero) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  auto target = Model::load(write_agreeing_target(), f32_caches());
  const draft::TreeSpec stat = specmoe::testing::tree_spec({2, 1, 1}, 0, 0, 0, draft::TreeSampling::TopK);
  const draft::TreeSpec dyn = specmoe::testing::tree_spec({}, 6, 3, 2, draft::TreeSampling::TopK);
  for (const std::string& preset : kHeads) {
    draft::Eagle3Drafter drafter(*target, load_head(preset), 128);
    const verify::GreedyVerifier gv;
    const verify::SpeculativeVerifier sv;
    for (const verify::Verifier* v : {static_cast<const verify::Verifier*>(&gv), static_cast<const verify::Verifier*>(&sv)}) {
      for (int g = 1; g <= 4; ++g) {
        const verify::DecodeOptions o = decode_options(40, g);
        const verify::GenerationResult ar = verify::generate_autoregressive(*target, prompt, greedy, o, 0);
        verify::SpeculativeDecoder dec(*target, drafter, *v, greedy, o);
        const verify::GenerationResult sd = dec.generate(prompt, 0);
        EXPECT_EQ(sd.tokens, ar.tokens) << preset << " g=" << g << " " << v->name();
        EXPECT_GT(sd.metrics.n_accepted, 0) << preset << " g=" << g;
        if (g == 3) std::printf("eagle3 %s g=3: acceptance %.2f\n", preset.c_str(), sd.metrics.acceptance_rate());
      }
      for (const draft::TreeSpec& shape : {stat, dyn}) {
        const verify::DecodeOptions o = decode_options(40, 4, shape);
        const verify::GenerationResult ar = verify::generate_autoregressive(*target, prompt, greedy, o, 0);
        verify::SpeculativeDecoder dec(*target, drafter, *v, greedy, o);
        const verify::GenerationResult sd = dec.generate(prompt, 0);
        EXPECT_EQ(sd.tokens, ar.tokens) << preset << " " << shape.describe() << " " << v->name();
        EXPECT_GT(sd.metrics.n_accepted, 0) << preset << " " << shape.describe();
        EXPECT_GT(sd.metrics.tree_size(), 1.0) << preset << " " << shape.describe();
      }
    }
  }
}

TEST(Eagle3, ItsCacheHoldsTheHeadOverTheTargetsFeatures) {
  // After a sampled run (drafts accepted and rejected), the head's cache equals the head run afresh
  // over the committed tokens x_1.. with the fused features of the token before each: the next
  // prediction from both agrees.
  const std::vector<int32_t> prompt = {1, 87, 104, 97, 116, 32};
  auto target = Model::load(write_agreeing_target(), f32_caches());
  for (const std::string& preset : kHeads) {
    SCOPED_TRACE(preset);
    auto head = load_head(preset);
    draft::Eagle3Drafter drafter(*target, head, 128);
    const SamplingParams sp = specmoe::testing::plain_sampling(1.0f, 7);
    const verify::SpeculativeVerifier sv;
    verify::SpeculativeDecoder dec(*target, drafter, sv, sp, decode_options(30, 3));
    const verify::GenerationResult res = dec.generate(prompt, 3);
    EXPECT_GT(res.metrics.n_accepted, 0);
    EXPECT_LT(res.metrics.n_accepted, res.metrics.n_drafted);
    drafter.flush();
    // Everything but the last generated token is committed: tokens 1 .. n-2 are the cache's rows.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), res.tokens.begin(), res.tokens.end());
    const int n = static_cast<int>(all.size()) - 1;  // committed tokens: all but the last
    ASSERT_EQ(drafter.cache().size(), n - 1);
    KVCache tkv = target->new_cache(128);
    ForwardOptions fo;
    fo.hidden_layers = head->config().head_target_layers;
    const std::vector<int32_t> committed(all.begin(), all.begin() + n);
    const ForwardResult tf = target->forward(committed, tkv, fo);
    const Rows g = head->eagle3_fuse(tf.hidden.data, n);
    KVCache fresh = head->new_cache(128);
    // Rows 0 .. n-2 pair x_{P+1} with g_P, then the next token with g_{n-1}.
    std::vector<int32_t> shifted(all.begin() + 1, all.begin() + n + 1);
    const ForwardResult a = head->forward_eagle3(shifted, g.data, fresh);
    // The drafter's cache plus that last row, fed alone.
    KVCache kept = drafter.cache();
    const ForwardResult b = head->forward_eagle3(std::span<const int32_t>(&all[n], 1), g.row(n - 1), kept);
    const std::vector<float> la = download(a.logits), lb = download(b.logits);
    std::vector<float> last(la.end() - 320, la.end());
    double diff = 0;
    for (size_t i = 0; i < lb.size(); ++i)
      if (std::isfinite(lb[i])) diff = std::max(diff, static_cast<double>(std::fabs(lb[i] - last[i])));
    EXPECT_LT(diff, 1e-3);
  }
}

TEST(Eagle3, SpeculativeSamplingIsLossless) {
  // The joint of the first two tokens at temperature 1 (tests/lossless.h), each head drafting for
  // the target; an always-accept verifier must fail the same test.
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing_target(), f32_caches());
  const SamplingParams sp = plain_sampling(1.0f, 35);
  std::vector<double> expect;
  const Tokens prompt = most_uncertain_prompt(*target, sp, expect);
  const verify::SpeculativeVerifier sv;
  for (const std::string& preset : kHeads) {
    draft::Eagle3Drafter drafter(*target, load_head(preset), 64);
    verify::SpeculativeDecoder dec(*target, drafter, sv, sp, decode_options(60, 3));
    const double acceptance = dec.generate(prompt, 1).metrics.acceptance_rate();
    std::printf("eagle3 %s acceptance (one run of 60 tokens) %.2f\n", preset.c_str(), acceptance);
    EXPECT_GT(acceptance, 0.05) << preset << ": the test must see drafts accepted";
    const auto counts = two_token_counts(*target, drafter, sv, prompt, sp, kModelTrials, 3);
    const ChiSquare cs = pooled_chi_square(counts, expect, kModelTrials);
    std::printf("eagle3 %s lossless g=3: chi2 %.1f df %d critical %.1f (pooled mass %.3f)\n", preset.c_str(), cs.stat,
                cs.df, chi2_critical_0001(cs.df), cs.pooled_mass);
    EXPECT_EQ(cs.impossible, 0) << preset;
    EXPECT_GE(cs.df, 5) << preset;
    EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << preset;
  }
  draft::Eagle3Drafter drafter(*target, load_head("eagle3-tiny"), 64);
  const AlwaysAcceptVerifier bad;
  const auto bad_counts = two_token_counts(*target, drafter, bad, prompt, sp, kModelTrials, 3);
  const ChiSquare bcs = pooled_chi_square(bad_counts, expect, kModelTrials);
  std::printf("eagle3 always-accept: chi2 %.1f df %d critical %.1f\n", bcs.stat, bcs.df, chi2_critical_0001(bcs.df));
  EXPECT_TRUE(bcs.stat > chi2_critical_0001(bcs.df) || bcs.impossible > 0);
}

TEST(Eagle3, ClearErrors) {
  auto target = Model::load(write_preset("tiny"), f32_caches());
  // A head for another width of target.
  {
    SynthSpec s = synth_spec("eagle3-tiny");
    s.head_target_width = 32;
    const std::string path = specmoe::testing::scratch_file("eagle3_w32.gguf");
    synth_write(s, path, 42);
    try {
      draft::Eagle3Drafter d(*target, std::shared_ptr<Model>(Model::load(path)), 64);
      FAIL() << "a head of another width";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("target_hidden_size"), std::string::npos) << e.what();
    }
  }
  // A head reading past the target's layers.
  {
    SynthSpec s = synth_spec("eagle3-tiny");
    s.eagle3_layers = {1, 2, 7};
    const std::string path = specmoe::testing::scratch_file("eagle3_l7.gguf");
    synth_write(s, path, 42);
    EXPECT_THROW(draft::Eagle3Drafter(*target, std::shared_ptr<Model>(Model::load(path)), 64), Error);
  }
  // Not a head; no head given; a vocabulary limit on a head with its own vocabulary.
  EXPECT_THROW(draft::Eagle3Drafter(*target, std::shared_ptr<Model>(Model::load(write_preset("tiny"))), 64), Error);
  draft::DrafterOptions o;
  o.target = target.get();
  EXPECT_THROW(draft::make_drafter("eagle3", o), Error);
  o.draft_model_path = write_preset("eagle3-d2t-tiny");
  o.draft_vocab = 100;
  EXPECT_THROW(draft::make_drafter("eagle3", o), Error);
  o.draft_vocab = 0;
  EXPECT_EQ(draft::make_drafter("eagle3", o)->name(), "eagle3");
  // An unbound head's forward.
  auto head = load_head("eagle3-tiny");
  KVCache kv = head->new_cache(16);
  RowBuffer g(head->backend());
  EXPECT_THROW(head->forward_eagle3(kIds, g.reserve(static_cast<int64_t>(kIds.size()), 64), kv), Error);
}

TEST(Eagle3, TheCliDraftsAndBenchesWithAHead) {
  // speculate --drafter eagle3 -md HEAD: the target's own greedy output (generate's), with drafts
  // accepted; bench -md HEAD: the head's cost ratio c.
  SPECMOE_REQUIRE_CLI();
  using nlohmann::json;
  const std::string target = write_agreeing_target(), head = write_preset("eagle3-d2t-tiny");
  const specmoe::testing::CliRun sp = specmoe::testing::run_cli(
      {"speculate", "-m", target, "-md", head, "--drafter", "eagle3", "--temp", "0", "-p", "Hello world", "-n", "24",
       "--draft-max", "3", "-t", "1", "--json"});
  ASSERT_EQ(sp.exit_code, 0) << sp.describe();
  const specmoe::testing::CliRun ar = specmoe::testing::run_cli(
      {"generate", "-m", target, "--temp", "0", "-p", "Hello world", "-n", "24", "-t", "1", "--json"});
  ASSERT_EQ(ar.exit_code, 0) << ar.describe();
  const json js = json::parse(sp.out), ja = json::parse(ar.out);
  EXPECT_EQ(js.at("tokens"), ja.at("tokens"));
  EXPECT_GT(js.at("metrics").at("n_accepted").get<int>(), 0);
  const specmoe::testing::CliRun b = specmoe::testing::run_cli(
      {"bench", "-m", target, "-md", head, "-t", "1", "-n", "2", "-p", "0", "-r", "2", "--max-batch", "2", "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  const double c = json::parse(b.out).at("draft").at("cost_ratio").at("median").get<double>();
  EXPECT_GT(c, 0.0);
  EXPECT_LT(c, 10.0);
  // info names the head's target layers and its draft vocabulary.
  const specmoe::testing::CliRun info = specmoe::testing::run_cli({"info", "-m", head, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.describe();
  const json e = json::parse(info.out).at("eagle3");
  EXPECT_EQ(e.at("target_layers"), json::array({0, 1, 3}));
  EXPECT_EQ(e.at("draft_vocab").get<int>(), 160);
}

namespace {

// A copy of the head at `src` with metadata `key` replaced by `value` (nullopt: dropped) and
// tensor `tensor` (when named) replaced by `bytes` of `type` and shape `ne`; loading it must fail
// with an error naming the file and containing `needle`.
void expect_bad_head(const std::string& src, const std::string& tag, const std::string& key,
                     std::optional<GGUFValue> value, const std::string& tensor, DType type, std::vector<int64_t> ne,
                     const std::vector<uint8_t>& bytes, const std::string& needle) {
  const std::string copy = specmoe::testing::scratch_file("bad_eagle3_" + tag + ".gguf");
  {
    auto f = GGUFFile::open(src);
    GGUFWriter w;
    for (const auto& [k, v] : f->metadata())
      if (k != key) w.set_value(k, v);
    if (value) w.set_value(key, *value);
    for (const auto& t : f->tensors()) {
      if (t.name == tensor)
        w.add_tensor(t.name, type, ne, bytes);
      else
        w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
    }
    w.write(copy);
  }
  try {
    Model::load(copy, f32_caches());
    ADD_FAILURE() << "no error for " << tag;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(copy), std::string::npos) << tag << ": " << what;
    EXPECT_NE(what.find(needle), std::string::npos) << tag << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << tag << ": " << what;
  }
}

std::vector<uint8_t> i64_bytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST(Eagle3, BadHeadFilesGetOneLineErrors) {
  const std::string head = write_preset("eagle3-d2t-tiny");
  std::vector<int64_t> ids(160);
  for (int i = 0; i < 160; ++i) ids[i] = i;
  GGUFValue two_layers;
  two_layers.type = GGUFType::ARRAY;
  two_layers.elem_type = GGUFType::INT32;
  for (int l : {0, 1}) {
    GGUFValue item;
    item.type = GGUFType::INT32;
    item.i = l;
    two_layers.items.push_back(item);
  }
  expect_bad_head(head, "no_layers", "eagle3.target_layers", std::nullopt, "", DType::F32, {}, {},
                  "eagle3.target_layers");
  expect_bad_head(head, "two_layers", "eagle3.target_layers", two_layers, "", DType::F32, {}, {}, "3 target layers");
  expect_bad_head(head, "no_width", "eagle3.target_hidden_size", std::nullopt, "", DType::F32, {}, {},
                  "target_hidden_size");
  std::vector<int64_t> dup = ids;
  dup[7] = dup[3];
  expect_bad_head(head, "d2t_dup", "", std::nullopt, "d2t", DType::I64, {160}, i64_bytes(dup), "two draft ids");
  std::vector<int64_t> far = ids;
  far[9] = 320;
  expect_bad_head(head, "d2t_range", "", std::nullopt, "d2t", DType::I64, {160}, i64_bytes(far), "outside the vocabulary");
  expect_bad_head(head, "d2t_float", "", std::nullopt, "d2t", DType::F32, {160}, std::vector<uint8_t>(640, 0),
                  "integers");
  expect_bad_head(head, "d2t_short", "", std::nullopt, "d2t", DType::I64, {100},
                  i64_bytes(std::vector<int64_t>(ids.begin(), ids.begin() + 100)), "output.weight");
}

TEST(Eagle3, TreesAreLossless) {
  // The first three tokens through the loop at temperature 1 against the target's exact joint
  // (tests/tree_lossless.h), the head with its own 160-id vocabulary (q is 0 outside it) growing
  // trees drawn from q with and without replacement and top-k trees; the verifier that keeps p
  // after a rejection (no residual) must fail where it changes tokens.
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing_target(), f32_caches());
  const SamplingParams sp = plain_sampling(1.0f, 11);
  std::vector<double> unused;
  const Tokens prompt = most_uncertain_prompt(*target, sp, unused);
  expect_trees_lossless(
      *target, prompt, sp,
      [&] { return std::make_unique<draft::Eagle3Drafter>(*target, load_head("eagle3-d2t-tiny"), 64); }, "eagle3");
}
