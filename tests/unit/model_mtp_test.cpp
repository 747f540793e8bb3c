// Multi-token prediction: the NextN/MTP block of deepseek2, glm4moe, qwen35 and qwen35moe files
// (core::Model::forward_mtp) against the double-precision reference (tests/reference_forward.h
// run_mtp: eh_proj over the normed embedding and hidden row, the architecture's own layer n_layer,
// the block's head norm and head), the final hidden rows a forward hands out
// (ForwardOptions::hidden) against the reference's, and the mtp drafter (draft/mtp_drafter.h)
// through the decoding loop: identical to autoregressive decoding at temperature 0 for every
// architecture and draft length, lossless at temperature 1 (chi-square of the first two tokens,
// an always-accept verifier failing it), its cache after a run equal to the block run afresh over
// the target's hidden rows; clear errors. Token for token against llama.cpp's draft-mtp:
// scripts/conformance-mtp.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/mtp_drafter.h"
#include "draft/registry.h"
#include "lossless.h"
#include "moe_reference_forward.h"
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

namespace {

const std::vector<int32_t>& kIds = specmoe::testing::kRecurrentIds;
const std::vector<std::string> kPresets = {"qwen35-mtp-tiny", "qwen35moe-mtp-tiny", "glm4moe-mtp-tiny",
                                           "deepseek2-mtp-tiny"};

std::string write_preset(const std::string& preset) { return specmoe::testing::write_preset_file(preset); }

// The preset with every layer's residual branches scaled down: the model's next token is then
// mostly the head over the current token's embedding, which the block guesses from that same
// embedding (its eh_proj passes it on), so drafts are accepted often and the tests below exercise
// acceptance, rejection and the catch-up over accepted tokens alike.
SynthSpec agreeing_spec(const std::string& preset) {
  SynthSpec s = synth_spec(preset);
  s.n_full_layers = 0;
  s.deep_residual_scale = 0.05f;
  s.mtp_own_head = false;  // the model's embedding and head (glm4moe-mtp-tiny's own ones are random)
  return s;
}

std::string write_agreeing(const std::string& preset, const std::string& suffix = "") {
  const std::string path = specmoe::testing::scratch_file(preset + "_agreeing" + suffix + ".gguf");
  synth_write(agreeing_spec(preset), path, 42);
  return path;
}

double max_abs(const std::vector<std::vector<double>>& a) {
  double m = 0;
  for (const auto& r : a)
    for (double v : r) m = std::max(m, std::fabs(v));
  return m;
}

// max |got - want| / max |want| over rows [T][n] (got: T * n floats).
double rel_error(const std::vector<float>& got, const std::vector<std::vector<double>>& want) {
  double diff = 0;
  const size_t n = want[0].size();
  EXPECT_EQ(got.size(), want.size() * n);
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t j = 0; j < n; ++j) diff = std::max(diff, std::fabs(got[t * n + j] - want[t][j]));
  return diff / max_abs(want);
}

// A run of max_tokens (no stop at EOG, no cost probes) drafting g tokens, or trees of `tree`.
verify::DecodeOptions decode_options(int max_tokens, int g, const draft::TreeSpec& tree = {}) {
  verify::DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = g;
  o.tree = tree;
  o.stop_at_eog = false;
  o.cost_probe_forwards = 0;
  return o;
}

// max |got - want| / max |want| of two equal-sized float vectors (1 when the sizes differ).
double rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return 1.0;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return diff / scale;
}

// Rows in the model's memory from host floats.
Rows upload_rows(Model& m, RowBuffer& buf, const std::vector<float>& host, int64_t rows) {
  const int64_t cols = static_cast<int64_t>(host.size()) / rows;
  m.backend().upload(buf.reserve(rows, cols), host.data(), host.size() * sizeof(float));
  return buf.view(rows, cols);
}

// The reference's logits and hidden rows of the trunk, then of the block over kIds with h rows
// [0, H_0 .. H_{T-2}] (each token with the trunk's row of the token before it).
struct ReferenceRun {
  std::vector<std::vector<double>> logits, hidden, mtp_logits, mtp_hidden, mtp_h;
};

