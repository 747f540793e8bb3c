// MoE forward cost vs batch size.
//
// Layer level: with 8 experts top-2 (n_embd 1024, n_ff 2816, F16 experts, Mixtral-like
// proportions), a forward of T tokens reads U(T) experts' weights, so while decoding is memory
// bound its time should grow with U(T), not with T*k. Compared with:
//   - MoEForced: a zero router, so every token picks experts {0, 1} (U = 2 for every T);
//   - Dense: a SwiGLU FFN with the same active parameters (n_ff * k = 5632), run through the same
//     layer code as a single always-on expert, so the kernels are identical.
// Counters: U = mean distinct experts per forward, U_uniform = E(1-(1-k/E)^T), MB_read = expert
// weight MB read per forward, GBps = that over the time per forward.
//
// Model level (BM_MoEModel / BM_DenseModel): the synthetic `moe-target` (8 layers, dim 1024,
// 8 experts top-2 of width 1408, F16) and a dense model with the same layers but one SwiGLU of
// width 2816 = k * 1408 per layer (equal active parameters), forwards of T new tokens after a
// 128-token context. Counters: U_l<i> = layer i's mean U(T), U = mean over layers, MB_read =
// weights read per forward (non-expert + U(T) experts per layer), tokens/s.
// Models are synthesized once into $TMPDIR/specmoe-bench (seed 1); SPECMOE_THREADS=n sets threads.
// Args: {T, threads} (layer level), {T} (model level).
// Run: ./build/tests/bench_moe --benchmark_min_time=0.5
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/model.h"
#include "core/synth.h"
#include "kernels/cpu/quant.h"
#include "moe/moe_layer.h"
#include "moe/softmax_router.h"

namespace specmoe::moe {
namespace {

constexpr int kEmbd = 1024, kFF = 2816, kExperts = 8, kTopK = 2;
constexpr int kInputs = 8;  // distinct input batches cycled through, so U(T) is an average

struct Buffer {
  std::vector<uint8_t> bytes;
  MatrixView view;
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
  b.view = MatrixView::make(type, b.bytes.data(), ne[0], ne[1] * ne[2]);
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
  auto pool = threads > 1 ? std::make_shared<kernels::cpu::ThreadPool>(threads) : nullptr;
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

// ---- whole models -----------------------------------------------------------------------------

constexpr int kContext = 128;

int bench_threads() {
  if (const char* t = std::getenv("SPECMOE_THREADS")) return std::atoi(t);
  return 0;  // all hardware threads
}

core::SynthSpec model_spec(const std::string& name) {
  if (name == "moe-target") return core::synth_spec("moe-target");
  // Dense at equal active parameters: moe-target's attention, embedding and head (same seed,
  // same tensors) with a dense SwiGLU of width k * 1408 in every layer.
  core::SynthSpec s = core::synth_spec("moe-draft");
  s.keep_layers = -1;
  s.name = "moe-dense-equal-active";
  return s;
}

core::Model& bench_model(const std::string& name) {
  static std::unique_ptr<core::Model> moe, dense;
  auto& m = name == "moe-target" ? moe : dense;
  if (!m) {
    const auto dir = std::filesystem::temp_directory_path() / "specmoe-bench";
    std::filesystem::create_directories(dir);
    const auto path = dir / ("synth-" + name + "-seed1.gguf");
    if (!std::filesystem::exists(path)) core::synth_write(model_spec(name), path.string(), 1);
    core::LoadOptions o;
    o.n_threads = bench_threads();
    m = core::Model::load(path.string(), o);
  }
  return *m;
}

void run_model(benchmark::State& state, const std::string& name) {
  core::Model& m = bench_model(name);
  const int T = static_cast<int>(state.range(0));
  core::KVCache kv = m.new_cache(kContext + 32);
  std::vector<int32_t> ctx;
  for (int i = 0; i < kContext; ++i) ctx.push_back(3 + 'a' + i % 26);
  std::vector<float> logits;
  core::ForwardOptions last_only;
  last_only.logits_all = false;
  m.forward(ctx, kv, last_only).logits.to_host(logits);
  // kInputs different token batches (printable bytes), cycled, so U(T) is an average.
  std::vector<std::vector<int32_t>> batches(kInputs, std::vector<int32_t>(T));
  std::mt19937 rng(11);
  for (auto& b : batches)
    for (auto& id : b) id = 3 + 0x20 + static_cast<int32_t>(rng() % 95);
  // The model keeps no statistics: each forward's routing is accumulated here.
  std::vector<moe::ExpertStats> stats;
  for (int l = 0; l < m.config().n_layer; ++l) stats.emplace_back(m.config().n_expert, m.moe_k(), l);
  size_t i = 0;
  for (auto _ : state) {
    const core::ForwardResult f = m.forward(batches[i++ % kInputs], kv);
    f.logits.to_host(logits);  // logits for every token, as verification needs
    for (int l = 0; l < m.config().n_layer; ++l)
      if (f.stats.moe[l].n_tokens > 0) stats[l].record_forward(f.stats.moe[l], m.moe_expert_bytes(l));
    kv.truncate(kContext);
    benchmark::DoNotOptimize(logits.data());
  }
  const core::ModelConfig& c = m.config();
  double bytes = static_cast<double>(m.weight_bytes_per_token());
  if (c.is_moe()) {
    const int k = m.moe_k();
    double sum_u = 0;
    for (int l = 0; l < c.n_layer; ++l) {
      const moe::ExpertStats* st = &stats[l];
      const moe::ForwardSizeStats& f = st->by_size().at({T, k});
      const double u = f.mean_distinct();
      sum_u += u;
      state.counters["U_l" + std::to_string(l)] = u;
      // weight_bytes_per_token counts k experts per layer; a forward of T tokens reads U(T).
      const double per_expert = static_cast<double>(f.sum_expert_bytes) / static_cast<double>(f.sum_distinct);
      bytes += (u - k) * per_expert;
    }
    state.counters["U"] = sum_u / c.n_layer;
    state.counters["U_uniform"] = uniform_distinct_experts(c.n_expert, k, T);
    state.counters["Txk"] = T * k;
  }
  state.counters["MB_read"] = bytes / 1e6;
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = m.backend().threads();
}

void BM_MoEModel(benchmark::State& state) { run_model(state, "moe-target"); }
void BM_DenseModel(benchmark::State& state) { run_model(state, "moe-dense"); }

void model_args(benchmark::internal::Benchmark* b) {
  for (int T : {1, 4, 8, 16}) b->Arg(T);
  b->ArgName("T")->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_MoEModel)->Apply(model_args);
BENCHMARK(BM_DenseModel)->Apply(model_args);

}  // namespace
}  // namespace specmoe::moe

BENCHMARK_MAIN();
