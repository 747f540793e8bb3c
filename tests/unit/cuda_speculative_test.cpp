// Device-resident speculative decoding (core/device_sampler.h, kernels/cuda/speculative.cu):
// the device verification rule on hand-built distributions (first token and joint of two tokens
// distributed as the target, one-hot drafts, the greedy reduction, agreement with the host rule
// where the outcome is certain), and the whole loop on a GPU target (lossless at temperature 1
// and 0.7 / top-p 0.9 against the exact distribution, same seed same tokens, undrafted steps
// equal to the device-resident baseline, greedy identity). GPU tests skip without a device
// (GTEST_SKIP); the host-side contracts (CPU models are never device-resident, a device draft is
// refused by host verifiers) run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/device_sampler.h"
#include "kernels/cuda/device.h"
#include "core/environment.h"
#include "base/error.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "lossless.h"
#include "require_cuda.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"
#include "verify/speculative_verifier.h"
#ifdef SPECMOE_HAVE_CUDA
#include "cuda_device_array.h"
#include "kernels/cuda/ops.h"
#endif

namespace specmoe {
namespace {

using Tokens = std::vector<int32_t>;

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
  return core::Model::load(path, o);
}

// ---------------------------------------------------------------------------------------------
// Host-side contracts (every machine).

TEST(DeviceResidency, CpuModelsUseTheHostLoop) {
  auto m = load(synth_file("tiny", 7), "cpu");
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  EXPECT_FALSE(core::DeviceSampler::supported(*m, sp));
  EXPECT_EQ(m->cuda_context(), nullptr);
  try {
    core::DeviceSampler s(*m);
    FAIL() << "a device sampler was made for a CPU model";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
  core::KVCache kv = m->new_cache(8);
  const Tokens ids = {1, 70};
  EXPECT_THROW(m->forward_device(ids, {}, kv, nullptr), Error);
  EXPECT_THROW(m->forward_device_ids(ids.data(), 2, {}, kv, nullptr), Error);
  EXPECT_EQ(kv.size(), 0) << "a refused forward stores nothing";
  draft::NgramDrafter ngram(1, 3);
  const verify::SpeculativeVerifier spec;
  verify::DecodeOptions o;
  o.max_tokens = 4;
  verify::SpeculativeDecoder dec(*m, ngram, spec, sp, o);
  EXPECT_FALSE(dec.device_resident());
}

TEST(DeviceResidency, HostVerifiersRefuseADeviceDraft) {
  draft::Draft d;
  d.tokens = {2};
  d.q.assign(1, std::vector<float>(4, 0.25f));
  float fake = 0.0f;
  d.q_device = &fake;  // never dereferenced: the check refuses first
  const std::vector<std::vector<float>> p(2, std::vector<float>(4, 0.25f));
  core::Rng rng(1);
  try {
    verify::SpeculativeVerifier().verify(d, p, rng);
    FAIL() << "a device draft was verified on the host";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("device"), std::string::npos) << e.what();
  }
  d.clear();
  EXPECT_EQ(d.q_device, nullptr) << "clear() forgets the device rows";
}

#ifdef SPECMOE_HAVE_CUDA
namespace cu = kernels::cuda;
using testing::chi2_critical_0001;
using testing::ChiSquare;
using testing::DeviceArray;
using testing::pooled_chi_square;

// ---------------------------------------------------------------------------------------------
// The device rule on hand-built distributions.

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

class CudaVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    SPECMOE_REQUIRE_CUDA();
    ctx_ = std::make_unique<cu::Context>(0);
  }
  // One verification: uploads the draft, runs the kernel with Philox blocks [counter, counter + g].
  std::pair<int, int32_t> verify(const DeviceArray<float>& p, const DeviceArray<float>* q, const Tokens& draft,
                                 int64_t n, uint64_t counter) {
    DeviceArray<int32_t> d(*ctx_, draft);
    DeviceArray<int32_t> result(*ctx_, size_t{2});
    cu::speculative_verify(*ctx_, p.ptr(), q ? q->ptr() : nullptr, d.ptr(), static_cast<int>(draft.size()), n, 77, 5,
                           counter, result.ptr());
    const std::vector<int32_t> r = result.get(*ctx_);
    return {r[0], r[1]};
  }
  std::unique_ptr<cu::Context> ctx_;
  std::mt19937 gen_{1234};
};

