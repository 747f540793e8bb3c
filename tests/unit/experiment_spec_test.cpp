// Experiment TOML schema: every error names FILE:LINE and the key; sweep expansion counts, names,
// baselines and config hashes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/config_hash.h"
#include "experiments/experiment_spec.h"
#include "experiments/sweep.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {

const std::string kBase = R"([experiment]
name = "t"
seed = 7

[models.target]
path = "target.gguf"

[models.draft]
path = "draft.gguf"

[prompts]
list = ["hello", "world"]

[sampling]
temperature = 0.0
max_tokens = 8

[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"

[[strategy]]
name = "model"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
)";

// 1-based line of the first line containing `needle`.
int line_of(const std::string& text, const std::string& needle) {
  size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

// The Config error message of parsing `text` (as file "dir/t.toml"), or "" when it parses.
std::string config_error(const std::string& text) {
  try {
    ExperimentSpec spec = parse_experiment_string(text, "dir/t.toml");
    expand_runs(spec);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config) << e.what();
    return e.what();
  }
  return "";
}

TEST(ExperimentSpec, ParsesTheBaseConfig) {
  ExperimentSpec spec = parse_experiment_string(kBase, "dir/t.toml");
  EXPECT_EQ(spec.name, "t");
  EXPECT_EQ(spec.seed, 7u);
  ASSERT_EQ(spec.models.size(), 2u);
  const ModelSpec* target = spec.find_model("target");
  ASSERT_NE(target, nullptr);
  // Relative model paths start at the TOML file's folder.
  EXPECT_EQ(target->path, (std::filesystem::absolute("dir") / "target.gguf").lexically_normal().string());
  ASSERT_EQ(spec.prompts.size(), 2u);
  EXPECT_EQ(spec.prompts[1].text, "world");
  EXPECT_EQ(spec.prompts[1].id, "p1");
  EXPECT_EQ(spec.sampling.max_tokens, 8);
  ASSERT_EQ(spec.strategies.size(), 2u);
  EXPECT_EQ(spec.strategies[1].kind, StrategyKind::Speculative);
  EXPECT_EQ(spec.strategies[1].draft_max, 4);        // default
  EXPECT_EQ(spec.strategies[1].verifier, "speculative");  // default
  EXPECT_EQ(spec.output, "specmoe-results/t");
}

TEST(ExperimentSpec, UnknownKeyNamesFileLineAndKey) {
  std::string text = replace(kBase, "seed = 7\n", "seed = 7\nbogus = 1\n");
  EXPECT_TRUE(config_error(text).starts_with(fmt::format("dir/t.toml:{}: key 'experiment.bogus': unknown key", line_of(text, "bogus"))))
      << config_error(text);
  std::string text2 = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_maxx = 3\n");
  EXPECT_TRUE(config_error(text2).starts_with(fmt::format("dir/t.toml:{}: key 'strategy[1].draft_maxx': unknown key", line_of(text2, "draft_maxx"))))
      << config_error(text2);
  std::string text3 = kBase + "\n[sampling2]\nx = 1\n";
  EXPECT_TRUE(config_error(text3).starts_with(fmt::format("dir/t.toml:{}: key 'sampling2': unknown key", line_of(text3, "[sampling2]"))))
      << config_error(text3);
}

TEST(ExperimentSpec, WrongTypes) {
  std::string text = replace(kBase, "temperature = 0.0", "temperature = \"hot\"");
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'sampling.temperature': expected a number, got string",
                                            line_of(text, "temperature")));
  std::string text2 = replace(kBase, "seed = 7", "seed = 7.5");
  EXPECT_EQ(config_error(text2), "dir/t.toml:3: key 'experiment.seed': expected an integer, got float");
  std::string text3 = replace(kBase, "list = [\"hello\", \"world\"]", "list = [\"hello\", 3]");
  EXPECT_EQ(config_error(text3), fmt::format("dir/t.toml:{}: key 'prompts.list': element 1: expected a string, got integer",
                                             line_of(text3, "list =")));
  std::string text4 = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_max = 2.5\n");
  EXPECT_EQ(config_error(text4), fmt::format("dir/t.toml:{}: key 'strategy[1].draft_max': expected an integer, got float",
                                             line_of(text4, "draft_max")));
}

