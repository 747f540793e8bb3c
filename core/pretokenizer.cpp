// Regex pre-tokenizers of byte-level BPE vocabularies, keyed by tokenizer.ggml.pre. The regex
// lists are the ones llama.cpp applies (src/llama-vocab.cpp, llm_tokenizer_bpe), which in turn
// come from each model's Hugging Face tokenizer.json; several regexes run in sequence, each
// splitting every piece of the previous split into its matches and the gaps between them
// (llama.cpp's unicode_regex_split). They run on PCRE2 in UTF + UCP mode (\p{L}, \p{N}, \s over
// all of Unicode), which also handles the lookaheads std::regex lacks.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "base/error.h"
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
const char* const kPoro = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

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
    spec.regexes = {
        "[\r\n]",
        // Cased letters (Unicode L&), spelled as code points so no editor or tool can
        // normalize the characters (several are NFC-unstable, e.g. U+1F7D, U+212A).
        R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-)"
        R"(\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C})"
        R"(\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
        R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B})"
        R"(\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45})"
        R"(\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4})"
        R"(\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-)"
        R"(\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113})"
        R"(\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139})"
        R"(\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
        R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
        R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
        R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
        R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
        "\\s+$",
        R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
        "\\p{N}+",
    };
  } else if (pre == "deepseek-v3") {
    spec.regexes = {
        R"(\p{N}{1,3})",
        R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
        "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    };
  } else if (pre == "deepseek-coder") {
    spec.regexes = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N})"};
  } else if (pre == "falcon") {
    spec.regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  } else if (is_any({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    // Digits are split one by one before the GPT-2 regex runs.
    spec.regexes = {R"(\p{N})", kGpt2};
  } else if (is_any({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                     "mellum", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en",
                     "jina-v2-code", "roberta-bpe", "modern-bert"})) {
    spec.regexes = {kGpt2};
  } else if (is_any({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "kormo", "solar-open", "f2llmv2"})) {
    spec.regexes = {kQwen2};
  } else if (is_any({"poro-chat", "bloom", "gpt3-finnish"})) {
    spec.regexes = {kPoro};
  } else if (pre == "viking") {
    spec.regexes = {kPoro, R"(\p{N})"};
  } else if (pre == "tekken") {
    spec.regexes = {kTekken};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (is_any({"gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"})) {
    spec.regexes = {kGpt4o};
  } else if (pre == "seed-coder") {
    // The tokenizer.json regex with its (?i:...) contractions spelled out, as llama.cpp writes it.
    spec.regexes = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
        "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  } else if (pre == "minicpm5") {
    spec.regexes = {
        R"(\p{N}{1,3})",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    spec.ignore_merges = true;
  } else if (pre == "mellum2") {
    spec.regexes = {R"(\p{N})", kGpt2};
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