ReferenceRun reference_run(const std::string& path, bool moe, int n_expert_used) {
  ReferenceRun r;
  auto run = [&](auto& ref) {
    r.logits = ref.run(kIds);
    r.hidden = ref.hidden();
    r.mtp_h.assign(1, std::vector<double>(r.hidden[0].size(), 0.0));
    r.mtp_h.insert(r.mtp_h.end(), r.hidden.begin(), r.hidden.end() - 1);
    r.mtp_logits = ref.run_mtp(kIds, r.mtp_h);
    r.mtp_hidden = ref.hidden();
  };
  if (moe) {
    specmoe::testing::MoEReferenceForward ref(path, n_expert_used);
    run(ref);
  } else {
    specmoe::testing::ReferenceForward ref(path);
    run(ref);
  }
  return r;
}

std::vector<float> flat(const std::vector<std::vector<double>>& rows) {
  std::vector<float> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

}  // namespace

TEST(Mtp, ReadsTheBlockAfterTheLayers) {
  auto m = Model::load(write_preset("qwen35-mtp-tiny"), f32_caches());
  EXPECT_EQ(m->config().n_layer, 4);  // block_count 5 less nextn_predict_layers 1
  EXPECT_EQ(m->config().n_nextn, 1);
  EXPECT_TRUE(m->has_mtp());
  auto plain = Model::load(write_preset("qwen35-tiny"), f32_caches());
  EXPECT_FALSE(plain->has_mtp());
  // The block leaves the model's own forward as it was: the same tensors, the same logits.
  KVCache a = m->new_cache(32), b = plain->new_cache(32);
  EXPECT_EQ(specmoe::testing::logits_of(*m, kIds, a), specmoe::testing::logits_of(*plain, kIds, b));
  // ...and the bandwidth figure counts the model's layers only.
  EXPECT_EQ(m->weight_bytes_per_token(), plain->weight_bytes_per_token());
}

TEST(Mtp, HiddenRowsAndTheBlockMatchTheReference) {
  for (const std::string& preset : kPresets) {
    SCOPED_TRACE(preset);
    const std::string path = write_preset(preset);
    auto m = Model::load(path, f32_caches());
    const ReferenceRun ref = reference_run(path, m->config().is_moe(), m->config().n_expert_used);
    // The trunk's hidden rows (all of them, whatever logits are asked for) and logits.
    KVCache kv = m->new_cache(32);
    ForwardOptions o;
    o.hidden = true;
    o.logits_all = false;
    ForwardResult f = m->forward(kIds, kv, o);
    ASSERT_EQ(f.hidden.rows, static_cast<int64_t>(kIds.size()));
    ASSERT_EQ(f.hidden.cols, m->config().n_embd);
    ASSERT_EQ(f.logits.rows, 1);
    std::vector<float> hidden;
    f.hidden.to_host(hidden);
    EXPECT_LE(rel_error(hidden, ref.hidden), 1e-4);
    // The block over the reference's hidden rows, in one batch and one token at a time.
    RowBuffer hb(m->backend());
    const Rows h = upload_rows(*m, hb, flat(ref.mtp_h), static_cast<int64_t>(kIds.size()));
    KVCache mkv = m->new_mtp_cache(32), single = m->new_mtp_cache(32);
    ForwardOptions all;
    all.hidden = true;
    std::vector<float> logits, mtp_hidden;
    ForwardResult r = m->forward_mtp(kIds, h.data, mkv, all);
    r.logits.to_host(logits);
    r.hidden.to_host(mtp_hidden);
    EXPECT_LE(rel_error(logits, ref.mtp_logits), 1e-4);
    EXPECT_LE(rel_error(mtp_hidden, ref.mtp_hidden), 1e-4);
    EXPECT_GT(max_abs(ref.mtp_logits), 1.0);
    EXPECT_EQ(mkv.size(), static_cast<int>(kIds.size()));
    std::vector<float> one_by_one, row;
    for (size_t t = 0; t < kIds.size(); ++t) {
      m->forward_mtp(std::span<const int32_t>(kIds).subspan(t, 1), h.row(static_cast<int64_t>(t)), single)
          .logits.to_host(row);
      one_by_one.insert(one_by_one.end(), row.begin(), row.end());
    }
    EXPECT_LE(rel_diff(one_by_one, logits), 1e-5);
  }
}

