// Matmul speed per weight dtype at decode-sized batches: y[T, n_out] = x[T, n_in] * W^T for
// T = 1, 2, 4, 5, 8, 9, 16 and shapes (n_in x n_out) 0: 4096 x 4096, 1: 1024 x 2816, 2: 2816 x 1024
// (the synth target's FFN), 3: 1536 x 8960, 4: 8960 x 1536 (Qwen2.5-Coder-1.5B's FFN). Reports
// the weight bytes read per second (each call reads W once, whatever T is) and GFLOP/s
// (2 * T * n_in * n_out per call). Several copies of W (>= 128 MB in all) are used in turn so the
// weights come from memory, not from the 32 MB L3, as in a real model's forward. Block-quantized
// weights that the integer kernels read packed (kernels/cpu/packed.h) are packed once, as the CPU
// backend does when a model loads.
//   ./build/tests/bench_matmul                           (single thread)
//   SPECMOE_THREADS=2 ./build/tests/bench_matmul         (threads of the pool)
//   ./build/tests/bench_matmul --benchmark_filter='Q4_K'
//   ./build/tests/bench_matmul --benchmark_filter='BM_Matmul/dtype:(6|7|10|11|20|23)/T:(1|8)/shape:0'
//     (Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 at 4096 x 4096; the label names the type)
//   ./build/tests/bench_matmul --benchmark_filter='BM_Matmul/dtype:(16|17|18|19|21|22|29|34|35)/'
//     (the read-only i-quant and ternary formats, random codes: IQ2_XXS ... TQ2_0)
// BM_MatmulKernel: the micro-kernels with the weights hot in L2 (1536 x 128, the width of the
// 1.5B target), one thread, per dtype, T = 1, 2, 4, 5, 8, 9, 16, 64 (64: prompt-sized, the
// row-major types' tiles) and instruction set (0 scalar, 1 AVX2, 2 AVX-512 VNNI, 3 AMX-INT8 where
// the CPU has them): multiply-adds per second when memory is not the limit, i.e. what a T-token
// verify forward can overlap with its weight reads. (With 128 rows the activations' quantization
// is a visible part of the time; BM_Matmul's shapes are the model's.)
//   ./build/tests/bench_matmul --benchmark_filter='Kernel.*dtype:12/'   (Q4_K)
// The ratio time(T=8) / time(T=1) inside one run is the figure that matters for verification
// (a (g+1)-token verify forward should cost about a 1-token forward); absolute rates on a busy
// machine are noisy.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"
#include "quant_reference.h"

using namespace specmoe;
namespace cpu = specmoe::kernels::cpu;

namespace {

// Shapes {n_in, n_out}: a 4096-wide layer and the synth target's FFN up / down projections.
constexpr int64_t kShapes[][2] = {{4096, 4096}, {1024, 2816}, {2816, 1024}, {1536, 8960}, {8960, 1536}};
constexpr size_t kMinBytes = size_t{128} << 20;

int bench_threads() {
  if (const char* t = std::getenv("SPECMOE_THREADS")) return std::max(1, std::atoi(t));
  return 1;
}

// Copies of one random matrix of `type` and shape, quantized once and duplicated (with their
// packed copies where the type has one).
// Bytes on huge pages, as the CPU backend allocates packed weights (kernels/cpu/huge_pages.h).
struct HugeBytes {
  std::shared_ptr<void> p;
  void resize(size_t n) { p = cpu::allocate_huge(n); }
  uint8_t* data() { return static_cast<uint8_t*>(p.get()); }
};

struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<HugeBytes> packed;
  std::vector<cpu::MatrixView> views;
};

// Gives `view` a packed copy held by `store` when its type is read packed.
void attach_packed(cpu::MatrixView& view, HugeBytes& store) {
  if (!cpu::packs(view.type)) return;
  store.resize(cpu::packed_bytes(view));
  cpu::ThreadPool pool(1);
  cpu::pack(pool, view, store.data());
  view.packed = store.data();
}

// n_out rows of N(0, 0.02^2) weights quantized to `type`; the read-only formats (nothing here
// writes them) get random codes under scales of the same size (tests/quant_reference.h).
void fill_weights(DType type, std::mt19937& rng, uint8_t* bytes, int64_t n_in, int64_t n_out) {
  const size_t rb = dtype_row_bytes(type, n_in);
  if (dtype_is_read_only(type)) {
    const auto blocks = specmoe::testing::ref_random_iq_blocks(type, rng, n_out * n_in / 256, 0.2f);
    std::memcpy(bytes, blocks.data(), blocks.size());
    return;
  }
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(n_in);
  for (int64_t j = 0; j < n_out; ++j) {
    for (auto& v : row) v = dist(rng);
    cpu::quantize_row(type, row.data(), bytes + j * rb, n_in);
  }
}

