// Tokenizers against llama.cpp's tokenizer test vectors (exact token ids), round trips, the
// stories260K reference text, and the byte vocabulary of synthetic models.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/tokenizer.h"
#include "core/tokenizer_internal.h"
#include "test_data.h"

namespace specmoe::core {
namespace {

using specmoe::testing::data_path;
using specmoe::testing::scratch_dir;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream is(line);
  for (int64_t v; is >> v;) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

// llama.cpp's test-tokenizer-0 format: every string is followed by "\n__ggml_vocab_test__\n"
// (so a string may be empty or contain newlines); the .out file has one line of ids per string.
struct Vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> expected;
};
Vectors read_vectors(const std::string& name) {
  const std::string base = "tokenizer/ggml-vocab-" + name + ".gguf";
  const std::string raw = read_file(data_path(base + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  Vectors v;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      v.inputs.push_back(raw.substr(pos));
      break;
    }
    v.inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(data_path(base + ".out"));
  for (std::string line; std::getline(out, line);) v.expected.push_back(parse_ids(line));
  return v;
}

std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) r += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return r;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string r;
  for (int32_t id : ids) {
    if (!r.empty()) r += ' ';
    r += std::to_string(id);
  }
  return r;
}

std::unique_ptr<Tokenizer> load(const std::string& rel) {
  auto file = GGUFFile::open(data_path(rel).string());
  return Tokenizer::from_gguf(*file);
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

// Every test string must encode (no BOS, parse_special = false, as test-tokenizer-0) to exactly
// the ids llama.cpp produced, and decode back to itself.
TEST_P(VocabVectors, EncodesLikeLlamaCpp) {
  const std::string name = GetParam();
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-" + name + ".gguf.inp");
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-" + name + ".gguf");
  const auto tok = load("tokenizer/ggml-vocab-" + name + ".gguf");
  const Vectors v = read_vectors(name);
  ASSERT_EQ(v.inputs.size(), v.expected.size()) << name << ": .inp and .out disagree on the number of tests";
  ASSERT_GE(v.inputs.size(), 40u) << name << ": suspiciously few test strings";
  size_t matched = 0, nonempty = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const auto ids = tok->encode(v.inputs[i], /*add_bos=*/false, /*parse_special=*/false);
    nonempty += !ids.empty();
    if (ids == v.expected[i]) {
      ++matched;
    } else {
      ADD_FAILURE() << name << " string " << i << " '" << printable(v.inputs[i]) << "'\n  expected: "
                    << join(v.expected[i]) << "\n  got:      " << join(ids);
    }
    EXPECT_EQ(tok->decode(ids), v.inputs[i]) << name << " round trip of string " << i;
  }
  std::printf("[ vectors  ] %-15s %zu / %zu strings match llama.cpp\n", name.c_str(), matched, v.inputs.size());
  EXPECT_EQ(matched, v.inputs.size());
  EXPECT_GT(nonempty, v.inputs.size() / 2);  // guard: the tokenizer does produce ids
}

INSTANTIATE_TEST_SUITE_P(Required, VocabVectors, ::testing::Values("llama-spm", "phi-3", "gpt-2", "starcoder"));
INSTANTIATE_TEST_SUITE_P(Extra, VocabVectors,
                         ::testing::Values("deepseek-coder", "deepseek-llm", "falcon", "mpt", "refact"));

