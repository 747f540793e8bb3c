// The fuzz entry points, shared by the libFuzzer targets (tests/fuzz/*_fuzz.cpp) and by the
// regression replay in the normal suite (tests/unit/fuzz_regression_test.cpp), so a saved crashing
// input is replayed through exactly the code that found it.
//
// Contract under test: any byte sequence yields either a loaded object or one specmoe::Error whose
// message names the input. Each run_* function catches specmoe::Error (returning Outcome::Rejected)
// and lets everything else escape: a std::bad_alloc, std::out_of_range or library exception that
// reaches the caller is a bug (libFuzzer reports it as a crash, gtest as a failure). Extra
// invariants that must hold for accepted inputs (round trips, ids in range) throw OracleFailure.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "core/gguf.h"
#include "core/quantize.h"
#include "core/model.h"
#include "core/model_config.h"
#include "core/tokenizer.h"
#include "experiments/config_hash.h"
#include "experiments/experiment_spec.h"
#include "experiments/prompt_loader.h"
#include "experiments/sweep.h"
#include "kernels/cpu/quant.h"

namespace specmoe::fuzz {

enum class Outcome { Accepted, Rejected };

struct OracleFailure : std::logic_error {
  using std::logic_error::logic_error;
};

#define SPECMOE_FUZZ_CHECK(cond, what) \
  do {                                 \
    if (!(cond)) throw ::specmoe::fuzz::OracleFailure(std::string("fuzz oracle failed: ") + (what)); \
  } while (0)

// A private scratch folder per process (fuzzers run several processes with -jobs).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specmoe-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path.string());
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// An Error from parsing `name` must say which input it is about.
inline void check_names_input(const Error& e, std::string_view name) {
  const std::string_view msg = e.what();
  SPECMOE_FUZZ_CHECK(!msg.empty(), "empty error message");
  SPECMOE_FUZZ_CHECK(msg.find(name) != std::string_view::npos,
                     "error message does not name the input '" + std::string(name) + "': " + std::string(msg));
}

// ---------------------------------------------------------------------------------------------
// Tokenizer: encode/decode with a given tokenizer.

// Exercises one tokenizer on `text` and on `text` read as little-endian int32 ids.
// `roundtrip`: decode(encode(text)) must give text back (vocabularies that cover every byte, no
// special parsing, no literal "▁" which SentencePiece byte runs decode to a space). SentencePiece
// with add_space_prefix also prefixes a space after every special or user-defined token (as
// llama.cpp does), which decode keeps, so those vocabularies skip the check when `text` contains
// one of `prefix_tokens`.
inline void exercise_tokenizer(const core::Tokenizer& tok, std::string_view text, unsigned flags, bool roundtrip,
                               const std::vector<std::string>& prefix_tokens = {}) {
  const bool add_bos = (flags & 1) && tok.bos() >= 0;
  const bool parse_special = flags & 2;
  const int n_vocab = tok.n_vocab();
  SPECMOE_FUZZ_CHECK(n_vocab > 0, "tokenizer with an empty vocabulary");

  if (!(flags & 4)) {
    std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
    for (int32_t id : ids) SPECMOE_FUZZ_CHECK(id >= 0 && id < n_vocab, "encode produced an out-of-range id");
    if (add_bos) SPECMOE_FUZZ_CHECK(!ids.empty() && ids[0] == tok.bos(), "add_bos did not prepend BOS");
    const std::string back = tok.decode(ids);
    for (const auto& t : prefix_tokens) roundtrip &= text.find(t) == std::string_view::npos;
    if (roundtrip && !parse_special && text.find("\xE2\x96\x81") == std::string_view::npos)
      SPECMOE_FUZZ_CHECK(back == text, "decode(encode(text)) != text");
    for (int32_t id : ids) (void)tok.token_to_piece(id, true);
    return;
  }
  // Arbitrary id sequences: out-of-range ids must be Error(InvalidArgument), never a crash.
  std::vector<int32_t> ids(text.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * 4);
  bool any_bad = false;
  for (int32_t& id : ids) {
    if (!(flags & 8)) id = static_cast<int32_t>(static_cast<uint32_t>(id) % static_cast<uint32_t>(n_vocab + 2)) - 1;
    any_bad |= id < 0 || id >= n_vocab;
  }
  try {
    (void)tok.decode(ids);
    SPECMOE_FUZZ_CHECK(!any_bad, "decode accepted an out-of-range id");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(any_bad, std::string("decode of valid ids threw: ") + e.what());
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "decode of a bad id threw the wrong kind");
  }
  for (int32_t id : ids) {
    const bool bad = id < 0 || id >= n_vocab;
    try {
      (void)tok.token_to_piece(id, flags & 16);
      (void)tok.token_text(id);
      (void)tok.token_type(id);
      (void)tok.is_eog(id);
      SPECMOE_FUZZ_CHECK(!bad, "token_to_piece accepted an out-of-range id");
    } catch (const Error& e) {
      SPECMOE_FUZZ_CHECK(bad, std::string("token_to_piece of a valid id threw: ") + e.what());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GGUF: open from memory, walk everything, then build the model config and the tokenizer.

inline constexpr const char* kGgufName = "fuzz-input.gguf";

inline void walk_gguf(const core::GGUFFile& f) {
  using core::GGUFType;
  for (const auto& [key, v] : f.metadata()) {
    SPECMOE_FUZZ_CHECK(f.find(key) == &v, "find() does not return the listed value");
    try {
      switch (v.type) {
        case GGUFType::STRING: (void)f.get_string(key); break;
        case GGUFType::BOOL: (void)f.get_bool(key, false); break;
        case GGUFType::FLOAT32: case GGUFType::FLOAT64: (void)f.get_float(key); break;
        case GGUFType::ARRAY:
          if (v.elem_type == GGUFType::STRING) (void)f.get_string_array(key);
          else if (v.elem_type == GGUFType::FLOAT32 || v.elem_type == GGUFType::FLOAT64) (void)f.get_float_array(key);
          else if (v.elem_type != GGUFType::ARRAY && v.elem_type != GGUFType::BOOL) (void)f.get_int_array(key);
          break;
        default: (void)f.get_int(key); (void)f.get_float(key); break;
      }
    } catch (const Error& e) {
      check_names_input(e, kGgufName);  // e.g. a UINT64 above INT64_MAX
    }
  }
  std::vector<float> row;
  for (const auto& t : f.tensors()) {
    SPECMOE_FUZZ_CHECK(f.find_tensor(t.name) == &t, "find_tensor() does not return the listed tensor");
    SPECMOE_FUZZ_CHECK(!t.ne.empty() && t.ne.size() <= 4, "tensor with a bad dimension count was accepted");
    const int64_t rows = t.rows();
    SPECMOE_FUZZ_CHECK(t.nbytes == dtype_row_bytes(t.type, t.ne[0]) * static_cast<size_t>(rows),
                       "tensor byte size disagrees with its shape");
    SPECMOE_FUZZ_CHECK(t.offset + t.nbytes <= f.file_size(), "tensor ends past the end of the file");
    if (t.nbytes == 0) continue;
    // Touch the first and last byte (ASan checks them against the exact-size buffer) and
    // dequantize the first rows, whatever garbage they hold.
    volatile uint8_t sink = t.data[0] ^ t.data[t.nbytes - 1];
    (void)sink;
    const int64_t n0 = t.ne[0];
    if (n0 <= 0 || n0 > (1 << 14)) continue;
    if (dtype_is_integer(t.type)) {  // integer tensors (e.g. EAGLE-3's d2t map) have no float rows
      bool refused = false;
      try {
        kernels::cpu::dequantize_row(t.type, t.data, row.data(), 0);
      } catch (const Error&) {
        refused = true;
      }
      SPECMOE_FUZZ_CHECK(refused, "dequantize_row accepted an integer tensor");
      continue;
    }
    row.resize(static_cast<size_t>(n0));
    const size_t row_bytes = dtype_row_bytes(t.type, n0);
    for (int64_t r = 0; r < std::min<int64_t>(rows, 2); ++r)
      kernels::cpu::dequantize_row(t.type, t.data + r * row_bytes, row.data(), n0);
  }
}

// The whole model: Model::load binds every tensor against the config, then a KV cache and a
// two-token forward run on whatever weights the file holds (NaNs are fine; reads out of bounds
// are not). Model::load takes a path, so the bytes go through a scratch file.
// Returns whether the model loaded and ran.
inline bool load_model(std::span<const uint8_t> bytes) {
  const std::string path = (scratch_dir() / kGgufName).string();
  write_file(path, bytes);
  std::unique_ptr<core::Model> m;
  core::LoadOptions options;
  options.n_threads = 1;
  try {
    m = core::Model::load(path, options);
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
    return false;
  }
  const core::ModelConfig& c = m->config();
  (void)m->weight_bytes_per_token();
  try {
    // The default cache is the training context: checked against memory, not allocated blindly.
    // Only build it when small, since a legitimate big one would make every input slow.
    const double cache_bytes = 8.0 * c.n_layer * c.n_ctx_train * static_cast<double>(c.kv_dim());
    core::KVCache kv = cache_bytes < (64 << 20) ? m->new_cache(0) : m->new_cache(8);
    std::vector<float> logits;
    const std::vector<int32_t> tokens = {0, std::min(1, c.n_vocab - 1)};
    m->forward(tokens, kv).logits.to_host(logits);
    SPECMOE_FUZZ_CHECK(logits.size() == 2 * static_cast<size_t>(c.n_vocab), "forward wrote the wrong logits size");
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
    return false;
  }
  return true;
}

inline Outcome run_gguf(std::span<const uint8_t> bytes) {
  std::shared_ptr<core::GGUFFile> f;
  try {
    f = core::GGUFFile::open_memory(bytes, kGgufName);
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
    return Outcome::Rejected;
  }
  walk_gguf(*f);
  // `specmoe quantize` of any file that opens (core/quantize.h), to Q8_0 with requantizing
  // allowed: an Error naming the input, or a file that opens again with the same tensors in the
  // types the summary names.
  try {
    core::QuantizeOptions qo;
    qo.type = DType::Q8_0;
    qo.allow_requantize = true;
    qo.threads = 1;
    core::GGUFWriter w;
    const core::QuantizeSummary qs = core::quantize_gguf(*f, qo, w);
    const std::vector<uint8_t> image = w.bytes();
    const std::shared_ptr<core::GGUFFile> back = core::GGUFFile::open_memory(image, "quantized image");
    SPECMOE_FUZZ_CHECK(back->tensors().size() == f->tensors().size() && qs.tensors.size() == f->tensors().size(),
                       "quantize changed the tensor count");
    for (const core::QuantizedTensor& t : qs.tensors) {
      const core::GGUFTensorInfo* b = back->find_tensor(t.name);
      SPECMOE_FUZZ_CHECK(b != nullptr && b->type == t.to && b->ne == t.ne,
                         "quantize's output lacks tensor '" + t.name + "' as its summary names it");
    }
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
  }
  // Accepted: the file opened, and the model config and the tokenizer loaded where the file has
  // their keys (a vocabulary-only or metadata-only file is still a good file).
  Outcome out = Outcome::Accepted;
  const std::string arch = f->has("general.architecture") && f->find("general.architecture")->type ==
                                   core::GGUFType::STRING ? f->get_string("general.architecture") : "";
  const bool has_config = !arch.empty() && f->has(arch + ".block_count");
  const bool has_vocab = f->has("tokenizer.ggml.model");
  try {
    core::ModelConfig c = core::ModelConfig::from_gguf(*f);
    c.validate();
    SPECMOE_FUZZ_CHECK(c.n_head % c.n_head_kv == 0 && c.head_dim > 0, "validate() let a bad config through");
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
    if (has_config) out = Outcome::Rejected;
  }
  try {
    std::unique_ptr<core::Tokenizer> tok = core::Tokenizer::from_gguf(*f);
    static const std::string kSample = std::string("Hello world <s> </s> <|endoftext|> 123\n\t \xE2\x96\x81x \xff\xfe") +
                                       std::string(1, '\0') + "end";
    exercise_tokenizer(*tok, kSample, 2, false);
    exercise_tokenizer(*tok, kSample, 0, false);
    std::vector<int32_t> ids;
    for (int32_t id = -1; id <= tok->n_vocab() && id < 300; ++id) ids.push_back(id);
    exercise_tokenizer(*tok,
                       std::string_view(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)),
                       4 | 8 | 16, false);
  } catch (const Error& e) {
    check_names_input(e, kGgufName);
    if (has_vocab) out = Outcome::Rejected;
  }
  // A file with an embedding claims to be a whole model: then it must load and run too.
  const bool has_model = f->find_tensor("token_embd.weight") != nullptr;
  if (out == Outcome::Accepted && has_config && has_vocab && !load_model(bytes) && has_model) out = Outcome::Rejected;
  return out;
}

struct FuzzTokenizer {
  std::string label;
  std::unique_ptr<core::Tokenizer> tok;
  bool roundtrip;  // covers every byte: decode(encode(text)) == text
  std::vector<std::string> prefix_tokens = {};  // see exercise_tokenizer
};

// ---------------------------------------------------------------------------------------------
// Vocabularies built in code (also written into seed GGUF files by make_corpus.cpp).

// GPT-2's bytes_to_unicode (Radford et al. 2019, encoder.py): the printable symbol of each byte.
inline std::string gpt2_byte_symbol(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int extra = 0;
    for (int k = 0; k < b; ++k)
      if (!((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || (k >= 174 && k <= 255))) ++extra;
    cp = 256 + extra;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A small byte-level BPE vocabulary: the 256 byte symbols, merges spelling a few words (so merges
// chain), two control tokens and one user-defined token.
inline core::Vocab small_bpe_vocab(const std::string& pre) {
  core::Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  v.name = "fuzz bpe " + pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(gpt2_byte_symbol(b));
  std::vector<std::string> seen_merges;
  for (const char* word : {" the", "the", " hello", " world", "ing", " 123", "12", "\n\n", "  ", " <tool>", "é"}) {
    std::vector<std::string> syms;
    for (const char* c = word; *c; ++c) syms.push_back(gpt2_byte_symbol(static_cast<unsigned char>(*c)));
    std::string cur = syms[0];
    for (size_t k = 1; k < syms.size(); ++k) {
      const std::string merge = cur + " " + syms[k];
      cur += syms[k];
      bool dup = false;
      for (const auto& m : seen_merges) dup |= m == merge;
      if (dup) continue;
      seen_merges.push_back(merge);
      v.merges.push_back(merge);
      bool have = false;
      for (const auto& t : v.tokens) have |= t == cur;
      if (!have) v.tokens.push_back(cur);
    }
  }
  v.types.assign(v.tokens.size(), core::TokenType::Normal);
  for (auto [text, type] : {std::pair{"<|endoftext|>", core::TokenType::Control},
                            std::pair{"<|im_start|>", core::TokenType::Control},
                            std::pair{"<tool>", core::TokenType::UserDefined}}) {
    v.tokens.push_back(text);
    v.types.push_back(type);
  }
  v.bos = v.eos = static_cast<int32_t>(v.tokens.size()) - 3;
  return v;
}

// A small SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens and scored pieces that merge.
inline core::Vocab small_spm_vocab() {
  core::Vocab v;
  v.model = "llama";
  v.name = "fuzz spm";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {core::TokenType::Unknown, core::TokenType::Control, core::TokenType::Control};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    v.types.push_back(core::TokenType::Byte);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  const char* pieces[] = {"\xE2\x96\x81", "t", "h", "e", "th", "he", "the", "\xE2\x96\x81t", "\xE2\x96\x81the",
                          "a", "b", "ab", ("\xE2\x96\x81" "ab"), "\xE2\x96\x81\xE2\x96\x81", "1", "12", "\xC3\xA9"};
  float score = -1.0f;
  for (const char* p : pieces) {
    v.tokens.push_back(p);
    v.types.push_back(core::TokenType::Normal);
    v.scores.push_back(score);
    score -= 0.5f;
  }
  v.tokens.push_back("<tool>");
  v.types.push_back(core::TokenType::UserDefined);
  v.scores.push_back(0.0f);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

// Built once: the byte-level SentencePiece vocabulary of `specmoe synth` (through a GGUF file, as
// write_byte_vocab stores it), a small SentencePiece vocabulary with scored merges, small
// byte-level BPE vocabularies under each family of pre-tokenizer regexes, and the GGUF vocabulary
// $SPECMOE_FUZZ_VOCAB names, if any.
inline const std::vector<FuzzTokenizer>& fuzz_tokenizers() {
  static const std::vector<FuzzTokenizer> toks = [] {
    std::vector<FuzzTokenizer> out;
    {  // the synth byte vocabulary, as written into and read back from a GGUF file
      core::GGUFWriter w;
      w.set_string("general.architecture", "llama");
      core::write_byte_vocab(w, 300);
      const std::string path = (scratch_dir() / "byte-vocab.gguf").string();
      w.write(path);
      out.push_back({"byte-spm", core::Tokenizer::from_gguf(*core::GGUFFile::open(path)), true});
    }
    out.push_back({"small-spm", core::Tokenizer::from_vocab(small_spm_vocab()), true, {"<tool>"}});
    for (const char* pre : {"gpt-2", "llama3", "qwen2", "default", "deepseek-llm", "deepseek-v3", "deepseek-coder",
                            "falcon", "starcoder", "poro-chat", "viking", "tekken", "gpt-4o"})
      out.push_back({std::string("bpe-") + pre, core::Tokenizer::from_vocab(small_bpe_vocab(pre)), true});
    if (const char* file = std::getenv("SPECMOE_FUZZ_VOCAB"); file && *file) {
      auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(file));
      const bool bpe = tok->kind() == core::TokenizerKind::BytePairEncoding;
      out.push_back({file, std::move(tok), bpe});
    }
    return out;
  }();
  return toks;
}

// A folder with small prompt files the fuzzer can name by relative path ("prompts.txt",
// "questions.jsonl"), as a real experiment folder has.
inline const std::filesystem::path& toml_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = scratch_dir() / "experiment";
    std::filesystem::create_directories(d);
    const std::string txt = "Hello there\n# a comment\n\nTwo\\nlines\n";
    const std::string jsonl =
        "{\"question_id\": 81, \"category\": \"writing\", \"turns\": [\"Write a poem.\", \"Shorter.\"]}\n"
        "{\"question_id\": 82, \"category\": \"coding\", \"turns\": [\"Sort a list.\", \"In C.\"]}\n"
        "{\"task_id\": \"HumanEval/0\", \"prompt\": \"def f():\\n\"}\n";
    write_file(d / "prompts.txt", {reinterpret_cast<const uint8_t*>(txt.data()), txt.size()});
    write_file(d / "questions.jsonl", {reinterpret_cast<const uint8_t*>(jsonl.data()), jsonl.size()});
    return d;
  }();
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Tokenizers on built-in vocabularies: input = 1 selector byte + text (or ids).


inline Outcome run_tokenizer(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome::Rejected;
  const auto& toks = fuzz_tokenizers();
  const uint8_t sel = bytes[0];
  const FuzzTokenizer& t = toks[(sel & 0x0F) % toks.size()];
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 1), bytes.size() - 1);
  try {
    exercise_tokenizer(*t.tok, text, sel >> 4 | ((sel & 0x80) ? 16 : 0), t.roundtrip, t.prefix_tokens);
  } catch (const Error& e) {
    // encode never fails on these vocabularies (every byte has a token, BOS exists); decode
    // errors are handled inside exercise_tokenizer.
    throw OracleFailure(t.label + ": unexpected error: " + e.what());
  }
  return Outcome::Accepted;
}

// ---------------------------------------------------------------------------------------------
// Experiment TOML: parse (which also loads the prompts), expand the sweep, hash and serialize.

inline Outcome run_toml(std::span<const uint8_t> bytes) {
  const std::string path = (toml_dir() / "fuzz-experiment.toml").string();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  try {
    exp::ExperimentSpec spec = exp::parse_experiment_string(text, path);
    std::vector<exp::RunSpec> runs = exp::expand_runs(spec);
    SPECMOE_FUZZ_CHECK(!runs.empty(), "an accepted experiment has no runs");
    (void)exp::spec_to_json(spec, runs).dump();
    (void)exp::experiment_config_hash(spec, runs);
  } catch (const Error& e) {
    check_names_input(e, "fuzz-experiment.toml");
    return Outcome::Rejected;
  }
  return Outcome::Accepted;
}

// ---------------------------------------------------------------------------------------------
// Prompt files: input = 1 selector byte + file content, read as JSONL or as a text file; selector
// bit 6 names the file *.gz, so the content is inflated as gzip first.

inline Outcome run_prompts(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome::Rejected;
  const uint8_t sel = bytes[0];
  const bool jsonl = !(sel & 1);
  const std::string gz = (sel & 0x40) ? ".gz" : "";
  const std::filesystem::path file = scratch_dir() / ((jsonl ? "fuzz-prompts.jsonl" : "fuzz-prompts.txt") + gz);
  write_file(file, bytes.subspan(1));
  exp::PromptSource source;
  (jsonl ? source.jsonl : source.file) = file.string();
  source.turn = (sel >> 1) & 1;
  source.limit = (sel >> 2) & 3;
  switch ((sel >> 4) & 3) {
    case 1: if (jsonl) source.categories = {"writing"}; break;
    case 2: if (jsonl) source.categories = {"coding", "math"}; break;
    case 3: source.list = {"inline prompt"}; break;
    default: break;
  }
  exp::SourceMap src;
  src.file = "fuzz-prompts.toml";
  try {
    std::vector<exp::Prompt> prompts = exp::load_prompts(source, src);
    SPECMOE_FUZZ_CHECK(!prompts.empty(), "load_prompts returned no prompts without an error");
    for (const auto& p : prompts) SPECMOE_FUZZ_CHECK(!p.text.empty() && !p.id.empty(), "empty prompt or id accepted");
    if (source.limit > 0) SPECMOE_FUZZ_CHECK(prompts.size() <= static_cast<size_t>(source.limit), "limit ignored");
  } catch (const Error& e) {
    check_names_input(e, "fuzz-prompts.toml");
    return Outcome::Rejected;
  }
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
