// The vocabulary tables both tokenizer kinds share, special-token partitioning and the factory.
// Behaviour follows llama.cpp's llama-vocab.cpp (load, tokenizer_st_partition, token_to_piece).
#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "core/tokenizer_internal.h"

namespace specmoe::core {

void Vocab::validate() const {
  const std::string& src = source.empty() ? std::string("vocabulary") : source;
  const size_t n = tokens.size();
  if (n == 0) throw_error(ErrorKind::Format, "{}: tokenizer.ggml.tokens is empty", src);
  if (n > detail::kMaxVocabTokens)
    throw_error(ErrorKind::Limit, "{}: tokenizer.ggml.tokens has {} entries (limit {})", src, n,
                detail::kMaxVocabTokens);
  if (merges.size() > detail::kMaxMerges)
    throw_error(ErrorKind::Limit, "{}: tokenizer.ggml.merges has {} entries (limit {})", src, merges.size(),
                detail::kMaxMerges);
  if (!scores.empty() && scores.size() != n)
    throw_error(ErrorKind::Format, "{}: tokenizer.ggml.scores has {} entries, tokenizer.ggml.tokens {}", src,
                scores.size(), n);
  if (!types.empty() && types.size() != n)
    throw_error(ErrorKind::Format, "{}: tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}", src,
                types.size(), n);
  const std::pair<const char*, int32_t> ids[] = {{"bos_token_id", bos}, {"eos_token_id", eos},
                                                 {"unknown_token_id", unk}, {"eot_token_id", eot},
                                                 {"eom_token_id", eom}, {"padding_token_id", pad},
                                                 {"fim_pre_token_id", fim_pre}, {"fim_suf_token_id", fim_suf},
                                                 {"fim_mid_token_id", fim_mid}, {"fim_pad_token_id", fim_pad},
                                                 {"fim_rep_token_id", fim_rep}, {"fim_sep_token_id", fim_sep}};
  for (const auto& [key, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n))
      throw_error(ErrorKind::Format, "{}: tokenizer.ggml.{} = {} is outside the vocabulary of {} tokens", src, key,
                  id, n);
  }
  detail::StringIdMap seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = seen.emplace(tokens[i], static_cast<int32_t>(i));
    if (!inserted)
      throw_error(ErrorKind::Format, "{}: duplicate token '{}' in tokenizer.ggml.tokens (ids {} and {})", src,
                  tokens[i], it->second, i);
  }
}

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  if (vocab.model == "llama") return detail::make_spm_tokenizer(std::move(vocab));
  if (vocab.model == "gpt2" || vocab.model == "gemma4") return detail::make_bpe_tokenizer(std::move(vocab));
  throw_error(ErrorKind::Unsupported,
              "{}: tokenizer.ggml.model '{}' is not supported (expected 'llama', 'gpt2' or 'gemma4')",
              vocab.source.empty() ? std::string("vocabulary") : vocab.source, vocab.model);
}

namespace detail {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t len = utf8_len(c);
  if (len == 1 || i + len > s.size()) {
    ++i;
    return c;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) {
      ++i;
      return c;
    }
  }
  uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (b(i + k) & 0x3F);
  i += len;
  return cp;
}

namespace {

// Special tokens llama.cpp recognises by their text (llama-vocab.cpp, "auto-detect special tokens
// by text"; its lists as of 2026-10). Converted GGUFs often leave them Normal or UserDefined; llama.cpp
// makes them Control, so they are matched in the input only when special tokens are parsed and are
// not printed.
//
// Role tokens: when the GGUF names none for a role, the first token (by id) with one of these texts
// takes the role and becomes Control.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]",      "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                                             "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                                             "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                                             "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
// End of generation, every token with one of these texts (made Control too), besides EOS, EOT,
// EOM and the FIM pad/repo/separator tokens.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
};
// gpt-oss's channel markers are always printed (UserDefined), whatever the GGUF says.
constexpr std::string_view kAlwaysRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

