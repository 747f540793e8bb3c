// The tokenizers of the real models (scripts/fetch-models.sh) against llama.cpp: token ids equal to
// llama-tokenize's on the texts of tests/golden/tokenizer_texts.json (code, Chinese, Japanese and
// Korean, emoji with joiners, whitespace runs, mixed scripts, special-token texts), as a chat prompt
// is tokenized (the model's BOS, special tokens parsed) and as plain text (no BOS, special-token
// texts as text); and the same end-of-generation tokens. The expected ids in tests/golden/tokenizer_llamacpp.json were produced by
// scripts/tokenizer-golden.sh with llama-tokenize of llama.cpp 2026-10 (llama-cpp-python 0.3.36).
// Each model skips when it is absent.
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/gguf.h"
#include "core/tokenizer.h"
#include "real_models.h"

namespace specmoe::core {
namespace {

nlohmann::json read_json(const std::string& rel) {
  std::ifstream in(std::string(SPECMOE_SOURCE_DIR) + "/" + rel, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + rel);
  return nlohmann::json::parse(in);
}

std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) r += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : c == '\r' ? std::string("\\r") : std::string(1, c);
  return r;
}

class RealTokenizer : public ::testing::TestWithParam<const char*> {};

TEST_P(RealTokenizer, MatchesLlamaTokenize) {
  const std::string model = GetParam();
  SPECMOE_REQUIRE_MODEL(model);
  const nlohmann::json texts_json = read_json("tests/golden/tokenizer_texts.json");
  const nlohmann::json golden = read_json("tests/golden/tokenizer_llamacpp.json");
  ASSERT_TRUE(golden["models"].contains(model)) << "no expected ids for " << model << " (scripts/tokenizer-golden.sh)";
  std::map<std::string, std::string> texts;
  for (const auto& t : texts_json["texts"]) texts[t["name"].get<std::string>()] = t["text"].get<std::string>();

  // Only the vocabulary is read, so this runs whether or not this build supports the model's
  // tensor types and architecture.
  auto file = GGUFFile::open_metadata(specmoe::testing::model_path(model).string());
  auto tok = Tokenizer::from_gguf(*file);
  const auto& cases = golden["models"][model]["cases"];
  ASSERT_EQ(cases.size(), texts.size());
  size_t n_ids = 0, n_nonzero = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    ASSERT_TRUE(texts.count(name)) << name;
    const std::string& text = texts[name];
    const auto special = c["special"].get<std::vector<int32_t>>();
    const auto plain = c["plain"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text, tok->add_bos_by_default(), /*parse_special=*/true), special)
        << model << ", text '" << name << "' (special tokens parsed): \"" << printable(text) << "\"";
    EXPECT_EQ(tok->encode(text, false, false), plain)
        << model << ", text '" << name << "' (plain): \"" << printable(text) << "\"";
    n_ids += special.size() + plain.size();
    for (int32_t id : plain) n_nonzero += id != 0;
  }
  // End of generation: the same set of ids as llama.cpp (from its load log).
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (tok->is_eog(id)) eog.push_back(id);
  EXPECT_EQ(eog, golden["models"][model]["eog"].get<std::vector<int32_t>>()) << model;
  EXPECT_FALSE(eog.empty());
  // The comparison cannot pass on empty or all-zero expectations.
  EXPECT_GT(n_ids, 1000u);
  EXPECT_GT(n_nonzero, 500u);
}

TEST_P(RealTokenizer, PlainTextRoundTrips) {
  const std::string model = GetParam();
  SPECMOE_REQUIRE_MODEL(model);
  auto file = GGUFFile::open_metadata(specmoe::testing::model_path(model).string());
  auto tok = Tokenizer::from_gguf(*file);
  const nlohmann::json texts = read_json("tests/golden/tokenizer_texts.json");
  for (const auto& t : texts["texts"]) {
    const std::string text = t["text"];
    const std::vector<int32_t> ids = tok->encode(text, false, false);
    std::string pieces;
    for (int32_t id : ids) pieces += tok->token_to_piece(id);
    EXPECT_EQ(pieces, text) << model << ", text '" << t["name"].get<std::string>() << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealTokenizer, ::testing::ValuesIn(specmoe::testing::kRealModels),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find(".gguf"));
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace specmoe::core
