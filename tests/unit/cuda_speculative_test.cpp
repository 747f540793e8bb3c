// Speculative decoding on a CUDA device over the one seam: the verifier chosen by name and by
// where the target's distributions live (verify/registry.h), the device rule (kernels/cuda
// speculative.cu) against the host rule with the same uniforms, the device draws against the CPU
// backend's, and the whole loop on a GPU target (lossless at temperature 1 and 0.7 / top-p 0.9,
// same seed same tokens, undrafted steps equal to the baseline, greedy identity, and the same
// tokens as the CPU loop for the same seed except where the two backends' probabilities differ at
// a draw). GPU tests skip without a device (GTEST_SKIP); the host-side contracts run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "base/error.h"
#include "core/backend.h"
#include "core/environment.h"
#include "core/logits_processors.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "host_rows.h"
#include "lossless.h"
#include "require_cuda.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"
#ifdef SPECMOE_HAVE_CUDA
#include "core/backend_cuda.h"
#include "cuda_device_array.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#endif

namespace specmoe {
namespace {

using Tokens = std::vector<int32_t>;

// ---------------------------------------------------------------------------------------------
// Host-side contracts (every machine).

TEST(VerifierSelection, OneNamePerRuleAnImplementationPerDevice) {
  const Device cpu, cuda{Device::Kind::Cuda, 0};
  EXPECT_EQ(verify::make_verifier("speculative", {cpu})->name(), "speculative");
  EXPECT_EQ(verify::make_verifier("greedy", {cuda})->name(), "greedy");  // one implementation for both
#ifndef SPECMOE_HAVE_CUDA
  try {
    verify::make_verifier("speculative", {cuda});
    FAIL() << "a CUDA verifier in a build without CUDA";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
#else
  EXPECT_EQ(verify::make_verifier("speculative", {cuda})->name(), "speculative");
#endif
}

TEST(VerifierSelection, HostRuleVerifiesHostRows) {
  // The host rule verifies host rows (the registry hands out the CUDA rule for CUDA rows); for
  // one-hot rows its result is the greedy one.
  const std::vector<std::vector<float>> p = {{0.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 1.0f}};
  draft::Draft d;
  d.one_hot = true;
  d.tokens = {1};
  core::Rng rng(1);
  const verify::VerifyResult r = verify::SpeculativeVerifier().verify(d, testing::HostRows(p), rng);
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.next_token, 2);
  EXPECT_EQ(rng.counter(), 1u) << "certain tests draw nothing: one uniform, the bonus token's draw";
}

// The CUDA backend applies the penalties from host-made lists (core::penalized_tokens,
// core::banned_tokens) to its copy of the logits; the lists must apply exactly what the CPU
// processors apply (checked here, on the host, for random histories).
TEST(PenaltyLists, ApplyExactlyWhatTheCpuProcessorsApply) {
  std::mt19937 gen(9);
  for (int trial = 0; trial < 200; ++trial) {
    const int V = 40;
    std::vector<int32_t> history(1 + gen() % 60);
    for (auto& t : history) t = static_cast<int32_t>(gen() % 12);  // repeats, so n-grams recur
    std::vector<float> logits(V);
    for (auto& l : logits) l = static_cast<float>(static_cast<int>(gen() % 200) - 100) / 10.0f;
    const int last_n = static_cast<int>(gen() % 3) == 0 ? -1 : static_cast<int>(gen() % 70);
    const int n = static_cast<int>(gen() % 4);
    std::vector<float> want = logits, got = logits;
    core::apply_repetition_penalty(want, history, 1.3f, last_n);
    core::apply_no_repeat_ngram(want, history, n);
    for (int32_t t : core::penalized_tokens(history, last_n)) got[t] = got[t] > 0.0f ? got[t] / 1.3f : got[t] * 1.3f;
    for (int32_t t : core::banned_tokens(history, n)) got[t] = -INFINITY;
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

#ifdef SPECMOE_HAVE_CUDA
std::string synth_file(const std::string& preset, uint64_t seed) {
  const std::string name = "cuda-spec-" + preset + "-" + std::to_string(seed) + ".gguf";
  const std::string path = (testing::scratch_dir() / name).string();
  core::synth_write(core::synth_spec(preset), path, seed);
  return path;
}

std::unique_ptr<core::Model> load(const std::string& path, const std::string& device) {
  core::LoadOptions o;
  o.n_threads = 1;
  o.device = device;
  o.cache_types = {DType::F32, DType::F32};  // CPU and GPU token agreement as recorded with f32 caches
  return core::Model::load(path, o);
}

namespace cu = kernels::cuda;
using testing::chi2_critical_0001;
using testing::ChiSquare;
using testing::DeviceArray;
using testing::pooled_chi_square;

// ---------------------------------------------------------------------------------------------
// The device rule and draws on hand-built distributions.

// A random distribution over n ids with some exact zeros (so residuals and supports differ).
std::vector<float> random_distribution(std::mt19937& gen, int n) {
  std::gamma_distribution<double> g(0.7, 1.0);
  std::vector<double> w(n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    w[i] = (i % 7 == 3) ? 0.0 : g(gen);
    sum += w[i];
  }
  std::vector<float> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<float>(w[i] / sum);
  return p;
}

int32_t draw(const std::vector<float>& p, std::mt19937& gen) {
  std::discrete_distribution<int32_t> d(p.begin(), p.end());
  return d(gen);
}

std::vector<float> concat(const std::vector<std::vector<float>>& rows) {
  std::vector<float> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

class CudaVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    SPECMOE_REQUIRE_CUDA();
    ctx_ = std::make_unique<cu::Context>(0);
  }
  struct Result {
    int n_accepted;
    int32_t next;
    int used;
  };
  // One verification with g + 2 uniforms from a copy of rng; rng advances by the uniforms used.
  Result verify(const DeviceArray<float>& p, const DeviceArray<float>* q, const Tokens& draft, int64_t n,
                core::Rng& rng) {
    core::Rng probe = rng;
    std::vector<double> u(draft.size() + 2);
    for (double& v : u) v = probe.uniform();
    DeviceArray<int32_t> d(*ctx_, draft);
    DeviceArray<double> du(*ctx_, u);
    DeviceArray<int32_t> result(*ctx_, size_t{3});
    cu::speculative_verify(*ctx_, p.ptr(), q ? q->ptr() : nullptr, d.ptr(), static_cast<int>(draft.size()), n,
                           du.ptr(), result.ptr());
    const std::vector<int32_t> r = result.get(*ctx_);
    for (int i = 0; i < r[2]; ++i) rng.uniform();
    return {r[0], r[1], r[2]};
  }
  std::unique_ptr<cu::Context> ctx_;
  std::mt19937 gen_{1234};
};

// Same significance and power reasoning as verifier_test.cpp: 20,000 trials, chi-square at 0.001
// over the pooled cells; the counts must fail against q (the draft's distribution), which is at
// total variation > 0.2 from p here, so the test can fail.
constexpr int kTrials = 20000;

TEST_F(CudaVerify, FirstTokenIsDistributedAsTheTargetG3) {
  const int n = 37, g = 3;
  std::vector<std::vector<float>> p(g + 1), q(g);
  for (auto& r : p) r = random_distribution(gen_, n);
  for (auto& r : q) r = random_distribution(gen_, n);
  DeviceArray<float> dp(*ctx_, concat(p)), dq(*ctx_, concat(q));
  std::map<size_t, int64_t> counts;
  int64_t accepted = 0;
  core::Rng rng(31);
  for (int t = 0; t < kTrials; ++t) {
    Tokens draft(g);
    for (int i = 0; i < g; ++i) draft[i] = draw(q[i], gen_);
    const Result r = verify(dp, &dq, draft, n, rng);
    ASSERT_TRUE(r.n_accepted >= 0 && r.n_accepted <= g);
    ASSERT_TRUE(r.next >= 0 && r.next < n);
    ++counts[static_cast<size_t>(r.n_accepted > 0 ? draft[0] : r.next)];
    accepted += r.n_accepted;
  }
  const std::vector<double> want(p[0].begin(), p[0].end());
  const ChiSquare cs = pooled_chi_square(counts, want, kTrials);
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "df " << cs.df;
  const ChiSquare against_q = pooled_chi_square(counts, std::vector<double>(q[0].begin(), q[0].end()), kTrials);
  EXPECT_GT(against_q.stat + static_cast<double>(against_q.impossible), chi2_critical_0001(against_q.df));
  EXPECT_GT(accepted, 0);
}

// The joint of the first two tokens with g = 2 and position-independent rows p0, p1: after a
// rejection at position 0 the second token comes from the next step, i.e. from p1 (drawn here).
TEST_F(CudaVerify, JointOfTwoTokensIsTheTargetsG2) {
  const int n = 11, g = 2;
  std::vector<std::vector<float>> p(g + 1), q(g);
  for (auto& r : p) r = random_distribution(gen_, n);
  for (auto& r : q) r = random_distribution(gen_, n);
  DeviceArray<float> dp(*ctx_, concat(p)), dq(*ctx_, concat(q));
  std::map<size_t, int64_t> counts;
  core::Rng rng(32);
  for (int t = 0; t < kTrials; ++t) {
    Tokens draft = {draw(q[0], gen_), draw(q[1], gen_)};
    const Result r = verify(dp, &dq, draft, n, rng);
    const int32_t t1 = r.n_accepted >= 1 ? draft[0] : r.next;
    const int32_t t2 = r.n_accepted >= 2 ? draft[1] : (r.n_accepted == 1 ? r.next : draw(p[1], gen_));
    ++counts[static_cast<size_t>(t1) * n + t2];
  }
  std::vector<double> want(static_cast<size_t>(n) * n);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) want[static_cast<size_t>(a) * n + b] = static_cast<double>(p[0][a]) * p[1][b];
  const ChiSquare cs = pooled_chi_square(counts, want, kTrials);
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_GE(cs.df, 20);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "df " << cs.df;
}

// The same uniforms give the same verdict on the device as on the host (SpeculativeVerifier),
// and consume the same number of them: CPU and GPU draw in one layout. Only a uniform within
// rounding of a boundary could tell the two summation orders apart (never, in practice, at these
// sizes: the test requires every trial to agree).
TEST_F(CudaVerify, SameUniformsSameVerdictAsTheHostRule) {
  const int n = 4099, g = 4;  // not a multiple of the block size
  const verify::SpeculativeVerifier host;
  int agree = 0, trials = 0;
  for (int t = 0; t < 200; ++t) {
    std::vector<std::vector<float>> p(g + 1), q(g);
    for (auto& r : p) r = random_distribution(gen_, n);
    for (auto& r : q) r = t % 2 ? random_distribution(gen_, n) : p[&r - &q[0]];  // q = p half the time
    Tokens draft(g);
    for (int i = 0; i < g; ++i) draft[i] = draw(q[i], gen_);
    DeviceArray<float> dp(*ctx_, concat(p)), dq(*ctx_, concat(q));
    core::Rng a(100 + t), b(100 + t);
    const Result dev = verify(dp, &dq, draft, n, a);
    draft::Draft d;
    d.tokens = draft;
    const testing::HostRows qr(q), pr(p);
    d.q = qr;
    const verify::VerifyResult want = host.verify(d, pr, b);
    ++trials;
    agree += dev.n_accepted == want.n_accepted && dev.next == want.next_token && a.counter() == b.counter();
  }
  std::printf("device vs host speculative rule, same uniforms: %d / %d trials agree\n", agree, trials);
  EXPECT_EQ(agree, trials);
}

// Certain outcomes: one-hot p and q give exactly the greedy rule and draw no uniform for the tests.
TEST_F(CudaVerify, CertainOutcomesMatchTheGreedyRule) {
  const int n = 4099, g = 4;
  std::uniform_int_distribution<int32_t> id(0, n - 1);
  for (int t = 0; t < 50; ++t) {
    Tokens target(g + 1), draft(g);
    for (auto& x : target) x = id(gen_);
    const int agree = t % (g + 1);  // the first `agree` draft tokens match the target's argmax
    for (int i = 0; i < g; ++i) draft[i] = i < agree ? target[i] : (target[i] + 1 + id(gen_) % (n - 1)) % n;
    std::vector<std::vector<float>> p(g + 1, std::vector<float>(n, 0.0f)), q(g, std::vector<float>(n, 0.0f));
    for (int i = 0; i <= g; ++i) p[i][target[i]] = 1.0f;
    for (int i = 0; i < g; ++i) q[i][draft[i]] = 1.0f;
    DeviceArray<float> dp(*ctx_, concat(p)), dq(*ctx_, concat(q));
    const verify::VerifyResult want = verify::verify_greedy_argmax(draft, target);
    using RowsPtr = const DeviceArray<float>*;
    for (RowsPtr qq : {static_cast<RowsPtr>(&dq), static_cast<RowsPtr>(nullptr)}) {  // q rows, then one-hot
      core::Rng rng(3);
      const Result r = verify(dp, qq, draft, n, rng);
      EXPECT_EQ(r.n_accepted, want.n_accepted) << "trial " << t;
      EXPECT_EQ(r.next, want.next_token) << "trial " << t;
      EXPECT_EQ(r.used, 1) << "only the emitted token's draw";
    }
  }
  EXPECT_THROW(cu::speculative_verify(*ctx_, nullptr, nullptr, nullptr, 0, 4, nullptr, nullptr), Error);
}

// The device draws against the CPU backend's with the same uniform: sample() and a drafter's
// draw() (vocabulary narrowing and widening, no mass, greedy and sampled confidence).
TEST_F(CudaVerify, DeviceDrawsEqualTheCpuBackendsDraws) {
  auto gpu = core::make_backend(Device{Device::Kind::Cuda, 0});
  auto cpu = core::make_backend(Device{}, 1);
  core::SamplingParams sampled, greedy;
  sampled.temperature = 1.0f;
  greedy.temperature = 0.0f;
  for (int t = 0; t < 100; ++t) {
    const int n = 1 + static_cast<int>(gen_() % 3000), n_out = t % 3 == 0 ? n : 1 + static_cast<int>(gen_() % 3000);
    const std::vector<float> probs = random_distribution(gen_, n);
    std::vector<float> logits(n);
    for (auto& l : logits) l = static_cast<float>(std::normal_distribution<double>(0, 2)(gen_));
    const double u = std::uniform_real_distribution<double>(0, 1)(gen_);
    for (const core::SamplingParams* sp : {&sampled, &greedy}) {
      DeviceArray<float> dprobs(cuda_context(*gpu), probs), dlogits(cuda_context(*gpu), logits),
          dq(cuda_context(*gpu), static_cast<size_t>(n_out));
      std::vector<float> q(static_cast<size_t>(n_out));
      const core::Draw want = cpu->draw(probs.data(), n, q.data(), n_out, *sp, u, logits.data());
      const core::Draw got = gpu->draw(dprobs.ptr(), n, dq.ptr(), n_out, *sp, u, dlogits.ptr());
      EXPECT_EQ(got.token, want.token) << "n " << n << " n_out " << n_out << " greedy " << sp->greedy();
      EXPECT_NEAR(got.confidence, want.confidence, 1e-5) << "n " << n;
      const std::vector<float> dq_host = dq.get(cuda_context(*gpu));
      for (int i = 0; i < n_out; ++i) ASSERT_NEAR(dq_host[i], q[i], 1e-6) << i;
      if (want.token >= 0) {
        EXPECT_EQ(gpu->sample(dq.ptr(), n_out, *sp, u), cpu->sample(q.data(), n_out, *sp, u));
      }
    }
  }
  // No mass on the target's ids: nothing drawn on either backend.
  const std::vector<float> tail = {0.0f, 0.0f, 1.0f};
  DeviceArray<float> dt(cuda_context(*gpu), tail), dq(cuda_context(*gpu), size_t{2});
  std::vector<float> q(2);
  EXPECT_EQ(cpu->draw(tail.data(), 3, q.data(), 2, sampled, 0.5, nullptr).token, -1);
  EXPECT_EQ(gpu->draw(dt.ptr(), 3, dq.ptr(), 2, sampled, 0.5, nullptr).token, -1);
}

// ---------------------------------------------------------------------------------------------
// The whole loop on a GPU target.

class CudaSpeculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (core::cuda_device_count() == 0) return;
    target_ = load(synth_file("tiny", 7), "cuda");
    draft_ = load(synth_file("tiny-draft", 7), "cuda");
  }
  static void TearDownTestSuite() {
    target_.reset();
    draft_.reset();
  }
  void SetUp() override { SPECMOE_REQUIRE_CUDA(); }
  static inline std::unique_ptr<core::Model> target_, draft_;
};

