// Byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe:
// the text is split into words by the pre-tokenizer regexes, each word's bytes are mapped to
// printable code points (GPT-2's bytes_to_unicode), and adjacent symbols are merged by merge
// rank (lowest first, leftmost among equal ranks) until no listed merge applies.
// SentencePiece-style BPE (tokenizer.ggml.model = "gemma4", and the pre-tokenizers that set
// PreTokenizerSpec::byte_encode = false) merges the raw UTF-8 instead, spaces written as U+2581,
// with "<0xXX>" tokens for bytes no symbol covers.
// References: Sennrich et al. 2016 (BPE); Radford et al. 2019 (GPT-2 byte-level BPE);
// llama.cpp src/llama-vocab.cpp.
#include <array>
#include <cctype>
#include <queue>
#include <string>

#include "base/error.h"
#include "core/tokenizer_internal.h"

namespace specmoe::core::detail {
namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte has a visible, non-space code point.
struct ByteUnicode {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> cp_to_byte;  // -1 where a code point is not an encoded byte
  ByteUnicode() {
    cp_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      append_utf8(byte_to_utf8[b], cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteUnicode& byte_unicode() {
  static const ByteUnicode table;
  return table;
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab v, const PreTokenizerSpec& spec)
      : VocabTokenizer(std::move(v), spec.add_bos),
        splitter_(spec.regexes, vocab_.source.empty() ? std::string("vocabulary") : vocab_.source),
        ignore_merges_(spec.ignore_merges),
        byte_encode_(spec.byte_encode),
        escape_whitespaces_(spec.escape_whitespaces),
        newline_runs_whole_(spec.newline_runs_whole) {
    if (spec.force_add_bos) add_bos_ = true;
    ranks_.reserve(vocab_.merges.size());
    for (size_t i = 0; i < vocab_.merges.size(); ++i) {
      const std::string& m = vocab_.merges[i];
      // Split at the first space after the first character, as llama.cpp does; a merge without
      // one pairs "" with "" and can never apply.
      const size_t pos = m.find(' ', 1);
      std::string key = pos == std::string::npos ? std::string(1, '\0') : merge_key(m.substr(0, pos), m.substr(pos + 1));
      ranks_.emplace(std::move(key), static_cast<int32_t>(i));  // the first listing wins
    }
    build_piece_cache();
  }

  TokenizerKind kind() const override { return TokenizerKind::BytePairEncoding; }

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string render_piece(int32_t id) const override;

 private:
  struct Symbol {
    int prev, next;
    size_t offset, n;
  };
  struct Bigram {
    int left, right;
    int32_t rank;
    size_t size;
  };
  // Lowest rank first; among equal ranks the leftmost pair.
  struct BigramOrder {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
  };
  // "left" NUL "right": NUL never occurs inside byte-level symbols (bytes map to printable code
  // points), so distinct pairs get distinct keys.
  static std::string merge_key(std::string_view left, std::string_view right) {
    std::string k;
    k.reserve(left.size() + right.size() + 1);
    k.append(left);
    k += '\0';
    k.append(right);
    return k;
  }
  int32_t rank_of(std::string& scratch, std::string_view left, std::string_view right) const {
    scratch.assign(left);
    scratch += '\0';
    scratch.append(right);
    auto it = ranks_.find(std::string_view(scratch));
    return it == ranks_.end() ? -1 : it->second;
  }
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

  RegexSplitter splitter_;
  bool ignore_merges_ = false;
  bool byte_encode_ = true;
  bool escape_whitespaces_ = false;
  bool newline_runs_whole_ = false;
  StringIdMap ranks_;
};

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

void BpeTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>& out) const {
  const auto& bu = byte_unicode();
  std::string escaped;
  if (escape_whitespaces_) {
    escaped.reserve(text.size());
    for (char c : text) {
      if (c == ' ')
        escaped += kEscapedSpace;
      else
        escaped += c;
    }
    text = escaped;
  }
  std::string word;
  for (const auto& [off, len] : splitter_.split(text)) {
    if (byte_encode_) {
      word.clear();
      for (size_t i = off; i < off + len; ++i) word += bu.byte_to_utf8[static_cast<unsigned char>(text[i])];
    } else {
      word.assign(text.substr(off, len));
    }
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges_ || (newline_runs_whole_ && word.find_first_not_of('\n') == std::string::npos)) {
    if (int32_t id = find_token(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t offs = 0; offs < word.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(word[offs])), word.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + n == word.size() ? -1 : index + 1, offs, n});
    offs += n;
  }
  const auto view = [&](const Symbol& s) { return std::string_view(word.data() + s.offset, s.n); };

