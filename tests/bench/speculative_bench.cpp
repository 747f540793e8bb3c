// Speculative vs autoregressive decoding speed.
//   bench_speculative --benchmark_filter=Synth      synth `target` (144M params, F16) with its
//                                                    `draft` (its first 2 layers): model drafter,
//                                                    g = 1..8, temperature 0 and 1
//   bench_speculative --benchmark_filter=Stories    stories260K with ngram and layerskip (exit
//                                                    layer 1..4), g = 1..8, temperature 0 and 1
//                                                    (needs ../shared/data or $SPECMOE_DATA_DIR)
// Each case generates 64 tokens after a 32-token prompt; counters report acceptance, tau, the
// measured cost ratio c, alpha_fit, the predicted speedup (Leviathan et al. 2023, Thm 3.8), the
// measured speedup over autoregressive decoding of the same prompt in the same process (median
// of SPECMOE_BENCH_PAIRS alternated baseline/speculative pairs, default 5): `speedup` over the
// whole generation, `decode_speedup` over the decode phase (the prompt's prefill excluded, as
// the theory models), and of_predicted = decode_speedup / predicted_speedup (what the engine's own
// overhead and a (g+1)-token verify forward costing more than a 1-token one leave of the theory).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <filesystem>
#include <map>
#include <memory>

#include "core/model.h"
#include "core/synth.h"
#include "draft/registry.h"
#include "experiments/statistics.h"
#include "verify/autoregressive.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"

