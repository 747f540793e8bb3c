// Attention over an f16 KV cache (the default cache type) with Qwen2.5-Coder-1.5B's shape: 12
// query heads sharing 2 KV heads, head_dim 128, for T = 1, 5, 9 new tokens (decode, a chain of 4,
// a verify batch of 9) at contexts of 128, 512 and 2048 cached rows, on the AVX2 (isa 1) and
// AVX-512 (isa 2) kernels, one thread: the score dots, the softmax and the weighted sum of one
// layer's attention. Reports microseconds per call and per token.
//   ./build/tests/bench_attention
//   ./build/tests/bench_attention --benchmark_filter='T:9/ctx:512'
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

namespace cpu = specmoe::kernels::cpu;
using specmoe::DType;

namespace {

void BM_Attention(benchmark::State& state) {
  const int64_t T = state.range(0), ctx = state.range(1);
  const auto isa = static_cast<cpu::Isa>(state.range(2));
  if (cpu::usable_isa(isa) != isa) {
    state.SkipWithError("instruction set not available on this CPU");
    return;
  }
  specmoe::kernels::AttentionParams p;
  p.n_head = 12;
  p.n_head_kv = 2;
  p.head_dim = 128;
  p.scale = 1.0f / std::sqrt(128.0f);
  const int64_t kvd = int64_t{p.n_head_kv} * p.head_dim, rows = ctx + T;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(T * p.n_head * p.head_dim)), row(static_cast<size_t>(kvd));
  for (auto& x : q) x = dist(rng);
  std::vector<uint8_t> k(static_cast<size_t>(rows * kvd * 2)), v(k.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& x : row) x = dist(rng);
    cpu::quantize_row(DType::F16, row.data(), k.data() + r * kvd * 2, kvd);
    for (auto& x : row) x = dist(rng);
    cpu::quantize_row(DType::F16, row.data(), v.data() + r * kvd * 2, kvd);
  }
  specmoe::kernels::KVView kv;
  kv.k = k.data();
  kv.v = v.data();
  kv.k_row_bytes = kv.v_row_bytes = static_cast<size_t>(kvd) * 2;
  kv.n_past = ctx;
  kv.k_type = kv.v_type = DType::F16;
  std::vector<float> out(q.size());
  cpu::ThreadPool pool(1);
  for (auto _ : state) {
    cpu::attention(pool, q.data(), T, kv, nullptr, p, out.data(), isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(cpu::isa_name(isa));
  state.counters["us/token"] = benchmark::Counter(static_cast<double>(T) * 1e-6,
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_Attention)
    ->ArgNames({"T", "ctx", "isa"})
    ->ArgsProduct({{1, 5, 9}, {128, 512, 2048}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