TEST(Mtp, DraftingIsIdenticalToAutoregressiveDecodingAtTemperatureZero) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  for (const std::string& preset : kPresets) {
    auto target = Model::load(write_agreeing(preset), f32_caches());
    draft::MtpDrafter drafter(*target, 128);
    const verify::GreedyVerifier gv;
    const verify::SpeculativeVerifier sv;
    for (const verify::Verifier* v : {static_cast<const verify::Verifier*>(&gv), static_cast<const verify::Verifier*>(&sv)})
      for (int g = 1; g <= 4; ++g) {
        verify::DecodeOptions o = decode_options(40, g);
        const verify::GenerationResult ar = verify::generate_autoregressive(*target, prompt, greedy, o, 0);
        verify::SpeculativeDecoder dec(*target, drafter, *v, greedy, o);
        const verify::GenerationResult sd = dec.generate(prompt, 0);
        EXPECT_EQ(sd.tokens, ar.tokens) << preset << " g=" << g << " " << v->name();
        EXPECT_GT(sd.metrics.n_accepted, 0) << preset;
      }
  }
}

TEST(Mtp, TreesAreIdenticalToAutoregressiveDecodingAtTemperatureZero) {
  // The block grows trees (draft/tree_grower.h): static and dynamic (EAGLE-2) shapes, each level
  // one batched forward of the nodes with their parents' output rows under the tree's attention.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  const std::vector<draft::TreeSpec> shapes = {specmoe::testing::tree_spec({2, 1, 1}, 0, 0, 0, draft::TreeSampling::TopK),
                                               specmoe::testing::tree_spec({}, 6, 3, 2, draft::TreeSampling::TopK),
                                               specmoe::testing::tree_spec({3, 2}, 0, 0, 0, draft::TreeSampling::StochasticNoReplace)};
  for (const std::string& preset : kPresets) {
    auto target = Model::load(write_agreeing(preset), f32_caches());
    draft::MtpDrafter drafter(*target, 128);
    const verify::GreedyVerifier gv;
    const verify::SpeculativeVerifier sv;
    for (const verify::Verifier* v : {static_cast<const verify::Verifier*>(&gv), static_cast<const verify::Verifier*>(&sv)})
      for (const draft::TreeSpec& shape : shapes) {
        verify::DecodeOptions o = decode_options(40, 4, shape);
        const verify::GenerationResult ar = verify::generate_autoregressive(*target, prompt, greedy, o, 0);
        verify::SpeculativeDecoder dec(*target, drafter, *v, greedy, o);
        const verify::GenerationResult sd = dec.generate(prompt, 0);
        EXPECT_EQ(sd.tokens, ar.tokens) << preset << " " << shape.describe() << " " << v->name();
        EXPECT_GT(sd.metrics.n_accepted, 0) << preset << " " << shape.describe();
        EXPECT_GT(sd.metrics.tree_size(), 1.0) << preset << " " << shape.describe();
      }
  }
}

TEST(Mtp, TreesAreLossless) {
  // The first three tokens through the loop at temperature 1 against the target's exact joint
  // (tests/tree_lossless.h), trees drawn from q with and without replacement and top-k trees;
  // the verifier that keeps p after a rejection (no residual) must fail where it changes tokens.
  // (glm4moe: exact_three enumerates 320 children in one tree batch, more than a recurrent
  // target's ring keeps; qwen35's trees are checked above and by the chain test.)
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing("glm4moe-mtp-tiny"), f32_caches());
  const SamplingParams sp = plain_sampling(1.0f, 11);
  std::vector<double> unused;
  const Tokens prompt = most_uncertain_prompt(*target, sp, unused);
  expect_trees_lossless(*target, prompt, sp, [&] { return std::make_unique<draft::MtpDrafter>(*target, 64); }, "mtp");
}