const Weights& weights(DType type, int shape) {
  static std::vector<std::pair<std::pair<DType, int>, Weights>> cache;
  for (auto& [key, w] : cache)
    if (key == std::make_pair(type, shape)) return w;
  const int64_t n_in = kShapes[shape][0], n_out = kShapes[shape][1];
  Weights w;
  const size_t rb = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(rb * n_out);
  std::mt19937 rng(1);
  fill_weights(type, rng, bytes.data(), n_in, n_out);
  const size_t n_copies = std::max<size_t>(1, (kMinBytes + bytes.size() - 1) / bytes.size());
  for (size_t c = 0; c < n_copies; ++c) w.copies.push_back(bytes);
  w.packed.resize(w.copies.size());
  for (size_t c = 0; c < w.copies.size(); ++c) {
    w.views.push_back(cpu::MatrixView::make(type, w.copies[c].data(), n_in, n_out));
    attach_packed(w.views.back(), w.packed[c]);
  }
  cache.emplace_back(std::make_pair(type, shape), std::move(w));
  return cache.back().second;
}

void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t T = state.range(1);
  const int shape = static_cast<int>(state.range(2));
  const int64_t n_in = kShapes[shape][0], n_out = kShapes[shape][1];
  const Weights& w = weights(type, shape);
  std::vector<float> x(static_cast<size_t>(T * n_in)), y(static_cast<size_t>(T * n_out));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  cpu::ThreadPool pool(bench_threads());
  size_t i = 0;
  for (auto _ : state) {
    cpu::matmul(pool, x.data(), T, w.views[i], y.data());
    i = (i + 1) % w.views.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(dtype_name(type));
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(w.views[0].bytes()) / 1e9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(T) * n_in * n_out / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool.n_threads();
}

// Weights that stay in L2 (random codes, one copy), x and y of T rows: the kernels' arithmetic.
void BM_MatmulKernel(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t T = state.range(1);
  const auto isa = static_cast<cpu::Isa>(state.range(2));
  if (cpu::usable_isa(isa) != isa) {
    state.SkipWithError("instruction set not available on this CPU");
    return;
  }
  constexpr int64_t n_in = 1536, n_out = 128;
  const size_t rb = dtype_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(rb * n_out);
  std::mt19937 rng(3);
  fill_weights(type, rng, bytes.data(), n_in, n_out);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  auto view = cpu::MatrixView::make(type, bytes.data(), n_in, n_out);
  HugeBytes packed;
  attach_packed(view, packed);
  std::vector<float> x(static_cast<size_t>(T * n_in)), y(static_cast<size_t>(T * n_out));
  for (auto& v : x) v = dist(rng) * 50.0f;
  cpu::ThreadPool pool(1);
  for (auto _ : state) {
    cpu::matmul(pool, x.data(), T, view, y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(dtype_name(type)) + " " + cpu::isa_name(isa));
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(T) * n_in * n_out / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["us/token"] = benchmark::Counter(static_cast<double>(T) * 1e-6,
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void kernel_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::IQ2_XXS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                  DType::IQ1_M})
    for (int64_t T : {1, 2, 4, 5, 8, 9, 16, 64})
      for (int64_t isa : {1, 2, 3}) b->Args({static_cast<int64_t>(t), T, isa});
}

void dtype_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K,
                  DType::IQ4_XS, DType::MXFP4, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                  DType::IQ3_S, DType::IQ1_S, DType::IQ1_M, DType::TQ1_0, DType::TQ2_0})
    for (int64_t T : {1, 2, 4, 5, 8, 9, 16})
      for (int64_t shape : {0, 1, 2, 3, 4}) b->Args({static_cast<int64_t>(t), T, shape});
}

}  // namespace

// Wall time: with threads > 1 the CPU time of the caller alone would understate the cost.
BENCHMARK(BM_Matmul)->ArgNames({"dtype", "T", "shape"})->Apply(dtype_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulKernel)->ArgNames({"dtype", "T", "isa"})->Apply(kernel_args)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