// The logits stay on the device: the view says so, and its argmax and host copy agree.
TEST_F(CudaSpeculative, LogitsLiveOnTheDevice) {
  const Tokens ids = {1, 72, 105, 33, 200};
  core::KVCache a = target_->new_cache(16);
  const core::ForwardResult f = target_->forward(ids, a);
  EXPECT_EQ(f.logits.where().name(), "cuda:0");
  EXPECT_EQ(f.logits.rows, static_cast<int64_t>(ids.size()));
  const std::vector<float> host = f.logits.to_host();
  const std::vector<int32_t> ids_max = f.logits.argmax();
  const int V = target_->config().n_vocab;
  for (size_t r = 0; r < ids.size(); ++r)
    EXPECT_EQ(ids_max[r], core::argmax(std::span<const float>(host.data() + r * V, static_cast<size_t>(V))));
  EXPECT_EQ(a.size(), 5);
}

TEST_F(CudaSpeculative, LosslessAtTemperatureOne) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 21;
  testing::check_lossless(*target_, *draft_, sp, /*power_check=*/true);
}

TEST_F(CudaSpeculative, LosslessAtTemperature07TopP09) {
  core::SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 0;
  sp.top_p = 0.9f;
  sp.min_p = 0.0f;
  sp.seed = 22;
  testing::check_lossless(*target_, *draft_, sp, /*power_check=*/true);
}