TEST(Mtp, ItsCacheHoldsTheBlockOverTheTargetsHiddenRows) {
  // After sampled runs (drafts accepted and rejected), the block's cache equals the block run
  // afresh over every committed token with the target's hidden row of the token before it: the
  // next prediction from both agrees.
  const std::vector<int32_t> prompt = {1, 87, 104, 97, 116, 32};
  for (const std::string& preset : {std::string("qwen35-mtp-tiny"), std::string("deepseek2-mtp-tiny")}) {
    SCOPED_TRACE(preset);
    auto target = Model::load(write_agreeing(preset), f32_caches());
    draft::MtpDrafter drafter(*target, 128);
    const verify::SpeculativeVerifier sv;
    verify::DecodeOptions o = decode_options(30, 3);
    verify::SpeculativeDecoder dec(*target, drafter, sv, specmoe::testing::plain_sampling(1.0f, 7), o);
    const verify::GenerationResult r = dec.generate(prompt, 3);
    EXPECT_GT(r.metrics.n_accepted, 0) << "some drafts accepted, so the catch-up reads verify rows";
    EXPECT_GT(r.metrics.n_drafted, r.metrics.n_accepted) << "and some rejected";
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), r.tokens.begin(), r.tokens.end() - 1);  // what the target has read
    drafter.flush();  // the accepted positions the next proposal would feed
    ASSERT_EQ(drafter.cache().size(), static_cast<int>(seq.size()));
    // The target's hidden rows of the whole sequence, the block afresh over them.
    KVCache kv = target->new_cache(128);
    ForwardOptions h;
    h.hidden = true;
    h.logits_all = false;
    std::vector<float> rows;
    target->forward(seq, kv, h).hidden.to_host(rows);
    const int64_t d = target->config().n_embd;
    std::vector<float> shifted(static_cast<size_t>(d), 0.0f);
    shifted.insert(shifted.end(), rows.begin(), rows.end() - d);
    RowBuffer hb(target->backend()), last(target->backend());
    const Rows hin = upload_rows(*target, hb, shifted, static_cast<int64_t>(seq.size()));
    KVCache fresh = target->new_mtp_cache(128);
    target->forward_mtp(seq, hin.data, fresh);
    // One more position on copies of both caches: the last token with the target's row of it.
    const Rows hl = upload_rows(*target, last, std::vector<float>(rows.end() - d, rows.end()), 1);
    const int32_t next[1] = {r.tokens.back()};
    KVCache a(drafter.cache()), b(fresh);
    std::vector<float> la, lb;
    target->forward_mtp(next, hl.data, a).logits.to_host(la);
    target->forward_mtp(next, hl.data, b).logits.to_host(lb);
    EXPECT_LE(rel_diff(la, lb), 1e-5);
  }
}

TEST(Mtp, SpeculativeSamplingIsLossless) {
  // The joint of the first two tokens at temperature 1 (tests/lossless.h), the block drafting for
  // its own model; an always-accept verifier must fail the same test.
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing("qwen35-mtp-tiny"), f32_caches());
  const SamplingParams sp = plain_sampling(1.0f, 35);
  std::vector<double> expect;
  const Tokens prompt = most_uncertain_prompt(*target, sp, expect);
  draft::MtpDrafter drafter(*target, 64);
  const verify::SpeculativeVerifier sv;
  for (int g : {1, 3}) {
    const verify::DecodeOptions o = decode_options(60, g);  // a longer run: the acceptance these draws see
    verify::SpeculativeDecoder dec(*target, drafter, sv, sp, o);
    const double acceptance = dec.generate(prompt, 1).metrics.acceptance_rate();
    const auto counts = two_token_counts(*target, drafter, sv, prompt, sp, kModelTrials, g);
    const ChiSquare cs = pooled_chi_square(counts, expect, kModelTrials);
    std::printf("mtp acceptance (one run of 60 tokens) %.2f\n", acceptance);
    EXPECT_GT(acceptance, 0.2) << "the test must see drafts accepted";
    std::printf("mtp lossless g=%d: chi2 %.1f df %d critical %.1f (pooled mass %.3f)\n", g, cs.stat, cs.df,
                chi2_critical_0001(cs.df), cs.pooled_mass);
    EXPECT_EQ(cs.impossible, 0);
    EXPECT_GE(cs.df, 5);
    EXPECT_LT(cs.pooled_mass, 0.5);
    EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "g " << g;
  }
  const AlwaysAcceptVerifier bad;
  const auto bad_counts = two_token_counts(*target, drafter, bad, prompt, sp, kModelTrials, 3);
  const ChiSquare bcs = pooled_chi_square(bad_counts, expect, kModelTrials);
  std::printf("mtp always-accept: chi2 %.1f df %d critical %.1f\n", bcs.stat, bcs.df, chi2_critical_0001(bcs.df));
  EXPECT_TRUE(bcs.stat > chi2_critical_0001(bcs.df) || bcs.impossible > 0);
}