bool contains(std::span<const std::string_view> list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

VocabTokenizer::VocabTokenizer(Vocab vocab, bool default_add_bos) : vocab_(std::move(vocab)) {
  // llama.cpp renames empty token texts so that every text maps back to one id.
  for (size_t i = 0; i < vocab_.tokens.size(); ++i)
    if (vocab_.tokens[i].empty()) vocab_.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  vocab_.validate();
  const int32_t n = static_cast<int32_t>(vocab_.tokens.size());

  types_ = vocab_.types.empty() ? std::vector<TokenType>(n, TokenType::Normal) : vocab_.types;
  token_to_id_.reserve(n);
  for (int32_t i = 0; i < n; ++i) token_to_id_.emplace(vocab_.tokens[i], i);

  // Role tokens named by text when the GGUF names none; whichever way a role is found by text,
  // its token becomes Control.
  const auto find_role = [&](int32_t& id, std::span<const std::string_view> texts) {
    if (id >= 0) return;
    for (int32_t i = 0; i < n; ++i) {
      if (contains(texts, vocab_.tokens[i])) {
        id = i;
        types_[i] = TokenType::Control;
        return;
      }
    }
  };
  find_role(vocab_.eot, kEotTexts);
  find_role(vocab_.eom, kEomTexts);
  find_role(vocab_.fim_pre, kFimPreTexts);
  find_role(vocab_.fim_suf, kFimSufTexts);
  find_role(vocab_.fim_mid, kFimMidTexts);
  find_role(vocab_.fim_pad, kFimPadTexts);
  find_role(vocab_.fim_rep, kFimRepTexts);
  find_role(vocab_.fim_sep, kFimSepTexts);

  // End-of-generation tokens.
  for (int32_t id : {vocab_.fim_pad, vocab_.fim_rep, vocab_.fim_sep})
    if (id >= 0) eog_ids_.push_back(id);
  for (int32_t i = 0; i < n; ++i) {
    if (contains(kEogTexts, vocab_.tokens[i])) {
      eog_ids_.push_back(i);
      types_[i] = TokenType::Control;
    }
  }
  for (int32_t i = 0; i < n; ++i)
    if (contains(kAlwaysRenderedTexts, vocab_.tokens[i])) types_[i] = TokenType::UserDefined;
  for (int32_t id : {vocab_.eos, vocab_.eot, vocab_.eom})
    if (id >= 0) eog_ids_.push_back(id);
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  const auto eog_text = [&](std::string_view t) {
    return std::any_of(eog_ids_.begin(), eog_ids_.end(), [&](int32_t id) { return vocab_.tokens[id] == t; });
  };
  const auto drop_eog = [&](std::string_view t, TokenType as) {
    for (size_t k = 0; k < eog_ids_.size(); ++k) {
      if (vocab_.tokens[eog_ids_[k]] != t) continue;
      types_[eog_ids_[k]] = as;
      eog_ids_.erase(eog_ids_.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
  };
  // Harmony (gpt-oss) and Solar Open end a message with <|end|> but a turn with <|return|>/<|call|>
  // (<|flush|>/<|calls|>): there <|end|> is an ordinary printed token.
  if (eog_text("<|end|>") &&
      ((eog_text("<|return|>") && eog_text("<|call|>")) || (eog_text("<|calls|>") && eog_text("<|flush|>"))))
    drop_eog("<|end|>", TokenType::UserDefined);
  // Gemma 4 and PLaMo use </s> as a normal token.
  if (eog_text("</s>") && (eog_text("<|tool_response>") || eog_text("<|plamo:eos|>")))
    drop_eog("</s>", TokenType::Normal);

  for (int32_t i = 0; i < n; ++i) {
    TokenType t = types_[i];
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
      special_cache_.push_back(i);
  }
  // Longest first, so a special text containing a shorter one wins (ties by id, deterministic).
  std::stable_sort(special_cache_.begin(), special_cache_.end(), [&](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });

  // Per-token whitespace stripping next to special matches. GGUF does not store these attributes;
  // llama.cpp sets them by model name, and only Phi-3 matters among the supported vocabularies.
  lstrip_.assign(n, 0);
  rstrip_.assign(n, 0);
  std::string name = vocab_.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : special_cache_) rstrip_[id] = 1;
    for (std::string_view t : {"</s>"})
      if (int32_t id = find_token(t); id >= 0) rstrip_[id] = 1;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (int32_t id = find_token(t); id >= 0) rstrip_[id] = 0;
  }

  add_bos_ = vocab_.add_bos.value_or(default_add_bos);
  add_eos_ = vocab_.add_eos.value_or(false);
}

void VocabTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw_error(ErrorKind::InvalidArgument, "token id {} is outside the vocabulary of {} tokens", id, n_vocab());
}

bool VocabTokenizer::is_eog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.tokens[id];
}

TokenType VocabTokenizer::token_type(int32_t id) const {
  check_id(id);
  return types_[id];
}

void VocabTokenizer::build_piece_cache() {
  pieces_.resize(vocab_.tokens.size());
  for (int32_t i = 0; i < n_vocab(); ++i) pieces_[i] = is_special(i) ? std::string() : render_piece(i);
}

std::string VocabTokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  if (is_special(id)) return render_special ? vocab_.tokens[id] : std::string();
  return pieces_[id];
}

std::string VocabTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    out += pieces_[id];
  }
  return out;
}

std::vector<Fragment> VocabTokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags{{false, -1, 0, text.size()}};
  std::vector<Fragment> next;
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (int32_t sid : special_cache_) {
    // Control and unknown texts are plain text unless parse_special; user-defined ones are
    // always split out first (Hugging Face tokenizers do the same for added non-special tokens).
    if (!parse_special && types_[sid] != TokenType::UserDefined) continue;
    const std::string& st = vocab_.tokens[sid];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t cur = f.offset;
      const size_t end = f.offset + f.length;
      while (cur < end) {
        const size_t pos = text.substr(0, end).find(st, cur);
        if (pos == std::string_view::npos) break;
        changed = true;
        size_t left_end = pos;
        if (lstrip_[sid])
          while (left_end > cur && is_space(text[left_end - 1])) --left_end;
        if (left_end > cur) next.push_back({false, -1, cur, left_end - cur});
        next.push_back({true, sid, 0, 0});
        cur = pos + st.size();
        if (rstrip_[sid])
          while (cur < end && is_space(text[cur])) ++cur;
      }
      if (cur < end) next.push_back({false, -1, cur, end - cur});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos) {
    if (vocab_.bos < 0)
      throw_error(ErrorKind::InvalidArgument, "{}: encode with add_bos, but the vocabulary has no BOS token",
                  vocab_.source.empty() ? std::string("vocabulary") : vocab_.source);
    out.push_back(vocab_.bos);
  }
  if (text.empty()) return out;
  bool after_special = true;
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.is_token) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  return out;
}

}  // namespace detail
}  // namespace specmoe::core
