// Text in JSON output is always valid UTF-8 and never loses bytes (issue 16, item 1): byte-level
// BPE models emit bytes, so generation stops inside characters; every JSON text field decodes
// with U+FFFD replacement exactly as a UTF-8 decoder does and keeps the exact bytes in
// "<key>_bytes_b64". Checked here: the decoder against Unicode's own examples and against an
// independent reference built from the definition; base64 against RFC 4648; Chinese and emoji
// prompts cut after every token on the gpt-2 vocabulary; `generate/speculate/info --json` and
// `specmoe run` on a synth model with the gpt-2 vocabulary, on random-weight synth models and on
// a real model when $SPECMOE_MODELS has one, each output parsed by a strict JSON parser.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/gguf.h"
#include "core/synth.h"
#include "core/tokenizer.h"
#include "experiments/json_text.h"
#include "test_data.h"

namespace fs = std::filesystem;
using namespace specmoe;
using nlohmann::json;
using specmoe::testing::CliRun;
using specmoe::testing::run_cli;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string scratch(const std::string& name) {
  static std::atomic<int> counter{0};
  const fs::path dir = specmoe::testing::scratch_dir() / fmt::format("json_output_{}", ::getpid());
  fs::create_directories(dir);
  return (dir / fmt::format("{}_{}", counter++, name)).string();
}

// ---------------------------------------------------------------------------------------------
// The decoder.

// Unicode 15 section 3.9 ("U+FFFD Substitution of Maximal Subparts", Table 3-8) and the cases of
// its Tables 3-9..3-11, with what a conforming decoder outputs.
TEST(Utf8Replacement, UnicodeStandardExamples) {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d"},  // Table 3-8
      {"\xC0\xAF", kFffd + kFffd},                                               // overlong, C0 never leads
      {"\xE0\x80\xAF", kFffd + kFffd + kFffd},                                   // overlong 3-byte
      {"\xF0\x80\x80\x80", kFffd + kFffd + kFffd + kFffd},                       // overlong 4-byte
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},                                   // surrogate D800
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},                       // above U+10FFFF
      {"\xF5", kFffd}, {"\xFF", kFffd}, {"\x80\x80", kFffd + kFffd},
      {"\xE4\xBD" "a", kFffd + "a"},  // a cut character followed by ASCII
      {"\xDF\xBF", "\xDF\xBF"}, {"\xEF\xBF\xBF\xF4\x8F\xBF\xBF", "\xEF\xBF\xBF\xF4\x8F\xBF\xBF"},  // U+07FF, U+FFFF, U+10FFFF
  };
  for (const auto& c : cases) {
    bool replaced = false;
    EXPECT_EQ(exp::utf8_replace_invalid(c.in, &replaced), c.out) << ::testing::PrintToString(c.in);
    EXPECT_EQ(replaced, c.in != c.out);
  }
}

TEST(Utf8Replacement, TruncatedCharactersBecomeOneReplacementEach) {
  // Generation stopped after 1..n-1 bytes of a character: one U+FFFD, whatever the length.
  for (const std::string ch : {"\xC3\xA9" /* é */, "\xE4\xBD\xA0" /* 你 */, "\xF0\x9F\x98\x80" /* 😀 */}) {
    EXPECT_EQ(exp::utf8_replace_invalid(ch), ch);
    for (size_t cut = 1; cut < ch.size(); ++cut) {
      const std::string in = "ab" + ch.substr(0, cut);
      bool replaced = false;
      EXPECT_EQ(exp::utf8_replace_invalid(in, &replaced), "ab" + kFffd) << cut;
      EXPECT_TRUE(replaced);
      EXPECT_FALSE(exp::is_valid_utf8(in));
    }
  }
  for (const std::string valid : {"", "plain ASCII", "naïve café", "你好，世界", "emoji 🦙🚀 and ZWJ 👩‍💻"})
    EXPECT_TRUE(exp::is_valid_utf8(valid)) << valid;
}

