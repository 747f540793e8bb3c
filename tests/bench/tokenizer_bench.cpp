// Encode/decode throughput of the GGUF tokenizers on llama.cpp's tokenizer test text (mixed
// scripts, emoji, code-like runs), repeated to about 64 KiB. Reports bytes/s of input text.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <benchmark/benchmark.h>

#include "core/gguf.h"
#include "core/tokenizer.h"

namespace {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("SPECMOE_DATA_DIR")) return env;
  return std::filesystem::path(SPECMOE_SOURCE_DIR) / ".." / "shared" / "data";
}

struct Fixture {
  std::unique_ptr<specmoe::core::Tokenizer> tok;
  std::string text;
};

// Loads the vocabulary once per name; an empty tokenizer means the data is absent.
const Fixture& fixture(const std::string& name) {
  static std::map<std::string, Fixture> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Fixture f;
  const auto gguf = data_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
  if (std::filesystem::exists(gguf)) {
    auto file = specmoe::core::GGUFFile::open(gguf.string());
    f.tok = specmoe::core::Tokenizer::from_gguf(*file);
    std::ifstream in(gguf.string() + ".inp", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string one = ss.str();
    while (!one.empty() && f.text.size() < 64 * 1024) f.text += one;
  }
  return cache.emplace(name, std::move(f)).first->second;
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const Fixture& f = fixture(name);
  if (!f.tok) {
    state.SkipWithError("shared test data not found (set SPECMOE_DATA_DIR)");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = f.tok->encode(f.text, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const Fixture& f = fixture(name);
  if (!f.tok) {
    state.SkipWithError("shared test data not found (set SPECMOE_DATA_DIR)");
    return;
  }
  const auto ids = f.tok->encode(f.text, false);
  for (auto _ : state) {
    auto s = f.tok->decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.text.size()));
}

BENCHMARK_CAPTURE(BM_Encode, llama_spm, std::string("llama-spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, gpt_2, std::string("gpt-2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, starcoder, std::string("starcoder"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, deepseek_llm, std::string("deepseek-llm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama_spm, std::string("llama-spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, gpt_2, std::string("gpt-2"))->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
