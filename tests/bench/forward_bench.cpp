// Forward-pass speed on the synthetic `target` (~144M parameters, F16, ~288 MB of weights):
// one-token decode and 2/4/8/16-token batched forwards at a context of 128 tokens, with the
// achieved weight-read bandwidth (weight bytes per forward / time) next to a plain memory
// bandwidth measurement (summing 1 GiB), plus the draft's forward and the target/draft greedy
// agreement; the target with Q8_0 and Q4_K weights (end-to-end tokens/s per type); stories260K's
// one-token forward (per-op overhead); decode at a 4096-token context with f32, f16 and q8_0 KV
// caches (the target and a real model). Caches are the default f16 unless a benchmark says. Models are synthesized once into $TMPDIR/specmoe-bench (seed 1).
//   ./build/tests/bench_forward                      (SPECMOE_THREADS=n to set threads)
//   ./build/tests/bench_forward --benchmark_filter='TargetForward' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <vector>

#include "core/model.h"
#include "core/synth.h"
#include "kernels/cpu/ops.h"

using namespace specmoe;
using namespace specmoe::core;

namespace {

constexpr int kContext = 128;

int bench_threads() {
  if (const char* t = std::getenv("SPECMOE_THREADS")) return std::atoi(t);
  return 0;  // all hardware threads
}

// The preset's model with its 2-D weights in `type` (F16 = the preset as is).
std::string synth_path(const std::string& preset, DType type = DType::F16) {
  const auto dir = std::filesystem::temp_directory_path() / "specmoe-bench";
  std::filesystem::create_directories(dir);
  const std::string suffix = type == DType::F16 ? "" : std::string("-") + dtype_name(type);
  const auto path = dir / ("synth-" + preset + suffix + "-seed1.gguf");
  // Rewritten when the synth recipe is newer than the cached file would be hard to detect;
  // delete the folder after changing core/synth.cpp.
  if (!std::filesystem::exists(path)) {
    SynthSpec spec = synth_spec(preset);
    if (type != DType::F16) spec.type = type;
    synth_write(spec, path.string(), 1);
  }
  return path.string();
}

Model& model(const std::string& preset, DType type = DType::F16) {
  static std::vector<std::pair<std::string, std::unique_ptr<Model>>> models;
  const std::string key = preset + "/" + dtype_name(type);
  for (auto& [k, m] : models)
    if (k == key) return *m;
  LoadOptions o;
  o.n_threads = bench_threads();
  models.emplace_back(key, Model::load(synth_path(preset, type), o));
  return *models.back().second;
}

// A cache holding kContext tokens of byte text, for the forwards to attend over.
KVCache prefilled_cache(Model& m) {
  KVCache kv = m.new_cache(kContext + 64);
  std::vector<int32_t> ids;
  for (int i = 0; i < kContext; ++i) ids.push_back(3 + 'a' + i % 26);
  std::vector<float> logits;
  ForwardOptions o;
  o.logits_all = false;
  m.forward(ids, kv, o).logits.to_host(logits);
  return kv;
}

void run_forward(benchmark::State& state, const std::string& preset, DType type, int T) {
  Model& m = model(preset, type);
  KVCache kv = prefilled_cache(m);
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = 3 + 'e' + t;
  std::vector<float> logits;
  for (auto _ : state) {
    m.forward(ids, kv).logits.to_host(logits);  // logits for every token, as verification needs
    kv.truncate(kContext);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  // Each forward reads every weight once, whatever T is.
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(m.weight_bytes_per_token()) / 1e9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_MB"] = static_cast<double>(m.weight_bytes_per_token()) / 1e6;
  state.counters["threads"] = m.backend().threads();
}

void BM_TargetForward(benchmark::State& state) { run_forward(state, "target", DType::F16, static_cast<int>(state.range(0))); }
BENCHMARK(BM_TargetForward)->ArgName("tokens")->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->Arg(8)->Arg(9)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// The target with quantized weights (end-to-end tokens/s per type). Args: ggml type id, tokens.
void BM_TargetForwardQuant(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  state.SetLabel(dtype_name(type));
  run_forward(state, "target", type, static_cast<int>(state.range(1)));
}
BENCHMARK(BM_TargetForwardQuant)
    ->ArgNames({"dtype", "tokens"})
    ->ArgsProduct({{static_cast<int64_t>(DType::Q8_0), static_cast<int64_t>(DType::Q4_K)}, {1, 8}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_DraftForward(benchmark::State& state) { run_forward(state, "draft", DType::F16, static_cast<int>(state.range(0))); }
BENCHMARK(BM_DraftForward)->ArgName("tokens")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// stories260K (dim 64, 5 layers, F32; shared test data, $SPECMOE_DATA_DIR/models): a one-token forward is ~40 tiny ops, so
// this measures the per-op overhead (thread pool hand-off, dispatch) rather than arithmetic.
// Arg = threads of the model's pool.
void BM_Stories260KForward(benchmark::State& state) {
  const char* env = std::getenv("SPECMOE_DATA_DIR");  // as tests/test_data.h
  const auto dir = env ? std::filesystem::path(env) : std::filesystem::path(SPECMOE_SOURCE_DIR) / ".." / "shared" / "data";
  const auto path = dir / "models" / "stories260K.gguf";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("models/stories260K.gguf not found (set SPECMOE_DATA_DIR)");
    return;
  }
  LoadOptions o;
  o.n_threads = static_cast<int>(state.range(0));
  auto m = Model::load(path.string(), o);
  KVCache kv = m->new_cache(256);
  std::vector<int32_t> ids = {1};
  std::vector<float> logits;
  for (int i = 0; i < 64; ++i) m->forward(ids, kv).logits.to_host(logits);  // a context of 64 tokens
  for (auto _ : state) {
    m->forward(ids, kv).logits.to_host(logits);
    kv.truncate(64);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Stories260KForward)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One F16 matmul of the target's FFN shape (1024 -> 2816, 5.8 MB: fits in L3, so this shows the
// kernel's arithmetic rate rather than memory): GFLOP/s at T tokens, single thread.
void BM_MatmulF16(benchmark::State& state) {
  const int64_t n_in = 1024, n_out = 2816, T = state.range(0);
  std::vector<uint16_t> w(static_cast<size_t>(n_in * n_out));
  for (size_t i = 0; i < w.size(); ++i) w[i] = fp32_to_fp16(static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f);
  const auto view = kernels::cpu::MatrixView::make(DType::F16, w.data(), n_in, n_out);
  std::vector<float> x(static_cast<size_t>(T * n_in), 0.25f), y(static_cast<size_t>(T * n_out));
  kernels::cpu::ThreadPool pool(1);
  for (auto _ : state) {
    kernels::cpu::matmul(pool, x.data(), T, view, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n_in * n_out * T / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulF16)->ArgName("tokens")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMicrosecond);

// Streaming read of 1 GiB of floats split over the same number of threads as the model: the
// ceiling for weight_GB/s above.
void BM_MemoryBandwidth(benchmark::State& state) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> buf(n, 1.0f);
  kernels::cpu::ThreadPool pool(bench_threads());
  const int64_t chunk = 1 << 20;
  std::vector<double> partial((n + chunk - 1) / chunk);
  for (auto _ : state) {
    pool.parallel_for(static_cast<int64_t>(partial.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const float* p = buf.data() + c * chunk;
        const int64_t len = std::min<int64_t>(chunk, static_cast<int64_t>(n) - c * chunk);
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i + 8 <= len; i += 8)
          for (int l = 0; l < 8; ++l) s[l] += p[i + l];
        partial[c] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
      }
    });
    benchmark::DoNotOptimize(std::accumulate(partial.begin(), partial.end(), 0.0));
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n * sizeof(float)) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool.n_threads();
}
BENCHMARK(BM_MemoryBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// Decode at a long context with each KV cache type (llama.cpp's -ctk / -ctv): one-token forwards
// at position `context` over a cache holding `context` tokens, on the synthetic target (model 0)
// or, when $SPECMOE_MODELS (else ~/.cache/specmoe/models) has it, Qwen2.5-Coder-1.5B-Instruct
// Q4_K_M (model 1). The cached rows are marked stored without a prefill (KVCache::append):
// attention reads and multiplies every visible row whatever its values, so a step costs what it
// costs after a real prompt of that length, without the minutes a 4096-token prefill takes on
// two cores. kv_MB: cache bytes one step reads (every row's keys and values, every layer).
//   ./build/tests/bench_forward --benchmark_filter=DecodeAtContext --benchmark_repetitions=3
void BM_DecodeAtContext(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const auto type = static_cast<DType>(state.range(1));
  const int context = static_cast<int>(state.range(2));
  std::string path;
  if (which == 0) {
    path = synth_path("target");
  } else {
    const char* env = std::getenv("SPECMOE_MODELS");
    const char* home = std::getenv("HOME");
    const auto dir = env && *env ? std::filesystem::path(env)
                                 : std::filesystem::path(home ? home : "/nonexistent") / ".cache" / "specmoe" / "models";
    path = (dir / "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf").string();
    if (!std::filesystem::exists(path)) {
      state.SkipWithError(("not found: " + path + " (scripts/fetch-models.sh)").c_str());
      return;
    }
  }
  LoadOptions o;
  o.n_threads = bench_threads();
  o.cache_types = {type, type};
  auto m = Model::load(path, o);
  state.SetLabel(std::string(which == 0 ? "synth target" : "Qwen2.5-Coder-1.5B Q4_K_M") + ", kv " +
                 kv_cache_type_name(type));
  KVCache kv = m->new_cache(context + 8);
  std::vector<int32_t> positions(static_cast<size_t>(context));
  std::iota(positions.begin(), positions.end(), 0);
  kv.append(positions);
  const int32_t one[1] = {3 + 'e'};
  ForwardOptions last;
  last.logits_all = false;
  std::vector<int32_t> ids;
  m->forward(one, kv, last).logits.argmax();  // pages the weights in
  kv.truncate(context);
  for (auto _ : state) {
    ids = m->forward(one, kv, last).logits.argmax();
    kv.truncate(context);
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_MB"] = static_cast<double>(kv.bytes_per_token()) * context / 1e6;
  state.counters["kv_B/token"] = static_cast<double>(kv.bytes_per_token());
  state.counters["weight_MB"] = static_cast<double>(m->weight_bytes_per_token()) / 1e6;
  state.counters["threads"] = m->backend().threads();
}
BENCHMARK(BM_DecodeAtContext)
    ->ArgNames({"model", "kv", "context"})
    ->ArgsProduct({{0, 1},
                   {static_cast<int64_t>(DType::F32), static_cast<int64_t>(DType::F16), static_cast<int64_t>(DType::Q8_0)},
                   {4096}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Greedy agreement of draft with target (acceptance rate at temperature 0), measured once.
void BM_TargetDraftAgreement(benchmark::State& state) {
  const std::vector<std::string> prompts = {"Once upon a time", "The quick brown fox", "int main() {",
                                            "In 1905, Einstein", "Hello"};
  double agreement = 0.0;
  for (auto _ : state) agreement = synth_greedy_agreement(model("target"), model("draft"), prompts, 200);
  state.counters["agreement"] = agreement;
  state.counters["tokens"] = 200.0 * prompts.size();
}
BENCHMARK(BM_TargetDraftAgreement)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
