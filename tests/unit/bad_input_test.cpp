// A catalogue of bad inputs users actually produce (damaged downloads, hand-written TOML, wrong
// paths), each fed to the library and checked for the exact ErrorKind and a message that names
// the input (file, key or tensor) and the problem. The fuzz targets (tests/fuzz/) check that *any*
// input ends in an Error; this file pins down *which* Error the common mistakes give.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <functional>
#include <map>
#include <sstream>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/model_config.h"
#include "core/synth.h"
#include "core/tokenizer.h"
#include "experiments/executor.h"
#include "experiments/experiment.h"
#include "experiments/experiment_spec.h"
#include "experiments/sweep.h"
#include "cli_runner.h"
#include "test_data.h"

namespace fs = std::filesystem;
using namespace specmoe;
using namespace specmoe::core;

namespace {

std::string scratch(const std::string& stem) {
  static std::atomic<int> counter{0};
  const fs::path dir = specmoe::testing::scratch_dir() / fmt::format("bad_input_{}", ::getpid());
  fs::create_directories(dir);
  return (dir / fmt::format("{}_{}", counter++, stem)).string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void write_text(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << s;
}

// Runs `f`, expecting an Error of `kind` whose message contains every phrase in `phrases`.
void expect_error(const std::function<void()>& f, ErrorKind kind, const std::vector<std::string>& phrases,
                  const std::string& what) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << what << ": kind " << error_kind_name(e.kind()) << ", message: " << e.what();
    for (const auto& p : phrases) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << what << ": '" << p
                                                                                              << "' not in: " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": message is not one line";
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-specmoe exception: " << e.what();
    return;
  }
  ADD_FAILURE() << what << ": no error";
}

// ---------------------------------------------------------------------------------------------
// GGUF files built byte by byte (little endian), so each field can be corrupted on its own.

struct GgufBytes {
  std::vector<uint8_t> b;
  template <typename T>
  void put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void kv_u32(const std::string& k, uint32_t v) { str(k), put<uint32_t>(4), put<uint32_t>(v); }
  void kv_str(const std::string& k, const std::string& v) { str(k), put<uint32_t>(8), str(v); }
  void pad() { b.resize((b.size() + 31) / 32 * 32, 0); }
};

// A valid llama file with one F32 tensor "blk.0.attn_norm.weight" [8]; knobs corrupt one field.
struct GgufSpec {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  bool duplicate_key = false;
  uint32_t n_dims = 1;
  std::vector<uint64_t> ne = {8};
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct GgufLayout {
  std::vector<uint8_t> bytes;
  size_t kv_start, tensor_info_start, data_start;
};

GgufLayout build_gguf(const GgufSpec& s) {
  GgufBytes f;
  GgufLayout out{};
  f.put(s.magic);
  f.put(s.version);
  f.put<uint64_t>(1);                           // tensors
  f.put<uint64_t>(s.duplicate_key ? 4 : 3);     // metadata entries
  out.kv_start = f.b.size();
  f.kv_str("general.architecture", "llama");
  f.kv_u32("llama.context_length", 64);
  f.kv_u32("llama.block_count", 1);
  if (s.duplicate_key) f.kv_u32("llama.context_length", 128);
  out.tensor_info_start = f.b.size();
  f.str("blk.0.attn_norm.weight");
  f.put(s.n_dims);
  for (uint64_t ne : s.ne) f.put(ne);
  f.put(s.type);
  f.put(s.offset);
  f.pad();
  out.data_start = f.b.size();
  for (int k = 0; k < 8; ++k) f.put<float>(1.0f + static_cast<float>(k));
  out.bytes = f.b;
  return out;
}

void expect_gguf_error(const std::vector<uint8_t>& bytes, ErrorKind kind, std::vector<std::string> phrases,
                       const std::string& what) {
  const std::string path = scratch("bad.gguf");
  write_bytes(path, bytes);
  phrases.insert(phrases.begin(), path);
  expect_error([&] { GGUFFile::open(path); }, kind, phrases, what);
}

TEST(BadGguf, ValidBaseFileOpens) {
  const std::string path = scratch("good.gguf");
  write_bytes(path, build_gguf({}).bytes);
  auto f = GGUFFile::open(path);
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].ne, std::vector<int64_t>{8});
  EXPECT_EQ(f->get_int("llama.context_length"), 64);
}

