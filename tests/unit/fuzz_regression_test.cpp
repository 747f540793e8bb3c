// Replays every fuzz seed (tests/fuzz/corpus/<target>/) and every input the fuzzers once crashed on
// (tests/regression/<target>/) through the fuzz targets' own entry points (tests/fuzz/fuzz_entry.h),
// so the normal suite keeps them fixed without clang or libFuzzer. Each input must end in either
// success or one specmoe::Error naming the input; anything else escaping (another exception type,
// a failed oracle) fails the test, and a crash fails the test run. Seeds named "valid-*" must be
// accepted, so the seeds keep exercising the success paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_entry.h"

namespace fs = std::filesystem;
using specmoe::fuzz::Outcome;

namespace {

struct Case {
  std::string target;
  fs::path file;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.target << ":" << c.file.string(); }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const fs::path root(SPECMOE_SOURCE_DIR);
  for (const char* target : {"gguf", "tokenizer", "toml", "prompts"}) {
    for (const fs::path& dir : {root / "tests" / "fuzz" / "corpus" / target, root / "tests" / "regression" / target}) {
      if (!fs::is_directory(dir)) continue;
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (auto& f : files) cases.push_back({target, f});
    }
  }
  return cases;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Outcome run(const std::string& target, std::span<const uint8_t> bytes) {
  if (target == "gguf") return specmoe::fuzz::run_gguf(bytes);
  if (target == "tokenizer") return specmoe::fuzz::run_tokenizer(bytes);
  if (target == "toml") return specmoe::fuzz::run_toml(bytes);
  return specmoe::fuzz::run_prompts(bytes);
}

class FuzzReplay : public ::testing::TestWithParam<Case> {};

TEST_P(FuzzReplay, EndsInSuccessOrError) {
  const Case& c = GetParam();
  const std::vector<uint8_t> bytes = read_bytes(c.file);
  Outcome outcome = Outcome::Rejected;
  try {
    outcome = run(c.target, bytes);
  } catch (const std::exception& e) {
    FAIL() << c.file << ": escaped as " << typeid(e).name() << ": " << e.what();
  }
  if (c.file.filename().string().rfind("valid-", 0) == 0) {
    EXPECT_EQ(outcome, Outcome::Accepted) << c.file << " is a valid seed but was rejected";
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.target + "_" + info.param.file.parent_path().filename().string() + "_" +
                     info.param.file.filename().string();
  if (info.param.file.string().find("/regression/") != std::string::npos) name = "regression_" + name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Inputs, FuzzReplay, ::testing::ValuesIn(all_cases()), case_name);

// The corpus must not silently disappear (a moved folder would make the replay vacuous).
TEST(FuzzReplayCorpus, EveryTargetHasSeeds) {
  const auto cases = all_cases();
  for (const char* target : {"gguf", "tokenizer", "toml", "prompts"}) {
    const auto n = std::count_if(cases.begin(), cases.end(), [&](const Case& c) { return c.target == target; });
    EXPECT_GE(n, 3) << "no seeds for fuzz target " << target;
  }
}

}  // namespace
