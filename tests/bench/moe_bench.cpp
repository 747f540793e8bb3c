// MoE forward cost vs batch size: with 8 experts top-2 (n_embd 1024, n_ff 2816, F16 experts,
// Mixtral-like proportions), a forward of T tokens reads U(T) experts' weights, so while decoding
// is memory bound its time should grow with U(T), not with T*k. Compared with:
//   - MoEForced: a zero router, so every token picks experts {0, 1} (U = 2 for every T);
//   - Dense: a SwiGLU FFN with the same active parameters (n_ff * k = 5632), run through the same
//     layer code as a single always-on expert, so the kernels are identical.
// Counters: U = mean distinct experts per forward, U_uniform = E(1-(1-k/E)^T), MB_read = expert
// weight MB read per forward, GBps = that over the time per forward.
// Args: {T, threads}. Run: ./build/tests/bench_moe --benchmark_min_time=0.5
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "kernels/cpu/quant.h"
#include "moe/moe_layer.h"
#include "moe/softmax_router.h"

namespace specmoe::moe {
namespace {

constexpr int kEmbd = 1024, kFF = 2816, kExperts = 8, kTopK = 2;
constexpr int kInputs = 8;  // distinct input batches cycled through, so U(T) is an average

struct Buffer {
  std::vector<uint8_t> bytes;
  WeightView view;
};

Buffer make_weight(DType type, std::array<int64_t, 3> ne, float scale, bool zero, uint32_t seed) {
  Buffer b;
  const size_t rb = dtype_row_bytes(type, ne[0]);
  const int64_t rows = ne[1] * ne[2];
  b.bytes.resize(rb * rows);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> row(ne[0]);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = zero ? 0.0f : u(rng);
    kernels::cpu::quantize_row(type, row.data(), b.bytes.data() + r * rb, ne[0]);
  }
  b.view = {b.bytes.data(), type, ne, ""};
  return b;
}

struct Setup {
  std::vector<Buffer> buffers;  // keep the bytes alive
  std::unique_ptr<MoELayer> layer;
};

// n_expert experts of width ff; zero_router: all logits equal (ties -> experts 0..k-1).
Setup make_setup(int n_expert, int k, int ff, bool zero_router, int threads) {
  Setup s;
  s.buffers.reserve(4);
  s.buffers.push_back(make_weight(DType::F32, {kEmbd, n_expert, 1}, 1.0f, zero_router, 1));
  s.buffers.push_back(make_weight(DType::F16, {kEmbd, ff, n_expert}, 0.03f, false, 2));
  s.buffers.push_back(make_weight(DType::F16, {kEmbd, ff, n_expert}, 0.03f, false, 3));
  s.buffers.push_back(make_weight(DType::F16, {ff, kEmbd, n_expert}, 0.02f, false, 4));
  MoEWeights w;
  w.gate_inp = s.buffers[0].view;
  w.gate_exps = s.buffers[1].view;
  w.up_exps = s.buffers[2].view;
  w.down_exps = s.buffers[3].view;
  auto pool = threads > 1 ? std::make_shared<ThreadPool>(threads) : nullptr;
  s.layer = std::make_unique<MoELayer>(w, std::make_unique<SoftmaxTopKRouter>(n_expert, k, true),
                                       pool);
  return s;
}

std::vector<std::vector<float>> make_inputs(int T) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> xs(kInputs, std::vector<float>(static_cast<size_t>(T) * kEmbd));
  for (auto& x : xs)
    for (auto& v : x) v = u(rng);
  return xs;
}

void run(benchmark::State& state, int n_expert, int k, int ff, bool zero_router) {
  const int T = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  Setup s = make_setup(n_expert, k, ff, zero_router, threads);
  const auto xs = make_inputs(T);
  std::vector<float> out(static_cast<size_t>(T) * kEmbd);
  ExpertStats stats(n_expert, k);
  size_t i = 0;
  for (auto _ : state) {
    s.layer->forward(xs[i++ % kInputs].data(), T, out.data(), &stats);
    benchmark::DoNotOptimize(out.data());
  }
  const double u = stats.mean_distinct_experts();
  state.counters["U"] = u;
  state.counters["U_uniform"] = uniform_distinct_experts(n_expert, k, T);
  state.counters["Txk"] = T * k;
  const double bytes = u * s.layer->expert_bytes() + s.layer->router_bytes();
  state.counters["MB_read"] = bytes / 1e6;
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MoE(benchmark::State& state) { run(state, kExperts, kTopK, kFF, false); }
void BM_MoEForced(benchmark::State& state) { run(state, kExperts, kTopK, kFF, true); }
void BM_Dense(benchmark::State& state) { run(state, 1, 1, kFF * kTopK, false); }

void args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int T : {1, 4, 8, 16}) b->Args({T, threads});
  b->ArgNames({"T", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_MoE)->Apply(args);
BENCHMARK(BM_MoEForced)->Apply(args);
BENCHMARK(BM_Dense)->Apply(args);

}  // namespace
}  // namespace specmoe::moe

BENCHMARK_MAIN();