TEST(BadGguf, TruncatedAtTenOffsets) {
  const GgufLayout g = build_gguf({});
  const size_t n = g.bytes.size();
  // In the magic, version, counts, a key, a value, the tensor info and the tensor data.
  const size_t cuts[] = {0, 3, 6, 12, 20, g.kv_start + 5, g.kv_start + 30, g.tensor_info_start + 10,
                         g.data_start - 1, n - 1};
  for (size_t cut : cuts) {
    ASSERT_LT(cut, n);
    expect_gguf_error(std::vector<uint8_t>(g.bytes.begin(), g.bytes.begin() + cut), ErrorKind::Format,
                      {"truncated"}, fmt::format("truncated at {} of {}", cut, n));
  }
}

TEST(BadGguf, WrongMagic) {
  GgufSpec s;
  s.magic = 0x4c4c5546;  // "FULL"
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"not a GGUF file", "magic"}, "wrong magic");
}

TEST(BadGguf, UnsupportedVersion) {
  for (uint32_t v : {1u, 4u, 0x03000000u}) {
    GgufSpec s;
    s.version = v;
    expect_gguf_error(build_gguf(s).bytes, ErrorKind::Unsupported, {"version", std::to_string(v)},
                      fmt::format("version {}", v));
  }
}

TEST(BadGguf, TensorOffsetPastEnd) {
  GgufSpec s;
  s.offset = 1 << 20;
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"blk.0.attn_norm.weight", "past the end"},
                    "offset past EOF");
}

TEST(BadGguf, UnknownTensorType) {
  GgufSpec s;
  s.type = 99;
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Unsupported, {"blk.0.attn_norm.weight", "99"}, "type 99");
  s.type = 28;  // F64: a real ggml type specmoe does not read
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Unsupported, {"blk.0.attn_norm.weight", "F64"}, "type F64");
}

TEST(BadGguf, MoreThanFourDims) {
  GgufSpec s;
  s.n_dims = 5;
  s.ne = {1, 1, 1, 1, 8};
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"blk.0.attn_norm.weight", "5 dimensions"}, "5 dims");
}

TEST(BadGguf, ElementCountOverflow) {
  GgufSpec s;
  s.n_dims = 2;
  s.ne = {uint64_t{1} << 40, uint64_t{1} << 40};
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"blk.0.attn_norm.weight", "overflow"}, "2^80 elements");
  s.ne = {0, uint64_t{1} << 40, uint64_t{1} << 40};  // zero elements, but rows() would overflow
  s.n_dims = 3;
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"blk.0.attn_norm.weight", "overflow"}, "0 x 2^80");
}

TEST(BadGguf, DuplicateKey) {
  GgufSpec s;
  s.duplicate_key = true;
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Format, {"duplicate", "llama.context_length"}, "duplicate key");
}

TEST(BadGguf, HugeArrayCountIsCheckedBeforeAllocating) {
  // 2^40 UINT8 elements claimed in a 100-byte file: rejected from the byte count, nothing reserved.
  GgufBytes f;
  f.put<uint32_t>(0x46554747);
  f.put<uint32_t>(3);
  f.put<uint64_t>(0);
  f.put<uint64_t>(1);
  f.str("tokenizer.ggml.token_type");
  f.put<uint32_t>(9);
  f.put<uint32_t>(0);
  f.put<uint64_t>(uint64_t{1} << 40);
  f.b.resize(f.b.size() + 16, 0);
  expect_gguf_error(f.b, ErrorKind::Format, {"tokenizer.ggml.token_type", "truncated"}, "huge array count");
}

// ---------------------------------------------------------------------------------------------
// Experiment TOML: every error is "FILE:LINE: key 'x.y': problem".

const char* kGoodToml = R"([models.m]
synth = "tiny"
[prompts]
list = ["Hello"]
[[strategy]]
name = "spec"
kind = "speculative"
target = "m"
drafter = "ngram"
)";

void expect_toml_error(const std::string& text, ErrorKind kind, const std::vector<std::string>& phrases,
                       const std::string& what) {
  const std::string path = scratch("experiment.toml");
  write_text(path, text);
  std::vector<std::string> all = {path};
  all.insert(all.end(), phrases.begin(), phrases.end());
  expect_error([&] { exp::expand_runs(exp::parse_experiment_file(path)); }, kind, all, what);
}

