// specmoe generate: plain autoregressive generation, streaming the continuation to stdout and
// the speed figures (prompt tokens/s, generation tokens/s, time to first token) to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "base/error.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "core/sampling.h"
#include "experiments/json_text.h"
#include "experiments/metrics_json.h"
#include "experiments/result_json.h"
#include "verify/metrics.h"

namespace specmoe::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  InputOptions input;
  core::SamplingParams sampling;
  bool moe_stats = false;
  int top_logits = 0;  // --top-logits K: each generated token's K highest logits in the JSON
};

// The k highest logits of a row (ties: the lower id first), as (id, logit).
std::vector<std::pair<int32_t, float>> top_of_row(const std::vector<float>& row, int k) {
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  std::vector<std::pair<int32_t, float>> top;
  for (int i = 0; i < k; ++i) top.emplace_back(ids[i], row[ids[i]]);
  return top;
}

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
  const core::Sampler sampler(a.sampling);
  core::Rng rng(a.sampling.seed);
  core::RowBuffer probs(model->backend());
  core::ForwardOptions last_only;
  last_only.logits_all = false;

  if (!a.input.json) print_chat_template(prompt_ids.chat);
  // The decoding loop's metrics (verify::Metrics, as an autoregressive run of specmoe speculate
  // --compare counts them): the first token comes from the prefill, every later one from a step;
  // metrics.moe holds the expert load of every forward (--moe-stats).
  verify::Metrics metrics;
  metrics.n_prompt = n_prompt;
  double step_forward_s = 0.0;
  const auto t0 = Clock::now();
  core::ForwardResult f = model->forward(tokens, kv, last_only);
  model->backend().synchronize();
  const auto t_prefill = Clock::now();
  metrics.moe.record_load(f.stats, *model);
  metrics.time.verify_forward_s += seconds(t_prefill - t0);

  Utf8Stream out;
  std::vector<int32_t> generated;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;  // --top-logits, one list per sampled token
  std::vector<float> row;
  double ttft_s = 0.0;
  for (int i = 0; i < n_predict; ++i) {
    const auto t_sample = Clock::now();
    const int32_t next = sampler.sample(sampler.distributions(f.logits, tokens, {}, probs), 0, rng);
    metrics.time.sampling_s += seconds(Clock::now() - t_sample);
    if (i == 0) ttft_s = seconds(Clock::now() - t0);
    if (a.top_logits > 0) {
      // Also for an end-of-generation token, so a comparison sees where and how narrowly it won.
      f.logits.to_host(row);  // one row: the forward kept the last position's logits only
      tops.push_back(top_of_row(row, a.top_logits));
    }
    if (tok.is_eog(next)) break;
    tokens.push_back(next);
    generated.push_back(next);
    if (!a.input.json) out.write(tok.token_to_piece(next));
    if (i + 1 == n_predict) break;
    const int32_t one[1] = {next};
    const auto t_step = Clock::now();
    f = model->forward(one, kv, last_only);
    model->backend().synchronize();
    const double dt = seconds(Clock::now() - t_step);
    step_forward_s += dt;
    metrics.time.verify_forward_s += dt;
    metrics.record_step(0, 0);
    metrics.moe.record_forward(f.stats, *model, 1, 1);
  }
  const auto t_end = Clock::now();
  const double prefill_s = seconds(t_prefill - t0);
  const double gen_s = seconds(t_end - t_prefill);
  const double prompt_tps = prefill_s > 0 ? n_prompt / prefill_s : 0.0;
  const double gen_tps = gen_s > 0 ? generated.size() / gen_s : 0.0;
  // Achieved weight bandwidth of the decode steps: bytes every single-token forward reads times
  // forwards per second (the first token comes from the prefill, so steps = generated - 1).
  const double step_gbs = metrics.n_steps > 0 && step_forward_s > 0
                              ? static_cast<double>(model->weight_bytes_per_token()) * metrics.n_steps / step_forward_s / 1e9
                              : 0.0;

  metrics.n_generated = static_cast<int64_t>(generated.size());
  metrics.n_decoded = std::max<int64_t>(0, metrics.n_generated - 1);
  metrics.total_s = seconds(t_end - t0);
  metrics.prefill_s = prefill_s;
  metrics.ttft_s = ttft_s;
  if (metrics.n_steps > 0) metrics.target_step_s = step_forward_s / static_cast<double>(metrics.n_steps);
  metrics.target_weight_bytes = static_cast<double>(model->weight_bytes_per_token());
  metrics.time.other_s =
      std::max(0.0, metrics.total_s - metrics.time.verify_forward_s - metrics.time.sampling_s);

  if (a.input.json) {
    nlohmann::json j;
    exp::set_text(j, "model", a.model.model_path);  // paths are bytes too
    j["device"] = model->device().name();
    j["cache_type_k"] = core::kv_cache_type_name(model->cache_types().k);
    j["cache_type_v"] = core::kv_cache_type_name(model->cache_types().v);
    exp::set_text(j, "prompt", prompt);
    j["chat_template"] = prompt_ids.chat.templated() ? nlohmann::json(prompt_ids.chat.format) : nlohmann::json(nullptr);
    exp::set_text(j, "chat_template_reason", prompt_ids.chat.reason);
    j["prompt_tokens"] = std::vector<int32_t>(tokens.begin(), tokens.begin() + n_prompt);
    j["tokens"] = generated;
    // The continuation exactly as streamed (pieces concatenated): decode() would drop the
    // leading space SentencePiece puts on the first piece, which belongs to a continuation.
    // Valid UTF-8 with U+FFFD where a character is cut; the bytes in text_bytes_b64 then.
    std::string text;
    for (int32_t id : generated) text += tok.token_to_piece(id);
    exp::set_text(j, "text", text);
    j["seed"] = a.sampling.seed;
    j["sampling"] = {{"temperature", a.sampling.temperature}, {"top_k", a.sampling.top_k},
                     {"top_p", a.sampling.top_p}, {"min_p", a.sampling.min_p},
                     {"repeat_penalty", a.sampling.repeat_penalty}};
    j["timings"] = {{"n_prompt", n_prompt}, {"n_generated", generated.size()},
                    {"prompt_seconds", prefill_s}, {"generation_seconds", gen_s},
                    {"prompt_tokens_per_second", prompt_tps},
                    {"generation_tokens_per_second", gen_tps}, {"ttft_ms", ttft_s * 1e3},
                    {"decode_weight_gbs", step_gbs}};
    if (a.top_logits > 0) {
      // Per sampled token, the K highest raw logits of the row it was chosen from (before
      // temperature and the other processors): at temperature 0 the first is the token itself.
      // One more entry than "tokens" when an end-of-generation token ended the output.
      nlohmann::json list = nlohmann::json::array();
      for (const auto& top : tops) {
        nlohmann::json step = nlohmann::json::array();
        for (const auto& [id, logit] : top) {
          nlohmann::json e = {{"id", id}, {"logit", logit}};
          exp::set_text(e, "piece", tok.token_to_piece(id));
          step.push_back(std::move(e));
        }
        list.push_back(std::move(step));
      }
      j["top_logits"] = std::move(list);
    }
    j["metrics"] = exp::metrics_to_json(metrics);
    if (a.moe_stats) j["moe"] = moe_stats_json(*model, metrics.moe.layers);
    std::printf("%s\n", exp::dump_json(j).c_str());
    if (a.moe_stats) print_moe_stats(*model, metrics.moe.layers, stderr);
    return;
  }
  out.flush();
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr,
               "prompt: %d tokens, %.1f tokens/s | generation: %zu tokens, %.1f tokens/s, %.1f GB/s of weights read "
               "| ttft %.1f ms | seed %llu\n",
               n_prompt, prompt_tps, generated.size(), gen_tps, step_gbs, ttft_s * 1e3,
               static_cast<unsigned long long>(a.sampling.seed));
  if (a.moe_stats) print_moe_stats(*model, metrics.moe.layers, stderr);
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
  cmd->add_option("--top-logits", args->top_logits,
                  "with --json: each sampled token's K highest logits (id, logit, piece) as \"top_logits\", an ending end-of-generation token included")
      ->check(CLI::Range(0, 1000));
  cmd->callback([args] {
    if (args->top_logits > 0 && !args->input.json)
      throw_error(ErrorKind::InvalidArgument, "--top-logits needs --json (the logits are written in the JSON)");
    run_generate(*args);
  });
}

}  // namespace specmoe::cli
