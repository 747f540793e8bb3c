// Drafters: n-gram prompt lookup on hand-made sequences, the registry, the vocabulary
// compatibility check, and the model / layer-skip drafters' proposals on synthetic models.
#include <algorithm>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <functional>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/layerskip_drafter.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "draft/registry.h"
#include "draft/vocab_check.h"
#include "test_data.h"

namespace specmoe::draft {
namespace {

using Tokens = std::vector<int32_t>;

Tokens lookup(const Tokens& ctx, int nmin, int nmax, int g) {
  Tokens out = {99};  // must be cleared
  NgramDrafter::lookup(ctx, nmin, nmax, g, out);
  return out;
}

TEST(NgramDrafter, ProposesWhatFollowedTheMatch) {
  const Tokens ctx = {1, 2, 3, 4, 1, 2, 3};
  EXPECT_EQ(lookup(ctx, 1, 3, 4), (Tokens{4, 1, 2, 3}));  // "1 2 3" matched at the start
  EXPECT_EQ(lookup(ctx, 1, 3, 2), (Tokens{4, 1}));        // cut at g
  EXPECT_EQ(lookup(ctx, 1, 3, 17), (Tokens{4, 1, 2, 3}));  // never past the end of the context
  EXPECT_EQ(lookup(ctx, 1, 3, 0), Tokens{});
}

TEST(NgramDrafter, TakesTheMostRecentMatch) {
  // "5 6" occurs followed by 7 and later followed by 8: the later one wins.
  const Tokens ctx = {5, 6, 7, 5, 6, 8, 5, 6};
  EXPECT_EQ(lookup(ctx, 2, 2, 1), (Tokens{8}));
  EXPECT_EQ(lookup(ctx, 2, 2, 3), (Tokens{8, 5, 6}));
}

TEST(NgramDrafter, PrefersTheLongestMatchingNgram) {
  // The last 3 tokens "1 2 3" occur once (followed by 4 5); the last 2 "2 3" more recently
  // (followed by 6). ngram_max 3 uses the 3-gram, ngram_max 2 the more recent 2-gram.
  const Tokens ctx = {7, 1, 2, 3, 4, 5, 2, 3, 6, 1, 2, 3};
  EXPECT_EQ(lookup(ctx, 1, 3, 2), (Tokens{4, 5}));
  EXPECT_EQ(lookup(ctx, 1, 2, 2), (Tokens{6, 1}));
}

TEST(NgramDrafter, NoMatchGivesNothing) {
  EXPECT_EQ(lookup({1, 2, 3, 4}, 1, 3, 4), Tokens{});
  EXPECT_EQ(lookup({1}, 1, 3, 4), Tokens{});
  EXPECT_EQ(lookup({}, 1, 3, 4), Tokens{});
  // A single repeated token matches only with ngram_min 1.
  EXPECT_EQ(lookup({1, 2, 1}, 2, 3, 4), Tokens{});
  EXPECT_EQ(lookup({1, 2, 1}, 1, 3, 4), (Tokens{2, 1}));
  // A run: the most recent match of "9" ends one before the end, so one token follows it.
  EXPECT_EQ(lookup({9, 9, 9}, 1, 1, 4), (Tokens{9}));
}

TEST(NgramDrafter, ProposeIsOneHotAndBoundedByParams) {
  NgramDrafter d(1, 3);
  const Tokens ctx = {1, 2, 3, 4, 1, 2, 3};
  d.begin(ctx);
  Draft out;
  out.tokens = {42};
  DraftParams p;
  p.draft_max = 3;
  d.propose(ctx, p, out);
  EXPECT_TRUE(out.one_hot);
  EXPECT_EQ(out.tokens, (Tokens{4, 1, 2}));
  EXPECT_THROW(NgramDrafter(0, 3), Error);
  EXPECT_THROW(NgramDrafter(3, 2), Error);
}

TEST(DrafterRegistry, NamesAndErrors) {
  // The registry is process-wide: this test removes what it registers, so it holds under
  // --gtest_repeat.
  EXPECT_EQ(drafter_names(), (std::vector<std::string>{"dflash", "eagle3", "layerskip", "model", "mtp", "ngram"}));
  DrafterOptions o;
  o.ngram_min = 2;
  o.ngram_max = 4;
  EXPECT_EQ(make_drafter("ngram", o)->name(), "ngram");
  try {
    make_drafter("medusa", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'medusa'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layerskip, model, mtp, ngram"), std::string::npos) << e.what();
  }
  // Missing or bad options are errors, not crashes.
  EXPECT_THROW(make_drafter("model", o), Error);      // no target
  EXPECT_THROW(make_drafter("layerskip", o), Error);  // no target
  o.ngram_min = 5;
  EXPECT_THROW(make_drafter("ngram", o), Error);
  register_drafter("ngram-short", [](const DrafterOptions&) { return std::make_unique<NgramDrafter>(1, 1); });
  EXPECT_EQ(make_drafter("ngram-short", o)->name(), "ngram");
  EXPECT_EQ(drafter_names(), (std::vector<std::string>{"dflash", "eagle3", "layerskip", "model", "mtp", "ngram", "ngram-short"}));
  EXPECT_TRUE(unregister_drafter("ngram-short"));
  EXPECT_FALSE(unregister_drafter("ngram-short"));
  EXPECT_EQ(drafter_names(), (std::vector<std::string>{"dflash", "eagle3", "layerskip", "model", "mtp", "ngram"}));
}

// ---- Synthetic models -------------------------------------------------------------------------

std::string scratch(const std::string& name) {
  return (testing::scratch_dir() / (name + "-" + std::to_string(getpid()) + ".gguf")).string();
}

std::string synth_file(const std::string& preset, int n_vocab = 0) {
  core::SynthSpec spec = core::synth_spec(preset);
  if (n_vocab > 0) spec.n_vocab = n_vocab;
  const std::string path = scratch("drafter-" + preset + "-" + std::to_string(spec.n_vocab));
  core::synth_write(spec, path, 7);
  return path;
}

// Copies a GGUF file, letting `edit` change its metadata.
std::string rewrite(const std::string& src, const std::string& name,
                    const std::function<void(const std::string&, core::GGUFValue&)>& edit) {
  auto f = core::GGUFFile::open(src);
  core::GGUFWriter w;
  for (auto [key, value] : f->metadata()) {
    edit(key, value);
    w.set_value(key, value);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  const std::string path = scratch(name);
  w.write(path);
  return path;
}

struct Models {
  std::unique_ptr<core::Model> tiny, tiny_draft;
  Models() {
    tiny = core::Model::load(synth_file("tiny"));
    tiny_draft = core::Model::load(synth_file("tiny-draft"));
  }
};

TEST(VocabCheck, AcceptsMatchingAndPaddedVocabularies) {
  Models m;
  EXPECT_NO_THROW(check_vocab_compatible(*m.tiny, *m.tiny_draft));
  // A draft with 300 tokens: the target's ids 300..319 are "<pad...>" tokens.
  auto small = core::Model::load(synth_file("tiny-draft", 300));
  EXPECT_EQ(small->config().n_vocab, 300);
  EXPECT_NO_THROW(check_vocab_compatible(*m.tiny, *small));
  EXPECT_NO_THROW(check_vocab_compatible(*small, *m.tiny));
}

TEST(VocabCheck, RejectsDifferentTokensNamingBothFiles) {
  Models m;
  const std::string base = synth_file("tiny-draft");
  const std::string renamed = rewrite(base, "drafter-renamed", [](const std::string& key, core::GGUFValue& v) {
    if (key == "tokenizer.ggml.tokens") v.strings[100] = "hello";
  });
  auto bad = core::Model::load(renamed);
  try {
    check_vocab_compatible(*m.tiny, *bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(msg.find(renamed), std::string::npos) << msg;
    EXPECT_NE(msg.find(m.tiny->file().path()), std::string::npos) << msg;
    EXPECT_NE(msg.find("token 100"), std::string::npos) << msg;
  }
  const std::string eos = rewrite(base, "drafter-eos", [](const std::string& key, core::GGUFValue& v) {
    if (key == "tokenizer.ggml.eos_token_id") v.i = 0;
  });
  auto bad_eos = core::Model::load(eos);
  EXPECT_THROW(check_vocab_compatible(*m.tiny, *bad_eos), Error);
  // Extra ids that are not padding: a 300-token draft against a target whose id 310 is real.
  const std::string real = rewrite(synth_file("tiny"), "drafter-real310", [](const std::string& key, core::GGUFValue& v) {
    if (key == "tokenizer.ggml.tokens") v.strings[310] = "world";
  });
  auto target310 = core::Model::load(real);
  auto small = core::Model::load(synth_file("tiny-draft", 300));
  EXPECT_THROW(check_vocab_compatible(*target310, *small), Error);
  // Through the registry too.
  DrafterOptions o;
  o.target = m.tiny.get();
  o.draft_model = std::shared_ptr<core::Model>(std::move(bad));
  EXPECT_THROW(make_drafter("model", o), Error);
}

core::SamplingParams greedy_params() {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  return sp;
}

// The greedy continuation of `ctx` by `model`, token by token on a fresh cache.
Tokens greedy_chain(core::Model& model, const Tokens& ctx, int g, int n_layers = -1) {
  core::KVCache kv = model.new_cache(256);
  std::vector<float> logits;
  core::ForwardOptions fo;
  fo.logits_all = false;
  fo.exit_layer = n_layers;
  model.forward(ctx, kv, fo).logits.to_host(logits);
  Tokens out;
  for (int i = 0; i < g; ++i) {
    out.push_back(core::argmax(logits));
    model.forward(std::span<const int32_t>(&out.back(), 1), kv, fo).logits.to_host(logits);
  }
  return out;
}

TEST(ModelDrafter, GreedyProposalsFollowTheDraftModel) {
  Models m;
  const Tokens prompt = m.tiny->tokenizer().encode("Once upon a time", true);
  ASSERT_GT(prompt.size(), 3u);
  ModelDrafter d(m.tiny_draft.get(), m.tiny->config().n_vocab, -1, 256);
  const core::Sampler chain(greedy_params());
  core::Rng rng(1);
  DraftParams p;
  p.draft_max = 5;
  p.sampler = &chain;
  p.rng = &rng;
  Draft out;
  d.begin(prompt);
  d.propose(prompt, p, out);
  const Tokens expect = greedy_chain(*m.tiny_draft, prompt, 5);
  EXPECT_EQ(out.tokens, expect);
  EXPECT_FALSE(out.one_hot);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(static_cast<size_t>(out.q.cols), 320u);
    EXPECT_EQ(out.q.row(i)[expect[i]], 1.0f);  // temperature 0: one-hot q
  }
  // The cache holds the prompt and the first g-1 drafted tokens.
  Tokens cached = prompt;
  cached.insert(cached.end(), expect.begin(), expect.end() - 1);
  EXPECT_EQ(d.cached_tokens(), cached);
  EXPECT_EQ(d.cache().size(), static_cast<int>(cached.size()));

  // Accept 2, then a different token: the next proposal continues the new context exactly as a
  // fresh greedy run does.
  Tokens ctx = prompt;
  ctx.insert(ctx.end(), expect.begin(), expect.begin() + 2);
  ctx.push_back(expect[2] == 65 ? 66 : 65);
  d.accepted(2, ctx.back());
  // Rolled back at once to the prompt and the 2 accepted tokens.
  EXPECT_EQ(d.cached_tokens(), Tokens(ctx.begin(), ctx.end() - 1));
  EXPECT_EQ(d.cache().size(), static_cast<int>(ctx.size()) - 1);
  d.propose(ctx, p, out);
  EXPECT_EQ(out.tokens, greedy_chain(*m.tiny_draft, ctx, 5));
  // Full acceptance + bonus: the cache lacks x_g, the next proposal feeds it.
  Tokens ctx2 = ctx;
  ctx2.insert(ctx2.end(), out.tokens.begin(), out.tokens.end());
  ctx2.push_back(70);
  d.accepted(5, 70);
  EXPECT_EQ(d.cached_tokens(), Tokens(ctx2.begin(), ctx2.end() - 2));  // x_5 and 70 not fed yet
  d.propose(ctx2, p, out);
  EXPECT_EQ(out.tokens, greedy_chain(*m.tiny_draft, ctx2, 5));
}

TEST(ModelDrafter, AdaptiveLengthAndSmallerDraftVocabulary) {
  Models m;
  auto small = std::shared_ptr<core::Model>(core::Model::load(synth_file("tiny-draft", 300)));
  const Tokens prompt = m.tiny->tokenizer().encode("abc", true);
  ModelDrafter d(small, 320, -1, 256);
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  const core::Sampler chain(sp);
  core::Rng rng(3);
  DraftParams p;
  p.draft_max = 4;
  p.sampler = &chain;
  p.rng = &rng;
  Draft out;
  d.begin(prompt);
  d.propose(prompt, p, out);
  ASSERT_EQ(out.size(), 4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(static_cast<size_t>(out.q.cols), 320u);  // the target's vocabulary
    double sum = 0.0, tail = 0.0;
    for (int v = 0; v < 320; ++v) {
      sum += out.q.row(i)[v];
      if (v >= 300) tail += out.q.row(i)[v];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);  // float accumulation over 300 entries
    EXPECT_EQ(tail, 0.0);
    EXPECT_LT(out.tokens[i], 300);
    EXPECT_GT(out.q.row(i)[out.tokens[i]], 0.0f);
  }
  // Adaptive length: the draft's top probability is below 1, so p_min = 1 drafts nothing;
  // p_min tiny drafts all g.
  p.p_min = 1.0f;
  d.propose(prompt, p, out);
  EXPECT_EQ(out.size(), 0);
  p.p_min = 1e-6f;
  d.propose(prompt, p, out);
  EXPECT_EQ(out.size(), 4);
  // Greedy: the confidence is the plain softmax's top probability (< 1), not the one-hot q's.
  const core::Sampler greedy(greedy_params());
  p.sampler = &greedy;
  p.p_min = 1.0f;
  d.propose(prompt, p, out);
  EXPECT_EQ(out.size(), 0);
}

TEST(LayerSkipDrafter, ExitAfterLayerOneEqualsTheOneLayerDraftModel) {
  // tiny-draft is tiny's first layer with the same embedding, final norm and head, so the
  // target exiting after layer 1 must propose exactly what the draft model proposes, with the
  // same q (both at temperature 0.8 with the same random stream).
  Models m;
  const Tokens prompt = m.tiny->tokenizer().encode("The cat sat", true);
  LayerSkipDrafter skip(*m.tiny, 1, 256);
  ModelDrafter model(m.tiny_draft.get(), 320, -1, 256);
  core::SamplingParams sp;
  sp.temperature = 0.8f;
  const core::Sampler chain(sp);
  core::Rng r1(5), r2(5);
  DraftParams p1, p2;
  p1.draft_max = p2.draft_max = 6;
  p1.sampler = p2.sampler = &chain;
  p1.rng = &r1;
  p2.rng = &r2;
  Draft a, b;
  skip.begin(prompt);
  model.begin(prompt);
  skip.propose(prompt, p1, a);
  model.propose(prompt, p2, b);
  EXPECT_EQ(skip.name(), "layerskip");
  ASSERT_EQ(a.size(), 6);
  EXPECT_EQ(a.tokens, b.tokens);
  for (int i = 0; i < 6; ++i)
    for (int v = 0; v < 320; ++v) ASSERT_NEAR(a.q.row(i)[v], b.q.row(i)[v], 1e-6f) << i << " " << v;  // same kernels
  // It shares the target's weights: same model object.
  EXPECT_EQ(&skip.model(), m.tiny.get());
  EXPECT_THROW(LayerSkipDrafter(*m.tiny, 0), Error);
  EXPECT_THROW(LayerSkipDrafter(*m.tiny, 4), Error);  // tiny has 4 layers: nothing to skip
}

}  // namespace
}  // namespace specmoe::draft
