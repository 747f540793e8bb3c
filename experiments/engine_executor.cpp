// The engine-backed executor: model loading and checks before any run, then one generation per
// request with the run's drafter/verifier (built once per run and reused across its prompts).
#include "experiments/engine_executor.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "core/model.h"
#include "core/sampling.h"
#include "core/synth.h"
#include "moe/expert_stats.h"
#include "draft/registry.h"
#include "verify/autoregressive.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"
#include "experiments/experiment.h"
#include "experiments/prompt_conversation.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

struct EngineExecutor::RunState {
  std::unique_ptr<draft::Drafter> drafter;
  std::unique_ptr<verify::Verifier> verifier;
  std::unique_ptr<verify::SpeculativeDecoder> decoder;
  core::KVCache kv;  // autoregressive runs: reused so allocation is not timed per prompt
};

namespace {

core::SamplingParams to_params(const SamplingSpec& s, uint64_t seed) {
  core::SamplingParams p;
  p.temperature = static_cast<float>(s.temperature);
  p.top_k = s.top_k;
  p.top_p = static_cast<float>(s.top_p);
  p.min_p = static_cast<float>(s.min_p);
  p.repeat_penalty = static_cast<float>(s.repeat_penalty);
  p.seed = seed;
  return p;
}

verify::DecodeOptions to_decode_options(const RunSpec& run) {
  verify::DecodeOptions o;
  o.max_tokens = run.sampling.max_tokens;
  o.stop_at_eog = true;
  if (run.strategy.kind == StrategyKind::Speculative) {
    o.draft_max = run.strategy.draft_max;
    o.draft_min = run.strategy.draft_min;
    o.draft_p_min = static_cast<float>(run.strategy.draft_p_min);
    o.tree = tree_spec_of(run.strategy);
  }
  return o;
}

std::string key_of(const ExperimentSpec& spec, const RunSpec& run, const std::string& field) {
  for (const auto& [k, v] : run.point)
    if (k == field) return "sweep." + field;
  return spec.strategy_key(run.strategy.index, field);
}

double finite_or_nan(double v) { return v > 0.0 ? v : kNaN; }

}  // namespace

std::string ensure_synth_model(const ModelSpec& model) {
  core::SynthSpec spec = core::synth_spec(model.synth);
  std::error_code ec;
  if (fs::is_regular_file(model.path, ec)) return model.path;
  fs::create_directories(fs::path(model.path).parent_path(), ec);
  if (ec) throw_error(ErrorKind::Io, "{}: cannot create the synth cache folder: {}", model.path, ec.message());
  core::synth_write(spec, model.path, model.synth_seed);  // GGUFWriter writes atomically
  return model.path;
}

EngineExecutor::EngineExecutor() = default;
EngineExecutor::EngineExecutor(std::string device) : device_(std::move(device)) {}
EngineExecutor::~EngineExecutor() = default;

std::vector<std::string> EngineExecutor::drafter_names() const { return draft::drafter_names(); }
std::vector<std::string> EngineExecutor::verifier_names() const { return verify::verifier_names(); }

std::shared_ptr<core::Model> EngineExecutor::model(const std::string& path, int threads) {
  auto it = models_.find(path);
  if (it != models_.end()) return it->second;
  core::LoadOptions load;
  load.n_threads = threads;
  if (!device_.empty()) load.device = device_;
  load.cache_types = cache_types_;
  load.huge_pages = core::HugePages::On;  // an experiment decodes long enough to repay their first touch
  std::shared_ptr<core::Model> m = core::Model::load(path, load);
  models_[path] = m;
  return m;
}