TEST(BadToml, BaseFileParses) {
  const std::string path = scratch("experiment.toml");
  write_text(path, kGoodToml);
  const auto spec = exp::parse_experiment_file(path);
  EXPECT_EQ(spec.strategies.size(), 1u);
  EXPECT_EQ(exp::expand_runs(spec).size(), 1u);
}

TEST(BadToml, SyntaxError) {
  expect_toml_error(std::string(kGoodToml) + "draft_max = = 3\n", ErrorKind::Config, {":10:", "syntax"},
                    "syntax error");
}

TEST(BadToml, UnknownKey) {
  expect_toml_error(std::string(kGoodToml) + "draft_maximum = 3\n", ErrorKind::Config,
                    {":10:", "strategy[0].draft_maximum", "unknown key"}, "unknown key");
}

TEST(BadToml, WrongValueType) {
  expect_toml_error(std::string(kGoodToml) + "draft_max = \"four\"\n", ErrorKind::Config,
                    {":10:", "strategy[0].draft_max", "expected an integer"}, "string for an integer");
}

TEST(BadToml, NegativeDraftLength) {
  expect_toml_error(std::string(kGoodToml) + "draft_max = -2\n", ErrorKind::Config,
                    {":10:", "strategy[0].draft_max", "-2"}, "negative draft length");
}

TEST(BadToml, NegativeTemperature) {
  expect_toml_error(std::string(kGoodToml) + "[sampling]\ntemperature = -0.5\n", ErrorKind::Config,
                    {":11:", "sampling.temperature", "-0.5"}, "temperature < 0");
}

TEST(BadToml, TopPOutsideZeroOne) {
  for (const char* v : {"0.0", "1.5", "-1"}) {
    expect_toml_error(std::string(kGoodToml) + "[sampling]\ntop_p = " + v + "\n", ErrorKind::Config,
                      {":11:", "sampling.top_p", "(0, 1]"}, fmt::format("top_p = {}", v));
  }
}

TEST(BadToml, SweepTooLarge) {
  std::string text = kGoodToml;
  text += "[sweep]\n";
  for (const char* k : {"temperature", "top_p", "min_p", "repeat_penalty"})
    text += fmt::format("{} = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.15, 0.25]\n", k);
  expect_toml_error(text, ErrorKind::Config, {"sweep", "10000 runs"}, "12^4 runs");
}

TEST(BadToml, MissingFileAndDevice) {
  expect_error([] { exp::parse_experiment_file("/nonexistent/dir/x.toml"); }, ErrorKind::Config,
               {"/nonexistent/dir/x.toml", "not found"}, "missing experiment file");
  expect_toml_error("[models.m]\nsynth = \"tiny\"\n[prompts]\nfile = \"/dev/zero\"\n", ErrorKind::Config,
                    {":4:", "prompts.file", "/dev/zero", "not a regular file"}, "prompts from /dev/zero");
}

// ---------------------------------------------------------------------------------------------
// Prompt files.

TEST(BadPrompts, EmptyPromptFile) {
  const std::string prompts = scratch("empty.txt");
  write_text(prompts, "# only a comment\n\n");
  expect_toml_error(fmt::format("[models.m]\nsynth = \"tiny\"\n[prompts]\nfile = \"{}\"\n", prompts),
                    ErrorKind::Config, {"prompts", "empty"}, "empty prompt file");
}

TEST(BadPrompts, BadJsonlLine) {
  const std::string jsonl = scratch("q.jsonl");
  write_text(jsonl, "{\"question_id\": 1, \"turns\": [\"ok\"]}\n{\"question_id\": 2, \"turns\": [1e999]}\n");
  expect_toml_error(fmt::format("[models.m]\nsynth = \"tiny\"\n[prompts]\njsonl = \"{}\"\n", jsonl),
                    ErrorKind::Config, {":4:", "prompts.jsonl", jsonl, "line 2"}, "number overflow in JSONL");
}

// ---------------------------------------------------------------------------------------------
// Models: vocabulary against the weights, draft against target.

// A small synth model (n_ctx 64), written once per test binary.
const std::string& synth_model() {
  static const std::string path = [] {
    core::SynthSpec spec;
    spec.n_vocab = 300;
    spec.n_embd = 32;
    spec.n_layer = 2;
    spec.n_ff = 64;
    spec.n_ctx = 64;
    const std::string p = scratch("synth.gguf");
    core::synth_write(spec, p, 7);
    return p;
  }();
  return path;
}