// The cases of speculative_test.cpp on the device: the bonus token with draft_max 1, top-k and
// min-p, and the penalties (applied on the device from host-made token lists).
TEST_F(CudaSpeculative, LosslessBonusTopKMinPAndPenalties) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 23;
  testing::check_lossless(*target_, *draft_, sp, testing::LosslessCase{1, true});
  sp.temperature = 0.9f;
  sp.top_k = 12;
  sp.min_p = 0.02f;
  sp.seed = 24;
  testing::check_lossless(*target_, *draft_, sp, true);
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.5f;
  sp.no_repeat_ngram = 1;
  sp.seed = 25;
  testing::check_lossless(*target_, *draft_, sp, testing::LosslessCase{2, true});
}

// A reduced draft vocabulary on the device (speculative_test.cpp's case): the head's first rows
// equal the full head's first columns (cuBLAS computes each output row alone: same values, to
// the GEMM's tolerance), and the loop stays lossless with 160 of 320 ids.
TEST_F(CudaSpeculative, ReducedDraftVocabularyHeadAndLossless) {
  // Device GEMMs may sum in another order than the full head's: a tolerance, not bit equality.
  testing::expect_head_prefix(*draft_, {1, 72, 105, 33, 200}, 100, 1e-4f, "CUDA head of 100");
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 26;
  testing::check_lossless(*target_, *draft_, sp, testing::LosslessCase{3, true, 160});
}

