// EngineExecutor: runs experiment generations with the specmoe engine -- core::Model targets,
// drafters and verifiers from the draft/ and verify/ registries, plain autoregressive decoding
// for autoregressive strategies and verify::SpeculativeDecoder for speculative ones.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/chat_template.h"
#include "core/kv_cache.h"
#include "experiments/executor.h"

namespace specmoe::core {
class Model;
}

namespace specmoe::exp {

// Builds a synth model into the cache (atomically) unless the file exists; returns its path.
// Throws Error(InvalidArgument) for an unknown preset (listing the known ones).
std::string ensure_synth_model(const ModelSpec& model);

class EngineExecutor : public RunExecutor {
 public:
  EngineExecutor();
  // device: where every model loads ("cpu", "cuda", "cuda:N"; "" = the engine's default, cpu).
  explicit EngineExecutor(std::string device);
  ~EngineExecutor() override;

  std::vector<std::string> drafter_names() const override;
  std::vector<std::string> verifier_names() const override;
  void prepare(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) override;
  void describe_environment(nlohmann::json& environment) const override;
  PromptRecord execute(const ExecutionRequest& request) override;
  void finish_run(const RunSpec& run) override;

 private:
  struct RunState;
  std::shared_ptr<core::Model> model(const std::string& path, int threads);
  RunState& state_for(const ExecutionRequest& request);

  std::string device_;
  core::KVCacheTypes cache_types_;  // [experiment] cache_type_k / cache_type_v
  std::map<std::string, std::shared_ptr<core::Model>> models_;  // by path; loaded once
  std::map<std::string, std::unique_ptr<RunState>> runs_;       // by run name
  // Prompt tokens by (target path, prompt index).
  std::map<std::pair<std::string, int>, std::vector<int32_t>> prompt_tokens_;
  // The chat template of each target's prompts, by model name.
  std::map<std::string, core::ChatTemplateChoice> chat_templates_;
};

}  // namespace specmoe::exp