// Copies a GGUF file, passing its tokenizer.ggml.tokens through `edit` first.
std::string rewrite_tokens(const std::string& src, const std::function<void(std::vector<std::string>&)>& edit,
                           const std::string& stem) {
  auto f = GGUFFile::open(src);
  GGUFWriter w;
  for (const auto& [key, value] : f->metadata()) {
    if (key == "general.alignment") continue;
    if (key == "tokenizer.ggml.tokens") {
      std::vector<std::string> tokens = value.strings;
      edit(tokens);
      w.set_string_array(key, tokens);
      continue;
    }
    if ((key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type")) {
      // Keep these arrays as long as the tokens (the reader would reject a mismatch first).
      std::vector<std::string> probe = f->get_string_array("tokenizer.ggml.tokens");
      edit(probe);
      GGUFValue v = value;
      v.items.resize(std::min(v.items.size(), probe.size()));
      w.set_value(key, v);
      continue;
    }
    w.set_value(key, value);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, {t.data, t.nbytes});
  const std::string out = scratch(stem);
  w.write(out);
  return out;
}

TEST(BadModel, VocabularySizeDoesNotMatchTheWeights) {
  const std::string path = rewrite_tokens(synth_model(), [](auto& t) { t.resize(290); }, "short-vocab.gguf");
  expect_error([&] { core::Model::load(path); }, ErrorKind::Format, {path, "token_embd.weight", "290"},
               "290 tokens for 300 embedding rows");
}

TEST(BadModel, DraftVocabularyDiffersFromTarget) {
  // Same size, but two byte tokens swapped: ids would mean different text in draft and target.
  const std::string draft =
      rewrite_tokens(synth_model(), [](auto& t) { std::swap(t[100], t[101]); }, "swapped-vocab.gguf");
  const std::string toml = scratch("vocab-mismatch.toml");
  write_text(toml, fmt::format(R"([experiment]
output = "{}"
[models.target]
path = "{}"
[models.draft]
path = "{}"
[prompts]
list = ["Hi"]
[sampling]
max_tokens = 4
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"
[[strategy]]
name = "spec"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
)",
                               scratch("out-vocab"), synth_model(), draft));
  exp::RunOptions o;
  o.progress = false;
  expect_error([&] { exp::run_experiment(toml, o); }, ErrorKind::Config, {toml, "draft", draft, "token 100"},
               "draft/target vocabulary mismatch");
}

TEST(BadModel, PromptLongerThanTheContext) {
  const std::string toml = scratch("long-prompt.toml");
  write_text(toml, fmt::format(R"([experiment]
output = "{}"
[models.target]
path = "{}"
[prompts]
list = ["{}"]
[sampling]
max_tokens = 8
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"
)",
                               scratch("out-long"), synth_model(), std::string(100, 'a')));
  exp::RunOptions o;
  o.progress = false;
  expect_error([&] { exp::run_experiment(toml, o); }, ErrorKind::Config,
               {toml, "sampling.max_tokens", "p0", "context", "64"}, "101-token prompt, 64-token context");
}

// ---------------------------------------------------------------------------------------------
// The runner: output folder, interrupt and resume. A fake executor stands in for the engine.

class CountingExecutor : public exp::RunExecutor {
 public:
  std::vector<std::string> drafter_names() const override { return {"ngram"}; }
  std::vector<std::string> verifier_names() const override { return {"speculative", "greedy"}; }
  void prepare(const exp::ExperimentSpec&, const std::vector<exp::RunSpec>&) override {}
  exp::PromptRecord execute(const exp::ExecutionRequest& req) override {
    ++calls[req.run->name];
    if (--calls_until_sigint == 0) std::raise(SIGINT);  // as if the user pressed Ctrl-C now
    exp::PromptRecord r;
    r.tokens = {3, 4, 5};
    r.text = "abc";
    r.wall_s = 0.01;
    return r;
  }
  void finish_run(const exp::RunSpec& run) override { ++finished[run.name]; }
  std::map<std::string, int> calls, finished;
  int calls_until_sigint = -1;
};

std::string runner_toml(const std::string& output) {
  const std::string toml = scratch("runner.toml");
  write_text(toml, fmt::format(R"([experiment]
output = "{}"
warmup = 0
[models.m]
synth = "tiny"
[prompts]
list = ["one", "two"]
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
[[strategy]]
name = "ngram-a"
kind = "speculative"
target = "m"
drafter = "ngram"
[[strategy]]
name = "ngram-b"
kind = "speculative"
target = "m"
drafter = "ngram"
verifier = "greedy"
)",
                               output));
  return toml;
}