TEST_F(CudaSpeculative, SameSeedSameTokensAndUndraftedStepsEqualTheBaseline) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 5;
  const auto spec = verify::make_verifier("speculative", {target_->device()});
  const Tokens prompt = target_->tokenizer().encode("Once upon a time", true);
  verify::DecodeOptions o;
  o.max_tokens = 30;
  o.draft_max = 3;
  o.stop_at_eog = false;
  auto run = [&](uint64_t stream) {
    draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
    verify::SpeculativeDecoder dec(*target_, drafter, *spec, sp, o);
    return dec.generate(prompt, stream);
  };
  const verify::GenerationResult a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.metrics.n_accepted, b.metrics.n_accepted);
  EXPECT_EQ(a.tokens.size(), 30u);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_GT(a.metrics.n_drafted, 0);

  // No drafting (draft_max 0): every step is a plain step, which must sample exactly as the
  // baseline does.
  verify::DecodeOptions never = o;
  never.draft_max = 0;
  draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
  verify::SpeculativeDecoder dec(*target_, drafter, *spec, sp, never);
  const verify::GenerationResult plain = dec.generate(prompt, 9);
  const verify::GenerationResult base = verify::generate_autoregressive(*target_, prompt, sp, never, 9);
  EXPECT_EQ(plain.metrics.n_drafted, 0);
  EXPECT_EQ(plain.tokens, base.tokens);
}