TEST(ExperimentSpec, MissingRequiredKeysPointAtTheTable) {
  std::string text = replace(kBase, "name = \"model\"\nkind = \"speculative\"\ntarget = \"target\"\n",
                             "name = \"model\"\nkind = \"speculative\"\n");
  int header = line_of(text, "[[strategy]]\nname = \"model\"");
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'strategy[1].target': missing required key", header));
  std::string text2 = replace(kBase, "kind = \"autoregressive\"\n", "");
  EXPECT_EQ(config_error(text2),
            fmt::format("dir/t.toml:{}: key 'strategy[0].kind': missing required key (autoregressive or speculative)",
                        line_of(text2, "[[strategy]]")));
  std::string text3 = replace(kBase, "path = \"target.gguf\"", "");
  EXPECT_EQ(config_error(text3),
            fmt::format("dir/t.toml:{}: key 'models.target': give exactly one of 'path' (a GGUF file) or 'synth' (a synthetic preset)",
                        line_of(text3, "[models.target]")));
}

TEST(ExperimentSpec, UndefinedModelNames) {
  std::string text = replace(kBase, "draft = \"draft\"", "draft = \"nope\"");
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'strategy[1].draft': undefined model 'nope' (defined: draft, target)",
                                            line_of(text, "draft = \"nope\"")));
  std::string text2 = replace(kBase, "kind = \"autoregressive\"\ntarget = \"target\"", "kind = \"autoregressive\"\ntarget = \"big\"");
  EXPECT_EQ(config_error(text2), fmt::format("dir/t.toml:{}: key 'strategy[0].target': undefined model 'big' (defined: draft, target)",
                                             line_of(text2, "target = \"big\"")));
}

TEST(ExperimentSpec, RangeChecks) {
  std::string text = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_max = -2\n");
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'strategy[1].draft_max': must be >= 1, got -2", line_of(text, "draft_max")));
  std::string text2 = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_min = -1\n");
  EXPECT_EQ(config_error(text2), fmt::format("dir/t.toml:{}: key 'strategy[1].draft_min': must be >= 0, got -1", line_of(text2, "draft_min")));
  std::string text3 = replace(kBase, "temperature = 0.0", "temperature = -0.5");
  EXPECT_EQ(config_error(text3), fmt::format("dir/t.toml:{}: key 'sampling.temperature': must be >= 0, got -0.5", line_of(text3, "temperature")));
  std::string text4 = replace(kBase, "temperature = 0.0", "temperature = 0.0\ntop_p = 1.5");
  EXPECT_EQ(config_error(text4), fmt::format("dir/t.toml:{}: key 'sampling.top_p': must be in (0, 1], got 1.5", line_of(text4, "top_p")));
  std::string text5 = replace(kBase, "temperature = 0.0", "temperature = 0.0\ntop_p = 0");
  EXPECT_EQ(config_error(text5), fmt::format("dir/t.toml:{}: key 'sampling.top_p': must be in (0, 1], got 0", line_of(text5, "top_p")));
  std::string text6 = replace(kBase, "seed = 7", "seed = 7\nrepeats = 0");
  EXPECT_EQ(config_error(text6), "dir/t.toml:4: key 'experiment.repeats': must be >= 1, got 0");
  // Cross-field: draft_min above draft_max, found per run.
  std::string text7 = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_max = 2\ndraft_min = 3\n");
  EXPECT_EQ(config_error(text7), fmt::format("dir/t.toml:{}: key 'strategy[1].draft_min': run 'model': draft_min 3 exceeds draft_max 2",
                                             line_of(text7, "draft_min")));
}