void EngineExecutor::prepare(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) {
  if (device_.empty()) device_ = spec.device;  // --device overrides [experiment] device
  cache_types_ = {core::parse_kv_cache_type(spec.cache_type_k, "experiment.cache_type_k"),
                  core::parse_kv_cache_type(spec.cache_type_v, "experiment.cache_type_v")};
  std::set<std::string> used;
  for (const auto& run : runs) {
    used.insert(run.strategy.target);
    if (!run.strategy.draft.empty()) used.insert(run.strategy.draft);
  }
  for (const auto& m : spec.models) {
    if (!used.count(m.name)) continue;
    std::string key = "models." + m.name + (m.is_synth() ? ".synth" : ".path");
    try {
      if (m.is_synth()) ensure_synth_model(m);
      model(m.path, spec.threads);
    } catch (const Error& e) {
      spec.src.fail(key, e.what());
    }
  }

  // Each target's prompts: its chat template, and for a later turn of a multi-turn question its
  // own greedy answers to the earlier turns (generated here, once per target and question); then
  // the prompt lengths against its context.
  const PromptSource& ps = spec.prompt_source;
  for (const auto& run : runs) {
    const ModelSpec* t = spec.find_model(run.strategy.target);
    auto target = model(t->path, spec.threads);
    const int n_ctx = target->config().n_ctx_train;
    if (!chat_templates_.count(t->name)) {
      core::ChatTemplateChoice chat;
      try {
        chat = core::resolve_chat_template(ps.chat_template, target->tokenizer().chat_template(),
                                           fmt::format("model '{}' ({})", t->name, fs::path(t->path).filename().string()));
      } catch (const Error& e) {
        spec.src.fail(spec.src.lines.count("prompts.chat_template") ? "prompts.chat_template" : "prompts", e.what());
      }
      if (!ps.system.empty() && !chat.templated())
        spec.src.fail("prompts.system", fmt::format("model '{}': a system message needs a chat template, and its "
                                                    "prompts are raw text ({})", t->name, chat.reason));
      chat_templates_[t->name] = chat;
      int n_history = 0;
      for (const Prompt& p : spec.prompts) n_history += p.history.empty() ? 0 : 1;
      if (n_history > 0)
        std::fprintf(stderr, "specmoe: model '%s' answers the earlier turns of %d question(s) greedily (at most %d "
                     "tokens each) before the runs start\n", t->name.c_str(), n_history, ps.history_max_tokens);
    }
    for (size_t i = 0; i < spec.prompts.size(); ++i) {
      auto& toks = prompt_tokens_[{t->path, static_cast<int>(i)}];
      if (toks.empty()) {
        const auto& tok = target->tokenizer();
        try {
          toks = build_conversation_prompt(*target, chat_templates_[t->name], ps, spec.prompts[i]).tokens;
        } catch (const Error& e) {
          spec.src.fail(spec.prompts[i].history.empty() ? "prompts" : "prompts.turn",
                        fmt::format("model '{}': {}", t->name, e.what()));
        }
        if (toks.empty() && tok.bos() >= 0) toks.push_back(tok.bos());
      }
      const int draft_rows = run.strategy.has_tree() ? std::max(tree_spec_of(run.strategy).max_nodes(), 1)
                                                     : run.strategy.draft_max;
      const int need = static_cast<int>(toks.size()) + run.sampling.max_tokens + draft_rows + 1;
      if (n_ctx > 0 && need > n_ctx) {
        bool swept = false;
        for (const auto& [k, v] : run.point) swept |= k == "max_tokens";
        spec.src.fail(swept ? "sweep.max_tokens" : "sampling.max_tokens",
                      fmt::format("run '{}': prompt '{}' has {} tokens; with max_tokens {} it needs {} positions, more "
                                  "than the context of model '{}' ({})",
                                  run.name, spec.prompts[i].id, toks.size(), run.sampling.max_tokens, need, t->name, n_ctx));
      }
    }
  }

  // Every speculative run's drafter and verifier, built once now so that option and vocabulary
  // problems surface before the first generation.
  for (const auto& run : runs) {
    if (run.strategy.kind != StrategyKind::Speculative) continue;
    const StrategySpec& s = run.strategy;
    auto target = model(spec.find_model(s.target)->path, spec.threads);
    if (s.drafter == "layerskip" && s.exit_layer >= target->config().n_layer)
      spec.src.fail(key_of(spec, run, "exit_layer"),
                    fmt::format("run '{}': exit_layer {} must be below the target's {} layers", run.name,
                                s.exit_layer, target->config().n_layer));
    draft::DrafterOptions o;
    o.target = target.get();
    if (!s.draft.empty()) o.draft_model = model(spec.find_model(s.draft)->path, spec.threads);
    if (s.draft_vocab > 0) {
      const core::Model* head = s.drafter == "model" || s.drafter == "eagle3"      ? o.draft_model.get()
                                : s.drafter == "layerskip" || s.drafter == "mtp" ? target.get()
                                                                                  : nullptr;
      if (head == nullptr && s.drafter != "model" && s.drafter != "eagle3")
        spec.src.fail(key_of(spec, run, "draft_vocab"),
                      fmt::format("run '{}': draft_vocab applies to the model, layerskip, mtp and eagle3 drafters, not "
                                  "'{}'", run.name, s.drafter));
      if (head != nullptr && s.draft_vocab > head->config().n_vocab)
        spec.src.fail(key_of(spec, run, "draft_vocab"),
                      fmt::format("run '{}': draft_vocab {} exceeds the {} model's {} ids", run.name, s.draft_vocab,
                                  s.drafter == "model" ? "draft" : "target", head->config().n_vocab));
    }
    o.n_threads = spec.threads;
    o.ngram_min = s.ngram_min;
    o.ngram_max = s.ngram_max;
    o.exit_layer = s.exit_layer;
    o.draft_vocab = s.draft_vocab;
    try {
      draft::make_drafter(s.drafter, o);
    } catch (const Error& e) {
      spec.src.fail(key_of(spec, run, s.drafter == "model" ? "draft" : "drafter"), fmt::format("run '{}': {}", run.name, e.what()));
    }
    try {
      verify::make_verifier(s.verifier, {target->device()});
    } catch (const Error& e) {
      spec.src.fail(key_of(spec, run, "verifier"), e.what());
    }
  }
}