// An independent reference, from the definitions rather than from byte ranges: the well-formed
// sequences are the UTF-8 encodings of the Unicode scalar values (all code points but the
// surrogates), and a maximal subpart is the longest prefix of one that the input starts with.
class ReferenceDecoder {
 public:
  ReferenceDecoder() {
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const std::string e = encode(cp);
      complete_.insert(e);
      for (size_t k = 1; k < e.size(); ++k) prefixes_.insert(e.substr(0, k));
    }
  }
  std::string decode(const std::string& in) const {
    std::string out;
    size_t i = 0;
    while (i < in.size()) {
      size_t best = 0;
      bool whole = false;
      for (size_t k = 1; k <= 4 && i + k <= in.size(); ++k) {
        const std::string s = in.substr(i, k);
        if (complete_.count(s)) best = k, whole = true;
        else if (prefixes_.count(s)) best = k, whole = false;
        else break;
        if (whole) break;
      }
      if (whole) out += in.substr(i, best);
      else out += kFffd;
      i += std::max<size_t>(best, 1);
    }
    return out;
  }

 private:
  static std::string encode(uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else if (cp < 0x800) s += static_cast<char>(0xC0 | cp >> 6), s += static_cast<char>(0x80 | (cp & 63));
    else if (cp < 0x10000)
      s += static_cast<char>(0xE0 | cp >> 12), s += static_cast<char>(0x80 | (cp >> 6 & 63)),
          s += static_cast<char>(0x80 | (cp & 63));
    else
      s += static_cast<char>(0xF0 | cp >> 18), s += static_cast<char>(0x80 | (cp >> 12 & 63)),
          s += static_cast<char>(0x80 | (cp >> 6 & 63)), s += static_cast<char>(0x80 | (cp & 63));
    return s;
  }
  std::set<std::string> complete_, prefixes_;
};

TEST(Utf8Replacement, AgreesWithAReferenceDecoderOnRandomBytes) {
  const ReferenceDecoder ref;
  std::mt19937 rng(16);
  // Bytes drawn mostly from the interesting ranges (leads, continuations, the boundary values).
  const uint8_t pool[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                          0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFE, 0xFF};
  int with_replacement = 0;
  for (int t = 0; t < 20000; ++t) {
    std::string in(1 + rng() % 12, '\0');
    for (auto& c : in) c = static_cast<char>(rng() % 3 == 0 ? rng() % 256 : pool[rng() % sizeof pool]);
    bool replaced = false;
    const std::string got = exp::utf8_replace_invalid(in, &replaced);
    ASSERT_EQ(got, ref.decode(in)) << ::testing::PrintToString(in);
    with_replacement += replaced;
  }
  EXPECT_GT(with_replacement, 1000);  // the comparison covered ill-formed input
  EXPECT_LT(with_replacement, 20000);
}

TEST(Base64, Rfc4648TestVectorsAndStrictDecoding) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},         {"f", "Zg=="},     {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(exp::base64_encode(plain), coded);
    EXPECT_EQ(exp::base64_decode(coded), plain);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(exp::base64_decode(exp::base64_encode(all)), all);
  for (const char* bad : {"Zg=", "Zh==", "Z===", "Zm9v!", "Zg==Zg==", "=Zg="}) EXPECT_FALSE(exp::base64_decode(bad)) << bad;
}

// ---------------------------------------------------------------------------------------------
// Byte-level BPE text cut after every token.

const char* const kPrompts[] = {"请用中文写一首关于春天的诗：", "emoji 🦙🚀 and 👩‍💻 ok", "日本語のテキスト、句読点。"};