TEST(Tokenizer, KindsAndSpecialIds) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-llama-spm.gguf");
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  const auto spm = load("tokenizer/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(spm->n_vocab(), 32000);
  EXPECT_EQ(spm->bos(), 1);
  EXPECT_EQ(spm->eos(), 2);
  EXPECT_TRUE(spm->add_bos_by_default());
  EXPECT_FALSE(spm->add_eos_by_default());
  EXPECT_TRUE(spm->is_eog(2));
  EXPECT_FALSE(spm->is_eog(1));
  EXPECT_FALSE(spm->is_eog(13));
  EXPECT_EQ(spm->token_text(13), "<0x0A>");
  EXPECT_EQ(spm->token_type(13), TokenType::Byte);
  EXPECT_EQ(spm->token_to_piece(13), "\n");
  EXPECT_EQ(spm->token_to_piece(15043), " Hello");   // "▁Hello"
  EXPECT_EQ(spm->token_to_piece(1), "");             // control renders empty...
  EXPECT_EQ(spm->token_to_piece(1, true), "<s>");    // ...unless asked for
  // With BOS: the space prefix still applies to the text; decode drops it after BOS.
  const auto ids = spm->encode("Hello world", /*add_bos=*/true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(spm->decode(ids), "Hello world");
  EXPECT_EQ(spm->encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(spm->encode("", false).empty());

  const auto bpe = load("tokenizer/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(bpe->kind(), TokenizerKind::BytePairEncoding);
  EXPECT_EQ(bpe->n_vocab(), 50257);
  EXPECT_EQ(bpe->eos(), 50256);
  EXPECT_TRUE(bpe->is_eog(50256));
  EXPECT_EQ(bpe->token_to_piece(50256), "");
  EXPECT_EQ(bpe->token_to_piece(50256, true), "<|endoftext|>");
  EXPECT_EQ(bpe->token_to_piece(220), " ");  // "Ġ"
  EXPECT_EQ(bpe->token_to_piece(198), "\n");  // "Ċ"

  EXPECT_THROW(spm->token_to_piece(32000), Error);
  EXPECT_THROW(spm->token_to_piece(-1), Error);
  const std::vector<int32_t> bad{5, 99999};
  EXPECT_THROW(bpe->decode(bad), Error);
}

// parse_special: control texts in the input become their token only when asked for.
TEST(Tokenizer, ParseSpecial) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-llama-spm.gguf");
  const auto bpe = load("tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string text = "a<|endoftext|>b";
  const auto special = bpe->encode(text, false, true);
  ASSERT_EQ(special.size(), 3u);
  EXPECT_EQ(special[1], 50256);
  const auto plain = bpe->encode(text, false, false);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(bpe->decode(plain), text);

  const auto spm = load("tokenizer/ggml-vocab-llama-spm.gguf");
  const auto ids = spm->encode("<s>Hi</s>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(spm->decode(ids), "Hi");  // the space prefixed after <s> is dropped again
}

TEST(Tokenizer, RoundTripsUtf8) {
  const std::vector<std::string> texts = {
      "a", "The quick brown fox jumps over the lazy dog.", "  two leading spaces\tand a tab\n\nlines",
      "naïve café — ½ × 3 ≠ 7", "Привет, мир", "日本語のテキスト、句読点。", "emoji 🦙🚀 and ZWJ 👩‍💻",
      "mixed 123 4567 89.0 x=y+z; // code", " ", "\n",
  };
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "starcoder"}) {
    const std::string rel = std::string("tokenizer/ggml-vocab-") + name + ".gguf";
    SPECMOE_REQUIRE_DATA(rel);
    const auto tok = load(rel);
    for (const auto& t : texts) {
      const auto ids = tok->encode(t, false);
      EXPECT_FALSE(ids.empty()) << name;
      EXPECT_EQ(tok->decode(ids), t) << name << ": '" << t << "'";
    }
  }
}

// stories260K's published greedy output: decoding its 200 generated ids (after BOS) gives the
// text byte for byte, the leading space of "▁Once" dropped after BOS as llama2.c does.
TEST(Tokenizer, Stories260KGreedyText) {
  SPECMOE_REQUIRE_DATA("models/stories260K.gguf");
  SPECMOE_REQUIRE_DATA("models/stories260K.greedy_200_token_ids.txt");
  SPECMOE_REQUIRE_DATA("models/stories260K.expected_greedy_200steps.txt");
  const auto tok = load("models/stories260K.gguf");
  EXPECT_EQ(tok->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(tok->n_vocab(), 512);
  const auto ids = parse_ids(read_file(data_path("models/stories260K.greedy_200_token_ids.txt")));
  const std::string expected = read_file(data_path("models/stories260K.expected_greedy_200steps.txt"));
  ASSERT_EQ(ids.size(), 201u);  // BOS + 200 steps
  ASSERT_EQ(ids[0], tok->bos());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(tok->decode(ids), expected);
  // Prefixes decode to prefixes of the text (what a streaming printer relies on).
  for (size_t n : {1u, 2u, 17u, 100u}) {
    const std::string part = tok->decode(std::span<const int32_t>(ids.data(), n));
    EXPECT_EQ(expected.compare(0, part.size(), part), 0) << n << " ids: '" << part << "'";
  }
  EXPECT_EQ(tok->decode(std::span<const int32_t>(ids.data(), 2)), "Once");
  // And encoding the text back gives the same ids (the model's own tokenization).
  EXPECT_EQ(tok->encode(expected, /*add_bos=*/true), ids);
}

TEST(Tokenizer, ByteVocabularyThroughGguf) {
  const int n_vocab = 300;  // 259 + 41 padding tokens
  GGUFWriter w;
  w.set_string("general.architecture", "llama");
  write_byte_vocab(w, n_vocab);
  const auto path = scratch_dir() / "tokenizer_byte_vocab_300.gguf";
  w.write(path.string());
  auto file = GGUFFile::open(path.string());
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(tok->n_vocab(), n_vocab);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_EQ(tok->token_text(3 + 0x41), "<0x41>");
  EXPECT_EQ(tok->token_type(258), TokenType::Byte);
  EXPECT_EQ(tok->token_type(259), TokenType::Normal);

  // Every byte is its own token at id 3 + byte; a space is "▁" = E2 96 81.
  EXPECT_EQ(tok->encode("A b", true), (std::vector<int32_t>{1, 3 + 0x41, 3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 0x62}));
  const std::vector<std::string> texts = {"Hello, world!", " leading space", "tab\there\n", "½ é 🦙 日本", ""};
  for (const auto& t : texts) {
    const auto ids = tok->encode(t, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    for (size_t i = 1; i < ids.size(); ++i) {
      EXPECT_GE(ids[i], 3);
      EXPECT_LE(ids[i], 258);
    }
    EXPECT_EQ(tok->decode(ids), t);
  }
  // All 256 byte values in one string (invalid UTF-8 included) survive the round trip, except
  // that the literal "▁" character reads back as a space (SentencePiece's own ambiguity).
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(tok->decode(tok->encode(all, false)), all);

  EXPECT_THROW(byte_vocab(258), Error);
}

TEST(Tokenizer, UnknownPreTokenizerIsUnsupported) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "no-such-pre";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  GGUFWriter w;
  write_vocab(w, v);
  const auto path = scratch_dir() / "tokenizer_unknown_pre.gguf";
  w.write(path.string());
  auto file = GGUFFile::open(path.string());
  try {
    Tokenizer::from_gguf(*file);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  v.model = "wordpiece";
  EXPECT_THROW(Tokenizer::from_vocab(v), Error);
}

// A tiny hand-made BPE vocabulary: merge order decides, not token length.
TEST(Tokenizer, BpeMergesByRank) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "c", "ab", "bc", "abc", "Ġ", "Ġa"};
  v.merges = {"b c", "a b", "a bc", "Ġ a"};
  const auto tok = Tokenizer::from_vocab(v);
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{5}));     // b+c first, then a+bc
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{3}));
  EXPECT_EQ(tok->encode("cab", false), (std::vector<int32_t>{2, 3}));  // no "c a" merge
  EXPECT_EQ(tok->encode("ab a", false), (std::vector<int32_t>{3, 7}));  // " a" is one pre-token
  EXPECT_EQ(tok->decode(std::vector<int32_t>{3, 7}), "ab a");
  // Bytes without a symbol in this vocabulary are dropped, as llama.cpp does.
  EXPECT_EQ(tok->encode("z", false), std::vector<int32_t>{});
}