TEST(BadRun, UnwritableOutputFolder) {
  // A folder below a regular file can never be created (root ignores permission bits, so a
  // read-only folder would not do).
  const std::string file = scratch("not-a-folder");
  write_text(file, "x");
  const std::string toml = runner_toml(file + "/out");
  CountingExecutor ex;
  exp::RunOptions o;
  o.progress = false;
  expect_error([&] { exp::run_experiment(toml, o, ex); }, ErrorKind::Config,
               {toml, "experiment.output", file + "/out"}, "output below a regular file");
  EXPECT_TRUE(ex.calls.empty()) << "a generation ran before the output folder was checked";
}

TEST(BadRun, InterruptedRunResumesWithoutLossOrDuplicates) {
  const std::string out = scratch("out-resume");
  const std::string toml = runner_toml(out);
  exp::RunOptions o;
  o.progress = false;

  CountingExecutor first;
  first.calls_until_sigint = 3;  // run "ar" finishes (2 prompts); "ngram-a" is cut after its first prompt
  EXPECT_EQ(exp::run_experiment(toml, o, first), exp::kRunInterrupted);
  EXPECT_EQ(first.finished, (std::map<std::string, int>{{"ar", 1}}));
  EXPECT_TRUE(fs::exists(fs::path(out) / "runs" / "ar.json"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "runs" / "ngram-a.json")) << "a run cut short was saved";

  EXPECT_TRUE(fs::exists(fs::path(out) / "runs" / "ngram-a.partial.jsonl")) << "the cut run's journal is gone";

  CountingExecutor second;
  o.resume = true;
  EXPECT_EQ(exp::run_experiment(toml, o, second), exp::kRunOk);
  // The finished run is skipped; the cut run continues after its journaled first prompt; the
  // rest runs once.
  EXPECT_EQ(second.calls, (std::map<std::string, int>{{"ngram-a", 1}, {"ngram-b", 2}}));
  EXPECT_EQ(second.finished, (std::map<std::string, int>{{"ngram-a", 1}, {"ngram-b", 1}}));

  std::ifstream in(fs::path(out) / "report.json");
  ASSERT_TRUE(in) << "no report.json in " << out;
  const auto report = nlohmann::json::parse(in);
  std::map<std::string, int> in_report;
  for (const auto& r : report.at("runs")) {
    ++in_report[r.value("name", "")];
  }
  EXPECT_EQ(in_report, (std::map<std::string, int>{{"ar", 1}, {"ngram-a", 1}, {"ngram-b", 1}}));
  for (const char* run : {"ar", "ngram-a", "ngram-b"}) {
    EXPECT_TRUE(fs::exists(fs::path(out) / "runs" / (std::string(run) + ".json")));
    EXPECT_FALSE(fs::exists(fs::path(out) / "runs" / (std::string(run) + ".partial.jsonl")));
  }
}

// ---------------------------------------------------------------------------------------------
// The CLI (build/specmoe): bad flags and files end in one "specmoe: error: ..." line and exit 1.
// The error kind is not printed, so these check the exit status and that the line names the flag
// or file and the value.

// Splits a command line on spaces (the arguments here hold none) and runs it without a shell.
specmoe::testing::CliRun run_cli(const std::string& args) {
  std::vector<std::string> argv;
  std::istringstream in(args);
  for (std::string a; in >> a;) argv.push_back(a);
  return specmoe::testing::run_cli(argv, {}, 120);
}

// One line "specmoe: error: ..." on stderr naming every phrase, nothing on stdout, exit 1.
void expect_cli_error(const std::string& args, const std::vector<std::string>& phrases) {
  const specmoe::testing::CliRun r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << "specmoe " << args << "\n" << r.describe();
  EXPECT_EQ(r.err.rfind("specmoe: error: ", 0), 0u) << "specmoe " << args << "\n" << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  EXPECT_EQ(r.out, "") << "specmoe " << args;
  for (const auto& p : phrases)
    EXPECT_NE(r.err.find(p), std::string::npos) << "specmoe " << args << ": '" << p << "' not in: " << r.err;
}

