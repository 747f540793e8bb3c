// CPU goldens: what the CPU forward, sampling and speculative loop produce today, pinned so that
// a refactor of the forward, the backend seam or the loop is provably behaviour-preserving.
// tests/golden/cpu_goldens.json holds, per case: greedy token ids, sampled token ids at
// temperature 0.8, an FNV-1a hash of the raw bits of a prefill's logits (bit identity, not a
// tolerance), perplexity to 6 significant digits, and speculative decoding's tokens and counts
// (drafted, accepted, steps) for every drafter with fixed seeds, on dense and MoE synth models of
// every architecture and several tensor types, and on stories260K when ../shared/data is there.
//
// The file was written by this test from the code before the backend-seam refactor, with F32 KV
// caches: its "kv_cache" says so, recorded_options pins them (the engine's default is f16 since)
// and the test checks that the two agree:
//   SPECMOE_WRITE_GOLDENS=tests/golden/cpu_goldens.json ./build/tests/test_golden
// Regenerate it only when a change is meant to alter CPU outputs, and say so in the commit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/perplexity.h"
#include "core/synth.h"
#include "draft/registry.h"
#include "test_data.h"
#include "verify/autoregressive.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"

namespace specmoe {
namespace {

using json = nlohmann::json;
using Tokens = std::vector<int32_t>;

std::string golden_path() { return std::string(SPECMOE_SOURCE_DIR) + "/tests/golden/cpu_goldens.json"; }

uint64_t fnv1a(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ULL;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

struct SynthCase {
  std::string name;
  core::SynthSpec spec;
};

std::vector<SynthCase> synth_cases() {
  std::vector<SynthCase> cases;
  auto add = [&](const std::string& name, core::SynthSpec s) { cases.push_back({name, s}); };
  core::SynthSpec tiny = core::synth_spec("tiny");
  add("llama-f32", tiny);
  core::SynthSpec s = tiny;
  s.type = DType::F16;
  add("llama-f16", s);
  s.type = DType::BF16;
  add("llama-bf16", s);
  s = tiny;
  s.n_embd = 256;  // the K-quants need rows of 256
  s.n_ff = 512;
  s.n_head = 4;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    s.type = t;
    add(std::string("llama-") + dtype_name(t), s);
  }
  s = tiny;  // wide enough for several row chunks per thread and every register-block shape
  s.n_embd = 512;
  s.n_ff = 1536;
  s.n_head = 8;
  s.n_head_kv = 4;
  s.n_layer = 2;
  for (DType t : {DType::F16, DType::Q4_K}) {
    s.type = t;
    add(std::string("llama-wide-") + dtype_name(t), s);
  }
  s = tiny;
  s.arch = "qwen2";
  add("qwen2-f32", s);
  s.type = DType::Q8_0;
  add("qwen2-q8_0", s);
  s = tiny;
  s.arch = "gpt2";
  add("gpt2-f32", s);
  s.type = DType::F16;
  add("gpt2-f16", s);
  s = tiny;
  s.tied_output = true;
  s.type = DType::Q8_0;
  add("llama-q8_0-tied", s);
  add("moe-tiny", core::synth_spec("moe-tiny"));
  add("qwen2moe-tiny", core::synth_spec("qwen2moe-tiny"));
  s = core::synth_spec("moe-tiny");
  s.type = DType::Q8_0;
  add("moe-tiny-q8_0", s);
  return cases;
}

// The prompts every case decodes (byte-level vocabulary of the synth models, or stories260K's).
const std::vector<std::string> kPrompts = {"The quick brown fox", "Once upon a time, there was",
                                           "1, 2, 3, 4, 5, 6,"};
const std::string kPerplexityText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she "
    "saw a big, red ball in the park. She wanted to play with it, but it was too high. Lily asked her mom for "
    "help. Her mom smiled and said, \"Let's get it together!\" They jumped and jumped until they got the ball. "
    "Lily was very happy. She said thank you to her mom and they played with the ball all day long. The end. "
    "Tom had a small dog. The dog liked to run and bark. One day the dog ran into the woods and Tom could not "
    "find him. Tom was sad. Then he heard a bark. The dog came back with a stick. Tom laughed and hugged him.";

core::SamplingParams sampling(float temperature, uint64_t seed) {
  core::SamplingParams sp;
  sp.temperature = temperature;
  sp.seed = seed;
  return sp;
}

Tokens encode(core::Model& m, const std::string& text) { return m.tokenizer().encode(text, true); }

// Everything recorded for one model (target) and, for speculation, its drafters.
json record_model(core::Model& target, core::Model* draft_model, int n_tokens) {
  json j;
  verify::DecodeOptions opt;
  opt.max_tokens = n_tokens;
  opt.stop_at_eog = false;
  opt.cost_probe_forwards = 0;
  for (size_t p = 0; p < kPrompts.size(); ++p) {
    const Tokens prompt = encode(target, kPrompts[p]);
    json pj;
    pj["greedy"] = verify::generate_autoregressive(target, prompt, sampling(0.0f, 0), opt, p).tokens;
    pj["sampled"] = verify::generate_autoregressive(target, prompt, sampling(0.8f, 1234), opt, p).tokens;
    {
      core::KVCache kv = target.new_cache(256);
      std::vector<float> logits;
      target.forward(prompt, kv).logits.to_host(logits);
      pj["prefill_logits_fnv"] = fmt::format("{:016x}", fnv1a(logits));
    }
    // Speculative decoding: every drafter, greedy and lossless verifiers, temperatures 0 and 1.
    std::vector<std::string> drafters = {"ngram", "layerskip"};
    if (draft_model) drafters.push_back("model");
    for (const std::string& d : drafters) {
      if (d == "layerskip" && target.config().n_layer < 2) continue;
      for (const char* v : {"greedy", "speculative"}) {
        for (float temp : {0.0f, 1.0f}) {
          if (std::string(v) == "greedy" && temp > 0.0f) continue;
          draft::DrafterOptions dopt;
          dopt.target = &target;
          dopt.exit_layer = 1;
          dopt.ngram_min = 1;
          dopt.ngram_max = 3;
          if (d == "model") dopt.draft_model = std::shared_ptr<core::Model>(draft_model, [](core::Model*) {});
          auto drafter = draft::make_drafter(d, dopt);
          auto verifier = verify::make_verifier(v);
          verify::DecodeOptions so = opt;
          so.draft_max = 3;
          verify::SpeculativeDecoder dec(target, *drafter, *verifier, sampling(temp, 99), so);
          const verify::GenerationResult r = dec.generate(prompt, p);
          json sj;
          sj["tokens"] = r.tokens;
          sj["n_drafted"] = r.metrics.n_drafted;
          sj["n_accepted"] = r.metrics.n_accepted;
          sj["n_steps"] = r.metrics.n_steps;
          pj["speculative"][fmt::format("{}-{}-t{}", d, v, temp)] = sj;
        }
      }
    }
    j["prompts"].push_back(pj);
  }
  return j;
}

std::string ppl6(double v) { return fmt::format("{:.6g}", v); }

// How tests/golden/cpu_goldens.json was recorded: 2 threads and F32 KV caches (before f16 became
// the default); pinned so the file stays bit-identical.
core::LoadOptions recorded_options() {
  core::LoadOptions lo;
  lo.n_threads = 2;
  lo.cache_types = {DType::F32, DType::F32};
  return lo;
}

json record_all() {
  json all;
  const auto dir = testing::scratch_dir();
  for (const SynthCase& c : synth_cases()) {
    const std::string path = (dir / fmt::format("golden-{}-{}.gguf", c.name, getpid())).string();
    core::synth_write(c.spec, path, 7);
    core::LoadOptions lo = recorded_options();
    auto target = core::Model::load(path, lo);
    std::unique_ptr<core::Model> draft;
    std::string draft_path;
    if (c.spec.n_layer > 1) {
      core::SynthSpec ds = c.spec;
      ds.keep_layers = 1;
      draft_path = (dir / fmt::format("golden-{}-draft-{}.gguf", c.name, getpid())).string();
      core::synth_write(ds, draft_path, 7);
      draft = core::Model::load(draft_path, lo);
    }
    json j = record_model(*target, draft.get(), 24);
    j["perplexity_ctx64"] = ppl6(core::compute_perplexity(*target, kPerplexityText, 64).perplexity);
    all["synth"][c.name] = j;
    std::remove(path.c_str());
    if (!draft_path.empty()) std::remove(draft_path.c_str());
  }
  const auto stories = testing::data_path("models/stories260K.gguf");
  if (std::filesystem::exists(stories)) {
    auto m = core::Model::load(stories.string(), recorded_options());
    json j = record_model(*m, nullptr, 64);
    j["perplexity_ctx64"] = ppl6(core::compute_perplexity(*m, kPerplexityText, 64).perplexity);
    j["perplexity_ctx128"] = ppl6(core::compute_perplexity(*m, kPerplexityText + " " + kPerplexityText, 128).perplexity);
    all["stories260K"] = j;
  }
  return all;
}

TEST(CpuGoldens, OutputsEqualTheRecordedOnes) {
  const json now = record_all();
  if (const char* out = std::getenv("SPECMOE_WRITE_GOLDENS")) {
    // One line per case, so that a regenerated file diffs by case.
    std::ofstream f(out);
    // The KV cache type the outputs were made with (recorded_options), checked on every read.
    f << "{\n\"kv_cache\": " << json(core::kv_cache_type_name(recorded_options().cache_types.k)).dump()
      << ",\n\"synth\": {\n";
    bool first = true;
    for (const auto& [name, j] : now["synth"].items()) {
      f << (first ? "" : ",\n") << json(name).dump() << ": " << j.dump();
      first = false;
    }
    f << "\n}";
    if (now.contains("stories260K")) f << ",\n\"stories260K\": " << now["stories260K"].dump();
    f << "\n}\n";
    GTEST_SKIP() << "goldens written to " << out;
  }
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << "missing " << golden_path();
  const json want = json::parse(in);
  // Outputs depend on the cache type: the file says which one made it, and record_all uses it.
  ASSERT_EQ(recorded_options().cache_types.k, recorded_options().cache_types.v);
  EXPECT_EQ(want.value("kv_cache", ""), core::kv_cache_type_name(recorded_options().cache_types.k));
  ASSERT_TRUE(want.contains("synth"));
  ASSERT_EQ(want["synth"].size(), now["synth"].size());
  for (const auto& [name, j] : want["synth"].items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(now["synth"].contains(name));
    EXPECT_EQ(now["synth"][name], j) << "first difference: " << json::diff(j, now["synth"][name]).dump().substr(0, 600);
  }
  if (!now.contains("stories260K"))
    SPECMOE_MISSING("shared test data not found: stories260K goldens not checked");
  ASSERT_TRUE(want.contains("stories260K"));
  EXPECT_EQ(now["stories260K"], want["stories260K"])
      << json::diff(want["stories260K"], now["stories260K"]).dump().substr(0, 600);
}

// The goldens are real outputs, not empty placeholders: tokens were generated and drafts accepted.
TEST(CpuGoldens, RecordedFileIsNotEmpty) {
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << "missing " << golden_path();
  const json want = json::parse(in);
  int64_t accepted = 0, tokens = 0;
  for (const auto& [name, j] : want["synth"].items())
    for (const auto& p : j["prompts"]) {
      tokens += static_cast<int64_t>(p["greedy"].size());
      for (const auto& [k, s] : p["speculative"].items()) accepted += s["n_accepted"].get<int64_t>();
    }
  EXPECT_GT(tokens, 500);
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace specmoe
