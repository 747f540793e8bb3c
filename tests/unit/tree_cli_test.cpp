// Token trees from the command line and the experiment harness: `speculate --tree-*` (output
// identical to the baseline at temperature 0, the tree metrics in --json), and `specmoe run` with
// tree strategy fields (records, report.json, report.md's tree table).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/synth.h"
#include "test_data.h"

namespace fs = std::filesystem;
using nlohmann::json;
using specmoe::testing::CliRun;
using specmoe::testing::run_cli;

namespace specmoe {
namespace {

struct Models {
  fs::path dir;
  std::string target, draft;
};

Models make_models(const std::string& name) {
  Models m;
  m.dir = testing::scratch_dir() / fmt::format("{}_{}", name, ::getpid());
  fs::remove_all(m.dir);
  fs::create_directories(m.dir);
  m.target = (m.dir / "tiny.gguf").string();
  m.draft = (m.dir / "tiny-draft.gguf").string();
  core::synth_write("tiny", m.target, 7);
  core::synth_write("tiny-draft", m.draft, 7);
  return m;
}

TEST(TreeCli, SpeculateWithTreesMatchesTheBaselineAndReportsTreeMetrics) {
  SPECMOE_REQUIRE_CLI();
  const Models m = make_models("tree_cli");
  for (const std::vector<std::string>& shape :
       {std::vector<std::string>{"--tree-widths", "3,2,1"},
        std::vector<std::string>{"--tree-nodes", "8", "--tree-depth", "4", "--tree-top-k", "2"},
        std::vector<std::string>{"--tree-widths", "2,2", "--tree-sampling", "stochastic-noreplace"}}) {
    std::vector<std::string> args = {"speculate", "-m", m.target, "-md", m.draft, "-p", "Once upon a time", "-n", "24",
                                     "--temp", "0", "--threads", "1", "--compare", "--json"};
    args.insert(args.end(), shape.begin(), shape.end());
    const CliRun r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const json j = json::parse(r.out);
    SCOPED_TRACE(j.at("draft").at("tree").at("shape").get<std::string>());
    EXPECT_TRUE(j.at("identical_to_baseline").get<bool>());
    const json& mt = j.at("metrics");
    EXPECT_GT(mt.at("tree_size").get<double>(), 1.0);
    EXPECT_GT(mt.at("tree_size_max").get<int>(), 1);
    EXPECT_GT(mt.at("verify_tokens").get<double>(), 2.0);
    EXPECT_TRUE(mt.at("verify_cost_ratio").is_number());
    EXPECT_TRUE(mt.at("predicted_speedup_tree").is_number());
    EXPECT_TRUE(mt.at("speedup_bound").is_number());
    EXPECT_FALSE(mt.at("acceptance_by_depth").empty());
    EXPECT_EQ(mt.at("accepted_length_histogram").size(), mt.at("acceptance_by_depth").size() + 1);
  }
  // Bad shapes fail in one line.
  const CliRun bad = run_cli({"speculate", "-m", m.target, "-md", m.draft, "-p", "x", "--tree-widths", "4,x"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("tree widths '4,x'"), std::string::npos) << bad.err;
  fs::remove_all(m.dir);
}

TEST(TreeCli, ExperimentWithTreeStrategies) {
  SPECMOE_REQUIRE_CLI();
  const Models m = make_models("tree_run");
  const std::string toml = (m.dir / "trees.toml").string();
  std::ofstream(toml) << fmt::format(R"([experiment]
output = "{}"
warmup = 0
threads = 1
[models.t]
path = "{}"
[models.d]
path = "{}"
[prompts]
list = ["Once upon a time", "abcabc"]
[sampling]
max_tokens = 16
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "t"
[[strategy]]
name = "chain"
kind = "speculative"
target = "t"
drafter = "model"
draft = "d"
draft_max = 3
[[strategy]]
name = "tree"
kind = "speculative"
target = "t"
drafter = "model"
draft = "d"
tree_widths = [3, 2, 1]
[[strategy]]
name = "trie"
kind = "speculative"
target = "t"
drafter = "ngram"
tree_nodes = 6
tree_depth = 3
)",
                                     (m.dir / "out").string(), m.target, m.draft);
  const CliRun run = run_cli({"run", toml, "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  std::ifstream jin(m.dir / "out" / "report.json");
  const json report = json::parse(jin);
  int seen = 0;
  for (const auto& r : report.at("runs")) {
    const std::string name = r.at("name");
    if (name == "ar") continue;
    ++seen;
    SCOPED_TRACE(name);
    EXPECT_TRUE(r.at("identical_to_baseline").get<bool>());
    const json& mt = r.at("metrics");
    EXPECT_TRUE(mt.at("tree_size").is_number());
    if (name == "tree") {
      EXPECT_EQ(r.at("tree"), "widths 3,2,1, topk");
      EXPECT_EQ(mt.at("tree_size_max"), 3 + 6 + 6);
      EXPECT_EQ(mt.at("draft_max"), 3);  // the tree's depth
    } else if (name == "chain") {
      EXPECT_TRUE(r.at("tree").is_null());
      EXPECT_LE(mt.at("tree_size_max").get<int>(), 3);
    }
  }
  EXPECT_EQ(seen, 3);
  std::ifstream md(m.dir / "out" / "report.md");
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("Trees and chains"), std::string::npos);
  EXPECT_NE(text.str().find("model tree widths 3,2,1, topk"), std::string::npos);
  fs::remove_all(m.dir);
}

}  // namespace
}  // namespace specmoe