void EngineExecutor::describe_environment(nlohmann::json& environment) const {
  // Where the models were loaded ("cpu" unless a device was given).
  environment["backend"] = device_.empty() ? "cpu" : device_;
  // The KV cache element types every model ran with (llama.cpp's -ctk / -ctv).
  environment["kv_cache"] = fmt::format("k {}, v {}", core::kv_cache_type_name(cache_types_.k),
                                        core::kv_cache_type_name(cache_types_.v));
  if (device_.starts_with("cuda")) environment["cuda_device"] = device_;
  // The chat template each target's prompts were rendered with ("none" = raw text), and why.
  for (const auto& [name, chat] : chat_templates_)
    environment["chat_templates"][name] = {{"format", chat.templated() ? chat.format : "none"}, {"reason", chat.reason}};
}

EngineExecutor::RunState& EngineExecutor::state_for(const ExecutionRequest& req) {
  auto& slot = runs_[req.run->name];
  if (slot) return *slot;
  slot = std::make_unique<RunState>();
  const ExperimentSpec& spec = *req.spec;
  const RunSpec& run = *req.run;
  if (run.strategy.kind == StrategyKind::Speculative) {
    const StrategySpec& s = run.strategy;
    auto target = model(spec.find_model(s.target)->path, req.threads);
    draft::DrafterOptions o;
    o.target = target.get();
    if (!s.draft.empty()) o.draft_model = model(spec.find_model(s.draft)->path, req.threads);
    o.n_threads = req.threads;
    o.ngram_min = s.ngram_min;
    o.ngram_max = s.ngram_max;
    o.exit_layer = s.exit_layer;
    o.draft_vocab = s.draft_vocab;
    slot->drafter = draft::make_drafter(s.drafter, o);
    slot->verifier = verify::make_verifier(s.verifier, {target->device()});
    slot->decoder = std::make_unique<verify::SpeculativeDecoder>(*target, *slot->drafter, *slot->verifier,
                                                                  to_params(run.sampling, req.seed), to_decode_options(run));
  }
  return *slot;
}