TEST(ExperimentSpec, EmptyPromptSet) {
  std::string text = replace(kBase, "list = [\"hello\", \"world\"]", "list = []");
  EXPECT_TRUE(config_error(text).starts_with(fmt::format("dir/t.toml:{}: key 'prompts': the prompt set is empty", line_of(text, "[prompts]"))))
      << config_error(text);
  std::string text2 = replace(kBase, "[prompts]\nlist = [\"hello\", \"world\"]\n", "");
  EXPECT_EQ(config_error(text2), "dir/t.toml: key 'prompts': no prompts (give [prompts] list, file or jsonl)");
  std::string text3 = replace(kBase, "list = [\"hello\", \"world\"]", "list = [\"hello\", \"\"]");
  EXPECT_EQ(config_error(text3), fmt::format("dir/t.toml:{}: key 'prompts': prompt 1 ('p1') is empty", line_of(text3, "[prompts]")));
}

TEST(ExperimentSpec, ChatTemplateKeys) {
  ExperimentSpec spec = parse_experiment_string(kBase, "dir/t.toml");
  EXPECT_EQ(spec.prompt_source.chat_template, "auto");  // the GGUF's template, raw text without one
  EXPECT_EQ(spec.prompt_source.system, "");
  std::string ok = replace(kBase, "list = [\"hello\", \"world\"]",
                           "list = [\"hello\", \"world\"]\nchat_template = \"llama3\"\nsystem = \"Be brief.\"");
  spec = parse_experiment_string(ok, "dir/t.toml");
  EXPECT_EQ(spec.prompt_source.chat_template, "llama3");
  EXPECT_EQ(spec.prompt_source.system, "Be brief.");

  std::string bad = replace(kBase, "list = [\"hello\", \"world\"]", "list = [\"hello\", \"world\"]\nchat_template = \"chatmll\"");
  const std::string msg = config_error(bad);
  EXPECT_TRUE(msg.starts_with(fmt::format("dir/t.toml:{}: key 'prompts.chat_template': unknown chat template 'chatmll'",
                                          line_of(bad, "chat_template"))))
      << msg;
  std::string sys = replace(kBase, "list = [\"hello\", \"world\"]",
                            "list = [\"hello\", \"world\"]\nchat_template = \"none\"\nsystem = \"x\"");
  EXPECT_EQ(config_error(sys), fmt::format("dir/t.toml:{}: key 'prompts.system': a system message needs a chat template; "
                                           "prompts.chat_template is 'none'",
                                           line_of(sys, "system =")));
  std::string turn = replace(kBase, "list = [\"hello\", \"world\"]", "list = [\"hello\"]\nturn = 1\nchat_template = \"none\"");
  EXPECT_TRUE(config_error(turn).starts_with(fmt::format("dir/t.toml:{}: key 'prompts.turn': turn 1 is answered after the "
                                                         "earlier turns", line_of(turn, "turn ="))))
      << config_error(turn);
}

// The templating settings reach the run hashes only when they differ from the defaults, so the
// hashes of single-turn runs with auto templates are what they were before templates existed.
TEST(ConfigHash, TemplatingChangesHashesOnlyWhenSet) {
  const auto hashes = [](const std::string& text) {
    ExperimentSpec spec = parse_experiment_string(text, "dir/t.toml");
    std::vector<std::string> h;
    for (const auto& r : expand_runs(spec)) h.push_back(r.config_hash);
    return h;
  };
  const auto base = hashes(kBase);
  EXPECT_EQ(hashes(replace(kBase, "[prompts]\n", "[prompts]\nchat_template = \"auto\"\n")), base);
  EXPECT_NE(hashes(replace(kBase, "[prompts]\n", "[prompts]\nchat_template = \"chatml\"\n"))[0], base[0]);
  EXPECT_NE(hashes(replace(kBase, "[prompts]\n", "[prompts]\nsystem = \"s\"\n"))[0], base[0]);
}

