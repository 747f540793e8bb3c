// Cost of turning one row of logits into the processed distribution (SamplerChain::distribution),
// which speculative decoding pays for every drafted token twice (q from the draft, p from the
// target) and once per node of a tree: at temperature > 0 it is a visible share of a step when the
// vocabulary is large (Qwen2.5's 151,936 tokens). Rows are synthetic, shaped like a language
// model's: a Gaussian bulk and a head of a few high logits, "peaked" (a nucleus of a few tokens)
// or "flat" (a nucleus of thousands).
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/sampling.h"

namespace {

using specmoe::core::SamplerChain;
using specmoe::core::SamplingParams;

std::vector<float> logits_row(size_t n_vocab, bool peaked) {
  std::mt19937 gen(7);
  std::normal_distribution<float> bulk(0.0f, peaked ? 2.5f : 1.0f);
  std::vector<float> logits(n_vocab);
  for (float& l : logits) l = bulk(gen);
  const float head = peaked ? 14.0f : 5.0f;
  for (int i = 0; i < 16; ++i) logits[(static_cast<size_t>(i) * 9973) % n_vocab] = head - 0.7f * static_cast<float>(i);
  return logits;
}

// args: vocabulary size, peaked (1) or flat (0), sampler (0: temperature 0.7 top-p 0.9;
// 1: temperature 1, no truncation; 2: the defaults, temperature 0.8 top-k 40 top-p 0.95 min-p 0.05;
// 3: greedy).
void BM_Distribution(benchmark::State& state) {
  const size_t n_vocab = static_cast<size_t>(state.range(0));
  const std::vector<float> logits = logits_row(n_vocab, state.range(1) != 0);
  SamplingParams p;
  switch (state.range(2)) {
    case 0: p.temperature = 0.7f, p.top_k = 0, p.top_p = 0.9f, p.min_p = 0.0f; break;
    case 1: p.temperature = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f; break;
    case 2: break;
    default: p.temperature = 0.0f; break;
  }
  const SamplerChain chain(p);
  std::vector<float> probs(n_vocab);
  size_t kept = 0;
  for (auto _ : state) {
    chain.distribution(logits, {}, std::span<float>(probs));
    benchmark::DoNotOptimize(probs.data());
  }
  for (float v : probs) kept += v > 0.0f;
  state.counters["kept"] = static_cast<double>(kept);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n_vocab));
}
BENCHMARK(BM_Distribution)
    ->ArgNames({"vocab", "peaked", "sampler"})
    ->ArgsProduct({{32000, 151936}, {1, 0}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