// The same seed and stream on the CPU and on the GPU: the same uniforms at the same draws, so the
// tokens agree unless a uniform falls where the two backends' probabilities (summed in different
// orders) disagree. Reported, and required for nearly every generation.
TEST_F(CudaSpeculative, CpuAndGpuGiveTheSameTokensForTheSameSeed) {
  auto cpu_target = load(synth_file("tiny", 7), "cpu");
  auto cpu_draft = load(synth_file("tiny-draft", 7), "cpu");
  core::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.seed = 77;
  verify::DecodeOptions o;
  o.max_tokens = 24;
  o.draft_max = 3;
  o.stop_at_eog = false;
  o.cost_probe_forwards = 0;
  const Tokens prompt = target_->tokenizer().encode("The little dog", true);
  const auto v_gpu = verify::make_verifier("speculative", {target_->device()});
  const auto v_cpu = verify::make_verifier("speculative", {cpu_target->device()});
  int same = 0, same_tokens = 0, total_tokens = 0;
  const int streams = 40;
  for (int s = 0; s < streams; ++s) {
    draft::ModelDrafter dg(draft_.get(), target_->config().n_vocab, -1, 64);
    draft::ModelDrafter dc(cpu_draft.get(), cpu_target->config().n_vocab, -1, 64);
    verify::SpeculativeDecoder gpu_loop(*target_, dg, *v_gpu, sp, o), cpu_loop(*cpu_target, dc, *v_cpu, sp, o);
    const Tokens a = gpu_loop.generate(prompt, s).tokens, b = cpu_loop.generate(prompt, s).tokens;
    same += a == b;
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    same_tokens += static_cast<int>(i);
    total_tokens += static_cast<int>(b.size());
    const Tokens ar_gpu = verify::generate_autoregressive(*target_, prompt, sp, o, s).tokens;
    const Tokens ar_cpu = verify::generate_autoregressive(*cpu_target, prompt, sp, o, s).tokens;
    same += ar_gpu == ar_cpu;
  }
  std::printf("CPU vs GPU, same seed: %d / %d generations identical; speculative prefix agreement %d / %d tokens\n",
              same, 2 * streams, same_tokens, total_tokens);
  EXPECT_GE(same, 2 * streams * 9 / 10);
}