// draft_vocab: parsed, checked, sweepable, and in the hash only when set (older runs resume).
TEST(ExperimentSpec, DraftVocabParsesSweepsAndHashesOnlyWhenSet) {
  const auto runs_of = [](const std::string& text) { return expand_runs(parse_experiment_string(text, "dir/t.toml")); };
  const auto base = runs_of(kBase);
  const std::string zero = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_vocab = 0\n");
  ASSERT_EQ(runs_of(zero).size(), base.size());
  for (size_t i = 0; i < base.size(); ++i) EXPECT_EQ(runs_of(zero)[i].config_hash, base[i].config_hash);
  const std::string set = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_vocab = 32768\n");
  const auto runs = runs_of(set);
  EXPECT_EQ(runs[1].strategy.draft_vocab, 32768);
  EXPECT_NE(runs[1].config_hash, base[1].config_hash);
  const std::string bad = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_vocab = -5\n");
  EXPECT_TRUE(config_error(bad).starts_with(fmt::format("dir/t.toml:{}: key 'strategy[1].draft_vocab'", line_of(bad, "draft_vocab"))))
      << config_error(bad);
  const auto swept = runs_of(kBase + "\n[sweep]\nonly = [\"model\"]\ndraft_vocab = [0, 16384]\n");
  std::vector<std::string> names;
  for (const auto& r : swept) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ar", "model-dv0", "model-dv16384"}));
}

