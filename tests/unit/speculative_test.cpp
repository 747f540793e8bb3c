// The speculative decoding loop end to end on synthetic models (core/synth.h `tiny`, 4 layers,
// vocab 320, and drafts for it): token-for-token identity with autoregressive decoding at
// temperature 0 for every drafter, rejection at every draft position, EOS and max_tokens, KV
// cache state after rollback, and losslessness at temperature > 0 against the target's exact
// distribution computed by enumeration.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "draft/registry.h"
#include "kernels/cpu/quant.h"
#include "lossless.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"

namespace specmoe::verify {
namespace {

using Tokens = std::vector<int32_t>;

std::string scratch(const std::string& name) {
  return (testing::scratch_dir() / ("spec-" + name + "-" + std::to_string(getpid()) + ".gguf")).string();
}

std::string synth_file(const std::string& preset, uint64_t seed, int n_vocab = 0) {
  core::SynthSpec spec = core::synth_spec(preset);
  if (n_vocab > 0) spec.n_vocab = n_vocab;
  const std::string path = scratch(preset + "-" + std::to_string(spec.n_vocab) + "-" + std::to_string(seed));
  core::synth_write(spec, path, seed);
  return path;
}

// Copies a GGUF file with one metadata value changed.
std::string with_eos(const std::string& src, int32_t eos) {
  auto f = core::GGUFFile::open(src);
  core::GGUFWriter w;
  for (auto [key, value] : f->metadata()) {
    if (key == "tokenizer.ggml.eos_token_id") value.i = eos;
    w.set_value(key, value);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  const std::string path = src.substr(0, src.size() - 5) + "-eos" + std::to_string(eos) + ".gguf";
  w.write(path);
  return path;
}

// One thread: these models are tiny, and a shared machine makes thread hand-offs the main cost.
core::LoadOptions one_thread() {
  core::LoadOptions o;
  o.n_threads = 1;
  return o;
}

core::SamplingParams greedy() {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  return sp;
}

DecodeOptions decode_options(int max_tokens, int g) {
  DecodeOptions o;
  o.max_tokens = max_tokens;
  o.draft_max = g;
  return o;
}

class SpeculativeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_path_ = synth_file("tiny", 7);
    tiny_ = core::Model::load(tiny_path_, one_thread());
    tiny_draft_path_ = synth_file("tiny-draft", 7);
    tiny_draft_ = core::Model::load(tiny_draft_path_, one_thread());
  }
  static void TearDownTestSuite() {
    tiny_.reset();
    tiny_draft_.reset();
  }
  static std::vector<Tokens> prompts() {
    std::vector<Tokens> out;
    for (const char* text : {"Once upon a time", "abcabcabc", "The", "x = 1; y = 2; x = 1;"})
      out.push_back(tiny_->tokenizer().encode(text, true));
    return out;
  }

  static inline std::string tiny_path_, tiny_draft_path_;
  static inline std::unique_ptr<core::Model> tiny_, tiny_draft_;
};

// Runs both decoders on every prompt and checks identity; returns the merged metrics.
Metrics expect_identical(core::Model& target, draft::Drafter& drafter, const Verifier& verifier,
                         const std::vector<Tokens>& prompts, const DecodeOptions& o,
                         const core::SamplingParams& sp = greedy()) {
  SpeculativeDecoder dec(target, drafter, verifier, sp, o);
  Metrics all;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerationResult ar = generate_autoregressive(target, prompts[i], sp, o, i);
    const GenerationResult sd = dec.generate(prompts[i], i);
    EXPECT_EQ(sd.tokens, ar.tokens) << drafter.name() << " prompt " << i;
    EXPECT_EQ(sd.stopped_at_eog, ar.stopped_at_eog);
    EXPECT_LE(static_cast<int>(sd.tokens.size()), o.max_tokens);
    EXPECT_EQ(sd.metrics.n_generated, static_cast<int64_t>(sd.tokens.size()));
    // Decode-phase accounting: speculative decoding emits every token from a decode step, the
    // baseline its first from the prefill; the prefill is timed inside the whole run.
    EXPECT_EQ(sd.metrics.n_decoded, sd.metrics.n_generated);
    EXPECT_EQ(ar.metrics.n_decoded, std::max<int64_t>(0, ar.metrics.n_generated - 1));
    for (const Metrics* m : {&sd.metrics, &ar.metrics}) {
      EXPECT_GT(m->prefill_s, 0.0);
      EXPECT_LE(m->prefill_s, m->total_s);
      EXPECT_DOUBLE_EQ(m->decode_s(), m->total_s - m->prefill_s);
    }
    all.merge(sd.metrics);
  }
  return all;
}

