// core::compute_perplexity follows llama.cpp's `perplexity` chunking (DESIGN.md, "Models, formats,
// numerics"): tokenize with BOS; floor(n / ctx) non-overlapping chunks of ctx tokens, the rest
// dropped; each chunk's first token replaced by BOS; positions ctx/2 .. ctx-2 scored, each
// predicting the next token; ppl = exp(mean nll); at least 2 * ctx tokens. On stories260K and its
// published 200-token story (200 tokens, 201 with BOS), the counts are worked out by hand below,
// and the value is checked against an independent computation from Model::forward.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/kv_cache.h"
#include "core/model.h"
#include "core/perplexity.h"
#include "core/tokenizer.h"
#include "cli_runner.h"
#include "test_data.h"

namespace specmoe::core {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kText = "models/stories260K.expected_greedy_200steps.txt";

std::string read_text(const std::string& rel) {
  std::ifstream in(specmoe::testing::data_path(rel), std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Mean nll over the chunks of `tokens`, straight from the definition: one fresh cache and one
// forward per chunk, log-softmax in long double with its own max/sum order. `bos_first` false
// keeps each chunk's own first token (the rule llama.cpp does not follow), to show the rule matters.
struct Independent {
  double ppl = 0;
  int chunks = 0, scored = 0;
};
Independent independent_perplexity(Model& model, const std::vector<int32_t>& tokens, int ctx, bool bos_first) {
  const int n_vocab = model.config().n_vocab;
  const int32_t bos = model.tokenizer().bos();
  Independent out;
  out.chunks = static_cast<int>(tokens.size()) / ctx;
  long double nll = 0;
  for (int c = 0; c < out.chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (bos_first) chunk[0] = bos;
    KVCache kv = model.new_cache(ctx);
    std::vector<float> logits;
    model.forward(chunk, kv).logits.to_host(logits);
    EXPECT_EQ(logits.size(), static_cast<size_t>(ctx) * n_vocab);
    for (int i = ctx / 2; i <= ctx - 2; ++i) {
      const float* row = logits.data() + static_cast<size_t>(i) * n_vocab;
      long double mx = row[0];
      for (int v = 1; v < n_vocab; ++v) mx = std::max<long double>(mx, row[v]);
      long double sum = 0;
      for (int v = n_vocab - 1; v >= 0; --v) sum += std::exp(static_cast<long double>(row[v]) - mx);
      const int32_t next = tokens[static_cast<size_t>(c) * ctx + i + 1];
      nll -= static_cast<long double>(row[next]) - mx - std::log(sum);
      ++out.scored;
    }
  }
  out.ppl = static_cast<double>(std::exp(nll / out.scored));
  return out;
}

class Perplexity : public ::testing::Test {
 protected:
  void SetUp() override {
    SPECMOE_REQUIRE_DATA(kModel);
    SPECMOE_REQUIRE_DATA(kText);
    LoadOptions lo;
    lo.n_threads = 1;
    model_ = Model::load(specmoe::testing::data_path(kModel).string(), lo);
    text_ = read_text(kText);
    tokens_ = model_->tokenizer().encode(text_, true);
  }
  std::unique_ptr<Model> model_;
  std::string text_;
  std::vector<int32_t> tokens_;
};

// Both computations agree to double rounding: the same logits, summed in another order and
// precision (differences ~1e-15 relative; 1e-12 leaves room without hiding a wrong position).
constexpr double kRelTol = 1e-12;

TEST_F(Perplexity, ChunkCountsByHand) {
  // The story is 200 tokens; with BOS 201 (the vocabulary adds BOS).
  ASSERT_EQ(model_->tokenizer().encode(text_, false).size(), 200u);
  ASSERT_EQ(tokens_.size(), 201u);
  ASSERT_EQ(tokens_[0], model_->tokenizer().bos());
  struct Case {
    int ctx, chunks, scored;
  };
  // chunks = floor(201 / ctx); per chunk the positions ctx/2 .. ctx-2 (integer division):
  //   ctx 64: 3 chunks (192 tokens, 9 dropped), 32..62 = 31 each, 93;
  //   ctx 33: 6 chunks (198, 3 dropped), 16..31 = 16 each, 96;
  //   ctx 100: 2 chunks (200, 1 dropped), 50..98 = 49 each, 98;
  //   ctx 4: 50 chunks (200, 1 dropped), 2..2 = 1 each, 50.
  for (const Case c : {Case{64, 3, 93}, Case{33, 6, 96}, Case{100, 2, 98}, Case{4, 50, 50}}) {
    SCOPED_TRACE(c.ctx);
    std::vector<double> running;
    const PerplexityResult r =
        compute_perplexity(*model_, text_, c.ctx, [&](int chunk, double ppl) {
          EXPECT_EQ(chunk, static_cast<int>(running.size()));
          running.push_back(ppl);
        });
    EXPECT_EQ(r.n_tokens, 201);
    EXPECT_EQ(r.n_chunks, c.chunks);
    EXPECT_EQ(r.n_scored, c.scored);
    ASSERT_EQ(running.size(), static_cast<size_t>(c.chunks));
    EXPECT_EQ(r.chunk_ppl, running);
    EXPECT_DOUBLE_EQ(running.back(), r.perplexity);
    EXPECT_NEAR(r.mean_nll, std::log(r.perplexity), 1e-12);
    const Independent ref = independent_perplexity(*model_, tokens_, c.ctx, true);
    EXPECT_EQ(ref.chunks, c.chunks);
    EXPECT_EQ(ref.scored, c.scored);
    EXPECT_NEAR(r.perplexity, ref.ppl, kRelTol * ref.ppl);
    // Not vacuous: a trained model on its own greedy text is far below uniform (512) and above 1
    // (ctx 4 scores one position after just BOS and one token: ~55; ctx 64: ~1.85).
    EXPECT_GT(r.perplexity, 1.0);
    EXPECT_LT(r.perplexity, 128.0);
  }
}

TEST_F(Perplexity, EachChunkStartsWithBos) {
  const PerplexityResult r = compute_perplexity(*model_, text_, 64);
  const Independent with_bos = independent_perplexity(*model_, tokens_, 64, true);
  const Independent without = independent_perplexity(*model_, tokens_, 64, false);
  EXPECT_NEAR(r.perplexity, with_bos.ppl, kRelTol * with_bos.ppl);
  // Chunks 1 and 2 would start with their own token otherwise, which changes every logit after it.
  EXPECT_GT(std::fabs(r.perplexity - without.ppl), 1e-4 * without.ppl)
      << "BOS replacement makes no difference here: the check would not catch its absence";
}

TEST_F(Perplexity, TokensPastTheLastFullChunkAreDropped) {
  // More text that adds fewer than 64 tokens: still 3 chunks over the same 192 tokens, so the same
  // value to the last bit; the extra tokens are never scored.
  const std::string longer = text_ + " The end. They played all day.";
  const std::vector<int32_t> more = model_->tokenizer().encode(longer, true);
  ASSERT_GT(more.size(), tokens_.size());
  ASSERT_LT(more.size(), 256u);
  ASSERT_TRUE(std::equal(tokens_.begin(), tokens_.begin() + 192, more.begin()));
  const PerplexityResult a = compute_perplexity(*model_, text_, 64);
  const PerplexityResult b = compute_perplexity(*model_, longer, 64);
  EXPECT_EQ(b.n_tokens, static_cast<int>(more.size()));
  EXPECT_EQ(b.n_chunks, 3);
  EXPECT_EQ(a.perplexity, b.perplexity);
}

TEST_F(Perplexity, NeedsTwoContextsOfTokens) {
  // 201 tokens: ctx 100 needs 200 (runs), ctx 101 needs 202 (refused, naming both numbers).
  EXPECT_EQ(compute_perplexity(*model_, text_, 100).n_chunks, 2);
  try {
    compute_perplexity(*model_, text_, 101);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("201 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least 202"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compute_perplexity(*model_, text_, 3), Error);  // below the smallest scorable context
}

TEST(PerplexityFileText, DropsOneTrailingNewlineAsLlamaCppsDashF) {
  EXPECT_EQ(text_as_llama_reads_file("abc\n"), "abc");
  EXPECT_EQ(text_as_llama_reads_file("abc\n\n"), "abc\n");
  EXPECT_EQ(text_as_llama_reads_file("abc\r\n"), "abc\r");
  EXPECT_EQ(text_as_llama_reads_file("abc"), "abc");
  EXPECT_EQ(text_as_llama_reads_file("\n"), "");
  EXPECT_EQ(text_as_llama_reads_file(""), "");
  EXPECT_EQ(text_as_llama_reads_file("a\nb"), "a\nb");
}

// `specmoe perplexity -f` reads the file as llama-perplexity does. The story plus a newline is
// 202 tokens read verbatim (exactly 2 chunks of 101) and 201 as llama.cpp reads it, one short of
// 2 * 101: llama-perplexity refuses that file at -c 101 ("tokenizes to only 201 tokens"), and so
// must specmoe; with two newlines both see 202 tokens and score 2 chunks.
TEST_F(Perplexity, CliReadsTheFileAsLlamaCpp) {
  SPECMOE_REQUIRE_CLI();
  ASSERT_EQ(model_->tokenizer().encode(text_ + "\n", true).size(), 202u);
  ASSERT_EQ(model_->tokenizer().encode(text_ + "\n\n", true).size(), 203u);
  const auto dir = specmoe::testing::scratch_dir();
  const auto write = [&](const std::string& name, const std::string& body) {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << body;
    return path;
  };
  const std::string model = specmoe::testing::data_path(kModel).string();
  const auto one = specmoe::testing::run_cli(
      {"perplexity", "-m", model, "-f", write("ppl_one_newline.txt", text_ + "\n"), "-c", "101", "-t", "1"});
  EXPECT_NE(one.exit_code, 0) << one.describe();
  EXPECT_NE(one.err.find("201 tokens"), std::string::npos) << one.describe();
  const auto two = specmoe::testing::run_cli(
      {"perplexity", "-m", model, "-f", write("ppl_two_newlines.txt", text_ + "\n\n"), "-c", "101", "-t", "1"});
  ASSERT_EQ(two.exit_code, 0) << two.describe();
  EXPECT_NE(two.err.find("2 chunks of 101 tokens"), std::string::npos) << two.describe();
  EXPECT_NE(two.err.find("the text: 202 tokens"), std::string::npos) << two.describe();
  // The value is the in-process one of the text without its last newline, to the printed digits.
  const double ppl = compute_perplexity(*model_, text_ + "\n", 101).perplexity;
  EXPECT_NE(two.out.find(fmt::format("perplexity: {:.4f}", ppl)), std::string::npos) << two.describe() << ppl;
}

}  // namespace
}  // namespace specmoe::core