// Checks one JSON text value written by set_text for `bytes`, after a strict round trip.
void expect_text_field(const json& parsed, const std::string& key, const std::string& bytes, const std::string& what) {
  ASSERT_TRUE(parsed.contains(key)) << what;
  ASSERT_TRUE(parsed[key].is_string()) << what;
  EXPECT_EQ(parsed[key].get<std::string>(), exp::utf8_replace_invalid(bytes)) << what;
  EXPECT_EQ(parsed.contains(key + "_bytes_b64"), !exp::is_valid_utf8(bytes)) << what;
  EXPECT_EQ(exp::get_text(parsed, key), bytes) << what;
}

TEST(JsonText, Gpt2VocabularyPromptsCutAfterEveryToken) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(specmoe::testing::data_path("tokenizer/ggml-vocab-gpt-2.gguf")));
  int cut_inside = 0, total = 0;
  for (const char* prompt : kPrompts) {
    const auto ids = tok->encode(prompt, false);
    ASSERT_GE(ids.size(), 8u) << prompt;
    std::string bytes;
    for (size_t n = 1; n <= ids.size(); ++n) {
      bytes += tok->token_to_piece(ids[n - 1]);
      json j;
      exp::set_text(j, "text", bytes);
      // The default dump throws on invalid UTF-8 and the parser rejects it: strict both ways.
      const json parsed = json::parse(j.dump());
      expect_text_field(parsed, "text", bytes, fmt::format("{} cut after {} tokens", prompt, n));
      cut_inside += !exp::is_valid_utf8(bytes);
      ++total;
    }
    EXPECT_EQ(bytes, prompt);
  }
  // gpt-2 splits CJK characters and emoji into byte tokens, so many cuts fall inside one.
  EXPECT_GT(cut_inside, total / 4) << cut_inside << " of " << total;
}

// ---------------------------------------------------------------------------------------------
// The CLI on models.

// A synth model (random weights) carrying the gpt-2 vocabulary: the synth file's metadata with
// its tokenizer.* keys replaced by those of ggml-vocab-gpt-2.gguf. Written once per binary.
const std::string& gpt2_synth_model() {
  static const std::string path = [] {
    const fs::path vocab_file = specmoe::testing::data_path("tokenizer/ggml-vocab-gpt-2.gguf");
    const core::Vocab vocab = core::read_vocab(*core::GGUFFile::open(vocab_file.string()));
    core::SynthSpec spec = core::synth_spec("tiny");
    spec.n_vocab = static_cast<int>(vocab.tokens.size());
    spec.type = DType::F16;
    spec.tied_output = true;
    const std::string byte_vocab = scratch("gpt2-synth-bytes.gguf");
    core::synth_write(spec, byte_vocab, 16);
    auto src = core::GGUFFile::open(byte_vocab);
    core::GGUFWriter w;
    for (const auto& [key, value] : src->metadata())
      if (key != "general.alignment" && !key.starts_with("tokenizer.")) w.set_value(key, value);
    core::write_vocab(w, vocab);
    for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, t.ne, {t.data, t.nbytes});
    const std::string out = scratch("gpt2-synth.gguf");
    w.write(out);
    return out;
  }();
  return path;
}

// What stdout gets for `ids`: the pieces concatenated (generate/speculate print pieces).
std::string pieces(const core::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += tok.token_to_piece(id);
  return s;
}

struct Checked {
  bool replaced = false;           // the text needed U+FFFD
  std::vector<int32_t> tokens;
};

// Runs a --json command, parses its stdout strictly and checks text, tokens and prompt.
Checked check_json(const core::Tokenizer& tok, const std::vector<std::string>& args, const std::string& prompt,
                   const std::string& what) {
  const CliRun r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.describe();
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << what << "\n" << r.err;
  json j;
  try {
    j = json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << what << ": stdout is not strict JSON: " << e.what() << "\n" << r.out;
    return {};
  }
  EXPECT_TRUE(j.contains("tokens") && j["tokens"].is_array()) << what;
  const auto tokens = j.value("tokens", std::vector<int32_t>{});
  const std::string bytes = pieces(tok, tokens);
  expect_text_field(j, "text", bytes, what);
  expect_text_field(j, "prompt", prompt, what);
  EXPECT_TRUE(j.contains("metrics") && j["metrics"].is_object()) << what;
  EXPECT_EQ(j["metrics"].value("n_generated", -1), static_cast<int64_t>(tokens.size())) << what;
  return {!exp::is_valid_utf8(bytes), tokens};
}