// SentencePiece merges by score: the highest-scoring adjacent pair first.
TEST(Tokenizer, SpmMergesByScore) {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "▁", "a", "b", "c", "ab", "bc", "▁a"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal, TokenType::Normal,
             TokenType::Normal,  TokenType::Normal,  TokenType::Normal,  TokenType::Normal, TokenType::Normal};
  v.scores = {0, 0, 0, -1, -1, -1, -1, -2, -1.5f, -3};
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  const auto tok = Tokenizer::from_vocab(v);
  // "▁abc": bc (-1.5) beats ab (-2) and ▁a (-3); then ▁a (-3) is the only merge left.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{9, 8}));
  // No byte tokens: an unknown character falls back to <unk>.
  EXPECT_EQ(tok->encode("ax", false), (std::vector<int32_t>{9, 0}));
}

// Every supported pre-tokenizer name compiles its regexes and splits text losslessly. The
// vocabulary holds the 256 byte symbols of GPT-2's byte-to-unicode map (no merges beyond one),
// so ids are per byte and decode must reproduce the input whatever the split was.
TEST(Tokenizer, EveryPreTokenizerCompilesAndRoundTrips) {
  Vocab base;
  base.model = "gpt2";
  int extra = 0;
  for (int b = 0; b < 256; ++b) {  // id = byte value
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const uint32_t cp = printable ? b : 256 + extra++;
    std::string u;
    if (cp < 0x80) {
      u += static_cast<char>(cp);
    } else {
      u += static_cast<char>(0xC0 | (cp >> 6));
      u += static_cast<char>(0x80 | (cp & 0x3F));
    }
    base.tokens.push_back(u);
  }
  base.tokens.push_back("ab");
  base.merges = {"a b"};
  const std::string text = "Hello, World! It's 2024: naïve café ½ 12345 日本語 한국어 🦙  \t\n\n  x'LL  ";
  for (const char* pre : {"", "default", "gpt-2", "llama3", "llama-bpe", "qwen2", "starcoder", "smollm", "refact",
                          "deepseek-coder", "deepseek-llm", "deepseek-v3", "falcon", "mpt", "olmo", "dbrx",
                          "stablelm2", "command-r", "poro-chat", "viking", "tekken", "gpt-4o", "chatglm-bpe", "seed-coder",
                          "minicpm5", "mellum2", "kanana2", "talkie", "f2llmv2", "afmoe", "bailingmoe", "bailingmoe2",
                          "chameleon", "cohere2moe", "exaone-moe", "glm5", "granite-embed-multi-97m", "grok-2",
                          "hunyuan-dense", "hy_v4", "jais-2", "jina-v5-nano", "joyai-llm", "kimi-k2", "laguna",
                          "llada-moe", "qwen35", "spark2_5", "superbpe", "tiny_aya", "ufakzeka", "youtu"}) {
    Vocab v = base;
    v.pre = pre;
    std::unique_ptr<Tokenizer> tok;
    ASSERT_NO_THROW(tok = Tokenizer::from_vocab(v)) << "pre '" << pre << "'";
    const auto ids = tok->encode(text, false);
    EXPECT_GE(ids.size(), 40u) << pre;
    EXPECT_EQ(tok->decode(ids), text) << "pre '" << pre << "'";
    EXPECT_EQ(tok->encode("cab", false), (std::vector<int32_t>{'c', 256})) << pre;
  }
}