TEST_F(SpeculativeTest, GreedyOutputIsIdenticalForEveryDrafter) {
  const auto ps = prompts();
  const DecodeOptions o = decode_options(40, 4);
  const SpeculativeVerifier spec;
  const GreedyVerifier greedy_v;

  // Draft model (tiny's first layer: high agreement) with both verifiers.
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);
  const Metrics mm = expect_identical(*tiny_, model, spec, ps, o);
  expect_identical(*tiny_, model, greedy_v, ps, o);
  EXPECT_GT(mm.n_drafted, 0);
  EXPECT_GT(mm.n_accepted, 0);
  EXPECT_LT(mm.n_accepted, mm.n_drafted);
  // Rejections at the first, a middle and the last draft position, and full acceptances: each
  // bucket of the accepted-length histogram (0 = first rejected, 3 = last rejected, 4 = all).
  ASSERT_EQ(mm.accept_length_histogram.size(), 5u);
  for (int k = 0; k <= 4; ++k) EXPECT_GT(mm.accept_length_histogram[k], 0) << "accepted length " << k;
  EXPECT_GT(mm.mean_accepted_length(), 1.0);

  // A different, smaller draft: other weights (seed 8), 300-token vocabulary. Low acceptance.
  auto other = std::shared_ptr<core::Model>(core::Model::load(synth_file("tiny-draft", 8, 300), one_thread()));
  draft::DrafterOptions dopt;
  dopt.target = tiny_.get();
  dopt.draft_model = other;
  dopt.n_ctx = 256;
  auto other_drafter = draft::make_drafter("model", dopt);
  const Metrics mo = expect_identical(*tiny_, *other_drafter, spec, ps, o);
  EXPECT_GT(mo.n_drafted, 0);
  EXPECT_LT(mo.acceptance_rate(), mm.acceptance_rate());

  // N-gram lookup (random models loop, so the lookup finds matches).
  draft::NgramDrafter ngram(1, 3);
  const Metrics mn = expect_identical(*tiny_, ngram, spec, ps, o);
  EXPECT_GT(mn.n_drafted, 0);
  EXPECT_GT(mn.n_accepted, 0);

  // Layer skip at exit 1 and exit 2.
  for (int exit_layer : {1, 2}) {
    draft::LayerSkipDrafter skip(*tiny_, exit_layer, 256);
    const Metrics ml = expect_identical(*tiny_, skip, spec, ps, o);
    EXPECT_GT(ml.n_accepted, 0) << exit_layer;
    if (exit_layer == 1) {
      EXPECT_EQ(ml.n_accepted, mm.n_accepted);  // same logits as tiny-draft
    }
  }
}