TEST(ExperimentSpec, SweepErrors) {
  std::string text = kBase + "\n[sweep]\ndraft_max = [2, -1]\n";
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'sweep.draft_max': element 1: must be >= 1, got -1", line_of(text, "draft_max = [")));
  std::string text2 = kBase + "\n[sweep]\ntemperature = [0.0, -1.0]\n";
  EXPECT_EQ(config_error(text2), fmt::format("dir/t.toml:{}: key 'sweep.temperature': element 1: must be >= 0, got -1", line_of(text2, "temperature = [")));
  std::string text3 = kBase + "\n[sweep]\nwarp = [1]\n";
  EXPECT_TRUE(config_error(text3).starts_with(fmt::format("dir/t.toml:{}: key 'sweep.warp': unknown key", line_of(text3, "warp")))) << config_error(text3);
  std::string text4 = kBase + "\n[sweep]\ndraft_max = 4\n";
  EXPECT_EQ(config_error(text4), fmt::format("dir/t.toml:{}: key 'sweep.draft_max': expected an array of values, got integer", line_of(text4, "draft_max = 4")));
  std::string text5 = kBase + "\n[sweep]\ndraft_max = [2, 2]\n";
  EXPECT_EQ(config_error(text5), fmt::format("dir/t.toml:{}: key 'sweep.draft_max': element 1: duplicate value 2", line_of(text5, "draft_max = [")));
  // A swept draft_max below the strategy's draft_min blames the sweep list.
  std::string text6 = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_min = 3\n") + "\n[sweep]\ndraft_max = [4, 2]\n";
  EXPECT_EQ(config_error(text6), fmt::format("dir/t.toml:{}: key 'strategy[1].draft_min': run 'model-g2': draft_min 3 exceeds draft_max 2",
                                             line_of(text6, "draft_min")));
  std::string text7 = kBase + "\n[sweep]\nonly = [\"nope\"]\ndraft_max = [2]\n";
  EXPECT_EQ(config_error(text7), fmt::format("dir/t.toml:{}: key 'sweep.only': undefined strategy 'nope'", line_of(text7, "only")));
}

TEST(ExperimentSpec, DeprecatedLayerskipLayersIsAnAliasOfExitLayer) {
  // Only this test uses the old spelling in this binary, so its note is printed on the first
  // repetition and never again (once per process).
  static int repetition = 0;
  const std::string strategy = "\n[[strategy]]\nname = \"skip\"\nkind = \"speculative\"\ntarget = \"target\"\n"
                               "drafter = \"layerskip\"\n";
  const std::string current = kBase + strategy + "exit_layer = 3\n";
  const std::string old = kBase + strategy + "layerskip_layers = 3\n";
  ::testing::internal::CaptureStderr();
  const ExperimentSpec a = parse_experiment_string(current, "dir/t.toml");
  const ExperimentSpec b = parse_experiment_string(old, "dir/t.toml");
  const ExperimentSpec c = parse_experiment_string(old, "dir/t.toml");
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(a.strategies.size(), 3u);
  EXPECT_EQ(a.strategies[2].exit_layer, 3);
  EXPECT_EQ(b.strategies[2].exit_layer, 3);
  EXPECT_EQ(c.strategies[2].exit_layer, 3);
  // Same run, same config hash, whichever spelling wrote it.
  EXPECT_EQ(expand_runs(a)[2].config_hash, expand_runs(b)[2].config_hash);
  const std::string note = fmt::format(
      "specmoe: note: dir/t.toml:{}: 'layerskip_layers' is deprecated and will be removed in the next release; use "
      "'exit_layer'\n",
      line_of(old, "layerskip_layers"));
  EXPECT_EQ(err, repetition++ == 0 ? note : "");

  // Both spellings in one table, and the old spelling in a sweep.
  const std::string both = current + "layerskip_layers = 2\n";
  EXPECT_EQ(config_error(both), fmt::format("dir/t.toml:{}: key 'strategy[2].layerskip_layers': 'exit_layer' is given twice "
                                            "(directly and through a deprecated spelling)",
                                            line_of(both, "layerskip_layers")));
  const std::string swept = kBase + strategy + "\n[sweep]\nlayerskip_layers = [1, 2]\n";
  const ExperimentSpec d = parse_experiment_string(swept, "dir/t.toml");
  ASSERT_EQ(d.sweep.axes.size(), 1u);
  EXPECT_EQ(d.sweep.axes[0].key, "exit_layer");
  const auto runs = expand_runs(d);
  ASSERT_EQ(runs.size(), 5u);  // ar, model-L1, model-L2, skip-L1, skip-L2
  EXPECT_EQ(runs[3].name, "skip-L1");
  EXPECT_EQ(runs[4].strategy.exit_layer, 2);
  EXPECT_EQ(runs[4].point.at(0).first, "exit_layer");
}

TEST(ExperimentSpec, TomlSyntaxErrorHasFileAndLine) {
  std::string text = replace(kBase, "seed = 7", "seed = = 7");
  std::string msg = config_error(text);
  EXPECT_EQ(msg.rfind("dir/t.toml:3: TOML syntax error: ", 0), 0u) << msg;
}

TEST(ExperimentSpec, StrategyNamesMustBeUniqueAndFileSafe) {
  std::string text = replace(kBase, "name = \"model\"", "name = \"ar\"");
  EXPECT_EQ(config_error(text), fmt::format("dir/t.toml:{}: key 'strategy[1].name': duplicate strategy name 'ar'",
                                            line_of(text, "name = \"ar\"\nkind = \"speculative\"")));
  std::string text2 = replace(kBase, "name = \"model\"", "name = \"a/b\"");
  EXPECT_TRUE(config_error(text2).starts_with(fmt::format("dir/t.toml:{}: key 'strategy[1].name': use only", line_of(text2, "a/b"))));
}

TEST(Sweep, CartesianProductNamesAndBaselines) {
  std::string text = kBase + R"(
[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"

[sweep]
draft_max = [2, 4, 6, 8]
temperature = [0.0, 0.7]
)";
  ExperimentSpec spec = parse_experiment_string(text, "dir/t.toml");
  auto runs = expand_runs(spec);
  // ar: 2 temperatures; model and ngram: 4 draft lengths x 2 temperatures each.
  ASSERT_EQ(runs.size(), 2u + 8u + 8u);
  EXPECT_EQ(runs[0].name, "ar-t0");
  EXPECT_EQ(runs[1].name, "ar-t0.7");
  EXPECT_EQ(runs[2].name, "model-g2-t0");
  EXPECT_EQ(runs[3].name, "model-g2-t0.7");
  EXPECT_EQ(runs[9].name, "model-g8-t0.7");
  EXPECT_EQ(runs[10].name, "ngram-g2-t0");
  EXPECT_EQ(runs[9].strategy.draft_max, 8);
  EXPECT_DOUBLE_EQ(runs[9].sampling.temperature, 0.7);
  EXPECT_TRUE(runs[0].is_baseline);
  EXPECT_TRUE(runs[1].is_baseline);
  EXPECT_EQ(runs[9].baseline, "ar-t0.7");
  EXPECT_EQ(runs[10].baseline, "ar-t0");
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].index, static_cast<int>(i));

  // sweep.only restricts strategy-field sweeps; sampling sweeps still apply to all.
  std::string text2 = replace(text, "[sweep]\n", "[sweep]\nonly = [\"model\"]\n");
  auto runs2 = expand_runs(parse_experiment_string(text2, "dir/t.toml"));
  ASSERT_EQ(runs2.size(), 2u + 8u + 2u);
  EXPECT_EQ(runs2[10].name, "ngram-t0");
  EXPECT_EQ(runs2[11].name, "ngram-t0.7");
}