// The pieces a pre-tokenizer name's regexes cut a text into (no vocabulary involved).
std::vector<std::string> split_pieces(const std::string& pre, const std::string& text) {
  detail::PreTokenizerSpec spec;
  if (!detail::pretokenizer_spec(pre, spec)) ADD_FAILURE() << "unknown pre-tokenizer '" << pre << "'";
  const detail::RegexSplitter splitter(spec.regexes, "test");
  std::vector<std::string> out;
  for (const auto& [off, len] : splitter.split(text)) out.push_back(text.substr(off, len));
  return out;
}

using Pieces = std::vector<std::string>;

// Pre-tokenizers llama.cpp 2026-10 added, cut as llama.cpp cuts them (checked against
// llama-tokenize's ids on vocabularies with each name). Where llama.cpp departs from the
// tokenizer.json regex, the pieces follow llama.cpp: every letter class (\p{Lu}, \p{Ll}, ...)
// matches any letter, and its built-in digit grouping joins the text before a digit run to the
// run's first group.
TEST(Tokenizer, NewPreTokenizerSplits) {
  // Tiny Aya / Cohere2 MoE: digits in threes from the right; "HelloWorld" stays one word.
  EXPECT_EQ(split_pieces("tiny_aya", "abc 1234567 HelloWorld"),
            (Pieces{"abc", " ", "1", "234", "567", " HelloWorld"}));
  EXPECT_EQ(split_pieces("cohere2moe", "12345"), (Pieces{"12", "345"}));
  // AFMoE: the spaces before a digit run belong to the run's first group before the word regex
  // runs, so "  " is cut in two.
  EXPECT_EQ(split_pieces("afmoe", "x  1234 \xe4\xb8\xad\xe6\x96\x87"),
            (Pieces{"x", " ", " ", "1", "234", " ", "\xe4\xb8\xad\xe6\x96\x87"}));
  // Kimi K2: Han runs, then non-Han letter words with contractions, digits in threes.
  EXPECT_EQ(split_pieces("kimi-k2", "\xe4\xb8\xad\xe6\x96\x87" "abc Def's 12345 \xe4\xb8\xad"),
            (Pieces{"\xe4\xb8\xad\xe6\x96\x87", "abc", " Def's", " ", "123", "45", " ", "\xe4\xb8\xad"}));
  // EXAONE MoE: letter runs continue over single spaces.
  EXPECT_EQ(split_pieces("exaone-moe", "New York is big.\n\nOK"),
            (Pieces{"New York is big", ".\n", "\n", "OK"}));
  // Bailing MoE 2 (Qwen2-like, contractions as one class).
  EXPECT_EQ(split_pieces("bailingmoe2", "a\n\n\nit'S 12"), (Pieces{"a", "\n\n\n", "it", "'S", " ", "1", "2"}));
  // Qwen3.5: combining marks stay in the word ("e" + U+0301).
  EXPECT_EQ(split_pieces("qwen35", "cafe\xcc\x81 12"), (Pieces{"cafe\xcc\x81", " ", "1", "2"}));
  EXPECT_EQ(split_pieces("qwen2", "cafe\xcc\x81 12"), (Pieces{"cafe", "\xcc\x81", " ", "1", "2"}));
  // SuperBPE: digit runs, then cuts before each group of three ASCII digits from the right
  // (empty matches cut; "½" is a number but not a digit).
  EXPECT_EQ(split_pieces("superbpe", "x 1234567 \xc2\xbd" "123"),
            (Pieces{"x ", "1", "234", "567", " ", "\xc2\xbd", "123"}));
  // Ufakzeka: no contractions, so an apostrophe suffix stays whole ("'s" too).
  EXPECT_EQ(split_pieces("ufakzeka", "Ankara'da it's"), (Pieces{"Ankara", "'da", " it", "'s"}));
  EXPECT_EQ(split_pieces("grok-2", "it's"), (Pieces{"it", "'s"}));
  // Jais 2: whitespace before a word is cut into power-of-two runs.
  EXPECT_EQ(split_pieces("jais-2", "a" + std::string(7, ' ') + "b"), (Pieces{"a", "    ", "  ", " b"}));
  // Hunyuan dense (DeepSeek V3's regexes): digits in threes, CJK runs apart.
  EXPECT_EQ(split_pieces("hunyuan-dense", "12345\xe4\xb8\xad\xe6\x96\x87" "abc"),
            (Pieces{"123", "45", "\xe4\xb8\xad\xe6\x96\x87", "abc"}));
  // Youtu: Hangul runs first; cased words as any letters.
  EXPECT_EQ(split_pieces("youtu", "\xed\x95\x9c\xea\xb5\xad" "AbcDef"), (Pieces{"\xed\x95\x9c\xea\xb5\xad", "AbcDef"}));
  // Chameleon: sentinel texts are cut out first, but the later digit and punctuation regexes cut
  // them again (special tokens are matched before pre-tokenization anyway); tabs alone.
  EXPECT_EQ(split_pieces("chameleon", "<sentinel:12>a1!b\t\tc"),
            (Pieces{"<", "sentinel", ":", "1", "2", ">", "a", "1", "!", "b", "\t", "\t", "c"}));
  // Laguna: newline runs first.
  EXPECT_EQ(split_pieces("laguna", "a \n\n b"), (Pieces{"a", " ", "\n\n", " b"}));
  // SentencePiece-style BPE splits lines only (spaces are U+2581 by then).
  EXPECT_EQ(split_pieces("gemma4", "a\xe2\x96\x81" "b\n\nc"), (Pieces{"a\xe2\x96\x81" "b", "\n\n", "c"}));
}

