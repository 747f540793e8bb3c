// dequantize_row throughput per type on a 4096-element row (one row of a 4096-wide weight, the
// unit the CPU matmul dequantizes). Reports elements/s and source bytes/s. BM_QuantizeActs: the
// integer matmuls' activation blocks (kernels/cpu/simd_avx2.h quantize_acts) of one token row,
// for 32-element (Q4_0's) and 256-element (Q4_K's) blocks, at the Qwen2.5-Coder-1.5B's widths
// (1536 and 8960), one thread.
//   ./build/tests/bench_quant --benchmark_filter=QuantizeActs
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

using namespace specmoe;

static void BM_Dequantize(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  constexpr int64_t n = 4096;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<uint8_t> q(dtype_row_bytes(type, n));
  kernels::cpu::quantize_row(type, x.data(), q.data(), n);
  for (auto _ : state) {
    kernels::cpu::dequantize_row(type, q.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(dtype_name(type));
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q.size()));
}
BENCHMARK(BM_Dequantize)->Arg(0)->Arg(1)->Arg(30)->Arg(8)->Arg(2)->Arg(3)->Arg(12)->Arg(13)->Arg(14)
    ->Arg(6)->Arg(7)->Arg(10)->Arg(11)->Arg(20)->Arg(23)->Arg(39);  // + Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4

static void BM_Quantize(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  constexpr int64_t n = 4096;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<uint8_t> q(dtype_row_bytes(type, n));
  for (auto _ : state) {
    kernels::cpu::quantize_row(type, x.data(), q.data(), n);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetLabel(dtype_name(type));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Quantize)->Arg(8)->Arg(12)->Arg(14)->Arg(6)->Arg(7)->Arg(10)->Arg(11)->Arg(20)->Arg(23);

static void BM_QuantizeActs(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1);
  if (kernels::cpu::best_isa() == kernels::cpu::Isa::Scalar) {
    state.SkipWithError("needs AVX2");
    return;
  }
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  std::vector<uint8_t> buf(kernels::cpu::avx2::act_row_bytes(type, n) + 64);
  uint8_t* a = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
  for (auto _ : state) {
    kernels::cpu::avx2::quantize_acts(type, x.data(), n, a);
    benchmark::DoNotOptimize(a);
    benchmark::ClobberMemory();
  }
  state.SetLabel(dtype_name(type));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_QuantizeActs)->ArgNames({"dtype", "n"})->Args({2, 1536})->Args({2, 8960})->Args({12, 1536})->Args({12, 8960});
BENCHMARK_MAIN();