  std::string scratch;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = rank_of(scratch, view(symbols[left]), view(symbols[right]));
    if (rank < 0) return;
    queue.push({left, right, rank, symbols[left].n + symbols[right].n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    // Stale entry: a side was merged away or grew. Symbols only grow rightwards from a fixed
    // start, so equal total size means the pair is still exactly the one queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = view(symbols[i]);
    if (int32_t id = find_token(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (a vocabulary without all 256 byte symbols): llama.cpp emits whatever single
    // bytes are tokens ("<0xXX>" ones without the byte mapping) and drops the rest.
    for (char c : piece) {
      int32_t id = -1;
      if (byte_encode_) {
        id = find_token(std::string_view(&c, 1));
      } else {
        static constexpr char kHex[] = "0123456789ABCDEF";
        const auto b = static_cast<unsigned char>(c);
        const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        id = find_token(std::string_view(name, 6));
      }
      if (id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::render_piece(int32_t id) const {
  switch (types_[id]) {
    case TokenType::UserDefined:
      return vocab_.tokens[id];  // added tokens are stored as plain text, not byte-mapped
    case TokenType::Normal: {
      const std::string& t = vocab_.tokens[id];
      std::string out;
      if (escape_whitespaces_) {  // SentencePiece-style: U+2581 is a space, the rest is UTF-8
        for (size_t pos = 0;;) {
          const size_t hit = t.find(kEscapedSpace, pos);
          out.append(t, pos, hit == std::string::npos ? std::string::npos : hit - pos);
          if (hit == std::string::npos) return out;
          out += ' ';
          pos = hit + kEscapedSpace.size();
        }
      }
      const auto& bu = byte_unicode();
      out.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        const size_t start = i;
        const uint32_t cp = next_codepoint(t, i);
        if (cp < bu.cp_to_byte.size() && bu.cp_to_byte[cp] >= 0)
          out += static_cast<char>(bu.cp_to_byte[cp]);
        else
          out.append(t, start, i - start);  // not a byte-level symbol: keep its UTF-8 as is
      }
      return out;
    }
    case TokenType::Byte: {  // "<0xXX>" (SentencePiece-style BPE): the byte
      const std::string& t = vocab_.tokens[id];
      const auto hex = [&](size_t i) { return std::isxdigit(static_cast<unsigned char>(t[i])) != 0; };
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(3) && hex(4))
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      return std::string();
    }
    default:  // Unused, Undefined: llama.cpp renders nothing for BPE
      return std::string();
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab) {
  // llama.cpp reads tokenizer.ggml.model "gemma4" as BPE with the gemma4 pre-tokenizer, whatever
  // tokenizer.ggml.pre says.
  if (vocab.model == "gemma4") vocab.pre = "gemma4";
  PreTokenizerSpec spec;
  if (!pretokenizer_spec(vocab.pre, spec))
    throw_error(ErrorKind::Unsupported, "{}: tokenizer.ggml.pre '{}' is not a supported pre-tokenizer",
                vocab.source.empty() ? std::string("vocabulary") : vocab.source, vocab.pre);
  if (vocab.merges.empty() && !spec.merges_optional)
    throw_error(ErrorKind::Format, "{}: tokenizer.ggml.merges is missing or empty (required for model 'gpt2')",
                vocab.source.empty() ? std::string("vocabulary") : vocab.source);
  return std::make_unique<BpeTokenizer>(std::move(vocab), spec);
}

}  // namespace specmoe::core::detail
