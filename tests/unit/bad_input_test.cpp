// A catalogue of bad inputs users actually produce (damaged downloads, hand-written TOML, wrong
// paths), each fed to the library and checked for the exact ErrorKind and a message that names
// the input (file, key or tensor) and the problem. The fuzz targets (tests/fuzz/) check that *any*
// input ends in an Error; this file pins down *which* Error the common mistakes give.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "core/gguf.h"
#include "core/model_config.h"
#include "core/tokenizer.h"
#include "experiments/experiment_spec.h"
#include "experiments/sweep.h"
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
  s.type = 10;  // Q2_K: a real ggml type specmoe does not read
  expect_gguf_error(build_gguf(s).bytes, ErrorKind::Unsupported, {"blk.0.attn_norm.weight", "Q2_K"}, "type Q2_K");
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

}  // namespace