namespace {

using namespace specmoe;
namespace fs = std::filesystem;

constexpr int kPromptTokens = 32;
constexpr int kGenerate = 64;

fs::path data_dir() {
  if (const char* env = std::getenv("SPECMOE_DATA_DIR")) return env;
  return fs::path(SPECMOE_SOURCE_DIR) / ".." / "shared" / "data";
}

// Synth files are rewritten by every run (a few seconds), so they never lag behind the
// generator's code; the write is atomic, so concurrent runs are safe.
std::string synth_path(const std::string& preset) {
  const fs::path dir = fs::temp_directory_path() / "specmoe-bench";
  fs::create_directories(dir);
  const fs::path path = dir / (preset + "-seed1.gguf");
  core::synth_write(preset, path.string(), 1);
  return path.string();
}

struct Pair {
  std::unique_ptr<core::Model> target;
  std::shared_ptr<core::Model> draft;
  std::vector<int32_t> prompt;
  std::map<int, double> baseline_tps;  // temperature x10 -> autoregressive tokens/s
};

std::vector<int32_t> prompt_of(const core::Model& m, const std::string& text) {
  std::vector<int32_t> p = m.tokenizer().encode(text, true);
  while (p.size() < static_cast<size_t>(kPromptTokens)) {
    const std::vector<int32_t> more = m.tokenizer().encode(text, false);
    p.insert(p.end(), more.begin(), more.end());
  }
  p.resize(kPromptTokens);
  return p;
}

const char* kText =
    "Once upon a time, in a small village by the sea, there lived an old fisherman who told stories "
    "to the children every evening.";

Pair& synth_pair() {
  static Pair* pair = [] {
    auto* p = new Pair;
    p->target = core::Model::load(synth_path("target"));
    p->draft = core::Model::load(synth_path("draft"));
    p->prompt = prompt_of(*p->target, kText);
    return p;
  }();
  return *pair;
}

Pair* stories() {
  static Pair* pair = []() -> Pair* {
    const fs::path path = data_dir() / "models" / "stories260K.gguf";
    if (!fs::exists(path)) return nullptr;
    auto* p = new Pair;
    p->target = core::Model::load(path.string());
    p->prompt = prompt_of(*p->target, kText);
    return p;
  }();
  return pair;
}

core::SamplingParams sampling(double temperature) {
  core::SamplingParams sp;
  sp.temperature = static_cast<float>(temperature);
  sp.top_k = 0;  // the plain distribution: the hardest case for acceptance
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 1;
  return sp;
}

verify::DecodeOptions decode(int g) {
  verify::DecodeOptions o;
  o.max_tokens = kGenerate;
  o.draft_max = g;
  o.stop_at_eog = false;  // always 64 tokens, so runs compare
  return o;
}

// Pairs of (autoregressive, speculative) runs per case, alternated so both see the same machine
// load; the speedup is the median of the pairs' ratios (SPECMOE_BENCH_PAIRS, default 5).
int bench_pairs() {
  if (const char* n = std::getenv("SPECMOE_BENCH_PAIRS")) return std::max(1, std::atoi(n));
  return 5;
}

void run_speculative(benchmark::State& state, Pair& pair, draft::Drafter& drafter, double temperature, int g) {
  const auto verifier = verify::make_verifier(temperature == 0.0 ? "greedy" : "speculative");
  verify::SpeculativeDecoder dec(*pair.target, drafter, *verifier, sampling(temperature), decode(g));
  // Warm-up: pages the weights in and sizes every buffer.
  verify::generate_autoregressive(*pair.target, pair.prompt, sampling(temperature), decode(0));
  dec.generate(pair.prompt);
  verify::Metrics m;
  std::vector<double> ratios, decode_ratios, spec_tps, base_tps, predicted;
  for (auto _ : state) {
    for (int i = 0; i < bench_pairs(); ++i) {
      const auto base = verify::generate_autoregressive(*pair.target, pair.prompt, sampling(temperature), decode(0));
      m = dec.generate(pair.prompt).metrics;
      base_tps.push_back(base.metrics.tokens_per_second());
      spec_tps.push_back(m.tokens_per_second());
      ratios.push_back(base_tps.back() > 0 ? spec_tps.back() / base_tps.back() : 0.0);
      const double bd = base.metrics.decode_tokens_per_second();
      decode_ratios.push_back(bd > 0 ? m.decode_tokens_per_second() / bd : 0.0);
      predicted.push_back(m.predicted_speedup());
    }
  }
  // Acceptance counts are the same in every pair (fixed seed); timings are medians.
  state.counters["tok_per_s"] = exp::median(spec_tps);
  state.counters["base_tok_per_s"] = exp::median(base_tps);
  state.counters["acceptance"] = m.acceptance_rate();
  state.counters["tau"] = m.mean_accepted_length();
  state.counters["c"] = m.cost_ratio();
  state.counters["alpha"] = m.alpha_fit();
  const double pred = exp::median(predicted), speedup = exp::median(ratios), decode_speedup = exp::median(decode_ratios);
  state.counters["predicted_speedup"] = pred;
  state.counters["speedup"] = speedup;
  state.counters["decode_speedup"] = decode_speedup;
  state.counters["of_predicted"] = pred > 0 ? decode_speedup / pred : 0.0;
  state.counters["draft_s"] = m.time.draft_s;
  state.counters["verify_forward_s"] = m.time.verify_forward_s;
}

// Args: temperature (0 or 1), g.
void BM_SynthAutoregressive(benchmark::State& state) {
  Pair& pair = synth_pair();
  const double t = static_cast<double>(state.range(0));
  verify::Metrics m;
  for (auto _ : state) m = verify::generate_autoregressive(*pair.target, pair.prompt, sampling(t), decode(0)).metrics;
  state.counters["tok_per_s"] = m.tokens_per_second();
  state.counters["target_step_ms"] = m.target_step_s * 1e3;
  // The draft's greedy agreement with the target (synth.h's reference figure): the acceptance
  // rate g = 1 greedy speculation should reproduce on a similar text.
  if (t == 0.0) state.counters["greedy_agreement"] = core::synth_greedy_agreement(*pair.target, *pair.draft, {kText}, 32);
}
BENCHMARK(BM_SynthAutoregressive)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_SynthSpeculative(benchmark::State& state) {
  Pair& pair = synth_pair();
  draft::DrafterOptions o;
  o.target = pair.target.get();
  o.draft_model = pair.draft;
  o.n_ctx = 256;
  auto drafter = draft::make_drafter("model", o);
  run_speculative(state, pair, *drafter, static_cast<double>(state.range(0)), static_cast<int>(state.range(1)));
}
BENCHMARK(BM_SynthSpeculative)
    ->ArgsProduct({{0, 1}, {1, 2, 3, 4, 5, 6, 7, 8}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Args: drafter (0 = ngram, 1..4 = layerskip exit layer), temperature (0 or 1), g.
void BM_StoriesSpeculative(benchmark::State& state) {
  Pair* pair = stories();
  if (pair == nullptr) {
    state.SkipWithError("stories260K.gguf not found (set SPECMOE_DATA_DIR)");
    return;
  }
  draft::DrafterOptions o;
  o.target = pair->target.get();
  o.n_ctx = 256;
  const int which = static_cast<int>(state.range(0));
  o.exit_layer = which;
  auto drafter = draft::make_drafter(which == 0 ? "ngram" : "layerskip", o);
  state.SetLabel(which == 0 ? "ngram" : "layerskip exit " + std::to_string(which));
  run_speculative(state, *pair, *drafter, static_cast<double>(state.range(1)), static_cast<int>(state.range(2)));
}
BENCHMARK(BM_StoriesSpeculative)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}, {1, 2, 3, 4, 5, 6, 7, 8}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
