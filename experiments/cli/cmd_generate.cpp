// specmoe generate: plain autoregressive generation, streaming the continuation to stdout and
// the speed figures (prompt tokens/s, generation tokens/s, time to first token) to stderr.
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "base/error.h"
#include "core/rng.h"
#include "core/sampling.h"

namespace specmoe::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  InputOptions input;
  core::SamplingParams sampling;
  bool moe_stats = false;
};

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void run_generate(const GenerateArgs& a) {
  a.sampling.validate();
  check_chat_options(a.input);
  const std::string prompt = read_prompt(a.input);
  auto model = load_model(a.model, a.model.model_path);
  const core::Tokenizer& tok = model->tokenizer();
  const PromptTokens prompt_ids = prompt_tokens(*model, a.input, prompt, a.model.model_path);
  std::vector<int32_t> tokens = prompt_ids.ids;
  if (tokens.empty()) throw_error(ErrorKind::InvalidArgument, "the prompt encodes to no tokens");
  const int n_prompt = static_cast<int>(tokens.size());
  const int n_ctx = context_for(*model, n_prompt, a.input);
  const int n_predict = std::min(a.input.n_predict, n_ctx - n_prompt);

  core::KVCache kv = model->new_cache(n_ctx);
  core::SamplerChain chain(a.sampling);
  core::Rng rng(a.sampling.seed);
  std::vector<float> logits, probs;
  core::ForwardOptions last_only;
  last_only.logits_all = false;

  if (!a.input.json) print_chat_template(prompt_ids.chat);
  const auto t0 = Clock::now();
  model->forward(tokens, {}, kv, logits, last_only);
  const auto t_prefill = Clock::now();

  Utf8Stream out;
  std::vector<int32_t> generated;
  double ttft_s = 0.0;
  for (int i = 0; i < n_predict; ++i) {
    const int32_t next = chain.sample_logits(logits, tokens, rng, probs);
    if (i == 0) ttft_s = seconds(Clock::now() - t0);
    if (tok.is_eog(next)) break;
    tokens.push_back(next);
    generated.push_back(next);
    if (!a.input.json) out.write(tok.token_to_piece(next));
    if (i + 1 == n_predict) break;
    const int32_t one[1] = {next};
    model->forward(one, {}, kv, logits, last_only);
  }
  const auto t_end = Clock::now();
  const double prefill_s = seconds(t_prefill - t0);
  const double gen_s = seconds(t_end - t_prefill);
  const double prompt_tps = prefill_s > 0 ? n_prompt / prefill_s : 0.0;
  const double gen_tps = gen_s > 0 ? generated.size() / gen_s : 0.0;

  if (a.input.json) {
    nlohmann::json j;
    j["model"] = a.model.model_path;
    j["device"] = model->device();
    j["prompt"] = prompt;
    j["chat_template"] = prompt_ids.chat.templated() ? nlohmann::json(prompt_ids.chat.format) : nlohmann::json(nullptr);
    j["chat_template_reason"] = prompt_ids.chat.reason;
    j["prompt_tokens"] = std::vector<int32_t>(tokens.begin(), tokens.begin() + n_prompt);
    j["tokens"] = generated;
    // The continuation exactly as streamed (pieces concatenated): decode() would drop the
    // leading space SentencePiece puts on the first piece, which belongs to a continuation.
    std::string text;
    for (int32_t id : generated) text += tok.token_to_piece(id);
    j["text"] = text;
    j["seed"] = a.sampling.seed;
    j["sampling"] = {{"temperature", a.sampling.temperature}, {"top_k", a.sampling.top_k},
                     {"top_p", a.sampling.top_p}, {"min_p", a.sampling.min_p},
                     {"repeat_penalty", a.sampling.repeat_penalty}};
    j["timings"] = {{"n_prompt", n_prompt}, {"n_generated", generated.size()},
                    {"prompt_seconds", prefill_s}, {"generation_seconds", gen_s},
                    {"prompt_tokens_per_second", prompt_tps},
                    {"generation_tokens_per_second", gen_tps}, {"ttft_ms", ttft_s * 1e3}};
    if (a.moe_stats) j["moe"] = moe_stats_json(*model);
    std::printf("%s\n", j.dump().c_str());
    if (a.moe_stats) print_moe_stats(*model, stderr);
    return;
  }
  out.flush();
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %d tokens, %.1f tokens/s | generation: %zu tokens, %.1f tokens/s | ttft %.1f ms | seed %llu\n",
               n_prompt, prompt_tps, generated.size(), gen_tps, ttft_s * 1e3,
               static_cast<unsigned long long>(a.sampling.seed));
  if (a.moe_stats) print_moe_stats(*model, stderr);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text autoregressively");
  add_model_options(cmd, args->model);
  add_input_options(cmd, args->input);
  add_sampling_options(cmd, args->sampling);
  cmd->add_flag("--moe-stats", args->moe_stats,
                "MoE models: print per-layer expert statistics to stderr (and a \"moe\" object with --json)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace specmoe::cli
