// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"), as llama.cpp's llm_tokenizer_spm:
// spaces become "▁" (U+2581), a space is prefixed at the start of the text and after special
// tokens (add_space_prefix), then adjacent symbols (initially UTF-8 characters) are merged
// greedily, highest vocabulary score first, as long as the merged text is a token. Symbols that
// end up not being tokens fall back to byte tokens <0xXX>.
// Reference: Kudo & Richardson 2018 (SentencePiece); llama.cpp src/llama-vocab.cpp.
#include <array>
#include <queue>

#include "base/error.h"
#include "core/tokenizer_internal.h"

namespace specmoe::core::detail {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" U+2581

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(Vocab v) : VocabTokenizer(std::move(v), /*default_add_bos=*/true) {
    add_space_prefix_ = vocab_.add_space_prefix.value_or(true);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
      int32_t id = find_token(name);
      if (id < 0) id = find_token(std::string(1, static_cast<char>(b)));  // llama.cpp's second choice
      if (id < 0) id = vocab_.unk;
      byte_token_[b] = id;
    }
    scores_ = vocab_.scores.empty() ? std::vector<float>(vocab_.tokens.size(), 0.0f) : vocab_.scores;
    build_piece_cache();
  }

  TokenizerKind kind() const override { return TokenizerKind::SentencePiece; }
  std::string decode(std::span<const int32_t> ids) const override;

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string render_piece(int32_t id) const override;

 private:
  struct Symbol {
    int prev, next;
    size_t offset, n;  // byte range in the escaped text; n == 0 once merged into its left neighbour
  };
  struct Bigram {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; among equal scores the leftmost pair (llama.cpp's order).
  struct BigramOrder {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
  };
  int32_t byte_of(int32_t id) const;  // the byte a Byte token stands for, -1 if not one

  bool add_space_prefix_ = true;
  std::array<int32_t, 256> byte_token_{};
  std::vector<float> scores_;
};

void SpmTokenizer::encode_text(std::string_view raw, bool after_special, std::vector<int32_t>& out) const {
  std::string text;
  if (add_space_prefix_ && after_special) text = " ";
  text += raw;
  replace_all(text, " ", kSpace);

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(text[offs])), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, offs, n});
    offs += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged(text.data() + symbols[left].offset, symbols[left].n + symbols[right].n);
    const int32_t id = find_token(merged);
    if (id < 0) return;
    queue.push({left, right, scores_[id], merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    // Stale entry: one side was merged away or has grown since the pair was queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece(text.data() + s.offset, s.n);
    // Every merge produced a token, so only single characters can be missing from the vocabulary.
    if (int32_t id = find_token(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t id = byte_token_[static_cast<unsigned char>(c)];
      if (id < 0)
        throw_error(ErrorKind::Unsupported, "{}: byte 0x{:02X} has no <0x..> token and the vocabulary has no <unk>",
                    vocab_.source.empty() ? std::string("vocabulary") : vocab_.source,
                    static_cast<unsigned char>(c));
      out.push_back(id);
    }
  }
}

int32_t SpmTokenizer::byte_of(int32_t id) const {
  if (types_[id] != TokenType::Byte) return -1;
  const std::string& t = vocab_.tokens[id];
  if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
    const auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = nib(t[3]), lo = nib(t[4]);
    if (hi >= 0 && lo >= 0) return hi * 16 + lo;
  }
  return -1;
}

std::string SpmTokenizer::render_piece(int32_t id) const {
  switch (types_[id]) {
    case TokenType::UserDefined:
      return vocab_.tokens[id];
    case TokenType::Normal: {
      std::string s = vocab_.tokens[id];
      replace_all(s, kSpace, " ");
      return s;
    }
    case TokenType::Byte: {
      const int32_t b = byte_of(id);
      return b >= 0 ? std::string(1, static_cast<char>(b)) : std::string();
    }
    default:  // Unused, Undefined: llama.cpp renders nothing
      return std::string();
  }
}

std::string SpmTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  std::string bytes;  // a run of byte tokens, unescaped as a whole (a "▁" may span three of them)
  bool strip = add_space_prefix_;
  const auto emit = [&](std::string_view s) {
    if (s.empty()) return;
    if (strip && s.front() == ' ') s.remove_prefix(1);
    strip = false;
    out += s;
  };
  const auto flush = [&] {
    if (bytes.empty()) return;
    replace_all(bytes, kSpace, " ");
    emit(bytes);
    bytes.clear();
  };
  for (int32_t id : ids) {
    check_id(id);
    if (types_[id] == TokenType::Byte) {
      bytes += pieces_[id];
      continue;
    }
    flush();
    if (id == vocab_.bos) {
      strip = add_space_prefix_;  // the text after BOS starts with the prefixed space
      continue;
    }
    emit(pieces_[id]);
  }
  flush();
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) { return std::make_unique<SpmTokenizer>(std::move(vocab)); }

}  // namespace specmoe::core::detail