PromptRecord EngineExecutor::execute(const ExecutionRequest& req) {
  const ExperimentSpec& spec = *req.spec;
  const RunSpec& run = *req.run;
  const ModelSpec* target_spec = spec.find_model(run.strategy.target);
  auto target = model(target_spec->path, req.threads);
  const auto& tokens = prompt_tokens_.at({target_spec->path, req.prompt_index});
  RunState& st = state_for(req);

  const bool moe = target->moe_k() > 0;
  verify::GenerationResult res;
  if (run.strategy.kind == StrategyKind::Autoregressive) {
    const int need = static_cast<int>(tokens.size()) + run.sampling.max_tokens + 1;
    if (st.kv.capacity() < need) st.kv = target->new_cache(need);
    res = verify::generate_autoregressive(*target, tokens, to_params(run.sampling, req.seed), to_decode_options(run),
                                          req.stream, &st.kv);
  } else {
    res = st.decoder->generate(tokens, req.stream);
  }

  const verify::Metrics& m = res.metrics;
  PromptRecord r;
  r.n_prompt_tokens = static_cast<int>(m.n_prompt);
  r.tokens = res.tokens;
  r.text = target->tokenizer().decode(res.tokens);
  r.stopped_at_eog = res.stopped_at_eog;
  r.n_generated = m.n_generated;
  r.n_drafted = m.n_drafted;
  r.n_accepted = m.n_accepted;
  r.n_steps = m.n_steps;
  r.position_drafted = m.position_drafted;
  r.position_accepted = m.position_accepted;
  r.accept_length_histogram = m.accept_length_histogram;
  r.depth_tried = m.depth_tried;
  r.tree_size_max = m.tree_size_max;
  const int64_t n_verify = m.n_verify_forwards();
  r.verify_step_ms = n_verify > 0 && m.verify_draft_s > 0 ? m.verify_draft_s / static_cast<double>(n_verify) * 1000.0 : kNaN;
  r.wall_s = m.total_s;
  r.prefill_s = m.prefill_s;
  r.n_decoded = m.n_decoded;
  r.ttft_ms = m.ttft_ms();
  r.target_step_ms = finite_or_nan(m.target_step_s) * 1000.0;
  r.target_weight_bytes = finite_or_nan(m.target_weight_bytes);
  if (run.strategy.kind == StrategyKind::Speculative) r.draft_step_ms = finite_or_nan(m.draft_token_s) * 1000.0;
  r.time_breakdown = m.time;
  if (moe) {
    // Expert counts cover every target forward of the generation (prefill and decode steps, not
    // the drafter's forwards nor the cost probes); U(T) covers the decode forwards.
    MoeRecord mr;
    const int n_layer = target->config().n_layer;
    mr.expert_tokens.resize(n_layer);
    mr.dropped_tokens.assign(n_layer, 0);
    for (int l = 0; l < n_layer; ++l) {
      if (l < static_cast<int>(m.moe.layers.size()) && m.moe.layers[l].n_expert() > 0) {
        mr.expert_tokens[l] = m.moe.layers[l].expert_tokens();
        mr.dropped_tokens[l] = m.moe.layers[l].dropped_tokens();
      }
    }
    mr.n_expert_used = m.moe.k > 0 ? m.moe.k : target->moe_k();
    for (const auto& [T, b] : m.moe.by_size) {
      if (T <= 0) continue;
      if (mr.distinct_experts_sum.size() <= static_cast<size_t>(T)) {
        mr.distinct_experts_sum.resize(T + 1, 0.0);
        mr.distinct_experts_count.resize(T + 1, 0);
      }
      mr.distinct_experts_sum[T] += b.sum_distinct;
      mr.distinct_experts_count[T] += b.n_forwards;
    }
    mr.expert_bytes_read = static_cast<double>(m.moe.expert_bytes);
    mr.n_expert = m.moe.n_expert > 0 ? m.moe.n_expert : target->config().n_expert;
    mr.n_moe_layers = m.moe.n_moe_layers;
    mr.n_forwards = m.moe.n_forwards;
    mr.sum_distinct = m.moe.sum_distinct;
    mr.sum_uniform = m.moe.sum_uniform;
    mr.sum_rejected_reads = m.moe.sum_rejected_reads;
    // What the target's cache holds per token with the run's KV cache types (rows of every layer).
    mr.kv_bytes_per_token = static_cast<double>(target->new_cache(1).bytes_per_token());
    r.moe = std::move(mr);
  }
  return r;
}

void EngineExecutor::finish_run(const RunSpec& run) { runs_.erase(run.name); }

int run_experiment(const std::string& path, const RunOptions& options) {
  EngineExecutor executor(options.device);
  return run_experiment(path, options, executor);
}

ExperimentPlan plan_experiment(const std::string& path, const RunOptions& options) {
  EngineExecutor executor;  // for the registries' names; loads nothing
  return plan_experiment(path, options, executor);
}

}  // namespace specmoe::exp