TEST(Mtp, AReducedDraftVocabularyStaysLossless) {
  // Drafting from the first 160 of 320 ids (the block's head computes those rows only): greedy
  // output identical, sampled output the target's (the chi-square of the first two tokens).
  using namespace specmoe::testing;
  auto target = Model::load(write_agreeing("qwen35-mtp-tiny"), f32_caches());
  draft::MtpDrafter drafter(*target, 64);
  drafter.set_vocabulary_limit(160);
  EXPECT_EQ(drafter.vocabulary_limit(), 160);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  verify::DecodeOptions o = decode_options(40, 3);
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111};
  const verify::GreedyVerifier gv;
  verify::SpeculativeDecoder dec(*target, drafter, gv, greedy, o);
  const verify::GenerationResult r = dec.generate(prompt, 0);
  EXPECT_EQ(r.tokens, verify::generate_autoregressive(*target, prompt, greedy, o, 0).tokens);
  const SamplingParams sp = plain_sampling(1.0f, 35);
  std::vector<double> expect;
  const Tokens p = most_uncertain_prompt(*target, sp, expect);
  const verify::SpeculativeVerifier sv;
  const auto counts = two_token_counts(*target, drafter, sv, p, sp, kModelTrials, 2);
  const ChiSquare cs = pooled_chi_square(counts, expect, kModelTrials);
  std::printf("mtp draft vocab 160: chi2 %.1f df %d critical %.1f\n", cs.stat, cs.df, chi2_critical_0001(cs.df));
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df));
  EXPECT_THROW(drafter.set_vocabulary_limit(321), Error);
}