TEST(BadCli, SamplingFlagsOutOfRange) {
  SPECMOE_REQUIRE_CLI();
  const std::string m = synth_model();
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --temp -0.5", m), {"temperature", "-0.5"});
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --top-p 1.5", m), {"top_p", "1.5"});
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --top-p 0", m), {"top_p", "0"});
}

TEST(BadCli, ChatTemplateChoices) {
  SPECMOE_REQUIRE_CLI();
  const std::string m = synth_model();
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --chat-template chatmlx", m),
                   {"unknown chat template 'chatmlx'", "auto, none"});
  // Every llama.cpp name renders (kimi-k2 was the last one refused); its special-token texts are bytes
  // in the synth vocabulary, so the prompt needs a longer context than the default 64.
  const specmoe::testing::CliRun kimi =
      run_cli(fmt::format("speculate -m {} -p hi -n 2 --drafter ngram --chat-template kimi-k2 -c 256", m));
  EXPECT_EQ(kimi.exit_code, 0) << kimi.describe();
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --chat-template none --system be-brief", m),
                   {"--system needs a chat template"});
  // The synth vocabulary has no template: auto means the raw text, where a system message cannot go.
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 --system be-brief", m),
                   {"--system needs a chat template", "no tokenizer.chat_template"});
  // A name works on any model, and --json says which template was used.
  const specmoe::testing::CliRun ok = run_cli(fmt::format("generate -m {} -p hi -n 2 --chat-template chatml --json", m));
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_NE(ok.out.find("\"chat_template\":\"chatml\""), std::string::npos) << ok.describe();
}

TEST(BadCli, NegativeDraftLength) {
  SPECMOE_REQUIRE_CLI();
  expect_cli_error(fmt::format("speculate -m {} -p hi -n 2 --drafter ngram --draft-max -2", synth_model()),
                   {"draft", "-2"});
}