TEST(Sweep, SingleValueListsDoNotRenameAndSecondAutoregressiveUsesTheFirst) {
  std::string text = kBase + R"(
[[strategy]]
name = "ar2"
kind = "autoregressive"
target = "target"

[sweep]
draft_max = [3]
verifier = ["greedy", "speculative"]
)";
  auto runs = expand_runs(parse_experiment_string(text, "dir/t.toml"));
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].name, "ar");
  EXPECT_EQ(runs[1].name, "model-vgreedy");
  EXPECT_EQ(runs[2].name, "model-vspeculative");
  EXPECT_EQ(runs[1].strategy.draft_max, 3);
  EXPECT_EQ(runs[3].name, "ar2");
  EXPECT_FALSE(runs[3].is_baseline);
  EXPECT_EQ(runs[3].baseline, "ar");
}

TEST(Sweep, RunNameCollisionIsAnError) {
  std::string text = kBase + R"(
[[strategy]]
name = "model-g2"
kind = "speculative"
target = "target"
drafter = "ngram"

[sweep]
draft_max = [2, 4]
only = ["model"]
)";
  std::string msg = config_error(text);
  EXPECT_NE(msg.find("run name 'model-g2' is produced twice"), std::string::npos) << msg;
}

TEST(ConfigHash, ChangesOnlyForTheRunsThatChanged) {
  std::string text = kBase + "\n[sweep]\ntemperature = [0.0, 0.7]\n";
  auto a = expand_runs(parse_experiment_string(text, "dir/t.toml"));
  auto same = expand_runs(parse_experiment_string(text, "other/t.toml"));
  auto b = expand_runs(parse_experiment_string(replace(text, "draft = \"draft\"\n", "draft = \"draft\"\ndraft_max = 5\n"), "dir/t.toml"));
  auto c = expand_runs(parse_experiment_string(replace(text, "max_tokens = 8", "max_tokens = 9"), "dir/t.toml"));
  ASSERT_EQ(a.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].config_hash.size(), 16u);
    EXPECT_EQ(a[i].config_hash, same[i].config_hash);  // the folder does not matter
    bool speculative = a[i].strategy.kind == StrategyKind::Speculative;
    EXPECT_EQ(a[i].config_hash != b[i].config_hash, speculative) << a[i].name;
    EXPECT_NE(a[i].config_hash, c[i].config_hash) << a[i].name;
  }
  EXPECT_NE(a[0].config_hash, a[1].config_hash);
  EXPECT_EQ(fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a64_hex("a"), "af63dc4c8601ec8c");
}