TEST_F(SpeculativeTest, DraftLengthsAndAdaptiveDrafting) {
  const auto ps = prompts();
  const SpeculativeVerifier spec;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);
  for (int g : {1, 2, 3, 7}) {
    const Metrics m = expect_identical(*tiny_, model, spec, ps, decode_options(33, g));
    EXPECT_EQ(m.draft_max, g);
    EXPECT_GT(m.n_accepted, 0) << g;
  }
  // draft_min larger than anything the ngram drafter finds on short prompts -> only plain steps,
  // which equal the baseline even at temperature 1 (same sampling, same random stream).
  DecodeOptions o = decode_options(20, 4);
  o.draft_min = 4;
  draft::NgramDrafter ngram(3, 3);
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  const Tokens short_prompt = {1, 70, 71};
  SpeculativeDecoder dec(*tiny_, ngram, spec, sp, o);
  const GenerationResult a = dec.generate(short_prompt, 9);
  const GenerationResult b = generate_autoregressive(*tiny_, short_prompt, sp, o, 9);
  EXPECT_EQ(a.metrics.n_drafted, 0);
  EXPECT_EQ(a.tokens, b.tokens);
  // Adaptive: p_min = 1 never drafts (the draft's top probability is < 1): all plain steps.
  o = decode_options(20, 4);
  o.draft_p_min = 1.0f;
  const Metrics m = expect_identical(*tiny_, model, spec, ps, o);
  EXPECT_EQ(m.n_drafted, 0);
  EXPECT_DOUBLE_EQ(m.mean_accepted_length(), 1.0);
  o.draft_p_min = 0.3f;
  const Metrics m2 = expect_identical(*tiny_, model, spec, ps, o);
  EXPECT_GT(m2.n_drafted, 0);
}

TEST_F(SpeculativeTest, DraftEqualToTargetAcceptsEverything) {
  const auto ps = prompts();
  const SpeculativeVerifier spec;
  draft::DrafterOptions dopt;
  dopt.target = tiny_.get();
  dopt.draft_model = std::shared_ptr<core::Model>(core::Model::load(tiny_path_, one_thread()));
  dopt.n_ctx = 256;
  auto same = draft::make_drafter("model", dopt);
  const Metrics m = expect_identical(*tiny_, *same, spec, ps, decode_options(41, 5));
  EXPECT_GT(m.n_drafted, 0);
  EXPECT_EQ(m.acceptance_rate(), 1.0);
  for (double a : m.per_position_acceptance()) EXPECT_EQ(a, 1.0);
  EXPECT_GT(m.accept_length_histogram[5], 0);
}

TEST_F(SpeculativeTest, MaxTokensIsNeverExceeded) {
  const Tokens prompt = prompts()[0];
  const SpeculativeVerifier spec;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);
  draft::DrafterOptions dopt;
  dopt.target = tiny_.get();
  dopt.draft_model = std::shared_ptr<core::Model>(core::Model::load(tiny_path_, one_thread()));
  auto same = draft::make_drafter("model", dopt);  // accepts everything: always hits the limit mid-draft
  for (int max_tokens : {0, 1, 2, 3, 5, 17}) {
    for (draft::Drafter* d : {static_cast<draft::Drafter*>(&model), same.get()}) {
      const DecodeOptions o = decode_options(max_tokens, 4);
      SpeculativeDecoder dec(*tiny_, *d, spec, greedy(), o);
      const GenerationResult sd = dec.generate(prompt);
      const GenerationResult ar = generate_autoregressive(*tiny_, prompt, greedy(), o);
      EXPECT_EQ(static_cast<int>(sd.tokens.size()), max_tokens);
      EXPECT_EQ(sd.tokens, ar.tokens) << max_tokens;
    }
  }
}

