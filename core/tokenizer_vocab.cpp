// GGUF metadata <-> Vocab: the tokenizer.ggml.* keys as llama.cpp names and defaults them
// (llama.cpp src/llama-vocab.cpp, llama_vocab::impl::load; gguf-py constants.py).
#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/tokenizer_internal.h"

namespace specmoe::core {
namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kChatTemplate = "tokenizer.chat_template";

struct IdKey {
  const char* key;
  int32_t Vocab::*field;
  bool legacy = false;  // an older name: read, never written
};
constexpr IdKey kIdKeys[] = {
    {"tokenizer.ggml.bos_token_id", &Vocab::bos},     {"tokenizer.ggml.eos_token_id", &Vocab::eos},
    {"tokenizer.ggml.unknown_token_id", &Vocab::unk}, {"tokenizer.ggml.eot_token_id", &Vocab::eot},
    {"tokenizer.ggml.eom_token_id", &Vocab::eom},     {"tokenizer.ggml.padding_token_id", &Vocab::pad},
    {"tokenizer.ggml.fim_pre_token_id", &Vocab::fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &Vocab::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &Vocab::fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &Vocab::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &Vocab::fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &Vocab::fim_sep},
    // Older names of the first three; llama.cpp reads them after the new ones, so they win.
    {"tokenizer.ggml.prefix_token_id", &Vocab::fim_pre, true}, {"tokenizer.ggml.suffix_token_id", &Vocab::fim_suf, true},
    {"tokenizer.ggml.middle_token_id", &Vocab::fim_mid, true},
};

}  // namespace

Vocab read_vocab(const GGUFFile& file) {
  Vocab v;
  v.source = file.path();
  v.model = file.get_string(kModel);
  v.pre = file.get_string(kPre, "");
  v.name = file.get_string("general.name", "");
  // Bounded before anything per token is copied or built (the reader bounds it by the file size).
  const std::vector<std::string>& tokens = file.get_string_array(kTokens);
  if (tokens.size() > detail::kMaxVocabTokens)
    throw_error(ErrorKind::Limit, "{}: {} has {} entries (limit {})", v.source, kTokens, tokens.size(),
                detail::kMaxVocabTokens);
  v.tokens = tokens;
  const size_t n = v.tokens.size();

  if (file.has(kScores)) {
    const std::vector<double> s = file.get_float_array(kScores);
    if (s.size() < n)
      throw_error(ErrorKind::Format, "{}: {} has {} entries, {} has {}", v.source, kScores, s.size(), kTokens, n);
    v.scores.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (file.has(kTypes)) {
    const std::vector<int64_t> t = file.get_int_array(kTypes);
    if (t.size() < n)
      throw_error(ErrorKind::Format, "{}: {} has {} entries, {} has {}", v.source, kTypes, t.size(), kTokens, n);
    v.types.resize(n);
    for (size_t i = 0; i < n; ++i)
      v.types[i] = (t[i] >= 0 && t[i] <= 6) ? static_cast<TokenType>(t[i]) : TokenType::Undefined;
  }
  if (file.has(kMerges)) {
    const std::vector<std::string>& merges = file.get_string_array(kMerges);
    if (merges.size() > detail::kMaxMerges)
      throw_error(ErrorKind::Limit, "{}: {} has {} entries (limit {})", v.source, kMerges, merges.size(),
                  detail::kMaxMerges);
    v.merges = merges;
  }

  // llama.cpp's defaults per model type, used when the key is absent or out of range.
  if (v.model == "llama") {
    v.unk = 0;
    v.bos = 1;
    v.eos = 2;
  } else if (v.model == "gpt2") {
    // ChatGLM/GLM pre-tokenizers have no default BOS; "gemma4" has no default ids at all.
    detail::PreTokenizerSpec spec;
    if (!detail::pretokenizer_spec(v.pre, spec) || spec.default_bos) v.bos = 11;
    v.eos = 11;
  }
  for (const IdKey& k : kIdKeys) {
    int32_t& id = v.*(k.field);
    if (id >= static_cast<int64_t>(n)) id = -1;
    if (!file.has(k.key)) continue;
    const int64_t value = file.get_int(k.key);
    if (value >= 0 && value < static_cast<int64_t>(n)) id = static_cast<int32_t>(value);
  }
  if (file.has(kAddBos)) v.add_bos = file.get_bool(kAddBos, false);
  if (file.has(kAddEos)) v.add_eos = file.get_bool(kAddEos, false);
  if (file.has(kAddSpacePrefix)) v.add_space_prefix = file.get_bool(kAddSpacePrefix, true);
  v.chat_template = file.get_string(kChatTemplate, "");
  return v;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) { return from_vocab(read_vocab(file)); }

Vocab byte_vocab(int n_vocab) {
  constexpr int kMin = 3 + 256;
  if (n_vocab < kMin)
    throw_error(ErrorKind::InvalidArgument, "byte vocabulary needs at least {} tokens (<unk>, <s>, </s>, 256 bytes), got {}",
                kMin, n_vocab);
  Vocab v;
  v.model = "llama";
  v.name = "specmoe byte vocabulary";
  v.tokens.reserve(n_vocab);
  v.types.reserve(n_vocab);
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(fmt::format("<0x{:02X}>", b));
    v.types.push_back(TokenType::Byte);
  }
  for (int i = kMin; i < n_vocab; ++i) {
    v.tokens.push_back(fmt::format("<pad_{}>", i));
    v.types.push_back(TokenType::Normal);
  }
  v.scores.assign(n_vocab, 0.0f);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = false;  // no "▁" (three byte tokens) in front of every prompt
  return v;
}

void write_vocab(GGUFWriter& w, const Vocab& v) {
  v.validate();
  w.set_string(kModel, v.model);
  if (!v.pre.empty()) w.set_string(kPre, v.pre);
  w.set_string_array(kTokens, v.tokens);
  if (!v.scores.empty()) w.set_f32_array(kScores, v.scores);
  if (!v.types.empty()) {
    std::vector<int32_t> t(v.types.size());
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(v.types[i]);
    w.set_i32_array(kTypes, t);
  }
  if (!v.merges.empty()) w.set_string_array(kMerges, v.merges);
  for (const IdKey& k : kIdKeys)
    if (!k.legacy && v.*(k.field) >= 0) w.set_u32(k.key, static_cast<uint32_t>(v.*(k.field)));
  if (v.add_bos) w.set_bool(kAddBos, *v.add_bos);
  if (v.add_eos) w.set_bool(kAddEos, *v.add_eos);
  if (v.add_space_prefix) w.set_bool(kAddSpacePrefix, *v.add_space_prefix);
  if (!v.chat_template.empty()) w.set_string(kChatTemplate, v.chat_template);
}

void write_byte_vocab(GGUFWriter& w, int n_vocab) { write_vocab(w, byte_vocab(n_vocab)); }

}  // namespace specmoe::core
