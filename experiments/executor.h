// RunExecutor: the seam between the experiment runner and whatever generates tokens. The runner
// owns the schedule (runs, prompts, repeats, warmups, shards, resume, interrupts, reports); an
// executor knows the engine: which drafters/verifiers exist, whether the models load, and how
// to run one (run, prompt, repeat). Tests drive the runner with a fake executor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/experiment_spec.h"
#include "experiments/run_result.h"

namespace specmoe::exp {

// One generation to execute.
struct ExecutionRequest {
  const ExperimentSpec* spec = nullptr;
  const RunSpec* run = nullptr;
  const Prompt* prompt = nullptr;
  int prompt_index = 0;
  int repeat = 0;        // < 0 for warmups (not recorded)
  uint64_t seed = 0;     // the experiment seed
  // The RNG stream: Rng(seed, stream) with stream = Rng::stream_id({prompt_index, repeat}), the
  // same in every run, so runs differ only by strategy.
  uint64_t stream = 0;
  int threads = 0;       // resolved thread count (never 0)
  bool warmup() const { return repeat < 0; }
};

class RunExecutor {
 public:
  virtual ~RunExecutor() = default;

  virtual std::vector<std::string> drafter_names() const = 0;
  virtual std::vector<std::string> verifier_names() const = 0;

  // Everything that needs the engine, before any run starts: builds synth models, opens every
  // model the runs use and loads its header, checks draft/target vocabulary compatibility.
  // Throws Error(Config) through spec.src ("FILE:LINE: key 'models.x.path': problem").
  virtual void prepare(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) = 0;

  // Adds engine facts to the report's environment block (e.g. "cuda_device").
  virtual void describe_environment(nlohmann::json& environment) const { (void)environment; }

  // Generates for one (run, prompt, repeat) and returns its record (run, prompt_index, repeat,
  // prompt_id and category may be left empty: the runner fills them).
  virtual PromptRecord execute(const ExecutionRequest& request) = 0;

  // The run is finished; models no later run needs may be released.
  virtual void finish_run(const RunSpec& run) { (void)run; }
};

// The stream id used for (prompt_index, repeat); shared with executors so they need not
// recompute it (SplitMix64 mix, see core/rng.h).
uint64_t prompt_stream_id(int prompt_index, int repeat);

}  // namespace specmoe::exp
