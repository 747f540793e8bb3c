// Prompt loading: inline lists, text files (one per line), MT-bench / Spec-Bench JSONL with
// category filter, limit and turn; errors name the TOML key and the data file's line.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <zlib.h>

#include "base/error.h"
#include "experiments/experiment_spec.h"
#include "experiments/prompt_loader.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;

// One folder per test: ctest runs the tests of this file as parallel processes, and two of them
// rewriting one q.jsonl let a test read it truncated (CI, 2026-12-05: "no question of category
// 'writing' ... (categories: )").
fs::path write_scratch(const std::string& name, const std::string& content) {
  fs::path dir = specmoe::testing::scratch_dir() / "experiment_prompts" /
                 ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

SourceMap src_for(const std::string& file) {
  SourceMap src;
  src.file = file;
  src.lines = {{"prompts", 10}, {"prompts.jsonl", 12}, {"prompts.file", 13}, {"prompts.categories", 14}};
  return src;
}

const char* kJsonl =
    R"({"question_id": 1, "category": "writing", "turns": ["w1 first", "w1 second"]}
{"question_id": 2, "category": "math", "turns": ["m2 first", "m2 second"]}

{"question_id": "q3", "category": "writing", "turns": ["w3 first", "w3 second"]}
{"question_id": 4, "category": "coding", "turns": ["c4 first", "c4 second"]}
{"task_id": "HumanEval/0", "prompt": "def f():\n"}
)";

TEST(PromptLoader, JsonlAllCategoriesFirstTurn) {
  PromptSource s;
  s.jsonl = write_scratch("q.jsonl", kJsonl).string();
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_EQ(prompts[0].id, "1");
  EXPECT_EQ(prompts[0].category, "writing");
  EXPECT_EQ(prompts[0].text, "w1 first");
  EXPECT_EQ(prompts[2].id, "q3");
  EXPECT_EQ(prompts[4].id, "HumanEval/0");
  EXPECT_EQ(prompts[4].category, "");
  EXPECT_EQ(prompts[4].text, "def f():\n");
}

TEST(PromptLoader, JsonlCategoryFilterLimitAndTurn) {
  PromptSource s;
  s.jsonl = write_scratch("q.jsonl", kJsonl).string();
  s.categories = {"writing", "coding"};
  s.turn = 1;
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].text, "w1 second");
  EXPECT_EQ(prompts[0].history, (std::vector<std::string>{"w1 first"}));  // answered first, by the target
  EXPECT_EQ(prompts[1].text, "w3 second");
  EXPECT_EQ(prompts[2].text, "c4 second");
  s.limit = 2;
  prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[1].id, "q3");
}

