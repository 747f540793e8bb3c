// The harness on the real engine: a tiny synthetic target/draft pair, every built-in drafter,
// greedy and sampled. Same TOML twice -> identical tokens and counts; greedy speculative runs
// reproduce the autoregressive baseline token for token; engine-side validation errors.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "draft/registry.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/report_builder.h"
#include "core/chat_template.h"
#include "core/model.h"
#include "verify/autoregressive.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;

const std::string kToml = R"([experiment]
name = "engine"
seed = 5
repeats = 1
warmup = 0
threads = 1

[models.target]
synth = "tiny"
seed = 9

[models.draft]
synth = "tiny-draft"
seed = 9

[prompts]
list = ["Once upon a time", "abc abc abc abc", "x"]

[sampling]
max_tokens = 12

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
draft_max = 3

[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"
draft_max = 2

[[strategy]]
name = "layerskip"
kind = "speculative"
target = "target"
drafter = "layerskip"
draft_max = 3
exit_layer = 1

[sweep]
temperature = [0.0, 0.8]
)";

class ExperimentEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test (ctest runs them as parallel processes: two rewriting one q.jsonl or
    // e.toml could read each other's half-written file); synth models go to a cache inside it,
    // not the user's ~/.cache.
    dir_ = specmoe::testing::scratch_dir() / "experiment_engine" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
    setenv("SPECMOE_CACHE_DIR", (dir_ / "cache").string().c_str(), 1);
  }
  void TearDown() override { unsetenv("SPECMOE_CACHE_DIR"); }

  std::string write_toml(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  RunOptions options(const std::string& out) {
    RunOptions o;
    o.output_override = (dir_ / out).string();
    o.progress = false;
    fs::remove_all(o.output_override);
    return o;
  }
  fs::path dir_;
};

TEST_F(ExperimentEngine, SameTomlTwiceGivesIdenticalTokensAndCounts) {
  std::string toml = write_toml("e.toml", kToml);
  ASSERT_EQ(run_experiment(toml, options("a")), kRunOk);
  ASSERT_EQ(run_experiment(toml, options("b")), kRunOk);
  Report a = load_report_inputs((dir_ / "a").string());
  Report b = load_report_inputs((dir_ / "b").string());
  ASSERT_EQ(a.runs.size(), 8u);
  ASSERT_EQ(b.runs.size(), 8u);
  EXPECT_TRUE(a.missing_runs.empty());
  int64_t total_generated = 0, total_drafted = 0;
  for (size_t i = 0; i < a.runs.size(); ++i) {
    const RunAggregate &ra = a.runs[i], &rb = b.runs[i];
    SCOPED_TRACE(ra.name);
    EXPECT_EQ(ra.name, rb.name);
    EXPECT_EQ(ra.output_digest, rb.output_digest);
    EXPECT_EQ(ra.n_generated, rb.n_generated);
    EXPECT_EQ(ra.n_drafted, rb.n_drafted);
    EXPECT_EQ(ra.n_accepted, rb.n_accepted);
    EXPECT_EQ(ra.n_steps, rb.n_steps);
    EXPECT_EQ(ra.position_accepted, rb.position_accepted);
    ASSERT_EQ(a.records[i].size(), 3u);
    for (size_t k = 0; k < a.records[i].size(); ++k) {
      EXPECT_EQ(a.records[i][k].tokens, b.records[i][k].tokens);
      EXPECT_FALSE(a.records[i][k].tokens.empty());
      EXPECT_LE(a.records[i][k].tokens.size(), 12u);
      EXPECT_GT(a.records[i][k].wall_s, 0.0);
    }
    total_generated += ra.n_generated;
    total_drafted += ra.n_drafted;
    if (ra.kind == "speculative") {
      EXPECT_GT(ra.n_steps, 0);
      EXPECT_GE(ra.n_drafted, ra.n_accepted);
    }
  }
  EXPECT_GT(total_generated, 0);
  EXPECT_GT(total_drafted, 0);  // some drafter proposed something

  // Greedy speculative decoding is lossless: identical to the baseline token for token.
  for (const auto& r : a.runs) {
    if (r.temperature != 0.0) {
      EXPECT_FALSE(r.identical_to_baseline.has_value()) << r.name;
      continue;
    }
    ASSERT_TRUE(r.identical_to_baseline.has_value()) << r.name;
    EXPECT_TRUE(*r.identical_to_baseline) << r.name;
    if (r.kind == "speculative") {
      EXPECT_GT(r.speedup.mean, 0.0) << r.name;
    }
  }
  // The model drafter proposes on every step (draft_max 3), so it drafted and got some accepted.
  for (const auto& r : a.runs)
    if (r.drafter == "model" && r.temperature == 0.0) {
      EXPECT_GT(r.n_drafted, 0);
      EXPECT_GT(r.n_accepted, 0);
      EXPECT_EQ(r.position_drafted.size(), 3u);
      EXPECT_TRUE(std::isfinite(r.cost_ratio.mean));
    }
  std::ostringstream out;
  EXPECT_EQ(compare_reports((dir_ / "a").string(), (dir_ / "b").string(), out), 0) << out.str();
  // The synth models were built once into the cache and reused.
  int cached = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) {
    std::string f = e.path().filename().string();
    cached += f.starts_with("synth-tiny-seed9-") || f.starts_with("synth-tiny-draft-seed9-");
  }
  EXPECT_EQ(cached, 2);
}