TEST(ExperimentSpec, SynthModelsGoToTheCacheFolder) {
  std::string text = replace(kBase, "path = \"target.gguf\"", "synth = \"tiny\"\nseed = 3");
  setenv("SPECMOE_CACHE_DIR", "/tmp/specmoe-cache-test", 1);
  ExperimentSpec spec = parse_experiment_string(text, "dir/t.toml");
  unsetenv("SPECMOE_CACHE_DIR");
  const ModelSpec* m = spec.find_model("target");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->synth_fingerprint.size(), 8u);
  EXPECT_EQ(m->path, "/tmp/specmoe-cache-test/synth-tiny-seed3-" + m->synth_fingerprint + ".gguf");
  // Another preset has another fingerprint.
  ExperimentSpec spec2 = parse_experiment_string(replace(text, "synth = \"tiny\"", "synth = \"tiny-draft\""), "dir/t.toml");
  EXPECT_NE(spec2.find_model("target")->synth_fingerprint, m->synth_fingerprint);
  std::string text3 = replace(kBase, "path = \"target.gguf\"", "synth = \"huge\"");
  EXPECT_TRUE(config_error(text3).starts_with(fmt::format("dir/t.toml:{}: key 'models.target.synth': ", line_of(text3, "huge"))))
      << config_error(text3);
  EXPECT_EQ(m->synth_seed, 3u);
  std::string text2 = replace(kBase, "path = \"target.gguf\"", "path = \"target.gguf\"\nseed = 3");
  EXPECT_EQ(config_error(text2), fmt::format("dir/t.toml:{}: key 'models.target.seed': 'seed' only applies to synth models",
                                             line_of(text2, "seed = 3")));
}

TEST(ExperimentSpec, ShippedConfigsParse) {
  // Every config under experiments/configs (results/ holds their reports): each parses, expands
  // to a baseline and strategies compared with it, and times its runs side by side. The real-pair
  // configs read their prompts from ../shared/data; their models are only opened by `run`.
  struct Shipped {
    const char* name;
    const char* data;  // the shared prompt file it reads, or nullptr
    size_t min_runs;
  };
  const Shipped shipped[] = {{"quickstart.toml", nullptr, 8},
                             {"draft-length-sweep.toml", nullptr, 8},
                             {"moe-speculative.toml", nullptr, 8},
                             {"tree-vs-chain.toml", nullptr, 8},
                             {"tree-vs-chain-humaneval.toml", "prompts/humaneval/HumanEval.jsonl.gz", 6},
                             {"tree-vs-chain-mtbench.toml", "prompts/mt_bench/question.jsonl", 11},
                             {"draft-vocab.toml", "prompts/humaneval/HumanEval.jsonl.gz", 5}};
  for (const Shipped& c : shipped) {
    if (c.data != nullptr) SPECMOE_REQUIRE_DATA(c.data);
    const std::string path = std::string(SPECMOE_SOURCE_DIR) + "/experiments/configs/" + c.name;
    ExperimentSpec spec = parse_experiment_file(path);
    auto runs = expand_runs(spec);
    EXPECT_GE(runs.size(), c.min_runs) << c.name;
    EXPECT_FALSE(spec.prompts.empty()) << c.name;
    EXPECT_EQ(spec.schedule, Schedule::Interleaved) << c.name;
    size_t baselines = 0;
    for (const auto& r : runs) {
      if (r.strategy.kind == StrategyKind::Speculative) {
        EXPECT_FALSE(r.baseline.empty()) << c.name << ": " << r.name;
      } else {
        ++baselines;
      }
    }
    EXPECT_GE(baselines, 1u) << c.name;
  }
}

TEST(ExperimentSpec, DeviceIsReadAndChecked) {
  EXPECT_EQ(parse_experiment_string(kBase, "dir/t.toml").device, "cpu");  // the default
  const std::string gpu = replace(kBase, "seed = 7\n", "seed = 7\ndevice = \"cuda:1\"\n");
  EXPECT_EQ(parse_experiment_string(gpu, "dir/t.toml").device, "cuda:1");
  const std::string bad = replace(kBase, "seed = 7\n", "seed = 7\ndevice = \"gpu0\"\n");
  const std::string e = config_error(bad);
  EXPECT_TRUE(e.starts_with(fmt::format("dir/t.toml:{}: key 'experiment.device': device 'gpu0'", line_of(bad, "device"))))
      << e;
}

