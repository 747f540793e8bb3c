// Helpers of the recurrent-architecture model tests (tests/unit/model_qwen35_test.cpp,
// model_granitehybrid_test.cpp): synth presets written to the scratch folder, logits of a forward
// on the host, the relative error against the double-precision reference forward, a batch against
// one token at a time, and a copy of a file with one metadata key changed.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "draft/drafter.h"
#include "draft/model_drafter.h"
#include "lossless.h"
#include "reference_forward.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_decoder.h"

namespace specmoe::testing {

inline std::string scratch_file(const std::string& name) { return (scratch_dir() / name).string(); }

// Two threads, F32 caches (the reference keeps unrounded keys and values).
inline core::LoadOptions f32_caches() {
  core::LoadOptions o;
  o.cache_types = {DType::F32, DType::F32};
  o.n_threads = 2;
  return o;
}

inline bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

inline const std::vector<int32_t> kRecurrentIds = {1, 72, 105, 33, 200, 7, 250, 44, 90, 3, 17};

// The preset with its matrices in `type`, seed 42, named after the preset and type.
inline std::string write_preset_file(const std::string& preset, DType type = DType::F32) {
  core::SynthSpec s = core::synth_spec(preset);
  s.type = type;
  const std::string path = scratch_file(fmt::format("{}_{}.gguf", preset, dtype_name(type)));
  core::synth_write(s, path, 42);
  return path;
}

inline std::vector<float> logits_of(core::Model& m, std::span<const int32_t> ids, core::KVCache& kv) {
  std::vector<float> out;
  m.forward(ids, kv).logits.to_host(out);
  return out;
}

// max |logit - reference| / max |reference logit| over kRecurrentIds.
inline double reference_rel_error(const std::string& path) {
  auto m = core::Model::load(path, f32_caches());
  core::KVCache kv = m->new_cache(32);
  const std::vector<float> got = logits_of(*m, kRecurrentIds, kv);
  const auto ref = ReferenceForward(path).run(kRecurrentIds);
  const int V = m->config().n_vocab;
  double max_ref = 0, max_diff = 0;
  for (size_t t = 0; t < kRecurrentIds.size(); ++t)
    for (int j = 0; j < V; ++j) {
      max_ref = std::max(max_ref, std::fabs(ref[t][j]));
      max_diff = std::max(max_diff, std::fabs(ref[t][j] - got[t * V + j]));
    }
  EXPECT_GT(max_ref, 1.0) << path;
  return max_diff / max_ref;
}

// The logits of a batch of kRecurrentIds equal those of one token at a time, bit for bit.
inline void expect_batch_equals_single(core::Model& m) {
  core::KVCache a = m.new_cache(32), b = m.new_cache(32);
  const std::vector<float> batched = logits_of(m, kRecurrentIds, a);
  std::vector<float> single;
  for (size_t i = 0; i < kRecurrentIds.size(); ++i) {
    const auto l = logits_of(m, std::span<const int32_t>(kRecurrentIds).subspan(i, 1), b);
    single.insert(single.end(), l.begin(), l.end());
  }
  ASSERT_EQ(batched.size(), single.size());
  EXPECT_TRUE(same_bits(batched.data(), single.data(), batched.size()));
}

// A copy of a GGUF file with one metadata key set to a u32, or dropped.
inline void copy_with(const std::string& src, const std::string& dst, const std::string& key,
                      std::optional<uint32_t> u32) {
  auto f = core::GGUFFile::open(src);
  core::GGUFWriter w;
  for (const auto& [k, v] : f->metadata())
    if (k != key) w.set_value(k, v);
  if (u32) w.set_u32(key, *u32);
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(t.data, t.nbytes));
  w.write(dst);
}

// Loading a copy of `path` with `key` set to `value` (nullopt: dropped) fails with an error that
// contains `needle`.
inline void expect_key_error(const std::string& path, const std::string& key, std::optional<uint32_t> value,
                             const std::string& needle) {
  const std::string copy = scratch_file(fmt::format("bad_{}_{}.gguf", key, value ? std::to_string(*value) : "none"));
  copy_with(path, copy, key, value);
  try {
    core::Model::load(copy, f32_caches());
    ADD_FAILURE() << "no error for " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Greedy speculative decoding of `prompt` with `drafter` and `verifier`, one run per tree shape
// (an empty shape: chains of draft_max), gives the autoregressive tokens.
inline void expect_decoding_identical(core::Model& target, draft::Drafter& drafter, const verify::Verifier& verifier,
                                      const std::vector<draft::TreeSpec>& shapes, const std::vector<int32_t>& prompt,
                                      int max_tokens, int draft_max) {
  core::SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (const draft::TreeSpec& tree : shapes) {
    verify::DecodeOptions o;
    o.max_tokens = max_tokens;
    o.draft_max = draft_max;
    o.tree = tree;
    o.stop_at_eog = false;
    const verify::GenerationResult ar = verify::generate_autoregressive(target, prompt, greedy, o, 0);
    verify::SpeculativeDecoder dec(target, drafter, verifier, greedy, o);
    const verify::GenerationResult sd = dec.generate(prompt, 0);
    const std::string what = (tree.empty() ? std::string("chain") : tree.describe()) + ", " + drafter.name() + ", " +
                             verifier.name();
    EXPECT_EQ(sd.tokens, ar.tokens) << what;
    EXPECT_GT(sd.metrics.n_accepted, 0) << what;
  }
}

// Plain sampling at a temperature (no top-k, top-p or min-p), for the lossless checks.
inline core::SamplingParams plain_sampling(float temperature, uint64_t seed) {
  core::SamplingParams sp;
  sp.temperature = temperature;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = seed;
  return sp;
}

// A draft model's greedy chains and a 2 x 2 tree give the target's autoregressive tokens on a
// fixed prompt, and its sampling through the loop is lossless at temperature 1 (check_lossless,
// seeded with `seed`).
inline void expect_draft_model_identical_and_lossless(core::Model& target, core::Model& draft_model, uint64_t seed) {
  const verify::GreedyVerifier gv;
  draft::ModelDrafter model(&draft_model, 320, -1, 256);
  std::vector<draft::TreeSpec> shapes(2);
  shapes[1].widths = {2, 2};
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 35, 119, 111, 114};
  expect_decoding_identical(target, model, gv, shapes, prompt, 30, 4);
  check_lossless(target, draft_model, plain_sampling(1.0f, seed), true);
}

}  // namespace specmoe::testing