TEST(Mtp, ABlockInItsOwnFileDraftsAsTheInlineOne) {
  // llama.cpp's --mtp export: the block (with the embedding, final norm and head) alone in its own
  // file, beside a target converted without it (--no-mtp). Same weights, same seed: the same
  // drafts, steps and tokens as the target's inline block, greedy and sampled, chains and trees.
  SynthSpec s = agreeing_spec("qwen35-mtp-tiny");
  const std::string inline_path = write_agreeing("qwen35-mtp-tiny", "_inline");
  SynthSpec alone = s, trunk = s;
  alone.mtp_only = true;
  trunk.n_nextn = 0;
  const std::string alone_path = specmoe::testing::scratch_file("mtp_alone.gguf"),
                    trunk_path = specmoe::testing::scratch_file("mtp_trunk.gguf");
  synth_write(alone, alone_path, 42);
  synth_write(trunk, trunk_path, 42);
  auto with_block = Model::load(inline_path, f32_caches());
  auto target = Model::load(trunk_path, f32_caches());
  std::shared_ptr<Model> block = Model::load(alone_path, f32_caches());
  EXPECT_TRUE(block->config().mtp_only);
  EXPECT_TRUE(block->has_mtp());
  EXPECT_FALSE(target->has_mtp());
  KVCache kv = block->new_cache(8);
  const int32_t one[1] = {5};
  try {
    block->forward(one, kv);
    ADD_FAILURE() << "a file of the block alone ran a forward";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("-md"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111};
  draft::TreeSpec tree;
  tree.widths = {2, 1};
  int64_t accepted = 0;
  for (const float temperature : {0.0f, 1.0f})
    for (const draft::TreeSpec& shape : {draft::TreeSpec{}, tree}) {
      const SamplingParams sp = specmoe::testing::plain_sampling(temperature, 5);
      verify::DecodeOptions o = decode_options(32, 3, shape);
      o.record_steps = true;
      const verify::SpeculativeVerifier sv;
      draft::MtpDrafter own(*with_block, 64), split(*target, block, 64);
      verify::SpeculativeDecoder a(*with_block, own, sv, sp, o), b(*target, split, sv, sp, o);
      const verify::GenerationResult ra = a.generate(prompt, 2), rb = b.generate(prompt, 2);
      EXPECT_EQ(ra.tokens, rb.tokens) << temperature;
      ASSERT_EQ(ra.steps.size(), rb.steps.size()) << temperature;
      for (size_t i = 0; i < ra.steps.size(); ++i) {
        EXPECT_EQ(ra.steps[i].drafted, rb.steps[i].drafted) << "step " << i;
        EXPECT_EQ(ra.steps[i].accepted, rb.steps[i].accepted) << "step " << i;
      }
      accepted += ra.metrics.n_accepted;
    }
  EXPECT_GT(accepted, 0);
  // By name: the block's file as the draft model.
  draft::DrafterOptions dopt;
  dopt.target = target.get();
  dopt.draft_model = block;
  EXPECT_EQ(draft::make_drafter("mtp", dopt)->name(), "mtp");
  // A block of another width does not fit.
  auto other = Model::load(write_preset("tiny-256"), f32_caches());
  EXPECT_THROW(draft::MtpDrafter(*other, block, 16), Error);
}

TEST(Mtp, ClearErrors) {
  const std::string plain_path = write_preset("qwen35-tiny");
  auto plain = Model::load(plain_path, f32_caches());
  try {
    draft::MtpDrafter d(*plain);
    ADD_FAILURE() << "no error for a model without a block";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find(plain_path), std::string::npos) << e.what();
  }
  EXPECT_THROW(plain->new_mtp_cache(16), Error);
  auto m = Model::load(write_preset("qwen35-mtp-tiny"), f32_caches());
  std::vector<float> zeros(static_cast<size_t>(m->config().n_embd), 0.0f);
  const int32_t one[1] = {5};
  KVCache own = m->new_cache(16);
  try {
    m->forward_mtp(one, zeros.data(), own);  // the model's own cache is not the block's
    ADD_FAILURE() << "no error for the wrong cache";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("new_mtp_cache"), std::string::npos) << e.what();
  }
  KVCache mkv = m->new_mtp_cache(16);
  const int32_t outside[1] = {m->config().n_vocab};
  EXPECT_THROW(m->forward_mtp(outside, zeros.data(), mkv), Error);
  // A loop that never hands the drafter the target's hidden rows gets told so.
  draft::MtpDrafter d(*m, 16);
  const std::vector<int32_t> prompt = {1, 72, 101};
  d.begin(prompt);
  Sampler sampler(SamplingParams{});
  Rng rng(1, 0);
  draft::Draft out;
  draft::DraftParams dp;
  dp.sampler = &sampler;
  dp.rng = &rng;
  try {
    d.propose(prompt, dp, out);
    ADD_FAILURE() << "no error without the target's rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target_hidden"), std::string::npos) << e.what();
  }
  // By name, and its options.
  const auto names = draft::drafter_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "mtp"), names.end());
  draft::DrafterOptions o;
  EXPECT_THROW(draft::make_drafter("mtp", o), Error);  // no target
  o.target = m.get();
  EXPECT_EQ(draft::make_drafter("mtp", o)->name(), "mtp");
  o.draft_vocab = 100;
  EXPECT_EQ(dynamic_cast<draft::MtpDrafter&>(*draft::make_drafter("mtp", o)).vocabulary_limit(), 100);
  o.draft_vocab = 1000;
  EXPECT_THROW(draft::make_drafter("mtp", o), Error);
  // synth writes the block for the architectures that run it only.
  SynthSpec s = synth_spec("tiny");
  s.n_nextn = 1;
  EXPECT_THROW(synth_write(s, specmoe::testing::scratch_file("bad_mtp.gguf"), 1), Error);
}
