// Regex pre-tokenizers of byte-level BPE vocabularies, keyed by tokenizer.ggml.pre. The regex
// lists are the ones llama.cpp applies (src/llama-vocab.cpp, llm_tokenizer_bpe), which in turn
// come from each model's Hugging Face tokenizer.json; several regexes run in sequence, each
// splitting every piece of the previous split into its matches and the gaps between them
// (llama.cpp's unicode_regex_split). They run on PCRE2 in UTF + UCP mode (\p{L}, \p{N}, \s over
// all of Unicode), which also handles the lookaheads std::regex lacks.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <string>

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
// Qwen3.5: as Qwen2, with combining marks (\p{M}) inside letter runs.
const char* const kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3's word regex (also AFMoE's): ASCII punctuation leading a Latin word, letter runs
// with marks, punctuation/symbol runs, whitespace.
const char* const kDeepseekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Han, hiragana and katakana runs (DeepSeek V3, Spark 2.5, Youtu).
const char* const kCjkKana = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
// Ling / Bailing MoE: the tokenizer.json regex with its possessive quantifiers made greedy, as
// llama.cpp runs it.
const char* const kBailingMoe =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// EXAONE MoE: letter runs may continue over single spaces ("New York" is one word).
const char* const kExaoneMoe =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
// Jais 2: Llama 3's regex with whitespace runs cut into power-of-two lengths.
const char* const kJais2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
// Granite embedding multilingual 97M: GPT-4o's regex with marks counted as letters.
const char* const kGraniteEmbMulti =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Cased-letter regex of Tiny Aya's and Youtu's tokenizer.json (with the contractions spelled out).
const char* const kCasedWords =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)";
// Text split into runs of newlines and runs of anything else (SentencePiece-style BPE, Laguna).
const char* const kNewlineRuns = R"([^\n]+|[\n]+)";
// Kimi K2's Han class: the CJK unified ideograph blocks (extensions A-F) and the compatibility
// ideographs, as llama.cpp delimits them (not Unicode's Script=Han).
const char* const kKimiHan =
    R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F})"
    R"(\x{2B820}-\x{2CEAF}\x{2CEB0}-\x{2EBEF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])";

// llama.cpp runs regexes that use \p{..} on a copy of the text where each non-ASCII character
// stands for its general category, and every letter subcategory (\p{Lu}, \p{Ll}, \p{Lt}, \p{Lm},
// \p{Lo}) stands for all letters. Its ids follow from that reading, so the cased-letter classes of
// a tokenizer.json regex are given the same meaning here.
std::string any_letter_case(std::string re) {
  for (const char* sub : {"\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}"}) {
    for (size_t pos = 0; (pos = re.find(sub, pos)) != std::string::npos;) re.replace(pos, 6, "\\p{L}");
  }
  return re;
}

// Kimi K2 (tokenization_kimi.py):
//   [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
//   [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
//   |\s*[\r\n]+|\s+(?!\S)|\s+
// llama.cpp implements it by hand (unicode.cpp, for the trigger regex "\p{Han}+"): its word runs
// are letters of any case outside its Han class, without combining marks. This regex makes the
// same cuts.
std::string kimi_k2_regex() {
  return std::string(kKimiHan) + R"(+|[^\r\n\p{L}\p{N}]?(?:(?!)" + kKimiHan +
         R"()\p{L})+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
         R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

}  // namespace