// An empty match cuts the text where it matches, and a non-empty match starting at the same place
// is tried next, as with std::regex_iterator (which llama.cpp splits with).
TEST(Tokenizer, RegexSplitterEmptyMatchesCut) {
  const auto split = [](const std::string& re, const std::string& text) {
    const detail::RegexSplitter splitter({re}, "test");
    Pieces out;
    for (const auto& [off, len] : splitter.split(text)) out.push_back(text.substr(off, len));
    return out;
  };
  EXPECT_EQ(split("(?=b)", "abab"), (Pieces{"a", "ba", "b"}));
  EXPECT_EQ(split("x*?", "axxb"), (Pieces{"a", "x", "x", "b"}));
  EXPECT_EQ(split("(?=a)", "aa"), (Pieces{"a", "a"}));
}

// The flags llama.cpp sets with the new names.
TEST(Tokenizer, NewPreTokenizerFlags) {
  const auto spec = [](const char* pre) {
    detail::PreTokenizerSpec s;
    EXPECT_TRUE(detail::pretokenizer_spec(pre, s)) << pre;
    return s;
  };
  EXPECT_TRUE(spec("jina-v5-nano").ignore_merges);
  EXPECT_TRUE(spec("jina-v5-nano").add_bos);
  EXPECT_TRUE(spec("chameleon").add_bos);
  EXPECT_TRUE(spec("youtu").ignore_merges);
  EXPECT_TRUE(spec("granite-embed-multi-97m").ignore_merges);
  EXPECT_TRUE(spec("glm5").ignore_merges);
  EXPECT_TRUE(spec("glm4").ignore_merges);
  EXPECT_FALSE(spec("glm5").default_bos);
  EXPECT_FALSE(spec("chatglm-bpe").default_bos);
  EXPECT_FALSE(spec("chatglm-bpe").ignore_merges);
  EXPECT_TRUE(spec("kimi-k2").merges_optional);
  for (const char* pre : {"gemma4", "granite-embed-multi-311m"}) {
    const auto s = spec(pre);
    EXPECT_FALSE(s.byte_encode) << pre;
    EXPECT_TRUE(s.escape_whitespaces) << pre;
    EXPECT_TRUE(s.newline_runs_whole) << pre;
    EXPECT_TRUE(s.force_add_bos) << pre;
  }
  const auto sarvam = spec("sarvam-moe");
  EXPECT_FALSE(sarvam.byte_encode);
  EXPECT_TRUE(sarvam.escape_whitespaces);
  EXPECT_FALSE(sarvam.newline_runs_whole);
  EXPECT_FALSE(sarvam.force_add_bos);
  detail::PreTokenizerSpec none;
  EXPECT_FALSE(detail::pretokenizer_spec("whitespace", none));  // needs tokenizer model "whitespace"
  for (const char* pre : {"bailingmoe", "bailingmoe2", "llada-moe", "exaone-moe", "hunyuan-dense", "qwen35", "kimi-k2",
                          "tiny_aya", "cohere2moe", "grok-2", "afmoe", "hy_v4", "joyai-llm", "jais-2", "laguna",
                          "spark2_5", "superbpe", "ufakzeka"}) {
    const auto s = spec(pre);
    EXPECT_FALSE(s.ignore_merges || s.add_bos || s.force_add_bos || !s.byte_encode || s.escape_whitespaces) << pre;
  }
}