bool check_json_command(const core::Tokenizer& tok, const std::vector<std::string>& args, const std::string& prompt,
                        const std::string& what) {
  return check_json(tok, args, prompt, what).replaced;
}

class JsonCli : public ::testing::Test {
 protected:
  void SetUp() override { SPECMOE_REQUIRE_CLI(); }
};

TEST_F(JsonCli, GenerateAndSpeculateOnTheGpt2VocabularyCutAtEveryLength) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string& model = gpt2_synth_model();
  auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(model));
  ASSERT_EQ(tok->kind(), core::TokenizerKind::BytePairEncoding);
  int replaced = 0, cases = 0;
  for (const char* prompt : {kPrompts[0], kPrompts[1]}) {
    for (int n = 1; n <= 8; ++n) {
      const std::string ns = std::to_string(n);
      const std::vector<std::string> gen = {"generate", "-m", model, "-p", prompt, "-n", ns, "--temp", "0", "-t", "1"};
      std::vector<std::string> gen_json = gen;
      gen_json.push_back("--json");
      const Checked c = check_json(*tok, gen_json, prompt, fmt::format("generate --json '{}' -n {}", prompt, n));
      replaced += c.replaced;
      EXPECT_EQ(c.tokens.size(), static_cast<size_t>(n));
      // stdout without --json: the raw bytes of the same tokens, complete or not, then a newline.
      const CliRun raw = run_cli(gen);
      EXPECT_EQ(raw.exit_code, 0) << raw.describe();
      EXPECT_EQ(raw.out, pieces(*tok, c.tokens) + "\n") << "generate -n " << n;
      replaced += check_json_command(*tok,
                                     {"speculate", "-m", model, "-p", prompt, "-n", ns, "--temp", "0", "-t", "1",
                                      "--drafter", "ngram", "--json"},
                                     prompt, fmt::format("speculate --json '{}' -n {}", prompt, n));
      cases += 2;
    }
  }
  // Random weights over 50257 tokens, many of them pieces of characters: sampled at a high
  // temperature, some outputs end inside a character. Fixed seeds, so this is deterministic.
  for (int seed = 1; seed <= 6; ++seed) {
    replaced += check_json_command(*tok,
                                   {"generate", "-m", model, "-p", kPrompts[2], "-n", "8", "--temp", "3", "--top-k", "0",
                                    "--top-p", "1", "--min-p", "0", "-s", std::to_string(seed), "-t", "1", "--json"},
                                   kPrompts[2], fmt::format("generate --json --temp 3 seed {}", seed));
    ++cases;
  }
  EXPECT_GT(replaced, 0) << "no output of " << cases << " needed replacement: the check exercised nothing";
  EXPECT_LT(replaced, cases);
}

TEST_F(JsonCli, RandomWeightSynthModelsOfEveryArchitecture) {
  // Byte vocabularies (<0xNN> tokens): a random model emits arbitrary bytes.
  int replaced = 0, cases = 0;
  for (const char* preset : {"tiny", "moe-tiny", "qwen2moe-tiny"}) {
    const std::string model = scratch(std::string(preset) + ".gguf");
    core::synth_write(preset, model, 5);
    auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(model));
    for (int seed = 1; seed <= 3; ++seed) {
      const std::string s = std::to_string(seed);
      replaced += check_json_command(*tok,
                                     {"generate", "-m", model, "-p", kPrompts[1], "-n", "12", "--temp", "1", "-s", s,
                                      "-t", "1", "--json", "--moe-stats"},
                                     kPrompts[1], fmt::format("{} generate seed {}", preset, seed));
      replaced += check_json_command(*tok,
                                     {"speculate", "-m", model, "-p", kPrompts[0], "-n", "12", "--temp", "1", "-s", s,
                                      "-t", "1", "--drafter", "layerskip", "--exit-layer", "1", "--compare", "--json"},
                                     kPrompts[0], fmt::format("{} speculate seed {}", preset, seed));
      cases += 2;
    }
  }
  EXPECT_GT(replaced, 0) << "no output of " << cases << " needed replacement";
}

