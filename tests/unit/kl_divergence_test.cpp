// KL divergence in llama.cpp's log-probability file format (core/kl_divergence.h): the file's
// layout byte for byte, a model against its own base (zero up to the 16-bit codes), two models
// against each other (the statistics against a double-precision computation from both models'
// logits), and the clear errors for files that are not what they claim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli_runner.h"
#include "core/kl_divergence.h"
#include "core/model.h"
#include "core/perplexity.h"
#include "core/synth.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::scratch_dir;

namespace {

constexpr int kCtx = 32;

std::string synth_path(const std::string& preset, uint64_t seed = 11) {
  const std::string path = (scratch_dir() / ("kld_" + preset + "_" + std::to_string(seed) + ".gguf")).string();
  synth_write(synth_spec(preset), path, seed);
  return path;
}

std::unique_ptr<Model> load(const std::string& path) {
  LoadOptions o;
  o.n_threads = 2;
  o.cache_types = {DType::F32, DType::F32};
  return Model::load(path, o);
}

// ~200 byte tokens of varied text: 6 chunks of 32 with the tiny presets' byte vocabulary.
std::string text() {
  std::string t;
  for (int i = 0; i < 12; ++i) t += "The quick brown fox " + std::to_string(i * 37) + " jumps; ";
  return t;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// KL(P_base || P) per position in long double from the two models' own logits, with the file's
// one loss of information modelled: log-probabilities more than 16 below the row's maximum logit
// are stored as the row's floor, so the base's nll saturates there (random-weight models are
// confidently wrong: many targets sit below it) and p_base < e^-16 is left out of the sum.
struct Exact {
  double kld_mean = 0, ppl = 0, ppl_base = 0, same_top = 0;
  int n = 0;
};
Exact exact_kld(Model& base, Model& model, const std::vector<int32_t>& tokens, int n_chunk) {
  const int n_vocab = model.config().n_vocab;
  Exact e;
  long double kld = 0, nll = 0, nll_base = 0;
  int same = 0;
  for (int c = 0; c < n_chunk; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * kCtx, tokens.begin() + (c + 1) * kCtx);
    chunk[0] = model.tokenizer().bos();
    KVCache kb = base.new_cache(kCtx), km = model.new_cache(kCtx);
    const std::vector<float> lb = base.forward(chunk, kb).logits.to_host();
    const std::vector<float> lm = model.forward(chunk, km).logits.to_host();
    for (int i = kCtx / 2; i <= kCtx - 2; ++i) {
      const float* rb = &lb[static_cast<size_t>(i) * n_vocab];
      const float* rm = &lm[static_cast<size_t>(i) * n_vocab];
      long double zb = 0, zm = 0, mb = rb[0], mm = rm[0];
      int ab = 0, am = 0;
      for (int v = 1; v < n_vocab; ++v) {
        if (rb[v] > mb) mb = rb[v], ab = v;
        if (rm[v] > mm) mm = rm[v], am = v;
      }
      long double min_b = rb[0];
      for (int v = 0; v < n_vocab; ++v) {
        zb += std::exp(rb[v] - mb), zm += std::exp(rm[v] - mm);
        min_b = std::min<long double>(min_b, rb[v]);
      }
      min_b = std::max(min_b, mb - 16);
      const long double floor_b = min_b - mb - std::log(zb);
      for (int v = 0; v < n_vocab; ++v) {
        const long double lpb = rb[v] - mb - std::log(zb), lpm = rm[v] - mm - std::log(zm);
        if (rb[v] > min_b && lpb > -16) kld += std::exp(lpb) * (lpb - lpm);
      }
      const int next = tokens[static_cast<size_t>(c) * kCtx + i + 1];
      nll -= rm[next] - mm - std::log(zm);
      nll_base -= std::max(rb[next] - mb - std::log(zb), floor_b);
      same += ab == am;
      ++e.n;
    }
  }
  e.kld_mean = static_cast<double>(kld / e.n);
  e.ppl = static_cast<double>(std::exp(nll / e.n));
  e.ppl_base = static_cast<double>(std::exp(nll_base / e.n));
  e.same_top = static_cast<double>(same) / e.n;
  return e;
}

TEST(KLDivergence, FileLayoutIsLlamaCpps) {
  auto m = load(synth_path("tiny"));
  const std::string path = (scratch_dir() / "kld_layout.kld").string();
  LogProbWriter w(path);
  const PerplexityResult p = compute_perplexity(*m, text(), kCtx, {}, &w);
  const int n_vocab = m->config().n_vocab;  // 320: even, so no padding entry
  ASSERT_GE(p.n_chunks, 4);
  const std::string bytes = read_bytes(path);
  const size_t nv = static_cast<size_t>(2 * ((n_vocab + 1) / 2) + 4);
  const size_t per_chunk = static_cast<size_t>(kCtx - 1 - kCtx / 2);
  ASSERT_EQ(bytes.size(), 8 + 12 + 4 * static_cast<size_t>(p.n_chunks) * kCtx + p.n_chunks * per_chunk * nv * 2);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  uint32_t ctx = 0;
  int32_t vocab = 0, chunks = 0;
  std::memcpy(&ctx, bytes.data() + 8, 4);
  std::memcpy(&vocab, bytes.data() + 12, 4);
  std::memcpy(&chunks, bytes.data() + 16, 4);
  EXPECT_EQ(ctx, static_cast<uint32_t>(kCtx));
  EXPECT_EQ(vocab, n_vocab);
  EXPECT_EQ(chunks, p.n_chunks);
  // The text's own tokens, BOS first (the file keeps the tokens; BOS replaces each chunk's first
  // only when scoring).
  const std::vector<int32_t> tokens = m->tokenizer().encode(text(), true);
  std::vector<int32_t> stored(static_cast<size_t>(chunks) * kCtx);
  std::memcpy(stored.data(), bytes.data() + 20, stored.size() * 4);
  EXPECT_EQ(stored, std::vector<int32_t>(tokens.begin(), tokens.begin() + stored.size()));
  // First record: decoding the correct token's code gives the model's nll to within a code step,
  // or the row's floor (16 below the maximum logit) when the token's logit lies below it.
  const char* rec = bytes.data() + 20 + stored.size() * 4;
  float scale = 0, min_log_prob = 0;
  std::memcpy(&scale, rec, 4);
  std::memcpy(&min_log_prob, rec + 4, 4);
  EXPECT_GT(scale, 0.f);
  EXPECT_LE(scale, 16.f / 65535.f + 1e-9f);
  std::vector<int32_t> chunk(tokens.begin(), tokens.begin() + kCtx);
  KVCache kv = m->new_cache(kCtx);
  const std::vector<float> logits = m->forward(chunk, kv).logits.to_host();
  std::vector<uint16_t> mine(nv);
  const float nll = encode_log_probs(&logits[static_cast<size_t>(kCtx / 2) * n_vocab], n_vocab, tokens[kCtx / 2 + 1],
                                     mine.data());
  EXPECT_EQ(std::memcmp(mine.data(), rec, nv * 2), 0);
  uint16_t code = 0;
  std::memcpy(&code, rec + 8 + 2 * tokens[kCtx / 2 + 1], 2);
  EXPECT_NEAR(-(scale * code + min_log_prob), std::min(nll, -min_log_prob), scale);
}

TEST(KLDivergence, AgainstItselfIsZeroUpToTheCodes) {
  auto m = load(synth_path("tiny"));
  const std::string path = (scratch_dir() / "kld_self.kld").string();
  LogProbWriter w(path);
  const PerplexityResult p = compute_perplexity(*m, text(), kCtx, {}, &w);
  std::vector<double> running;
  const KLDivergenceResult r = compute_kl_divergence(*m, path, [&](int, double k) { running.push_back(k); });
  EXPECT_EQ(r.n_chunks, p.n_chunks);
  EXPECT_EQ(r.n_scored, p.n_scored);
  EXPECT_EQ(running.size(), static_cast<size_t>(p.n_chunks));
  EXPECT_NEAR(r.ppl, p.perplexity, 1e-5 * p.perplexity);
  // PPL_base: the same nll, saturated at each row's floor (see exact_kld), to a code step.
  const Exact e = exact_kld(*m, *m, m->tokenizer().encode(text(), true), p.n_chunks);
  EXPECT_NEAR(r.ppl_base, e.ppl_base, 2.5e-4 * e.ppl_base);
  EXPECT_EQ(e.kld_mean, 0.0);
  // A code step is at most 16/65535 in log-probability, so each position's divergence is within
  // half a step of zero.
  EXPECT_LT(std::fabs(r.kld_mean), 1e-5);
  EXPECT_LT(r.kld_max, 1.3e-4);
  EXPECT_LT(r.p_diff_rms, 1e-4);
  EXPECT_GE(r.same_top, 0.99);
}

TEST(KLDivergence, TwoModelsMatchTheExactDivergence) {
  // Base: the F32 preset; compared: the same weights in Q4_0 (a real, small divergence).
  auto base = load(synth_path("tiny"));
  auto q = load(synth_path("tiny-q4_0"));
  const std::string path = (scratch_dir() / "kld_two.kld").string();
  LogProbWriter w(path);
  const PerplexityResult pb = compute_perplexity(*base, text(), kCtx, {}, &w);
  const KLDivergenceResult r = compute_kl_divergence(*q, path);
  const PerplexityResult pq = compute_perplexity(*q, text(), kCtx);
  const Exact e = exact_kld(*base, *q, base->tokenizer().encode(text(), true), pb.n_chunks);
  ASSERT_EQ(e.n, r.n_scored);
  EXPECT_GT(e.kld_mean, 1e-5) << "the two models agree: the comparison would not catch a wrong KLD";
  EXPECT_NEAR(r.kld_mean, e.kld_mean, 1e-3 * e.kld_mean + 2e-7);
  EXPECT_NEAR(r.ppl, pq.perplexity, 1e-5 * pq.perplexity);
  EXPECT_NEAR(r.ppl, e.ppl, 1e-5 * e.ppl);
  EXPECT_NEAR(r.ppl_base, e.ppl_base, 2.5e-4 * e.ppl_base);
  EXPECT_NEAR(r.ln_ppl_ratio, std::log(e.ppl / e.ppl_base), 2.5e-4);
  EXPECT_NEAR(r.same_top, e.same_top, 2.0 / e.n);
  EXPECT_LE(r.kld_median, r.kld_p99);
  EXPECT_LE(r.kld_p99, r.kld_max);
  EXPECT_GT(r.p_diff_rms, 0.0);
}

TEST(KLDivergence, BadFilesAreOneClearError) {
  auto m = load(synth_path("tiny"));
  const std::string good = (scratch_dir() / "kld_good.kld").string();
  LogProbWriter w(good);
  compute_perplexity(*m, text(), kCtx, {}, &w);
  const std::string bytes = read_bytes(good);
  const auto expect_error = [&](const std::string& name, const std::string& body, const std::string& needle) {
    SCOPED_TRACE(name);
    const std::string path = (scratch_dir() / name).string();
    write_bytes(path, body);
    try {
      compute_kl_divergence(*m, path);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("kld_magic.kld", "_logitz_" + bytes.substr(8), "not a log-probability file");
  expect_error("kld_short.kld", bytes.substr(0, bytes.size() - 7), "truncated");
  expect_error("kld_header.kld", bytes.substr(0, 14), "truncated");
  std::string vocab = bytes;
  const int32_t other = 321;
  std::memcpy(vocab.data() + 12, &other, 4);
  expect_error("kld_vocab.kld", vocab, "vocabulary of 321 tokens");
  std::string token = bytes;
  const int32_t bad = 9999;
  std::memcpy(token.data() + 20 + 4 * 5, &bad, 4);
  expect_error("kld_token.kld", token, "outside the vocabulary");
  // A header that promises 2^28 tokens (1 GiB of ids, and their records) in a file of a few KB:
  // refused from the file's size before anything of that size is allocated.
  std::string huge = bytes;
  const uint32_t ctx = 1u << 20, chunks = 256;
  std::memcpy(huge.data() + 8, &ctx, 4);
  std::memcpy(huge.data() + 16, &chunks, 4);
  expect_error("kld_huge.kld", huge, "its header promises 256 chunks of 1048576 tokens");
  EXPECT_THROW(compute_kl_divergence(*m, (scratch_dir() / "kld_missing.kld").string()), Error);
}

TEST(KLDivergence, CliWritesAndReads) {
  SPECMOE_REQUIRE_CLI();
  const std::string model = synth_path("tiny");
  const std::string txt = (scratch_dir() / "kld_cli.txt").string();
  write_bytes(txt, text() + "\n");
  const std::string base = (scratch_dir() / "kld_cli.kld").string();
  const auto write = specmoe::testing::run_cli(
      {"perplexity", "-m", model, "-f", txt, "-c", "32", "-t", "1", "--kl-divergence-base", base, "-ctk", "f32", "-ctv", "f32"});
  ASSERT_EQ(write.exit_code, 0) << write.describe();
  EXPECT_NE(write.out.find("perplexity: "), std::string::npos) << write.describe();
  const auto read = specmoe::testing::run_cli(
      {"perplexity", "-m", model, "-t", "1", "--kl-divergence", "--kl-divergence-base", base, "-ctk", "f32", "-ctv", "f32"});
  ASSERT_EQ(read.exit_code, 0) << read.describe();
  const size_t at = read.out.find("kld_mean: ");
  ASSERT_NE(at, std::string::npos) << read.describe();
  EXPECT_LT(std::fabs(std::stod(read.out.substr(at + 10))), 1e-5) << read.describe();
  EXPECT_NE(read.out.find("same_top: "), std::string::npos) << read.describe();
  const auto no_base = specmoe::testing::run_cli({"perplexity", "-m", model, "--kl-divergence"});
  EXPECT_NE(no_base.exit_code, 0);
  EXPECT_NE(no_base.err.find("--kl-divergence-base"), std::string::npos) << no_base.describe();
  const auto both = specmoe::testing::run_cli(
      {"perplexity", "-m", model, "-f", txt, "--kl-divergence", "--kl-divergence-base", base});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("leave out -f"), std::string::npos) << both.describe();
}

}  // namespace