TEST(BadCli, TruncatedModelFile) {
  SPECMOE_REQUIRE_CLI();
  std::ifstream in(synth_model(), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  const std::string path = scratch("half.gguf");
  write_bytes(path, bytes);
  expect_cli_error(fmt::format("info -m {}", path), {path, "truncated"});
}

// ---------------------------------------------------------------------------------------------
// Limits (issue 16, item 4): each case ends in one line naming the problem and a non-zero exit,
// never a crash, a hang or a silent cap. The synth model's context is 64 tokens.

TEST(BadLimits, PromptLongerThanTheContext) {
  SPECMOE_REQUIRE_CLI();
  const std::string a40(40, 'a'), a100(100, 'a');
  expect_cli_error(fmt::format("generate -m {} -c 16 -n 4 -p {}", synth_model(), a40),
                   {"prompt has 41 tokens", "longer than the context (16)"});
  expect_cli_error(fmt::format("speculate -m {} --drafter ngram -n 4 -p {}", synth_model(), a100),
                   {"prompt has 101 tokens", "longer than the context (64)"});
}

TEST(BadLimits, NPredictBeyondTheContext) {
  SPECMOE_REQUIRE_CLI();
  // "hi" is BOS + 2 byte tokens: 3 + 100 > 64.
  expect_cli_error(fmt::format("generate -m {} -p hi -n 100", synth_model()),
                   {"-n 100", "prompt's 3 tokens", "exceed the context (64)", "-n 61 or less"});
  expect_cli_error(fmt::format("speculate -m {} --drafter ngram -p hi -n 62", synth_model()),
                   {"-n 62", "exceed the context (64)", "-n 61 or less"});
  expect_cli_error(fmt::format("generate -m {} -p hi -c 8 -n 6", synth_model()), {"-n 6", "context (8)", "-n 5 or less"});
  // Exactly filling the context is allowed, and the default -n (128) is capped, not an error.
  const auto fits = run_cli(fmt::format("generate -m {} -p hi -n 61 --temp 0", synth_model()));
  EXPECT_EQ(fits.exit_code, 0) << fits.describe();
  const auto capped = run_cli(fmt::format("generate -m {} -p hi --temp 0 --json", synth_model()));
  ASSERT_EQ(capped.exit_code, 0) << capped.describe();
  EXPECT_EQ(nlohmann::json::parse(capped.out).at("tokens").size(), 61u);
}

TEST(BadLimits, KvCacheLargerThanMemory) {
  SPECMOE_REQUIRE_CLI();
  // 2e9 positions x 2 layers x 2 (K, V) x 16 KV dims... of f16: far beyond any machine's memory.
  expect_cli_error(fmt::format("generate -m {} -p hi -c 2000000000 -n 1999999000", synth_model()),
                   {"KV cache of 1999999003 tokens", "GiB", "memory"});
  expect_cli_error(fmt::format("speculate -m {} --drafter ngram -p hi -c 2000000000 -n 1999999000", synth_model()),
                   {"KV cache", "GiB", "memory"});
}

// An experiment TOML with `extra` appended to a valid one-run config.
std::string limits_toml(const std::string& extra, const std::string& experiment = "") {
  const std::string toml = scratch("limits.toml");
  write_text(toml, fmt::format("[experiment]\noutput = \"{}\"\n{}[models.m]\nsynth = \"tiny\"\n[prompts]\nlist = "
                               "[\"Hello\"]\n[[strategy]]\nname = \"ar\"\nkind = \"autoregressive\"\ntarget = \"m\"\n{}",
                               scratch("out-limits"), experiment, extra));
  return toml;
}

TEST(BadLimits, NegativeThreads) {
  SPECMOE_REQUIRE_CLI();
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 -t -1", synth_model()), {"--threads -1", "0 (all cores)", "4096"});
  expect_cli_error(fmt::format("speculate -m {} --drafter ngram -p hi -n 2 --threads -1", synth_model()), {"--threads -1"});
  expect_cli_error(fmt::format("run {} -t -1", limits_toml("")), {"--threads -1", "4096"});
  const std::string toml = limits_toml("", "threads = -1\n");
  expect_cli_error(fmt::format("run {}", toml), {toml + ":3:", "experiment.threads", "must be >= 0, got -1"});
}

TEST(BadLimits, TenThousandThreads) {
  SPECMOE_REQUIRE_CLI();
  expect_cli_error(fmt::format("generate -m {} -p hi -n 2 -t 10000", synth_model()), {"--threads 10000", "4096"});
  expect_cli_error(fmt::format("perplexity -m {} -f /dev/null -t 10000", synth_model()), {"--threads 10000"});
  expect_cli_error(fmt::format("run {} -t 10000", limits_toml("")), {"--threads 10000", "4096"});
  const std::string toml = limits_toml("", "threads = 10000\n");
  expect_cli_error(fmt::format("run {}", toml), {toml + ":3:", "experiment.threads", "must be <= 4096, got 10000"});
  // 0 means all cores, as documented.
  const auto all = run_cli(fmt::format("generate -m {} -p hi -n 2 -t 0", synth_model()));
  EXPECT_EQ(all.exit_code, 0) << all.describe();
}

TEST(BadLimits, SweepOfAMillionRuns) {
  SPECMOE_REQUIRE_CLI();
  // 10^6 runs: refused from the count before any run is built (in milliseconds, not minutes).
  std::string sweep = "[sweep]\n";
  sweep += "temperature = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]\n";
  sweep += "top_p = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\n";
  sweep += "min_p = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]\n";
  sweep += "repeat_penalty = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9]\n";
  sweep += "top_k = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  sweep += "max_tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  const std::string toml = limits_toml(sweep);
  const auto t0 = std::chrono::steady_clock::now();
  expect_cli_error(fmt::format("run {}", toml), {toml, "sweep", "more than 10000 runs"});
  expect_cli_error(fmt::format("run {} --dry-run", toml), {"more than 10000 runs"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST(BadLimits, JsonlPromptFileWithAMalformedLine) {
  SPECMOE_REQUIRE_CLI();
  const std::string jsonl = scratch("malformed.jsonl");
  write_text(jsonl, "{\"question_id\": 1, \"turns\": [\"one\"]}\n{\"question_id\": 2, \"turns\": [\"two\"]}\n"
                    "{\"question_id\": 3, \"turns\": [\"thr\n{\"question_id\": 4, \"turns\": [\"four\"]}\n");
  const std::string toml = scratch("malformed.toml");
  write_text(toml, fmt::format("[models.m]\nsynth = \"tiny\"\n[prompts]\njsonl = \"{}\"\n[[strategy]]\nname = \"ar\"\n"
                               "kind = \"autoregressive\"\ntarget = \"m\"\n",
                               jsonl));
  expect_cli_error(fmt::format("run {}", toml), {toml + ":4:", "prompts.jsonl", jsonl + " line 3"});
  expect_cli_error(fmt::format("run {} --dry-run", toml), {jsonl + " line 3"});
}

}  // namespace