TEST_F(SpeculativeTest, StopsAtEosLikeTheBaseline) {
  // Make a token the greedy continuation produces the EOS (in both target and drafts), so the
  // run must stop there, also when the EOS arrives inside an accepted draft.
  const Tokens prompt = prompts()[0];
  const GenerationResult free_run = generate_autoregressive(*tiny_, prompt, greedy(), decode_options(30, 4));
  ASSERT_EQ(free_run.tokens.size(), 30u);
  const int32_t eos = free_run.tokens[9];
  const size_t first = std::find(free_run.tokens.begin(), free_run.tokens.end(), eos) - free_run.tokens.begin();
  auto target = core::Model::load(with_eos(tiny_path_, eos), one_thread());
  auto draft_model = std::shared_ptr<core::Model>(core::Model::load(with_eos(tiny_draft_path_, eos), one_thread()));
  auto same_model = std::shared_ptr<core::Model>(core::Model::load(with_eos(tiny_path_, eos), one_thread()));
  ASSERT_TRUE(target->tokenizer().is_eog(eos));
  const SpeculativeVerifier spec;
  for (const auto& dm : {draft_model, same_model}) {
    draft::DrafterOptions dopt;
    dopt.target = target.get();
    dopt.draft_model = dm;
    auto drafter = draft::make_drafter("model", dopt);
    const DecodeOptions o = decode_options(30, 4);
    SpeculativeDecoder dec(*target, *drafter, spec, greedy(), o);
    const GenerationResult sd = dec.generate(prompt);
    const GenerationResult ar = generate_autoregressive(*target, prompt, greedy(), o);
    EXPECT_TRUE(ar.stopped_at_eog);
    EXPECT_EQ(ar.tokens.size(), first + 1);
    EXPECT_TRUE(sd.stopped_at_eog);
    EXPECT_EQ(sd.tokens, ar.tokens);
    EXPECT_EQ(sd.tokens.back(), eos);
  }
}

// Rows [0, n) of layer l's keys (or values) as floats, whatever the cache's element types.
std::vector<float> layer_rows(const core::KVCache& kv, int l, bool values, int n) {
  const std::vector<uint8_t> bytes = kv.read_layer(l);
  const core::KVLayerLayout& L = kv.layout(l);
  const size_t kb = kv.k_row_bytes(l), vb = kv.v_row_bytes(l);
  const int w = values ? L.v_width : L.k_width;
  std::vector<float> out(static_cast<size_t>(n) * w);
  for (int t = 0; t < n; ++t)
    kernels::cpu::dequantize_row(values ? L.v_type : L.k_type,
                                 bytes.data() + (values ? kv.size() * kb + t * vb : t * kb), out.data() + t * w, w);
  return out;
}

// The caches' first n_tokens rows of every layer, byte for byte (keys and values of any cache
// type), and their positions.
void expect_cache_equal(const core::KVCache& a, const core::KVCache& b, int n_tokens, int n_layers) {
  ASSERT_GE(a.size(), n_tokens);
  ASSERT_GE(b.size(), n_tokens);
  ASSERT_EQ(a.layout(0), b.layout(0));
  double max_abs = 0.0;
  for (int t = 0; t < n_tokens; ++t) EXPECT_EQ(a.position(t), b.position(t));
  for (int l = 0; l < n_layers; ++l)
    for (bool values : {false, true}) {
      // Bit for bit: the CPU kernels compute a token's keys and values the same way whether it
      // came in a batch of g+1 or alone (kernels/cpu/ops.h, determinism contract), and equal
      // floats convert to equal cache rows whatever the cache's type.
      const std::vector<uint8_t> ba = a.read_layer(l), bb = b.read_layer(l);
      const size_t row = values ? a.v_row_bytes(l) : a.k_row_bytes(l);
      const size_t off_a = values ? a.size() * a.k_row_bytes(l) : 0, off_b = values ? b.size() * b.k_row_bytes(l) : 0;
      for (int t = 0; t < n_tokens; ++t)
        ASSERT_EQ(std::memcmp(ba.data() + off_a + t * row, bb.data() + off_b + t * row, row), 0)
            << "layer " << l << (values ? " value" : " key") << " row of token " << t;
      for (float x : layer_rows(b, l, values, n_tokens)) max_abs = std::max(max_abs, static_cast<double>(std::abs(x)));
    }
  EXPECT_GT(max_abs, 0.01) << "the caches should hold real keys, not zeros";
}