// SentencePiece-style BPE (tokenizer.ggml.model "gemma4"): spaces as U+2581, merges on raw
// UTF-8, newline runs whole, "<0xXX>" byte fallback, BOS always added.
TEST(Tokenizer, SentencePieceStyleBpe) {
  Vocab v;
  v.model = "gemma4";
  v.tokens = {"<pad>", "<eos>", "<bos>", "\xe2\x96\x81", "a", "b",
              "\xe2\x96\x81" "a", "\n", "\n\n", "<0x63>", "<0xC3>", "<0xA9>"};
  v.types.assign(v.tokens.size(), TokenType::Normal);
  v.types[0] = v.types[1] = v.types[2] = TokenType::Control;
  v.types[9] = v.types[10] = v.types[11] = TokenType::Byte;
  v.merges = {"\xe2\x96\x81 a"};
  v.bos = 2;
  v.eos = 1;
  v.add_bos = false;  // llama.cpp adds BOS for Gemma 4 anyway
  const auto tok = Tokenizer::from_vocab(v);
  EXPECT_EQ(tok->kind(), TokenizerKind::BytePairEncoding);
  EXPECT_TRUE(tok->add_bos_by_default());
  // "\n\n" is one token though no merge makes it; "c" and "é" fall back to their bytes.
  const auto ids = tok->encode("a a\n\nc\xc3\xa9", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 6, 8, 9, 10, 11}));
  EXPECT_EQ(tok->decode(ids), "a a\n\nc\xc3\xa9");
  EXPECT_EQ(tok->encode("b", true), (std::vector<int32_t>{2, 5}));
  // The same vocabulary as "gpt2" with tokenizer.ggml.pre "sarvam-moe": no newline-run rule.
  v.model = "gpt2";
  v.pre = "sarvam-moe";
  const auto sarvam = Tokenizer::from_vocab(v);
  EXPECT_FALSE(sarvam->add_bos_by_default());
  EXPECT_EQ(sarvam->encode("a\n\n", false), (std::vector<int32_t>{4, 7, 7}));
}

// ChatGLM/GLM vocabularies have no default BOS (llama.cpp: special_bos_id = NULL); Kimi K2's
// may lack merges.
TEST(Tokenizer, NewPreTokenizerVocabularyDefaults) {
  Vocab v;
  v.model = "gpt2";
  for (int i = 0; i < 20; ++i) v.tokens.push_back(std::string(1, static_cast<char>('a' + i)));
  v.merges = {"a b"};
  v.tokens.push_back("ab");
  const auto read_back = [&](const char* pre) {
    Vocab w = v;
    w.pre = pre;
    GGUFWriter gw;
    write_vocab(gw, w);
    const auto path = scratch_dir() / (std::string("tokenizer_defaults_") + pre + ".gguf");
    gw.write(path.string());
    return read_vocab(*GGUFFile::open(path.string()));
  };
  EXPECT_EQ(read_back("glm5").bos, -1);
  EXPECT_EQ(read_back("glm4").bos, -1);
  EXPECT_EQ(read_back("chatglm-bpe").bos, -1);
  EXPECT_EQ(read_back("qwen35").bos, 11);  // gpt2's default
  EXPECT_EQ(read_back("glm5").eos, 11);

  v.merges.clear();
  v.pre = "kimi-k2";
  const auto kimi = Tokenizer::from_vocab(v);
  EXPECT_EQ(kimi->encode("ab", false), (std::vector<int32_t>{0, 1}));
  v.pre = "qwen35";
  EXPECT_THROW(Tokenizer::from_vocab(v), Error);
}

// Long runs (one huge pre-token, a long whitespace run) neither fail in PCRE2 nor lose bytes.
TEST(Tokenizer, LongRuns) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-llama-spm.gguf");
  const std::string spaces = std::string(100000, ' ') + "x" + std::string(3, '\n');
  const std::string letters(50000, 'a');
  for (const char* name : {"gpt-2", "llama-spm"}) {
    const auto tok = load(std::string("tokenizer/ggml-vocab-") + name + ".gguf");
    for (const std::string* t : {&spaces, &letters}) {
      const auto ids = tok->encode(*t, false);
      EXPECT_GT(ids.size(), 10u) << name;
      EXPECT_EQ(tok->decode(ids), *t) << name;
    }
  }
}