// A damaged report.json (a number overflowing a double, a field of another type) is one Error
// naming the file, never a library exception.
TEST_F(ExperimentEngine, CompareNamesADamagedReport) {
  const fs::path a = dir_ / "damaged-a.json", b = dir_ / "damaged-b.json";
  write_file_atomic(b.string(), R"({"format": "specmoe-report/1", "runs": []})");
  for (const char* text : {R"({"format": "specmoe-report/1", "runs": [], "x": 1e400})", R"({"format": 1, "runs": []})",
                           R"({"format": "specmoe-report/1", "runs": 3})"}) {
    write_file_atomic(a.string(), text);
    std::ostringstream out;
    try {
      compare_reports(a.string(), b.string(), out);
      FAIL() << "expected an error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Format);
      EXPECT_TRUE(std::string(e.what()).starts_with(a.string() + ": ")) << e.what();
    }
  }
  // Well-formed JSON whose run entries have fields of another type.
  write_file_atomic(a.string(), R"({"format": "specmoe-report/1", "runs": [{"name": 5}], "environment": {}})");
  std::ostringstream out;
  EXPECT_THROW(compare_reports(a.string(), b.string(), out), Error);
}

std::string run_error(const std::string& toml, const RunOptions& o) {
  try {
    run_experiment(toml, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config) << e.what();
    return e.what();
  }
  return "";
}

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

TEST_F(ExperimentEngine, EngineChecksRunBeforeAnyGeneration) {
  std::string t1 = replace(kToml, "synth = \"tiny-draft\"", "synth = \"huge\"");
  std::string toml = write_toml("bad1.toml", t1);
  std::string msg = run_error(toml, options("bad1"));
  EXPECT_TRUE(msg.starts_with(fmt::format("{}:{}: key 'models.draft.synth': ", toml, line_of(t1, "huge")))) << msg;
  EXPECT_NE(msg.find("huge"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir_ / "bad1" / "experiment.json"));

  std::string t2 = replace(kToml, "exit_layer = 1", "exit_layer = 4");
  toml = write_toml("bad2.toml", t2);
  EXPECT_EQ(run_error(toml, options("bad2")),
            fmt::format("{}:{}: key 'strategy[3].exit_layer': run 'layerskip-t0': exit_layer 4 must be below "
                        "the target's 4 layers",
                        toml, line_of(t2, "exit_layer = 4")));
  // The deprecated spelling still works for one release; errors name the current key at its line.
  std::string t2b = replace(kToml, "exit_layer = 1", "layerskip_layers = 4");
  toml = write_toml("bad2b.toml", t2b);
  EXPECT_EQ(run_error(toml, options("bad2b")),
            fmt::format("{}:{}: key 'strategy[3].exit_layer': run 'layerskip-t0': exit_layer 4 must be below "
                        "the target's 4 layers",
                        toml, line_of(t2b, "layerskip_layers = 4")));

  // A draft vocabulary larger than the head it limits, or on a drafter without a head.
  std::string t2c = replace(kToml, "exit_layer = 1", "exit_layer = 1\ndraft_vocab = 400");
  toml = write_toml("bad2c.toml", t2c);
  EXPECT_EQ(run_error(toml, options("bad2c")),
            fmt::format("{}:{}: key 'strategy[3].draft_vocab': run 'layerskip-t0': draft_vocab 400 exceeds the target "
                        "model's 320 ids",
                        toml, line_of(t2c, "draft_vocab = 400")));
  std::string t2d = replace(kToml, "draft_max = 2", "draft_max = 2\ndraft_vocab = 100");
  toml = write_toml("bad2d.toml", t2d);
  EXPECT_EQ(run_error(toml, options("bad2d")),
            fmt::format("{}:{}: key 'strategy[2].draft_vocab': run 'ngram-t0': draft_vocab applies to the model, "
                        "layerskip, mtp and eagle3 drafters, not 'ngram'",
                        toml, line_of(t2d, "draft_vocab = 100")));

  std::string t3 = replace(kToml, "max_tokens = 12", "max_tokens = 600");
  toml = write_toml("bad3.toml", t3);
  msg = run_error(toml, options("bad3"));
  EXPECT_TRUE(msg.starts_with(fmt::format("{}:{}: key 'sampling.max_tokens': run 'ar-t0': prompt 'p0' has", toml,
                                          line_of(t3, "max_tokens"))))
      << msg;
}

