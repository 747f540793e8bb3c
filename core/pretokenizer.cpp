// Regex pre-tokenizers of byte-level BPE vocabularies, keyed by tokenizer.ggml.pre. The regex
// lists are the ones llama.cpp applies (src/llama-vocab.cpp, llm_tokenizer_bpe), which in turn
// come from each model's Hugging Face tokenizer.json; several regexes run in sequence, each
// splitting every piece of the previous split into its matches and the gaps between them
// (llama.cpp's unicode_regex_split). They run on PCRE2 in UTF + UCP mode (\p{L}, \p{N}, \s over
// all of Unicode), which also handles the lookaheads std::regex lacks.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "core/error.h"
#include "core/tokenizer_internal.h"

namespace specmoe::core::detail {
namespace {

// GPT-2 (Radford et al. 2019, openai/gpt-2 encoder.py).
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (tiktoken cl100k-style), with the case-insensitive group spelled out as llama.cpp does.
const char* const kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
const char* const kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o / Llama 4 (o200k): case-aware letter runs with an optional contraction suffix.
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

}  // namespace

bool pretokenizer_spec(std::string_view pre, PreTokenizerSpec& spec) {
  const auto is_any = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
      if (pre == n) return true;
    return false;
  };
  spec = PreTokenizerSpec{};
  if (pre.empty() || pre == "default") {
    // llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT (also used when tokenizer.ggml.pre is missing).
    spec.regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  } else if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    spec.regexes = {kLlama3};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (is_any({"dbrx", "smaug-bpe"})) {
    spec.regexes = {kLlama3};
  } else if (pre == "deepseek-llm") {
    // Code points whose NFC form differs (Greek oxia letters U+1F7D, U+1FBE, U+1FD3, U+1FDB; OHM
    // SIGN U+2126; KELVIN SIGN U+212A) are written as \x{...}: Unicode normalization of this
    // source once turned them into U+03CE.. and 'K', giving out-of-order ranges that PCRE2 rejects
    // and a range 'K'..U+212D that swallowed ASCII punctuation.
    spec.regexes = {
        "[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
    };
  } else if (pre == "deepseek-v3") {
    spec.regexes = {
        R"(\p{N}{1,3})",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
        "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    };
  } else if (pre == "deepseek-coder") {
    spec.regexes = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"};
  } else if (pre == "falcon") {
    spec.regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  } else if (is_any({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    // Digits are split one by one before the GPT-2 regex runs.
    spec.regexes = {R"(\p{N})", kGpt2};
  } else if (is_any({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                     "mellum", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en",
                     "jina-v2-code", "roberta-bpe", "modern-bert"})) {
    spec.regexes = {kGpt2};
  } else if (is_any({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "kormo", "solar-open"})) {
    spec.regexes = {kQwen2};
  } else if (is_any({"poro-chat", "bloom", "gpt3-finnish"})) {
    spec.regexes = {kPoro};
  } else if (pre == "viking") {
    spec.regexes = {kPoro, R"(\p{N})"};
  } else if (pre == "tekken") {
    spec.regexes = {kTekken};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (is_any({"gpt-4o", "llama4", "minimax-m2"})) {
    spec.regexes = {kGpt4o};
  } else if (is_any({"glm4", "chatglm-bpe"})) {
    spec.regexes = {kLlama3};
  } else {
    return false;
  }
  return true;
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes, const std::string& source) {
  // DOLLAR_ENDONLY: `$` means the end of the piece, as in ECMAScript (deepseek-llm's "\s+$").
  // MATCH_INVALID_UTF: invalid UTF-8 in the input never matches and becomes a gap piece.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_MATCH_INVALID_UTF;
  for (const std::string& re : regexes) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(), options, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      throw_error(ErrorKind::Runtime, "{}: pre-tokenizer regex '{}' does not compile at offset {}: {}", source, re,
                  err_off, reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
    compiled_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::pair<size_t, size_t>> RegexSplitter::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
  if (text.empty()) return {};
  std::vector<std::pair<size_t, size_t>> next;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (const auto& c : compiled_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(c->code, nullptr), &pcre2_match_data_free);
    if (!md) throw_error(ErrorKind::Runtime, "pre-tokenizer: out of memory for PCRE2 match data");
    next.clear();
    for (const auto& [off, len] : pieces) {
      // Each piece is matched on its own, so lookaheads and `$` stop at the piece's end.
      const PCRE2_SPTR s = subject + off;
      size_t start = 0;  // where the next search begins
      size_t done = 0;   // everything before this is already emitted
      while (start < len) {
        int rc = pcre2_match(c->code, s, len, start, 0, md.get(), nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
          // JIT stack exhaustion on a long run: retry with the interpreter.
          rc = pcre2_match(c->code, s, len, start, PCRE2_NO_JIT, md.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          throw_error(ErrorKind::Runtime, "pre-tokenizer: regex match failed: {}", reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end == m_begin) {  // an empty match splits nothing; search again one character on
          start = m_begin + utf8_len(static_cast<unsigned char>(text[off + m_begin]));
          continue;
        }
        if (m_begin > done) next.emplace_back(off + done, m_begin - done);  // the gap before the match
        next.emplace_back(off + m_begin, m_end - m_begin);
        start = done = m_end;
      }
      if (done < len) next.emplace_back(off + done, len - done);
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace specmoe::core::detail