// Keys/values of `tokens` run through `model` one token at a time on a fresh cache.
core::KVCache fresh_cache(core::Model& model, const Tokens& tokens, int n_layers = -1) {
  core::KVCache kv = model.new_cache(256);
  std::vector<float> logits;
  core::ForwardOptions fo;
  fo.logits_all = false;
  fo.exit_layer = n_layers;
  for (int32_t t : tokens) model.forward(std::span<const int32_t>(&t, 1), kv, fo).logits.to_host(logits);
  return kv;
}

TEST_F(SpeculativeTest, CachesAfterRollbackEqualAFreshRun) {
  const SpeculativeVerifier spec;
  const Tokens prompt = prompts()[0];
  DecodeOptions o = decode_options(37, 4);
  o.stop_at_eog = false;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);
  draft::LayerSkipDrafter skip(*tiny_, 2, 256);
  for (draft::ModelDrafter* d : {&model, static_cast<draft::ModelDrafter*>(&skip)}) {
    SpeculativeDecoder dec(*tiny_, *d, spec, greedy(), o);
    const GenerationResult sd = dec.generate(prompt);
    ASSERT_EQ(sd.tokens.size(), 37u);
    EXPECT_GT(sd.metrics.n_accepted, 0);
    EXPECT_LT(sd.metrics.n_accepted, sd.metrics.n_drafted);  // rollbacks happened
    Tokens all = prompt;
    all.insert(all.end(), sd.tokens.begin(), sd.tokens.end() - 1);
    // Target: holds prompt + every token but the last.
    const core::KVCache& kv = dec.target_cache();
    EXPECT_EQ(kv.size(), static_cast<int>(all.size()));
    expect_cache_equal(kv, fresh_cache(*tiny_, all), kv.size(), tiny_->config().n_layer);
    // Drafter: after its rollbacks it holds a prefix of the accepted sequence (the tokens it has
    // not been fed yet are at most the last step's bonus and x_g); its K/V must be a fresh run's
    // over those same tokens.
    const Tokens cached = d->cached_tokens();
    ASSERT_GT(cached.size(), prompt.size() + 20);
    ASSERT_LE(cached.size(), all.size() + 1);
    Tokens full = prompt;
    full.insert(full.end(), sd.tokens.begin(), sd.tokens.end());
    EXPECT_TRUE(std::equal(cached.begin(), cached.end(), full.begin())) << "not a prefix of the output";
    EXPECT_GE(cached.size() + 2, full.size()) << "the drafter lags at most the bonus and x_g";
    const bool skip_layers = d == &skip;
    const int layers = skip_layers ? 2 : tiny_draft_->config().n_layer;
    expect_cache_equal(d->cache(), fresh_cache(d->model(), cached, skip_layers ? 2 : -1),
                       static_cast<int>(cached.size()), layers);
  }
}


TEST_F(SpeculativeTest, SameSeedAndStreamGiveTheSameTokens) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 5;
  const SpeculativeVerifier spec;
  const Tokens prompt = prompts()[0];
  auto run = [&](uint64_t stream) {
    draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);  // a fresh drafter each time
    SpeculativeDecoder dec(*tiny_, model, spec, sp, decode_options(30, 3));
    return dec.generate(prompt, stream);
  };
  const GenerationResult a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.metrics.n_accepted, b.metrics.n_accepted);
  EXPECT_EQ(a.metrics.n_drafted, b.metrics.n_drafted);
  EXPECT_EQ(a.metrics.accept_length_histogram, b.metrics.accept_length_histogram);
  EXPECT_NE(a.tokens, c.tokens);  // 30 tokens at temperature 1: another stream differs
  EXPECT_EQ(a.tokens.size(), 30u);
}

// ---- Losslessness at temperature > 0 with real (tiny) models: tests/lossless.h ----------

TEST_F(SpeculativeTest, LosslessAtTemperatureOne) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 21;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, true);
}