// generate --top-logits K: per sampled token the K highest logits of the row it was chosen
// from, highest first; at temperature 0 the first is the token itself. The greedy tokens are the
// same with and without the option (it only reads the logits).
TEST_F(JsonCli, GenerateTopLogitsListTheGreedyTokenFirst) {
  const std::string model = scratch("top-logits-tiny.gguf");
  core::synth_write("tiny", model, 3);
  const std::vector<std::string> base = {"generate", "-m", model, "-p", kPrompts[0], "-n", "10", "--temp", "0",
                                         "-t", "1", "--json"};
  std::vector<std::string> with = base;
  with.insert(with.end(), {"--top-logits", "4"});
  const CliRun plain = run_cli(base), top = run_cli(with);
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  ASSERT_EQ(top.exit_code, 0) << top.describe();
  const json jp = json::parse(plain.out), jt = json::parse(top.out);
  const auto tokens = jt.at("tokens").get<std::vector<int32_t>>();
  EXPECT_EQ(tokens, jp.at("tokens").get<std::vector<int32_t>>());
  ASSERT_FALSE(jp.contains("top_logits"));
  const json& steps = jt.at("top_logits");
  // One entry per token, and one more for an end-of-generation token that ended the output.
  ASSERT_TRUE(steps.size() == tokens.size() || (steps.size() == tokens.size() + 1 && tokens.size() < 10u));
  ASSERT_FALSE(tokens.empty());
  int spread = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    ASSERT_EQ(steps[i].size(), 4u) << "step " << i;
    if (i < tokens.size()) {
      EXPECT_EQ(steps[i][0].at("id").get<int32_t>(), tokens[i]) << "step " << i;
    }
    for (size_t k = 1; k < 4; ++k) {
      EXPECT_GE(steps[i][k - 1].at("logit").get<double>(), steps[i][k].at("logit").get<double>()) << "step " << i;
      EXPECT_NE(steps[i][k - 1].at("id").get<int32_t>(), steps[i][k].at("id").get<int32_t>()) << "step " << i;
    }
    spread += steps[i][0].at("logit").get<double>() > steps[i][3].at("logit").get<double>();
    EXPECT_TRUE(steps[i][0].contains("piece")) << "step " << i;
  }
  EXPECT_GT(spread, 0) << "all listed logits equal: the check compares nothing";
  // Without --json there is nowhere to write them: one clear error.
  std::vector<std::string> no_json(with.begin(), with.end());
  no_json.erase(std::find(no_json.begin(), no_json.end(), "--json"));
  const CliRun bad = run_cli(no_json);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--top-logits needs --json"), std::string::npos) << bad.err;
}