bool pretokenizer_spec(std::string_view pre, PreTokenizerSpec& spec) {
  const auto is_any = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
      if (pre == n) return true;
    return false;
  };
  spec = PreTokenizerSpec{};
  // The names, their regexes and flags follow llama.cpp's llama_vocab::impl::load and
  // llm_tokenizer_bpe (LLAMA_VOCAB_PRE_TYPE_* in comments where the name differs). llama.cpp's
  // clean_spaces flag only changes its detokenizer's space clean-up, which decode() does not do
  // for any name, so it is not recorded here.
  // Not supported: "whitespace", which converters write only with tokenizer.ggml.model
  // "whitespace" (llama.cpp drops the whitespace and may lowercase before BPE; that model is not
  // supported here), and on a "gpt2" vocabulary llama.cpp aborts at any run of two spaces.
  if (pre.empty() || pre == "default") {
    // llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT (also used when tokenizer.ggml.pre is missing).
    spec.regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  } else if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                     "jina-v5-nano"})) {
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
  } else if (is_any({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"})) {
    // DEEPSEEK3_LLM, HUNYUAN_DENSE, JOYAI_LLM, HY_V4.
    spec.regexes = {R"(\p{N}{1,3})", kCjkKana, kDeepseekV3Words};
  } else if (pre == "spark2_5") {
    spec.regexes = {
        R"(\p{N}{1,3})", kCjkKana,
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
        R"(\p{N})"};
  } else if (pre == "youtu") {
    spec.regexes = {
        // Hangul, CJK punctuation, bopomofo, then Han and kana runs.
        R"([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014})"
        R"(\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|)"
        R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
        any_letter_case(std::string(kCasedWords) + R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
    spec.ignore_merges = true;
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
  } else if (is_any({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "kormo", "solar-open", "f2llmv2",
                     "grok-2"})) {
    spec.regexes = {kQwen2};  // grok-2 is its own type in llama.cpp, with Qwen2's regex
  } else if (pre == "qwen35") {
    spec.regexes = {kQwen35};
  } else if (pre == "ufakzeka") {
    // Qwen2's regex without the English contractions (Turkish apostrophe suffixes stay attached).
    spec.regexes = {R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  } else if (pre == "laguna") {
    spec.regexes = {kNewlineRuns, kQwen2};
  } else if (is_any({"bailingmoe", "bailingmoe2", "llada-moe"})) {
    spec.regexes = {kBailingMoe};  // BAILINGMOE
  } else if (pre == "exaone-moe") {
    spec.regexes = {kExaoneMoe};
  } else if (pre == "jais-2") {
    spec.regexes = {kJais2};
  } else if (is_any({"tiny_aya", "cohere2moe"})) {
    // TINY_AYA. llama.cpp runs the tokenizer.json digit regex "\d{1,3}(?=(?:\d{3})*\b)" as its
    // AFMoE digit grouping.
    spec.regexes = {std::string(kDigitGroupsRegex),
                    any_letter_case(std::string(kCasedWords) +
                                    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
  } else if (pre == "afmoe") {
    spec.regexes = {
        std::string(kDigitGroupsRegex),
        // CJK, kana, halfwidth katakana, Kangxi radicals, Thai, Lao, Khmer, Myanmar, Hangul. The
        // third range starts at U+8C48 as in llama.cpp's source (not at U+F900).
        R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{8C48}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F})"
        R"(\x{2F00}-\x{2FDF}\x{E40}-\x{E7F}\x{E80}-\x{EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F})"
        R"(\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)",
        kDeepseekV3Words};
  } else if (pre == "kimi-k2") {
    spec.regexes = {kimi_k2_regex()};
    spec.merges_optional = true;
  } else if (pre == "superbpe") {
    // Number runs, then cuts before every group of three digits counted from the right.
    spec.regexes = {R"(\p{N}+)", std::string(kDigitTripleCutsRegex)};
  } else if (is_any({"gemma4", "granite-embed-multi-311m"})) {
    // GEMMA4: SentencePiece-style BPE. Spaces become U+2581, merges run on raw UTF-8 over whole
    // lines, and llama.cpp forces add_bos_token on.
    spec.regexes = {kNewlineRuns};
    spec.byte_encode = false;
    spec.escape_whitespaces = true;
    spec.newline_runs_whole = true;
    spec.force_add_bos = true;
  } else if (pre == "sarvam-moe") {
    spec.regexes = {kNewlineRuns};
    spec.byte_encode = false;
    spec.escape_whitespaces = true;
  } else if (pre == "granite-embed-multi-97m") {
    spec.regexes = {kGraniteEmbMulti};  // GRANITE_EMB_MULTI
    spec.ignore_merges = true;
  } else if (pre == "chameleon") {
    spec.regexes = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re",
                    R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2};
    spec.add_bos = true;
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
  } else if (pre == "chatglm-bpe") {
    spec.regexes = {kLlama3};  // CHATGLM4
    spec.default_bos = false;
  } else if (is_any({"glm4", "glm5"})) {
    spec.regexes = {kLlama3};  // CHATGLM4
    spec.default_bos = false;
    spec.ignore_merges = true;
  } else {
    return false;
  }
  return true;
}

struct RegexSplitter::Compiled {
  enum class Builtin { None, DigitGroups, DigitTripleCuts };
  pcre2_code* code = nullptr;  // the regex, or for a built-in the runs it works on
  Builtin builtin = Builtin::None;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes, const std::string& source) {
  // DOLLAR_ENDONLY: `$` means the end of the piece, as in ECMAScript (deepseek-llm's "\s+$").
  // MATCH_INVALID_UTF: invalid UTF-8 in the input never matches and becomes a gap piece.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_MATCH_INVALID_UTF;
  for (const std::string& spec_re : regexes) {
    auto c = std::make_unique<Compiled>();
    std::string re = spec_re;
    if (spec_re == kDigitGroupsRegex) {
      c->builtin = Compiled::Builtin::DigitGroups;
      re = R"(\p{N}+)";
    } else if (spec_re == kDigitTripleCutsRegex) {
      c->builtin = Compiled::Builtin::DigitTripleCuts;
      re = "[0-9]+";
    }
    int err = 0;
    PCRE2_SIZE err_off = 0;
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

namespace {

// pcre2_match, retried with the interpreter when the JIT fails (its stack exhausted on a long
// run); false when nothing matches, else the match is [begin, end).
bool match_at(const pcre2_code* code, PCRE2_SPTR s, size_t len, size_t start, uint32_t opts, pcre2_match_data* md,
              size_t& begin, size_t& end) {
  int rc = pcre2_match(code, s, len, start, opts, md, nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) rc = pcre2_match(code, s, len, start, opts | PCRE2_NO_JIT, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw_error(ErrorKind::Runtime, "pre-tokenizer: regex match failed: {}", reinterpret_cast<const char*>(msg));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> RegexSplitter::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
  if (text.empty()) return {};
  std::vector<std::pair<size_t, size_t>> next;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const auto char_len = [&](size_t at) { return utf8_len(static_cast<unsigned char>(text[at])); };
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
      size_t m_begin = 0, m_end = 0;
      if (c->builtin == Compiled::Builtin::DigitGroups) {
        // Each \p{N} run: the text since the last cut and the run's first 1-3 characters (the
        // run's length modulo 3, or 3), then groups of three characters.
        while (start < len && match_at(c->code, s, len, start, 0, md.get(), m_begin, m_end)) {
          size_t n = 0;
          for (size_t i = m_begin; i < m_end; i += char_len(off + i)) ++n;
          size_t take = n % 3 == 0 ? 3 : n % 3;
          for (size_t i = m_begin; i < m_end;) {
            for (size_t k = 0; k < take; ++k) i += char_len(off + i);
            next.emplace_back(off + done, i - done);
            done = i;
            take = 3;
          }
          start = m_end;
        }
        if (done < len) next.emplace_back(off + done, len - done);
        continue;
      }
      if (c->builtin == Compiled::Builtin::DigitTripleCuts) {
        // Cuts at the run's end minus 3, 6, ... (ASCII digits: one byte each), never at its end.
        while (start < len && match_at(c->code, s, len, start, 0, md.get(), m_begin, m_end)) {
          for (size_t cut = m_begin + (m_end - m_begin) % 3; cut + 3 <= m_end; cut += 3) {
            if (cut > done) next.emplace_back(off + done, cut - done);
            done = std::max(done, cut);
          }
          start = m_end;
        }
        if (done < len) next.emplace_back(off + done, len - done);
        continue;
      }
      while (start < len && match_at(c->code, s, len, start, 0, md.get(), m_begin, m_end)) {
        if (m_end == m_begin) {
          // An empty match (a lookahead-only regex) cuts the piece there. Then, as
          // std::regex_iterator (which llama.cpp splits with) does: a non-empty match starting at
          // the same place, else the search goes on one character later.
          if (m_begin > done) next.emplace_back(off + done, m_begin - done);
          done = std::max(done, m_begin);
          if (m_begin >= len) break;
          if (!match_at(c->code, s, len, m_begin, PCRE2_ANCHORED | PCRE2_NOTEMPTY_ATSTART, md.get(), m_begin, m_end)) {
            start = m_begin + char_len(off + m_begin);
            continue;
          }
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