TEST_F(SpeculativeTest, LosslessAtTemperature07TopP09) {
  core::SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 0;
  sp.top_p = 0.9f;
  sp.min_p = 0.0f;
  sp.seed = 22;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, true);
}

// draft_max 1: an accepted first draft token is followed by the bonus token, drawn from p of the
// second position, so the bonus path is inside the test at temperature > 0.
TEST_F(SpeculativeTest, LosslessBonusTokenWithDraftMax1) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 23;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, testing::LosslessCase{1, true});
}

TEST_F(SpeculativeTest, LosslessWithTopKAndMinP) {
  core::SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 12;
  sp.top_p = 1.0f;
  sp.min_p = 0.02f;
  sp.seed = 24;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, true);
}

// Penalties condition p (and q) on the drafted prefix: position i's distribution sees the
// history plus x_1..x_i, which is what makes the loop lossless with them.
TEST_F(SpeculativeTest, LosslessWithRepetitionPenaltyAndNgramBan) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.5f;
  sp.no_repeat_ngram = 1;  // every token already in the history is banned: the prompt's and t1
  sp.seed = 25;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, testing::LosslessCase{2, true});
}

// A reduced draft vocabulary (ModelDrafter::set_vocabulary_limit): q is the draft's softmax over
// ids below the limit, 0 elsewhere, so the target's mass above it only ever comes from the
// residual. 160 of the 320 ids: half the byte tokens cannot be drafted, so the test runs the
// residual path on most steps, with penalties whose history holds ids the draft head lacks.
TEST_F(SpeculativeTest, LosslessWithAReducedDraftVocabulary) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 26;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, testing::LosslessCase{3, true, 160});
  sp.temperature = 0.7f;
  sp.top_p = 0.9f;
  sp.repeat_penalty = 1.5f;
  sp.seed = 27;
  testing::check_lossless(*tiny_, *tiny_draft_, sp, testing::LosslessCase{2, true, 160});
}