TEST(ExperimentSpec, TreeFieldsParseSweepAndHash) {
  // A static tree as a string or an array, a dynamic one, the sampling of children; sweepable.
  const std::string text = replace(kBase, "draft = \"draft\"\n", R"(draft = "draft"
tree_widths = [4, 2, 2, 1]
tree_sampling = "stochastic"

[[strategy]]
name = "dyn"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
tree_nodes = 16
tree_depth = 4
tree_top_k = 3

[sweep]
only = ["model"]
tree_widths = ["4,2,2,1", [2, 2]]
tree_sampling = ["topk", "stochastic-noreplace"]
)");
  const ExperimentSpec spec = parse_experiment_string(text, "dir/t.toml");
  EXPECT_EQ(spec.strategies[1].tree_widths, "4,2,2,1");
  EXPECT_EQ(spec.strategies[1].tree_sampling, "stochastic");
  EXPECT_EQ(spec.strategies[2].tree_nodes, 16);
  const draft::TreeSpec dyn = tree_spec_of(spec.strategies[2]);
  EXPECT_EQ(dyn.nodes, 16);
  EXPECT_EQ(dyn.depth, 4);
  EXPECT_EQ(dyn.top_k, 3);
  EXPECT_EQ(dyn.sampling, draft::TreeSampling::TopK);
  const auto runs = expand_runs(spec);
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.name);
  // Run names name files: the widths' commas read x.
  EXPECT_EQ(names, (std::vector<std::string>{"ar", "model-w4x2x2x1-tstopk", "model-w4x2x2x1-tsstochastic-noreplace",
                                             "model-w2x2-tstopk", "model-w2x2-tsstochastic-noreplace", "dyn"}));
  EXPECT_EQ(tree_spec_of(runs[3].strategy).widths, (std::vector<int>{2, 2}));
  std::set<std::string> hashes;
  for (const auto& r : runs) hashes.insert(r.config_hash);
  EXPECT_EQ(hashes.size(), runs.size()) << "every tree shape is its own config";
  // A chain's hash does not change for the tree fields it does not use (older results resume).
  const ExperimentSpec plain = parse_experiment_string(kBase, "dir/t.toml");
  const std::string chain_hash = expand_runs(plain)[1].config_hash;
  const ExperimentSpec again = parse_experiment_string(replace(kBase, "draft = \"draft\"\n",
                                                               "draft = \"draft\"\ntree_sampling = \"topk\"\n"),
                                                       "dir/t.toml");
  EXPECT_EQ(expand_runs(again)[1].config_hash, chain_hash);

  // Errors name the line and the key.
  const std::string bad = replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ntree_widths = \"4,0\"\n");
  std::string e = config_error(bad);
  EXPECT_TRUE(e.starts_with(fmt::format("dir/t.toml:{}: key 'strategy[1].tree_widths'", line_of(bad, "tree_widths"))))
      << e;
  e = config_error(replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ntree_sampling = \"beam\"\n"));
  EXPECT_NE(e.find("stochastic-noreplace"), std::string::npos) << e;
  e = config_error(replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ntree_widths = \"2\"\ntree_nodes = 4\n"));
  EXPECT_NE(e.find("not both"), std::string::npos) << e;
  e = config_error(replace(kBase, "draft = \"draft\"\n", "draft = \"draft\"\ntree_widths = [2, \"x\"]\n"));
  EXPECT_NE(e.find("expected an integer width"), std::string::npos) << e;
}

TEST(ExperimentSpec, HomeRelativeModelPaths) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') GTEST_SKIP() << "HOME is not set";
  const ExperimentSpec spec =
      parse_experiment_string(replace(kBase, "path = \"target.gguf\"", "path = \"~/models/t.gguf\""), "dir/t.toml");
  EXPECT_EQ(spec.find_model("target")->path, (std::filesystem::path(home) / "models/t.gguf").string());
  EXPECT_EQ(spec.find_model("draft")->path, std::filesystem::absolute("dir/draft.gguf").lexically_normal().string());
}

}  // namespace
}  // namespace specmoe::exp