// llama.cpp's fix-ups of special tokens by their text (as of 2026-10): end-of-generation and FIM
// texts become Control (matched only when special tokens are parsed, never printed, and the
// end-of-generation ones stop generation), gpt-oss's channel markers become UserDefined, and
// <|end|> stops being an end of generation in Harmony-style vocabularies.
TEST(Tokenizer, SpecialTokensRecognisedByText) {
  Vocab v = byte_vocab(300);
  const auto put = [&](int id, const std::string& text, TokenType type) {
    v.tokens[id] = text;
    v.types[id] = type;
  };
  put(260, "</s>", TokenType::UserDefined);  // as Qwen2.5 and Gemma 3 GGUFs have it
  put(261, "<|fim_prefix|>", TokenType::Normal);
  put(262, "<|channel|>", TokenType::Control);
  put(263, "<|end|>", TokenType::Normal);
  put(264, "<|return|>", TokenType::Normal);
  put(265, "<|call|>", TokenType::Normal);
  put(266, "<|file_sep|>", TokenType::Normal);
  v.tokens[1] = "<bos>";  // no "</s>" among the built-in ids
  v.tokens[2] = "<eos>";
  auto tok = Tokenizer::from_vocab(v);

  EXPECT_EQ(tok->token_type(260), TokenType::Control);
  EXPECT_TRUE(tok->is_eog(260));
  EXPECT_EQ(tok->encode("a</s>", false, true), (std::vector<int32_t>{3 + 'a', 260}));
  // Plain text: the characters' bytes, not the special token.
  EXPECT_EQ(tok->encode("</s>", false, false).size(), 4u);
  EXPECT_EQ(tok->token_to_piece(260), "");
  EXPECT_EQ(tok->token_to_piece(260, true), "</s>");

  EXPECT_EQ(tok->token_type(261), TokenType::Control);
  EXPECT_FALSE(tok->is_eog(261));  // a FIM prefix does not end generation
  EXPECT_EQ(tok->token_type(262), TokenType::UserDefined);
  EXPECT_EQ(tok->token_to_piece(262), "<|channel|>");
  // <|end|> with <|return|> and <|call|>: an ordinary, printed token.
  EXPECT_FALSE(tok->is_eog(263));
  EXPECT_EQ(tok->token_type(263), TokenType::UserDefined);
  EXPECT_TRUE(tok->is_eog(264));
  EXPECT_TRUE(tok->is_eog(265));
  EXPECT_TRUE(tok->is_eog(266));  // the FIM file separator ends generation
  EXPECT_TRUE(tok->is_eog(2));    // EOS
}

// The chat template travels with the vocabulary (tokenizer.chat_template) through a GGUF.
TEST(Tokenizer, ChatTemplateThroughGguf) {
  Vocab v = byte_vocab(300);
  v.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}";
  GGUFWriter w;
  write_vocab(w, v);
  const auto path = (scratch_dir() / "tokenizer_chat_template.gguf").string();
  w.write(path);
  auto file = GGUFFile::open_metadata(path);
  EXPECT_EQ(Tokenizer::from_gguf(*file)->chat_template(), v.chat_template);
  EXPECT_EQ(Tokenizer::from_vocab(byte_vocab(300))->chat_template(), "");
}

// Pre-tokenizers of llama.cpp 2026-10 whose names map onto regexes of their own or of an older
// type (seed-coder, minicpm5, mellum2; kanana2 and talkie as gpt-4o, f2llmv2 as qwen2; and the
// names below that cut this text as one of those): the GPT-2
// vocabulary with tokenizer.ggml.pre set to each name, against the ids llama-tokenize printed for
// the same file and text (`llama-tokenize -m VOCAB -f TEXT --ids --no-escape`).
TEST(Tokenizer, NewerPreTokenizerNamesEncodeLikeLlamaCpp) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string text = "I'M 12345 x'LL don'T\r\n\n  \tcaf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xc2\xbd a.b_c/d!!  end ";
  const std::vector<int32_t> digits_one_by_one = {40, 6, 44, 220, 16, 17, 18, 19, 20, 2124, 6, 3069, 836, 6, 51,
                                                  201, 628, 220, 220, 197, 66, 1878, 2634, 10545, 245, 98, 17312, 105,
                                                  45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886,
                                                  220};
  const std::vector<int32_t> digits_by_three = {40, 6, 44, 220, 10163, 2231, 2124, 6, 3069, 836, 6, 51, 201, 628, 220,
                                                220, 197, 66, 1878, 2634, 10545, 245, 98, 17312, 105, 45739, 252, 220,
                                                23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220};
  auto file = GGUFFile::open(data_path("tokenizer/ggml-vocab-gpt-2.gguf").string());
  for (const auto& [pre, want] : {std::pair{"seed-coder", &digits_one_by_one}, std::pair{"mellum2", &digits_one_by_one},
                                  std::pair{"f2llmv2", &digits_one_by_one}, std::pair{"minicpm5", &digits_by_three},
                                  std::pair{"kanana2", &digits_by_three}, std::pair{"talkie", &digits_by_three},
                                  std::pair{"qwen35", &digits_one_by_one}, std::pair{"exaone-moe", &digits_one_by_one},
                                  std::pair{"bailingmoe", &digits_one_by_one}, std::pair{"bailingmoe2", &digits_one_by_one},
                                  std::pair{"llada-moe", &digits_one_by_one}, std::pair{"grok-2", &digits_one_by_one},
                                  std::pair{"ufakzeka", &digits_one_by_one}, std::pair{"laguna", &digits_one_by_one},
                                  std::pair{"jais-2", &digits_by_three}, std::pair{"glm5", &digits_by_three},
                                  std::pair{"jina-v5-nano", &digits_by_three},
                                  std::pair{"granite-embed-multi-97m", &digits_by_three}}) {
    Vocab v = read_vocab(*file);
    v.pre = pre;
    const auto tok = Tokenizer::from_vocab(v);
    EXPECT_EQ(join(tok->encode(text, false)), join(*want)) << pre;
  }
}


