// Forward-pass speed on cuda:0 on a synthetic model (default `target-1b`: ~1.1B parameters, F16,
// ~2.2 GB of weights; SPECMOE_BENCH_PRESET=target for the 144M one): one-token decode with the
// achieved weight-read bandwidth (weight bytes per forward / time, the figure to hold against the
// GPU's HBM bandwidth), batched forwards of 1, 9 and 64 tokens, and the cost of a 9-token
// verification forward relative to a 1-token forward measured in the same loop. Every forward
// includes the logits download the decoding loop needs. Skips (error row) without a device.
// The model is synthesized once into $TMPDIR/specmoe-bench (seed 1).
//   ./build-gpu/tests/bench_cuda_forward
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/environment.h"
#include "core/model.h"
#include "core/synth.h"

using namespace specmoe;
using namespace specmoe::core;

namespace {

constexpr int kContext = 128;

std::string preset() {
  const char* p = std::getenv("SPECMOE_BENCH_PRESET");
  return p ? p : "target-1b";
}

Model* model() {
  static std::unique_ptr<Model> m;
  if (!m) {
    const auto dir = std::filesystem::temp_directory_path() / "specmoe-bench";
    std::filesystem::create_directories(dir);
    const auto path = dir / ("synth-" + preset() + "-seed1.gguf");
    if (!std::filesystem::exists(path)) synth_write(preset(), path.string(), 1);
    LoadOptions o;
    o.device = "cuda:0";
    m = Model::load(path.string(), o);
  }
  return m.get();
}

bool skip_without_device(benchmark::State& state) {
  if (cuda_device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

// A cache holding kContext tokens of byte text, for the forwards to attend over.
KVCache prefilled_cache(Model& m) {
  KVCache kv = m.new_cache(kContext + 128);
  std::vector<int32_t> ids;
  for (int i = 0; i < kContext; ++i) ids.push_back(3 + 'a' + i % 26);
  std::vector<float> logits;
  ForwardOptions o;
  o.logits_all = false;
  m.forward(ids, kv, o).logits.to_host(logits);
  return kv;
}

void set_bandwidth_counters(benchmark::State& state, const Model& m, double tokens_per_forward) {
  state.counters["tokens/s"] = benchmark::Counter(tokens_per_forward, benchmark::Counter::kIsIterationInvariantRate);
  // Each forward reads every weight once, whatever T is.
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(m.weight_bytes_per_token()) / 1e9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_MB"] = static_cast<double>(m.weight_bytes_per_token()) / 1e6;
}

// Decode: one token per forward, only its logits, context growing from kContext by one token per
// iteration (rolled back every 64 so the context stays near kContext).
void BM_CudaDecode(benchmark::State& state) {
  if (skip_without_device(state)) return;
  Model& m = *model();
  KVCache kv = prefilled_cache(m);
  std::vector<float> logits;
  ForwardOptions o;
  o.logits_all = false;
  int32_t tok = 3 + 'e';
  for (auto _ : state) {
    const int32_t one[1] = {tok};
    m.forward(one, kv, o).logits.to_host(logits);
    tok = 3 + 'a' + (tok + 7) % 26;
    if (kv.size() >= kContext + 64) kv.truncate(kContext);
  }
  set_bandwidth_counters(state, m, 1.0);
}
BENCHMARK(BM_CudaDecode)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// T tokens with logits for all of them (what verification of T-1 draft tokens does).
void BM_CudaForward(benchmark::State& state) {
  if (skip_without_device(state)) return;
  Model& m = *model();
  const int T = static_cast<int>(state.range(0));
  KVCache kv = prefilled_cache(m);
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = 3 + 'a' + (t * 5) % 26;
  std::vector<float> logits;
  for (auto _ : state) {
    m.forward(ids, kv).logits.to_host(logits);
    kv.truncate(kContext);
  }
  set_bandwidth_counters(state, m, static_cast<double>(T));
}
BENCHMARK(BM_CudaForward)->ArgName("tokens")->Arg(1)->Arg(9)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

// verify_cost = time of a 9-token forward / time of a 1-token forward, alternating in one loop so
// that clocks and contention affect both alike. Speculative decoding with 8 draft tokens gains
// only while this stays well below the tokens it accepts per step.
void BM_CudaVerifyCost(benchmark::State& state) {
  if (skip_without_device(state)) return;
  using Clock = std::chrono::steady_clock;
  Model& m = *model();
  KVCache kv = prefilled_cache(m);
  std::vector<int32_t> nine(9);
  for (int t = 0; t < 9; ++t) nine[t] = 3 + 'a' + (t * 5) % 26;
  std::vector<float> logits;
  double s1 = 0, s9 = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    m.forward(std::span<const int32_t>(nine).first(1), kv).logits.to_host(logits);
    const auto t1 = Clock::now();
    kv.truncate(kContext);
    const auto t2 = Clock::now();
    m.forward(nine, kv).logits.to_host(logits);
    const auto t3 = Clock::now();
    kv.truncate(kContext);
    s1 += std::chrono::duration<double>(t1 - t0).count();
    s9 += std::chrono::duration<double>(t3 - t2).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["ms_1_token"] = n > 0 ? 1e3 * s1 / n : 0.0;
  state.counters["ms_9_tokens"] = n > 0 ? 1e3 * s9 / n : 0.0;
  state.counters["verify_cost_9_over_1"] = s1 > 0 ? s9 / s1 : 0.0;
}
BENCHMARK(BM_CudaVerifyCost)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const ComputeEnvironment env = query_compute_environment();
  benchmark::AddCustomContext("cuda_status", env.cuda_status);
  for (const GpuDeviceInfo& g : env.gpus)
    benchmark::AddCustomContext("gpu" + std::to_string(g.index), g.name + " (" + g.compute_capability + ", " +
                                                                     std::to_string(g.memory_total_bytes >> 20) + " MiB)");
  benchmark::AddCustomContext("cuda_driver", env.cuda_driver);
  benchmark::AddCustomContext("model", "synth " + preset());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