TEST_F(JsonCli, InfoJsonWithInvalidUtf8InGgufStrings) {
  const std::string src = scratch("info-src.gguf");
  core::synth_write("tiny", src, 1);
  auto f = core::GGUFFile::open(src);
  core::GGUFWriter w;
  const std::string bad_name = "synth \xE4\xBD cut \xFF";
  for (const auto& [key, value] : f->metadata()) {
    if (key == "general.alignment") continue;
    if (key == "general.name") w.set_string(key, bad_name);
    else w.set_value(key, value);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, {t.data, t.nbytes});
  const std::string path = scratch("info-bad-name.gguf");
  w.write(path);
  const CliRun r = run_cli({"info", "-m", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  expect_text_field(j, "name", bad_name, "general.name");
  EXPECT_EQ(j["name"], "synth " + kFffd + " cut " + kFffd);
  expect_text_field(j, "architecture", "llama", "architecture");
  EXPECT_EQ(j.value("n_vocab", 0), 320);
}

TEST_F(JsonCli, InfoNamesALoopedModelsBlocksAndPasses) {
  // nanbeige-tiny: 3 blocks run twice, 6 layers of the forward and the cache.
  const std::string path = scratch("info-nanbeige.gguf");
  core::synth_write(core::synth_spec("nanbeige-tiny"), path, 1);
  const CliRun r = run_cli({"info", "-m", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  EXPECT_EQ(j.value("n_layer", 0), 6);
  EXPECT_EQ(j.value("n_block", 0), 3);
  EXPECT_EQ(j.value("num_loops", 0), 2);
  EXPECT_TRUE(j.value("loop_final_norm", false));
  const CliRun text = run_cli({"info", "-m", path});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("6 (3 blocks run 2 times over, output_norm between passes)"), std::string::npos) << text.out;
}

TEST_F(JsonCli, RunRecordsAndReportAreStrictJsonWithExactBytes) {
  SPECMOE_REQUIRE_DATA("tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string& model = gpt2_synth_model();
  auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(model));
  const std::string out = scratch("run-out");
  const std::string toml = scratch("run.toml");
  std::ofstream(toml) << fmt::format(R"([experiment]
output = "{}"
warmup = 0
threads = 1
[models.m]
path = "{}"
[prompts]
list = ["{}", "{}"]
[sampling]
max_tokens = 7
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
[[strategy]]
name = "ngram"
kind = "speculative"
target = "m"
drafter = "ngram"
[sweep]
temperature = [0.0, 3.0]
)",
                                     out, model, kPrompts[0], kPrompts[1]);
  const CliRun r = run_cli({"run", toml, "-q"}, {{"SPECMOE_CACHE_DIR", scratch("cache")}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::ifstream in(fs::path(out) / "records.jsonl", std::ios::binary);
  std::string line;
  int records = 0, replaced = 0;
  while (std::getline(in, line)) {
    const json rec = json::parse(line);  // strict: throws on invalid UTF-8
    const auto tokens = rec.at("tokens").get<std::vector<int32_t>>();
    const std::string bytes = tok->decode(tokens);  // records hold the detokenized text
    expect_text_field(rec, "text", bytes, fmt::format("record {}", records));
    replaced += !exp::is_valid_utf8(bytes);
    ++records;
  }
  EXPECT_EQ(records, 8);  // 4 runs x 2 prompts
  EXPECT_GT(replaced, 0);
  std::ifstream rin(fs::path(out) / "report.json", std::ios::binary);
  const json report = json::parse(rin);
  EXPECT_EQ(report.at("runs").size(), 4u);
}

// A real byte-level BPE model, when $SPECMOE_MODELS holds SmolLM2 or Qwen GGUF files.
TEST_F(JsonCli, RealModelChinesePromptCutAtEveryLength) {
  const char* dir = std::getenv("SPECMOE_MODELS");
  std::string model;
  if (dir && fs::is_directory(dir)) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() == ".gguf" && (name.find("SmolLM2") != std::string::npos || name.find("Qwen") != std::string::npos))
        found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    if (!found.empty()) model = found.front();
  }
  if (model.empty()) GTEST_SKIP() << "no SmolLM2 or Qwen GGUF under $SPECMOE_MODELS";
  auto tok = core::Tokenizer::from_gguf(*core::GGUFFile::open(model));
  int replaced = 0;
  for (int n = 1; n <= 8; ++n)
    replaced += check_json_command(*tok,
                                   {"generate", "-m", model, "-p", kPrompts[0], "-n", std::to_string(n), "--temp", "0",
                                    "--json"},
                                   kPrompts[0], fmt::format("{} -n {}", model, n));
  RecordProperty("cut_inside_a_character", replaced);
}

}  // namespace