TEST_F(CudaSpeculative, DeviceLoopAtTemperatureZeroEqualsGreedyDecoding) {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  // not the greedy verifier: the speculative rule with one-hot p, q on the device
  const auto spec = verify::make_verifier("speculative", {target_->device()});
  verify::DecodeOptions o;
  o.max_tokens = 32;
  o.draft_max = 4;
  o.stop_at_eog = false;
  for (const char* text : {"Once upon a time", "abcabcabc"}) {
    const Tokens prompt = target_->tokenizer().encode(text, true);
    const verify::GenerationResult ar = verify::generate_autoregressive(*target_, prompt, sp, o, 0);
    draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
    verify::SpeculativeDecoder dec(*target_, drafter, *spec, sp, o);
    const verify::GenerationResult sd = dec.generate(prompt, 0);
    EXPECT_EQ(sd.tokens, ar.tokens) << text;
    draft::NgramDrafter ngram(1, 3);
    verify::SpeculativeDecoder dec2(*target_, ngram, *spec, sp, o);
    EXPECT_EQ(dec2.generate(prompt, 0).tokens, ar.tokens) << text << " n-gram (one-hot drafts)";
    // With penalties too: the device applies the host-made lists.
    core::SamplingParams pen = sp;
    pen.repeat_penalty = 1.3f;
    pen.no_repeat_ngram = 3;
    const verify::GenerationResult ar_pen = verify::generate_autoregressive(*target_, prompt, pen, o, 0);
    draft::ModelDrafter drafter2(draft_.get(), target_->config().n_vocab, -1, 256);
    verify::SpeculativeDecoder dec3(*target_, drafter2, *spec, pen, o);
    EXPECT_EQ(dec3.generate(prompt, 0).tokens, ar_pen.tokens) << text << " with penalties";
  }
}

// A draft model on the CPU drafting for a GPU target: q is copied to where p lives.
TEST_F(CudaSpeculative, DraftOnTheHostForATargetOnTheDevice) {
  auto cpu_draft = load(synth_file("tiny-draft", 7), "cpu");
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  const auto spec = verify::make_verifier("speculative", {target_->device()});
  verify::DecodeOptions o;
  o.max_tokens = 20;
  o.draft_max = 3;
  o.stop_at_eog = false;
  const Tokens prompt = target_->tokenizer().encode("Once upon a time", true);
  draft::ModelDrafter drafter(cpu_draft.get(), target_->config().n_vocab, -1, 64);
  verify::SpeculativeDecoder dec(*target_, drafter, *spec, sp, o);
  const verify::GenerationResult r = dec.generate(prompt, 0);
  EXPECT_EQ(r.tokens, verify::generate_autoregressive(*target_, prompt, sp, o, 0).tokens);
  EXPECT_GT(r.metrics.n_accepted, 0);
}
#endif  // SPECMOE_HAVE_CUDA

}  // namespace
}  // namespace specmoe
