// llama4 (Llama 4 Scout and Maverick, text) beyond the reference forward's test
// (test_model_arch_moe: MoEArchitectures.DeepseekStyleFamiliesMatchReferenceAndRoute for llama4-tiny
// and llama4-128e-tiny, MoEArchitectures.Llama4ReadsItsLayoutAndEachPartMatters): a batch equals one
// token at a time (the chunked layers' positions, the NoPE layer, the experts reading weighted
// inputs), speculative decoding is identical to autoregressive decoding and lossless, and the keys
// llama.cpp requires or refuses get clear errors. Chunks past 8192 positions are checked against
// llama.cpp by scripts/conformance.sh's long-context run (README, Architectures) and in the op
// harness (attention with `chunk`).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/synth.h"
#include "recurrent_model_helpers.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;
using specmoe::testing::expect_batch_equals_single;
using specmoe::testing::f32_caches;

namespace {

std::string write_preset(const std::string& preset, DType type = DType::F32) {
  return specmoe::testing::write_preset_file(preset, type);
}

}  // namespace

TEST(Llama4, BatchesEqualSingleTokens) {
  for (const char* preset : {"llama4-tiny", "llama4-128e-tiny"}) {
    auto m = Model::load(write_preset(preset), f32_caches());
    ASSERT_EQ(m->config().arch, Arch::Llama4);
    expect_batch_equals_single(*m);
  }
  auto f16 = Model::load(write_preset("llama4-tiny", DType::F16), f32_caches());
  expect_batch_equals_single(*f16);
}

TEST(Llama4, SpeculativeDecodingIsIdenticalAndLossless) {
  auto target = Model::load(write_preset("llama4-tiny"), f32_caches());
  auto draft = Model::load(write_preset("llama4-128e-tiny"), f32_caches());
  specmoe::testing::expect_draft_model_identical_and_lossless(*target, *draft, 37);
}

TEST(Llama4, KeysItNeedsOrRefusesGetClearErrors) {
  using specmoe::testing::expect_key_error;
  const std::string path = write_preset("llama4-tiny");
  expect_key_error(path, "llama4.interleave_moe_layer_step", std::nullopt,
                   "'llama4.interleave_moe_layer_step' is missing");
  expect_key_error(path, "llama4.interleave_moe_layer_step", 0u, "interleave_moe_layer_step is 0 for 4 layers");
  expect_key_error(path, "llama4.expert_feed_forward_length", std::nullopt,
                   "'llama4.expert_feed_forward_length' is missing");
  // Without chunks llama.cpp runs its last layer without RoPE and with a temperature of scale 0,
  // on which it aborts: refused by name.
  expect_key_error(path, "llama4.attention.sliding_window", 0u, "llama4 without chunked attention is not supported");
  // A nonzero window is llama.cpp's signal for chunks, whose size stays its 8192.
  const std::string windowed = specmoe::testing::scratch_file("llama4_window_4096.gguf");
  specmoe::testing::copy_with(path, windowed, "llama4.attention.sliding_window", 4096u);
  auto m = Model::load(windowed, f32_caches());
  EXPECT_EQ(m->config().chunk(0), 8192);
  EXPECT_EQ(m->config().window(0), 0);
}
