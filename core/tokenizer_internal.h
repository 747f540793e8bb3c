// Internals shared by the tokenizer implementations (not a public interface): the common base
// holding the vocabulary tables, special-token partitioning, UTF-8 helpers and the regex
// pre-tokenizer used by byte-level BPE.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer.h"

namespace specmoe::core::detail {

// Limits checked before per-token tables are built (a tokenizer needs ~200 bytes per token), well
// above any published vocabulary (256k tokens) and equal to ModelConfig's vocabulary limit.
inline constexpr size_t kMaxVocabTokens = size_t{1} << 22;
inline constexpr size_t kMaxMerges = size_t{1} << 23;

// Length of the UTF-8 sequence starting with byte `c`, from its high nibble only (continuation
// and invalid lead bytes count as 1), as llama.cpp's unicode_len_utf8.
inline size_t utf8_len(unsigned char c) {
  static constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}
void append_utf8(std::string& out, uint32_t cp);
// Decodes one code point at s[i], advancing i; invalid sequences yield the byte value and advance 1.
uint32_t next_codepoint(std::string_view s, size_t& i);

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A piece of the input after special-token partitioning: raw text or one special token.
struct Fragment {
  bool is_token = false;
  int32_t id = -1;        // is_token
  size_t offset = 0;      // raw text: byte range of the input
  size_t length = 0;
};

// Vocabulary tables and everything both tokenizer kinds share.
class VocabTokenizer : public Tokenizer {
 public:
  // default_add_bos: the model/pre type's add_bos_token when the vocabulary does not say.
  VocabTokenizer(Vocab vocab, bool default_add_bos);

  int n_vocab() const override { return static_cast<int>(vocab_.tokens.size()); }
  int32_t bos() const override { return vocab_.bos; }
  int32_t eos() const override { return vocab_.eos; }
  bool add_bos_by_default() const override { return add_bos_; }
  bool add_eos_by_default() const override { return add_eos_; }
  bool is_eog(int32_t id) const override;
  const std::string& token_text(int32_t id) const override;
  TokenType token_type(int32_t id) const override;
  const std::string& chat_template() const override { return vocab_.chat_template; }
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string token_to_piece(int32_t id, bool render_special) const override;
  std::string decode(std::span<const int32_t> ids) const override;  // concatenated pieces

  // -1 when `text` is not a token.
  int32_t find_token(std::string_view text) const {
    auto it = token_to_id_.find(text);
    return it == token_to_id_.end() ? -1 : it->second;
  }
  const Vocab& vocab() const { return vocab_; }

 protected:
  // Encodes one raw-text fragment; `after_special` is true at the start of the input and after a
  // special token (SentencePiece prefixes a space there).
  virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
  // The piece of a non-special token (Normal, UserDefined, Byte, ...); called once per token.
  virtual std::string render_piece(int32_t id) const = 0;
  // Subclass constructors call this once their own tables are ready.
  void build_piece_cache();
  void check_id(int32_t id) const;
  bool is_special(int32_t id) const {  // rendered "" unless render_special
    TokenType t = types_[id];
    return t == TokenType::Control || t == TokenType::Unknown;
  }
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  Vocab vocab_;
  std::vector<TokenType> types_;      // one per token, after the EOG -> Control fix-up
  std::vector<uint8_t> lstrip_, rstrip_;  // per-token whitespace stripping around special matches
  StringIdMap token_to_id_;
  std::vector<int32_t> special_cache_;  // Control/UserDefined/Unknown ids, longest text first
  std::vector<int32_t> eog_ids_;        // sorted
  std::vector<std::string> pieces_;     // render_piece(id) for every id
  bool add_bos_ = false, add_eos_ = false;
};

// Pre-tokenizer of a byte-level BPE vocabulary: the regexes llama.cpp applies for a
// tokenizer.ggml.pre value, run in sequence, each refining the previous split, and the flags
// llama.cpp sets for the name that change token ids or special-token defaults.
struct PreTokenizerSpec {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a word that is already a token is emitted whole (llama3)
  bool add_bos = false;        // the pre type's default for add_bos_token
  bool force_add_bos = false;  // BOS is added even where tokenizer.ggml.add_bos_token says false (Gemma 4)
  // Words are mapped through GPT-2's bytes_to_unicode before merging. False: merges run on the
  // raw UTF-8 and a symbol that is no token falls back to "<0xXX>" byte tokens (SentencePiece-
  // style BPE: Gemma 4, Sarvam).
  bool byte_encode = true;
  bool escape_whitespaces = false;  // spaces become U+2581 before splitting, and back when decoding
  bool newline_runs_whole = false;  // a word of newlines only that is a token is emitted whole (Gemma 4)
  bool default_bos = true;          // false: no BOS unless tokenizer.ggml.bos_token_id names one (ChatGLM/GLM)
  bool merges_optional = false;     // tokenizer.ggml.merges may be missing (Kimi K2)
};
// Returns false when `pre` is not a known pre-tokenizer name.
bool pretokenizer_spec(std::string_view pre, PreTokenizerSpec& spec);

// Entries of PreTokenizerSpec::regexes that RegexSplitter runs as built-in code, not PCRE2:
// - kDigitGroupsRegex, llama.cpp's built-in digit grouping (its "\p{AFMoE_digits}", also what it
//   runs for Tiny Aya's "\d{1,3}(?=(?:\d{3})*\b)"): every run of \p{N} is cut into groups of
//   three counted from the right, the shorter group first, and the text since the previous cut
//   joins the run's first group.
// - kDigitTripleCutsRegex, SuperBPE's lookahead as llama.cpp's std::regex reads it (\d is ASCII
//   there): its empty matches cut every run of ASCII digits before each group of three counted
//   from the run's end. In PCRE2 it would take time quadratic in the run's length.
inline constexpr std::string_view kDigitGroupsRegex = "\\p{AFMoE_digits}";
inline constexpr std::string_view kDigitTripleCutsRegex = "(?=(\\d{3})+(?!\\d))";

class RegexSplitter {
 public:
  explicit RegexSplitter(const std::vector<std::string>& regexes, const std::string& source);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  // Splits `text` into consecutive byte ranges [offset, offset+length) covering all of it: each
  // regex splits every current piece into its matches and the gaps between them.
  std::vector<std::pair<size_t, size_t>> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab);

}  // namespace specmoe::core::detail