TEST_F(ExperimentEngine, DraftWithAnotherVocabularyIsRejected) {
  SPECMOE_REQUIRE_DATA("models/stories260K.gguf");
  std::string t = replace(kToml, "synth = \"tiny-draft\"\nseed = 9",
                          "path = \"" + specmoe::testing::data_path("models/stories260K.gguf").string() + "\"");
  std::string toml = write_toml("vocab.toml", t);
  std::string msg = run_error(toml, options("vocab"));
  EXPECT_TRUE(msg.starts_with(fmt::format("{}:{}: key 'strategy[1].draft': run 'model-t0': ", toml, line_of(t, "draft = \"draft\""))))
      << msg;
}

// [experiment] cache_type_k / cache_type_v reach every model and every report: report.json's
// resolved config and environment, the Markdown report's environment table; the default is f16.
// A type the target's heads cannot hold (q8_0 with tiny's heads of 16) stops the run before any
// generation, naming the file and layer.
TEST_F(ExperimentEngine, KvCacheTypesAreUsedAndRecorded) {
  std::string t = replace(kToml, "synth = \"tiny\"\nseed = 9", "synth = \"tiny-256\"\nseed = 9");
  t = replace(t, "synth = \"tiny-draft\"\nseed = 9", "synth = \"tiny-256\"\nseed = 10");
  t = replace(t, "[sweep]\ntemperature = [0.0, 0.8]\n", "");
  const std::string q8 = replace(t, "threads = 1\n", "threads = 1\ncache_type_k = \"q8_0\"\ncache_type_v = \"F32\"\n");
  ASSERT_EQ(run_experiment(write_toml("kv_q8.toml", q8), options("kv_q8")), kRunOk);
  ASSERT_EQ(run_experiment(write_toml("kv_def.toml", t), options("kv_def")), kRunOk);
  const Report a = load_report_inputs((dir_ / "kv_q8").string()), b = load_report_inputs((dir_ / "kv_def").string());
  EXPECT_EQ(a.experiment.config["experiment"]["cache_type_k"], "q8_0");
  EXPECT_EQ(a.experiment.config["experiment"]["cache_type_v"], "f32");
  EXPECT_EQ(a.environment["kv_cache"], "k q8_0, v f32");
  EXPECT_EQ(b.experiment.config["experiment"]["cache_type_k"], "f16");
  EXPECT_EQ(b.environment["kv_cache"], "k f16, v f16");
  EXPECT_NE(a.experiment.config_hash, b.experiment.config_hash);
  EXPECT_NE(read_file((dir_ / "kv_q8" / "report.md").string()).find("k q8_0, v f32"), std::string::npos);
  // Greedy speculation over typed caches still reproduces the baseline token for token.
  ASSERT_EQ(a.runs.size(), 4u);
  for (const Report* r : {&a, &b})
    for (const auto& run : r->runs) {
      EXPECT_GT(run.n_generated, 0) << run.name;
      if (run.kind != "autoregressive") {
        EXPECT_TRUE(run.identical_to_baseline.value_or(false)) << run.name;
      }
    }

  const std::string bad = replace(kToml, "threads = 1\n", "threads = 1\ncache_type_k = \"q8_0\"\n");
  const std::string toml = write_toml("kv_bad.toml", bad);
  try {
    run_experiment(toml, options("kv_bad"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("K cache type q8_0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 0"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(dir_ / "kv_bad" / "runs"));
}

// MT-bench's second turn: the target answers the first turn itself, greedily, and the measured
// generation starts from the whole conversation in the chat template.
TEST_F(ExperimentEngine, SecondTurnFollowsTheTargetsOwnGreedyAnswer) {
  std::ofstream(dir_ / "q.jsonl") << R"({"question_id": 1, "category": "writing", "turns": ["Tell a story.", "Now shorter."]}
{"question_id": 2, "category": "math", "turns": ["2+2?", "And 3+3?"]}
)";
  const std::string t = R"([experiment]
name = "turns"
seed = 3
warmup = 0
threads = 1

[models.target]
synth = "tiny"
seed = 9

[prompts]
jsonl = "q.jsonl"
turn = 1
chat_template = "chatml"
system = "Be brief."
history_max_tokens = 6

[sampling]
max_tokens = 5

[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"

[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"
verifier = "greedy"
)";
  const std::string toml = write_toml("turns.toml", t);
  ASSERT_EQ(run_experiment(toml, options("turns")), kRunOk);
  Report rep = load_report_inputs((dir_ / "turns").string());
  ASSERT_EQ(rep.runs.size(), 2u);

  // The same conversation rebuilt by hand: system, turn 1, the greedy answer, turn 2.
  const ExperimentSpec spec = parse_experiment_file(toml);
  auto model = core::Model::load(spec.models[0].path, core::LoadOptions{});
  const core::ChatTemplateChoice chat{"chatml", "chosen by name"};
  const std::vector<std::string> first = {"Tell a story.", "2+2?"}, second = {"Now shorter.", "And 3+3?"};
  for (int q = 0; q < 2; ++q) {
    std::vector<core::ChatMessage> conv = {{"system", "Be brief."}, {"user", first[q]}};
    core::SamplingParams greedy;
    verify::DecodeOptions o;
    o.max_tokens = 6;
    const auto answer = verify::generate_autoregressive(*model, core::chat_prompt_tokens(model->tokenizer(), chat, conv),
                                                        greedy, o);
    ASSERT_FALSE(answer.tokens.empty());
    std::string text;
    for (int32_t id : answer.tokens)
      if (!model->tokenizer().is_eog(id)) text += model->tokenizer().token_to_piece(id);
    conv.push_back({"assistant", text});
    conv.push_back({"user", second[q]});
    const auto want = core::chat_prompt_tokens(model->tokenizer(), chat, conv);
    for (const auto& records : rep.records) {
      ASSERT_EQ(records.size(), 2u);
      EXPECT_EQ(records[q].n_prompt_tokens, static_cast<int>(want.size())) << "question " << q + 1;
      EXPECT_FALSE(records[q].tokens.empty());
    }
  }
  EXPECT_EQ(rep.environment["chat_templates"]["target"]["format"], "chatml");
  std::ifstream md(dir_ / "turns" / "report.md");
  const std::string report((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("Prompts are turn 2 of multi-turn questions: the earlier turns were answered by each target "
                        "itself, greedily (at most 6 tokens per answer)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("Chat templates: target: chatml (chosen by name)."), std::string::npos) << report;

  // The synth vocabulary has no chat template: auto gives raw text, which cannot hold a conversation.
  const std::string t2 = replace(t, "chat_template = \"chatml\"\nsystem = \"Be brief.\"\n", "");
  const std::string toml2 = write_toml("turns2.toml", t2);
  const std::string msg = run_error(toml2, options("turns2"));
  EXPECT_TRUE(msg.starts_with(fmt::format("{}:{}: key 'prompts.turn': model 'target': question '1' is answered after 1 "
                                          "earlier turn(s), fed back as a conversation, which needs a chat template",
                                          toml2, line_of(t2, "turn = 1"))))
      << msg;
}

TEST_F(ExperimentEngine, MoeTargetsReportExpertLoad) {
  std::string t = R"([experiment]
name = "moe"
seed = 2
warmup = 0
threads = 1
[models.target]
synth = "moe-tiny"
[prompts]
list = ["abcabcabc", "hello"]
[sampling]
max_tokens = 10
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"
[[strategy]]
name = "skip"
kind = "speculative"
target = "target"
drafter = "layerskip"
draft_max = 2
exit_layer = 1
)";
  std::string toml = write_toml("moe.toml", t);
  ASSERT_EQ(run_experiment(toml, options("moe")), kRunOk);
  Report r = load_report_inputs((dir_ / "moe").string());
  ASSERT_EQ(r.runs.size(), 2u);
  for (const auto& run : r.runs) {
    SCOPED_TRACE(run.name);
    ASSERT_TRUE(run.moe.has_value());
    EXPECT_EQ(run.moe->n_expert, 4);  // moe-tiny: 4 experts, top-2, 3 layers
    EXPECT_EQ(run.moe->n_expert_used, 2);
    ASSERT_EQ(run.moe->layers.size(), 3u);
    int64_t routed = 0;
    for (int64_t v : run.moe->layers[0].expert_tokens) routed += v;
    // Every token of every target forward goes to k = 2 experts (dropless).
    EXPECT_GT(routed, 0);
    EXPECT_EQ(routed % 2, 0);
    EXPECT_GE(run.moe->layers[0].jain_index, 0.25);
    EXPECT_LE(run.moe->layers[0].jain_index, 1.0);
    EXPECT_GT(run.moe->expert_bytes_per_token, 0.0);
    ASSERT_GE(run.moe->distinct_experts.size(), 2u);
    EXPECT_GE(run.moe->distinct_experts[1], 2.0 - 1e-9);  // one token touches exactly k experts
    EXPECT_LE(run.moe->distinct_experts[1], 2.0 + 1e-9);
  }
  // Decode-phase timing and the pooled MoE traffic sums reach the records and the aggregates.
  for (size_t i = 0; i < r.runs.size(); ++i) {
    SCOPED_TRACE(r.runs[i].name);
    const bool ar = i == 0;
    for (const auto& rec : r.records[i]) {
      EXPECT_GT(rec.prefill_s, 0.0);
      EXPECT_LT(rec.prefill_s, rec.wall_s);
      EXPECT_EQ(rec.n_decoded, ar ? rec.n_generated - 1 : rec.n_generated);
      ASSERT_TRUE(rec.moe.has_value());
      EXPECT_EQ(rec.moe->n_expert, 4);
      EXPECT_EQ(rec.moe->n_moe_layers, 3);
      EXPECT_GT(rec.moe->sum_distinct, 0.0);
    }
    EXPECT_TRUE(std::isfinite(r.runs[i].decode_speedup.mean));
    const MoeAggregate& m = *r.runs[i].moe;
    if (ar) {
      // One token per forward reads exactly k experts per layer; nothing is ever rejected.
      EXPECT_NEAR(m.amplification_mean, 1.0, 1e-12);
      EXPECT_NEAR(m.uniform_amplification, 1.0, 1e-12);
      EXPECT_DOUBLE_EQ(m.rejected_read_share, 0.0);
    } else {
      // Forwards of up to 3 tokens through 4 experts top-2: 1 <= U/k <= 2.
      EXPECT_GE(m.amplification_mean, 1.0);
      EXPECT_LE(m.amplification_mean, 2.0);
      EXPECT_GT(m.uniform_amplification, 1.0);
      EXPECT_GE(m.rejected_read_share, 0.0);
      EXPECT_LT(m.rejected_read_share, 1.0);
    }
  }
  std::string html = read_file((dir_ / "moe" / "report.html").string());
  EXPECT_NE(html.find("Expert load"), std::string::npos);
  EXPECT_NE(html.find("MoE expert traffic"), std::string::npos);
  EXPECT_NE(read_file((dir_ / "moe" / "report.md").string()).find("## MoE expert traffic"), std::string::npos);
  EXPECT_TRUE(r.runs[1].identical_to_baseline.value_or(false));
}

// A drafter registered at run time: proposes the last context token g times (one-hot).
class RepeatLastDrafter : public draft::Drafter {
 public:
  std::string name() const override { return "repeat-last"; }
  void begin(std::span<const int32_t>) override {}
  void propose(std::span<const int32_t> context, const draft::DraftParams& params, draft::Draft& out) override {
    out.clear();
    out.one_hot = true;
    for (int i = 0; i < params.draft_max; ++i) out.tokens.push_back(context.back());
  }
  void accepted(int, int32_t) override {}
};

TEST_F(ExperimentEngine, RegisteredDraftersNeedNoHarnessChange) {
  draft::register_drafter("repeat-last", [](const draft::DrafterOptions&) -> std::unique_ptr<draft::Drafter> {
    return std::make_unique<RepeatLastDrafter>();
  });
  std::string t = replace(kToml, "drafter = \"ngram\"", "drafter = \"repeat-last\"");
  std::string toml = write_toml("custom.toml", t);
  ASSERT_EQ(run_experiment(toml, options("custom")), kRunOk);
  Report r = load_report_inputs((dir_ / "custom").string());
  bool found = false;
  for (const auto& run : r.runs) {
    if (run.drafter != "repeat-last") continue;
    found = true;
    // draft_max 2 on every step, fewer near max_tokens.
    EXPECT_LE(run.n_drafted, 2 * run.n_steps) << run.name;
    EXPECT_GT(run.n_drafted, run.n_steps) << run.name;
    if (run.temperature == 0.0) {
      EXPECT_TRUE(run.identical_to_baseline.value_or(false)) << run.name;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace specmoe::exp
