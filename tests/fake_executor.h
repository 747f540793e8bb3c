// A deterministic stand-in for the experiment engine and an experiment TOML for it, shared by the
// runner, merge and slurm suites: they test the schedule and the files, not generation.
#pragma once
#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "experiments/executor.h"

namespace specmoe::testing {

// At temperature 0 every strategy emits the same tokens (as lossless decoding must); a
// speculative run takes half the baseline's time per token.
class FakeExecutor : public exp::RunExecutor {
 public:
  std::map<std::string, int> executions;  // recorded generations by run name
  int warmups = 0, prepared = 0, total = 0;
  int raise_sigint_at = -1;  // raise SIGINT during this recorded generation (1-based)
  // Every recorded generation in the order executed: (run name, prompt index, repeat).
  std::vector<std::tuple<std::string, int, int>> order;

  std::vector<std::string> drafter_names() const override { return {"layerskip", "model", "ngram"}; }
  std::vector<std::string> verifier_names() const override { return {"greedy", "speculative"}; }
  void prepare(const exp::ExperimentSpec&, const std::vector<exp::RunSpec>&) override { ++prepared; }

  exp::PromptRecord execute(const exp::ExecutionRequest& req) override {
    exp::PromptRecord r;
    if (req.warmup()) {
      ++warmups;
      return r;
    }
    ++executions[req.run->name];
    order.emplace_back(req.run->name, req.prompt_index, req.repeat);
    if (++total == raise_sigint_at) std::raise(SIGINT);
    const int n = req.run->sampling.max_tokens;
    const bool greedy = req.run->sampling.temperature == 0.0;
    for (int i = 0; i < n; ++i)
      r.tokens.push_back(greedy ? (req.prompt_index * 7 + i * 3) % 50
                                : static_cast<int32_t>((req.stream + i * 13 + req.run->name.size()) % 50));
    r.n_generated = n;
    r.n_prompt_tokens = static_cast<int>(req.prompt->text.size());
    r.text = req.prompt->text + "...";
    if (req.run->strategy.kind == exp::StrategyKind::Speculative) {
      const int g = req.run->strategy.draft_max;
      r.n_steps = n / 2;  // each step: one accepted draft token + one bonus token
      r.n_accepted = n / 2;
      r.n_drafted = static_cast<int64_t>(g) * (n / 2);
      r.position_drafted.assign(g, n / 2);
      r.position_accepted.assign(g, 0);
      r.position_accepted[0] = n / 2;
      r.wall_s = 0.005 * n;
      r.draft_step_ms = 0.1;  // cost_ratio() = 0.1 / 1.0
      r.target_step_ms = 1.0;
    } else {
      r.n_steps = n - 1;
      r.wall_s = 0.01 * n;
    }
    r.ttft_ms = 1.0;
    return r;
  }
};

// Model files target.gguf and draft.gguf must exist beside it (their content is not read).
inline const std::string kFakeExperimentToml = R"([experiment]
name = "fake"
seed = 11
repeats = 2
warmup = 1

[models.target]
path = "target.gguf"

[models.draft]
path = "draft.gguf"

[prompts]
list = ["alpha", "beta", "gamma"]

[sampling]
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

[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"

[sweep]
draft_max = [2, 4]
temperature = [0.0, 0.7]
)";
inline constexpr int kFakeExperimentRuns = 10;           // ar x 2 temperatures + (model, ngram) x 2 lengths x 2 temperatures
inline constexpr int kFakeExperimentRecordsPerRun = 6;   // 3 prompts x 2 repeats

}  // namespace specmoe::testing