TEST(PromptLoader, JsonlErrorsNameKeyFileAndLine) {
  PromptSource s;
  s.jsonl = write_scratch("bad.jsonl", "{\"question_id\": 1, \"turns\": [\"a\"]}\n{\"question_id\": 2, \"turns\": \n").string();
  try {
    load_prompts(s, src_for("e.toml"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_TRUE(std::string(e.what()).starts_with("e.toml:12: key 'prompts.jsonl': " + s.jsonl + " line 2: invalid JSON"))
        << e.what();
  }
  s.jsonl = write_scratch("q.jsonl", kJsonl).string();
  s.turn = 2;
  try {
    load_prompts(s, src_for("e.toml"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "e.toml:12: key 'prompts.jsonl': " + s.jsonl +
                                         " line 1: question '1' has 2 turn(s); prompts.turn = 2 is out of range");
  }
  s.turn = 0;
  s.categories = {"writting"};
  try {
    load_prompts(s, src_for("e.toml"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "e.toml:14: key 'prompts.categories': no question of category 'writting' in " +
                                         s.jsonl + " (categories: (none), coding, math, writing)");
  }
  s.categories = {};
  s.jsonl = "/nonexistent/q.jsonl";
  try {
    load_prompts(s, src_for("e.toml"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("e.toml:12: key 'prompts.jsonl': cannot open '/nonexistent/q.jsonl'", 0), 0u)
        << e.what();
  }
}

// gzip data as `gzip` writes it, built with zlib (so no data file is needed).
std::string gzip_bytes(const std::string& text) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, text.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(PromptLoader, GzipJsonlAndTextFiles) {
  PromptSource s;
  s.jsonl = write_scratch("q.jsonl.gz", gzip_bytes(kJsonl)).string();
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_EQ(prompts[4].id, "HumanEval/0");
  EXPECT_EQ(prompts[4].text, "def f():\n");
  // Two gzip members back to back (gzip -c a b) read as one file.
  s.jsonl = write_scratch("two.jsonl.gz", gzip_bytes(kJsonl) + gzip_bytes(kJsonl)).string();
  EXPECT_EQ(load_prompts(s, src_for("e.toml")).size(), 10u);
  s.jsonl.clear();
  s.file = write_scratch("p.txt.gz", gzip_bytes("one\ntwo\n")).string();
  EXPECT_EQ(load_prompts(s, src_for("e.toml")).size(), 2u);
  // Not gzip, or cut short: the key and the file are named.
  s.file.clear();
  for (const std::string& bad : {std::string("plain text, not gzip"), gzip_bytes(kJsonl).substr(0, 40)}) {
    s.jsonl = write_scratch("bad.jsonl.gz", bad).string();
    try {
      load_prompts(s, src_for("e.toml"));
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Config);
      EXPECT_TRUE(std::string(e.what()).starts_with("e.toml:12: key 'prompts.jsonl': '" + s.jsonl +
                                                    "' is not valid gzip data"))
          << e.what();
    }
  }
}

TEST(PromptLoader, HumanEvalAsShipped) {
  SPECMOE_REQUIRE_DATA("prompts/humaneval/HumanEval.jsonl.gz");
  PromptSource s;
  s.jsonl = specmoe::testing::data_path("prompts/humaneval/HumanEval.jsonl.gz").string();
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 164u);
  EXPECT_EQ(prompts[0].id, "HumanEval/0");
  EXPECT_TRUE(prompts[0].text.starts_with("from typing import List\n\n\ndef has_close_elements")) << prompts[0].text;
  EXPECT_EQ(prompts[163].id, "HumanEval/163");
}

TEST(PromptLoader, TextFileOnePromptPerLine) {
  PromptSource s;
  s.list = {"inline one"};
  s.file = write_scratch("p.txt", "# comment\nfirst prompt\n\n  \nsecond\\nline two\r\nback\\\\slash\n").string();
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 4u);
  EXPECT_EQ(prompts[0].text, "inline one");
  EXPECT_EQ(prompts[1].text, "first prompt");
  EXPECT_EQ(prompts[2].text, "second\nline two");
  EXPECT_EQ(prompts[3].text, "back\\slash");
  EXPECT_EQ(prompts[3].id, "p3");
  s.limit = 1;
  EXPECT_EQ(load_prompts(s, src_for("e.toml")).size(), 1u);
}

TEST(PromptLoader, MtBenchQuestionFile) {
  SPECMOE_REQUIRE_DATA("prompts/mt_bench/question.jsonl");
  PromptSource s;
  s.jsonl = specmoe::testing::data_path("prompts/mt_bench/question.jsonl").string();
  auto all = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(all.size(), 80u);  // 8 categories x 10 questions
  s.categories = {"writing", "math"};
  s.limit = 15;
  auto prompts = load_prompts(s, src_for("e.toml"));
  ASSERT_EQ(prompts.size(), 15u);
  // File order: writing 81..90, then math 111..
  EXPECT_EQ(prompts[0].id, "81");
  EXPECT_EQ(prompts[9].id, "90");
  EXPECT_EQ(prompts[10].id, "111");
  EXPECT_EQ(prompts[14].id, "115");
  EXPECT_EQ(prompts[10].category, "math");
  EXPECT_TRUE(prompts[0].text.starts_with("Compose an engaging travel blog post about a recent trip to Hawaii"));
  s.turn = 1;
  s.limit = 1;
  const Prompt second = load_prompts(s, src_for("e.toml"))[0];
  EXPECT_EQ(second.text, "Rewrite your previous response. Start every sentence with the letter A.");
  ASSERT_EQ(second.history.size(), 1u);
  EXPECT_TRUE(second.history[0].starts_with("Compose an engaging travel blog post about a recent trip to Hawaii"));
}

TEST(PromptLoader, FromTomlRelativeToTheFile) {
  fs::path jsonl = write_scratch("q.jsonl", kJsonl);
  std::string toml = R"([models.m]
path = "m.gguf"
[prompts]
jsonl = "q.jsonl"
categories = ["math"]
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
)";
  ExperimentSpec spec = parse_experiment_string(toml, (jsonl.parent_path() / "e.toml").string());
  ASSERT_EQ(spec.prompts.size(), 1u);
  EXPECT_EQ(spec.prompts[0].text, "m2 first");
  EXPECT_EQ(spec.name, "e");  // defaults to the file's stem
}

}  // namespace
}  // namespace specmoe::exp