// The reduced head's logits are the full head's first columns, bit for bit (its rows are
// independent outputs), for float and packed quantized heads, a limit inside a group of 16 rows,
// one token and a batch; the drafter drafts only ids below the limit, its q rows sum to 1 over
// them, and greedy decoding with it is the baseline's token for token.
TEST_F(SpeculativeTest, ReducedDraftVocabularyHeadAndGreedyIdentity) {
  for (DType type : {DType::F32, DType::Q8_0, DType::Q4_K}) {
    core::SynthSpec spec = core::synth_spec("tiny");
    spec.type = type;
    if (type == DType::Q4_K) spec.n_embd = 256, spec.n_ff = 512;  // K-quant rows of 256
    const std::string path = scratch(std::string("head-") + dtype_name(type));
    core::synth_write(spec, path, 5);
    auto m = core::Model::load(path, one_thread());
    const Tokens tokens = {1, 40, 41, 42, 43};
    for (int64_t rows : {int64_t{100}, int64_t{259}})
      testing::expect_head_prefix(*m, tokens, rows, 0.0f, std::string(dtype_name(type)) + " head of " + std::to_string(rows));
    core::KVCache c = m->new_cache(16);
    core::ForwardOptions bad;
    bad.head_rows = 321;
    EXPECT_THROW(m->forward(tokens, c, bad), Error);
  }

  draft::ModelDrafter d(tiny_draft_.get(), 320, -1, 256);
  EXPECT_THROW(d.set_vocabulary_limit(321), Error);
  EXPECT_THROW(d.set_vocabulary_limit(-1), Error);
  d.set_vocabulary_limit(320);
  EXPECT_EQ(d.vocabulary_limit(), 0) << "the whole vocabulary is no limit";
  d.set_vocabulary_limit(200);
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  const core::Sampler sampler(sp);
  core::Rng rng(3, 0);
  draft::DraftParams params;
  params.draft_max = 4;
  params.sampler = &sampler;
  params.rng = &rng;
  draft::Draft out;
  const Tokens ctx = tiny_->tokenizer().encode("Once upon a time", true);
  d.begin(ctx);
  d.propose(ctx, params, out);
  ASSERT_EQ(out.size(), 4);
  std::vector<float> q;
  out.q.to_host(q);
  ASSERT_EQ(out.q.cols, 320);
  for (int i = 0; i < 4; ++i) {
    EXPECT_LT(out.tokens[static_cast<size_t>(i)], 200);
    double in = 0.0, above = 0.0;
    for (int j = 0; j < 320; ++j) (j < 200 ? in : above) += q[static_cast<size_t>(i * 320 + j)];
    EXPECT_NEAR(in, 1.0, 1e-5);
    EXPECT_EQ(above, 0.0);
  }

  // Greedy: identical to the baseline with both verifiers; the limit lowers acceptance (the
  // output has ids above it) but never changes a token. The layer-skip drafter takes it too.
  const auto ps = prompts();
  const DecodeOptions o = decode_options(40, 4);
  const SpeculativeVerifier spec;
  const GreedyVerifier greedy_v;
  draft::ModelDrafter full(tiny_draft_.get(), 320, -1, 256);
  const Metrics mf = expect_identical(*tiny_, full, spec, ps, o);
  draft::ModelDrafter limited(tiny_draft_.get(), 320, -1, 256);
  limited.set_vocabulary_limit(105);
  const Metrics ml = expect_identical(*tiny_, limited, spec, ps, o);
  expect_identical(*tiny_, limited, greedy_v, ps, o);
  EXPECT_GT(ml.n_accepted, 0);
  EXPECT_LT(ml.acceptance_rate(), mf.acceptance_rate());
  draft::DrafterOptions dopt;
  dopt.target = tiny_.get();
  dopt.draft_vocab = 105;
  dopt.exit_layer = 2;
  dopt.n_ctx = 256;
  auto skip = draft::make_drafter("layerskip", dopt);
  EXPECT_EQ(dynamic_cast<draft::ModelDrafter&>(*skip).vocabulary_limit(), 105);
  expect_identical(*tiny_, *skip, spec, ps, o);
  dopt.draft_vocab = 321;
  EXPECT_THROW(draft::make_drafter("layerskip", dopt), Error);
}

// At temperature 0 with penalties every drafter's output is the baseline's, token for token.
TEST_F(SpeculativeTest, GreedyWithPenaltiesIsIdenticalForEveryDrafter) {
  const auto ps = prompts();
  const DecodeOptions o = decode_options(40, 4);
  core::SamplingParams sp = greedy();
  sp.repeat_penalty = 1.3f;
  sp.no_repeat_ngram = 3;
  const SpeculativeVerifier spec;
  const GreedyVerifier greedy_v;
  draft::ModelDrafter model(tiny_draft_.get(), 320, -1, 256);
  const Metrics mm = expect_identical(*tiny_, model, spec, ps, o, sp);
  expect_identical(*tiny_, model, greedy_v, ps, o, sp);
  EXPECT_GT(mm.n_accepted, 0);
  draft::NgramDrafter ngram(1, 3);
  expect_identical(*tiny_, ngram, spec, ps, o, sp);
  draft::LayerSkipDrafter skip(*tiny_, 2, 256);
  const Metrics ml = expect_identical(*tiny_, skip, spec, ps, o, sp);
  EXPECT_GT(ml.n_accepted, 0);
  // The penalties change the output: the test would not notice them being ignored otherwise.
  const GenerationResult plain = generate_autoregressive(*tiny_, ps[0], greedy(), o, 0);
  const GenerationResult pen = generate_autoregressive(*tiny_, ps[0], sp, o, 0);
  EXPECT_NE(plain.tokens, pen.tokens);
}

}  // namespace
}  // namespace specmoe::verify