std::vector<float> concat(const std::vector<std::vector<float>>& rows) {
  std::vector<float> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

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
  for (int t = 0; t < kTrials; ++t) {
    Tokens draft(g);
    for (int i = 0; i < g; ++i) draft[i] = draw(q[i], gen_);
    const auto [n_acc, next] = verify(dp, &dq, draft, n, static_cast<uint64_t>(t) * (g + 1));
    ASSERT_TRUE(n_acc >= 0 && n_acc <= g);
    ASSERT_TRUE(next >= 0 && next < n);
    ++counts[static_cast<size_t>(n_acc > 0 ? draft[0] : next)];
    accepted += n_acc;
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
  for (int t = 0; t < kTrials; ++t) {
    Tokens draft = {draw(q[0], gen_), draw(q[1], gen_)};
    const auto [n_acc, next] = verify(dp, &dq, draft, n, static_cast<uint64_t>(t) * (g + 1));
    const int32_t t1 = n_acc >= 1 ? draft[0] : next;
    const int32_t t2 = n_acc >= 2 ? draft[1] : (n_acc == 1 ? next : draw(p[1], gen_));
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

TEST_F(CudaVerify, OneHotDraftIsLossless) {
  const int n = 23;
  const std::vector<float> p0 = random_distribution(gen_, n), p1 = random_distribution(gen_, n);
  DeviceArray<float> dp(*ctx_, concat({p0, p1}));
  std::map<size_t, int64_t> counts;
  for (int t = 0; t < kTrials; ++t) {
    const Tokens draft = {static_cast<int32_t>(t % 5)};  // deterministic drafts (n-gram lookup)
    const auto [n_acc, next] = verify(dp, nullptr, draft, n, static_cast<uint64_t>(t) * 2);
    ++counts[static_cast<size_t>(n_acc > 0 ? draft[0] : next)];
  }
  const ChiSquare cs = pooled_chi_square(counts, std::vector<double>(p0.begin(), p0.end()), kTrials);
  EXPECT_EQ(cs.impossible, 0);
  EXPECT_LT(cs.stat, chi2_critical_0001(cs.df)) << "df " << cs.df;
}

// Certain outcomes: one-hot p and q give exactly the greedy rule; q = p accepts everything; the
// host verifier agrees in both cases (its randomness is not consulted there either).
TEST_F(CudaVerify, CertainOutcomesMatchTheGreedyRuleAndTheHostVerifier) {
  const int n = 4099, g = 4;  // not a multiple of the block size
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
    using Rows = const DeviceArray<float>*;
    for (Rows qq : {static_cast<Rows>(&dq), static_cast<Rows>(nullptr)}) {  // q rows, then a one-hot draft
      const auto [n_acc, next] = verify(dp, qq, draft, n, static_cast<uint64_t>(t) * 8);
      EXPECT_EQ(n_acc, want.n_accepted) << "trial " << t;
      EXPECT_EQ(next, want.next_token) << "trial " << t;
    }
    draft::Draft d;
    d.tokens = draft;
    d.q = q;
    core::Rng rng(3);
    const verify::VerifyResult host = verify::SpeculativeVerifier().verify(d, p, rng);
    EXPECT_EQ(host.n_accepted, want.n_accepted);
    EXPECT_EQ(host.next_token, want.next_token);
  }
  // q = p: every ratio is 1, so the whole draft is accepted and the bonus comes from p_g.
  std::vector<std::vector<float>> p(g + 1);
  for (auto& r : p) r = random_distribution(gen_, n);
  DeviceArray<float> dp(*ctx_, concat(p));
  DeviceArray<float> dq(*ctx_, concat(std::vector<std::vector<float>>(p.begin(), p.begin() + g)));
  for (int t = 0; t < 20; ++t) {
    Tokens draft(g);
    for (int i = 0; i < g; ++i) draft[i] = draw(p[i], gen_);
    const auto [n_acc, next] = verify(dp, &dq, draft, n, static_cast<uint64_t>(t) * (g + 1));
    EXPECT_EQ(n_acc, g);
    EXPECT_GT(p[g][next], 0.0f);
  }
}

TEST_F(CudaVerify, RestrictDistributionAndRowMax) {
  const std::vector<float> src = {0.1f, 0.2f, 0.3f, 0.4f};
  DeviceArray<float> s(*ctx_, src), narrow(*ctx_, size_t{3}), wide(*ctx_, size_t{6}), mx(*ctx_, size_t{1});
  cu::restrict_distribution(*ctx_, s.ptr(), 4, narrow.ptr(), 3);  // draft padding id 3 masked out
  const std::vector<float> a = narrow.get(*ctx_);
  EXPECT_NEAR(a[0], 0.1 / 0.6, 1e-6);
  EXPECT_NEAR(a[2], 0.3 / 0.6, 1e-6);
  cu::restrict_distribution(*ctx_, s.ptr(), 4, wide.ptr(), 6);  // ids the draft lacks get 0
  const std::vector<float> b = wide.get(*ctx_);
  EXPECT_NEAR(b[3], 0.4, 1e-6);
  EXPECT_EQ(b[4], 0.0f);
  EXPECT_EQ(b[5], 0.0f);
  cu::row_max(*ctx_, s.ptr(), 4, mx.ptr());
  EXPECT_EQ(mx.get(*ctx_)[0], 0.4f);
  DeviceArray<float> zeros(*ctx_, std::vector<float>{0.0f, 0.0f, 0.5f});
  cu::restrict_distribution(*ctx_, zeros.ptr(), 3, narrow.ptr(), 2);  // no mass on the target ids
  EXPECT_EQ(narrow.get(*ctx_), (std::vector<float>{1.0f, 0.0f, 0.0f}));
  EXPECT_THROW(cu::speculative_verify(*ctx_, nullptr, nullptr, nullptr, 0, 4, 0, 0, 0, nullptr), Error);
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

// The device forwards run the same kernels as forward(): bit-identical logits, whether the ids
// come from the host or from device memory, and the cache advances the same way.
TEST_F(CudaSpeculative, DeviceForwardsEqualTheHostForward) {
  const Tokens ids = {1, 72, 105, 33, 200};
  const int V = target_->config().n_vocab;
  core::KVCache a = target_->new_cache(16), b = target_->new_cache(16), c = target_->new_cache(16);
  std::vector<float> want;
  target_->forward(ids, {}, a, want);
  int64_t rows = 0;
  const float* d = target_->forward_device(ids, {}, b, &rows);
  ASSERT_EQ(rows, static_cast<int64_t>(ids.size()));
  std::vector<float> got(want.size());
  target_->cuda_context()->download(got.data(), d, got.size() * sizeof(float));
  EXPECT_EQ(got, want);
  DeviceArray<int32_t> d_ids(*target_->cuda_context(), ids);
  core::ForwardOptions last;
  last.logits_all = false;
  d = target_->forward_device_ids(d_ids.ptr(), static_cast<int>(ids.size()), {}, c, &rows, last);
  ASSERT_EQ(rows, 1);
  std::vector<float> last_row(static_cast<size_t>(V));
  target_->cuda_context()->download(last_row.data(), d, last_row.size() * sizeof(float));
  EXPECT_EQ(last_row, std::vector<float>(want.end() - V, want.end()));
  EXPECT_EQ(b.size(), a.size());
  EXPECT_EQ(c.size(), a.size());
}

TEST_F(CudaSpeculative, LosslessAtTemperatureOne) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 21;
  testing::check_lossless(*target_, *draft_, sp, /*power_check=*/true, /*expect_device_resident=*/true);
}

TEST_F(CudaSpeculative, LosslessAtTemperature07TopP09) {
  core::SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 0;
  sp.top_p = 0.9f;
  sp.min_p = 0.0f;
  sp.seed = 22;
  testing::check_lossless(*target_, *draft_, sp, /*power_check=*/false, /*expect_device_resident=*/true);
}

TEST_F(CudaSpeculative, SameSeedSameTokensAndUndraftedStepsEqualTheBaseline) {
  core::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 5;
  const verify::SpeculativeVerifier spec;
  const Tokens prompt = target_->tokenizer().encode("Once upon a time", true);
  verify::DecodeOptions o;
  o.max_tokens = 30;
  o.draft_max = 3;
  o.stop_at_eog = false;
  auto run = [&](uint64_t stream) {
    draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
    verify::SpeculativeDecoder dec(*target_, drafter, spec, sp, o);
    EXPECT_TRUE(dec.device_resident());
    return dec.generate(prompt, stream);
  };
  const verify::GenerationResult a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.metrics.n_accepted, b.metrics.n_accepted);
  EXPECT_EQ(a.tokens.size(), 30u);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_GT(a.metrics.n_drafted, 0);

  // No drafting (draft_max 0): every step is a plain device step, which must sample exactly as
  // the device-resident baseline does.
  verify::DecodeOptions never = o;
  never.draft_max = 0;
  draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
  verify::SpeculativeDecoder dec(*target_, drafter, spec, sp, never);
  const verify::GenerationResult plain = dec.generate(prompt, 9);
  const verify::GenerationResult base = verify::generate_autoregressive(*target_, prompt, sp, never, 9);
  EXPECT_EQ(plain.metrics.n_drafted, 0);
  EXPECT_EQ(plain.tokens, base.tokens);
}

TEST_F(CudaSpeculative, DeviceLoopAtTemperatureZeroEqualsGreedyDecoding) {
  core::SamplingParams sp;
  sp.temperature = 0.0f;
  const verify::SpeculativeVerifier spec;  // not the greedy verifier: the device rule with one-hot p, q
  verify::DecodeOptions o;
  o.max_tokens = 32;
  o.draft_max = 4;
  o.stop_at_eog = false;
  for (const char* text : {"Once upon a time", "abcabcabc"}) {
    const Tokens prompt = target_->tokenizer().encode(text, true);
    const verify::GenerationResult ar = verify::generate_autoregressive(*target_, prompt, sp, o, 0);
    draft::ModelDrafter drafter(draft_.get(), target_->config().n_vocab, -1, 256);
    verify::SpeculativeDecoder dec(*target_, drafter, spec, sp, o);
    ASSERT_TRUE(dec.device_resident());
    const verify::GenerationResult sd = dec.generate(prompt, 0);
    EXPECT_EQ(sd.tokens, ar.tokens) << text;
    draft::NgramDrafter ngram(1, 3);
    verify::SpeculativeDecoder dec2(*target_, ngram, spec, sp, o);
    EXPECT_EQ(dec2.generate(prompt, 0).tokens, ar.tokens) << text << " n-gram (one-hot drafts)";
  }
}
#endif  // SPECMOE_HAVE_CUDA

}  // namespace
}  // namespace specmoe