// The other new names, on the GPT-2 vocabulary, against llama-tokenize's ids for two texts (one
// with a camel-case word, a 7-digit number, a spaced name, Han next to Latin, a combining mark,
// a Turkish suffix, a space run and newlines). SentencePiece-style names find few of their
// symbols in a byte-level vocabulary (spaces become U+2581); their ids still follow llama.cpp's.
TEST(Tokenizer, NewPreTokenizerNamesEncodeLikeLlamaCpp) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string text =
      "I'M 12345 x'LL don'T\r\n\n  \tcaf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xc2\xbd a.b_c/d!!  end ";
  const std::string text2 =
      "HelloWorld 1234567 New York \xe4\xb8\xad\xe6\x96\x87" "abc e\xcc\x81 Ankara'da" + std::string(7, ' ') + "x\n\n\ny";
  struct Case {
    std::vector<const char*> names;
    std::vector<int32_t> ids, ids2;
  };
  const std::vector<Case> cases = {
      {{"tiny_aya", "cohere2moe", "superbpe"},
       {40, 6, 44, 220, 1065, 27712, 2124, 6, 3069, 836, 6, 51, 201, 628, 220, 220, 197, 66, 1878, 2634, 10545, 245,
        98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220},
       {15496, 10603, 220, 16, 24409, 20, 3134, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223, 28760, 1549,
        64, 220, 220, 220, 220, 220, 220, 2124, 628, 198, 88}},
      {{"kimi-k2", "hunyuan-dense", "hy_v4", "joyai-llm"},
       {40, 6, 44, 220, 10163, 2231, 2124, 6, 3069, 836, 6, 51, 201, 628, 220, 220, 197, 66, 1878, 2634, 220, 33768,
        98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220},
       {15496, 10603, 220, 10163, 29228, 22, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223, 28760, 1549,
        64, 220, 220, 220, 220, 220, 220, 2124, 628, 198, 88}},
      {{"afmoe"},
       {40, 6, 44, 220, 1065, 27712, 2124, 6, 3069, 836, 6, 51, 201, 628, 220, 220, 197, 66, 1878, 2634, 220, 33768,
        98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220},
       {15496, 10603, 220, 16, 24409, 20, 3134, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223, 28760, 1549,
        64, 220, 220, 220, 220, 220, 220, 2124, 628, 198, 88}},
      {{"youtu"},
       {40, 6, 44, 220, 16, 17, 18, 19, 20, 2124, 6, 3069, 836, 6, 51, 201, 628, 220, 220, 197, 66, 1878, 2634, 220,
        33768, 98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220},
       {15496, 10603, 220, 16, 17, 18, 19, 20, 21, 22, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223,
        28760, 1549, 64, 220, 220, 220, 220, 220, 220, 2124, 628, 198, 88}},
      {{"spark2_5"},
       {40, 6, 44, 220, 16, 17, 18, 19, 20, 2124, 6, 3069, 836, 6, 51, 201, 198, 198, 220, 220, 197, 66, 1878, 2634,
        220, 33768, 98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 3228, 220, 886, 220},
       {15496, 10603, 220, 16, 17, 18, 19, 20, 21, 22, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223,
        28760, 1549, 64, 220, 220, 220, 220, 220, 220, 2124, 198, 198, 198, 88}},
      {{"chameleon"},
       {40, 6, 44, 220, 16, 17, 18, 19, 20, 2124, 6, 3069, 836, 6, 51, 201, 198, 198, 220, 220, 197, 66, 1878, 2634,
        10545, 245, 98, 17312, 105, 45739, 252, 220, 23141, 257, 13, 65, 62, 66, 14, 67, 0, 0, 220, 220, 437, 220},
       {15496, 10603, 220, 16, 17, 18, 19, 20, 21, 22, 968, 1971, 220, 40792, 23877, 229, 39305, 304, 136, 223,
        28760, 6, 6814, 220, 220, 220, 220, 220, 220, 2124, 198, 198, 198, 88}},
      {{"gemma4", "granite-embed-multi-311m", "sarvam-moe"},
       {40, 6, 44, 10163, 2231, 87, 6, 3069, 9099, 6, 51, 66, 1878, 165, 121, 64, 13, 65, 62, 66, 14, 67, 3228, 437},
       {15496, 10603, 10163, 2231, 3134, 3791, 49278, 39305, 68, 2025, 74, 3301, 1549, 64, 87, 88}},
  };
  auto file = GGUFFile::open(data_path("tokenizer/ggml-vocab-gpt-2.gguf").string());
  const Vocab base = read_vocab(*file);
  for (const Case& c : cases) {
    for (const char* pre : c.names) {
      Vocab v = base;
      v.pre = pre;
      const auto tok = Tokenizer::from_vocab(v);
      EXPECT_EQ(join(tok->encode(text, false)), join(c.ids)) << pre;
      EXPECT_EQ(join(tok->encode(text2, false)), join(c.ids2)) << pre;
    }
  }
}

}  // namespace
}  // namespace specmoe::core
