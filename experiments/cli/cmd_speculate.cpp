// specmoe speculate: speculative decoding with a drafter (model, ngram, layerskip) and a verifier
// (greedy, speculative). The continuation goes to stdout, the metrics of DESIGN.md to stderr;
// --compare also runs the autoregressive baseline on the same input and reports the speedup and
// whether the outputs are identical.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "base/error.h"
#include "draft/registry.h"
#include "draft/token_tree.h"
#include "experiments/deprecation.h"
#include "experiments/json_text.h"
#include "experiments/metrics_json.h"
#include "experiments/result_json.h"
#include "experiments/statistics.h"
#include "verify/autoregressive.h"
#include "verify/registry.h"
#include "verify/speculative_decoder.h"

namespace specmoe::cli {
namespace {

struct SpeculateArgs {
  ModelOptions model;
  InputOptions input;
  core::SamplingParams sampling;
  std::string draft_path;
  std::string drafter;   // empty: "model" when -md is given, else "ngram"
  std::string verifier = "speculative";
  int exit_layer = 0;    // layer-skip drafter: layers run before the head (0 = half)
  int draft_vocab = 0;   // model / layer-skip drafters: draft from the first N ids only (0 = all)
  int ngram_min = 1, ngram_max = 3;
  int draft_max = 4, draft_min = 0;
  float draft_p_min = 0.0f;
  std::string tree_widths, tree_sampling = "topk";  // token trees (draft::TreeSpec)
  int tree_nodes = 0, tree_depth = 0, tree_top_k = 0;
  bool compare = false;
  bool steps = false;
  int repeat = 1;
};

std::string pieces(const core::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += tok.token_to_piece(id);
  return text;
}

void print_metrics(const verify::Metrics& m) {
  std::fprintf(stderr,
               "drafted %lld, accepted %lld, steps %lld | acceptance %.3f | mean accepted length %.3f\n",
               static_cast<long long>(m.n_drafted), static_cast<long long>(m.n_accepted),
               static_cast<long long>(m.n_steps), m.acceptance_rate(), m.mean_accepted_length());
  std::fprintf(stderr, "per-position acceptance:");
  for (double a : m.per_position_acceptance()) std::fprintf(stderr, " %.3f", a);
  std::fprintf(stderr, "\ncost ratio c %.3f | alpha_fit %.3f | predicted speedup %.3f\n", m.cost_ratio(),
               m.alpha_fit(), m.predicted_speedup());
  if (m.tree_size_max > 0) {
    std::fprintf(stderr, "tree size %.2f (max %lld) | verify forward r(N) %.3f over %.2f tokens | acceptance by depth:",
                 m.tree_size(), static_cast<long long>(m.tree_size_max), m.verify_cost_ratio(), m.verify_tokens());
    const std::vector<double> a = m.acceptance_by_depth();
    for (size_t i = 0; i < a.size(); ++i) {
      if (m.depth_tried[i] > 0) std::fprintf(stderr, " %.3f", a[i]);
      else std::fprintf(stderr, " -");
    }
    std::fprintf(stderr, "\naccepted length histogram:");
    for (int64_t h : m.accept_length_histogram) std::fprintf(stderr, " %lld", static_cast<long long>(h));
    std::fprintf(stderr, "\ndraft cost per step %.3f | predicted speedup (tree) %.3f | bound (D+1)/(draft + r(N)) %.3f\n",
                 m.draft_cost_per_step(), m.predicted_speedup_tree(), m.speedup_bound());
  }
  std::fprintf(stderr, "%.2f tokens/s (decode phase %.2f) | ttft %.1f ms | time: draft %.3f s, verify %.3f s, sampling %.3f s, other %.3f s\n",
               m.tokens_per_second(), m.decode_tokens_per_second(), m.ttft_ms(), m.time.draft_s, m.time.verify_forward_s, m.time.sampling_s,
               m.time.other_s);
  if (m.moe.n_expert > 0)
    std::fprintf(stderr,
                 "MoE target (%d experts, k %d): distinct experts per layer per forward U(T) %.2f, amplification "
                 "U/k %.2f (uniform routing %.2f) | expert MB per generated token %.2f | reads on rejected tokens "
                 "%.1f%%\n",
                 m.moe.n_expert, m.moe.k, m.moe.mean_distinct(), m.moe.amplification(), m.moe.uniform_amplification(),
                 m.moe.expert_bytes_per_token(m.n_generated) / 1e6, 100.0 * m.moe.rejected_read_share());
}

void run_speculate(const SpeculateArgs& a) {
  a.sampling.validate();
  check_chat_options(a.input);
  const std::string prompt_text = read_prompt(a.input);
  std::shared_ptr<core::Model> target = load_model(a.model, a.model.model_path);
  const core::Tokenizer& tok = target->tokenizer();
  const PromptTokens prompt_ids = prompt_tokens(*target, a.input, prompt_text, a.model.model_path);
  const std::vector<int32_t>& prompt = prompt_ids.ids;
  if (prompt.empty()) throw_error(ErrorKind::InvalidArgument, "the prompt encodes to no tokens");
  const int n_ctx = context_for(*target, static_cast<int>(prompt.size()), a.input);

  draft::TreeSpec tree;
  if (!a.tree_widths.empty()) tree.widths = draft::parse_tree_widths(a.tree_widths);
  tree.nodes = a.tree_nodes;
  tree.depth = a.tree_depth;
  tree.top_k = a.tree_top_k;
  tree.sampling = draft::parse_tree_sampling(a.tree_sampling);
  tree.validate();
  // Cache rows one step may add after the context: a chain's g, a tree's nodes.
  const int draft_rows = tree.empty() ? a.draft_max : std::max(tree.max_nodes(), 1);
  const std::string drafter_name = !a.drafter.empty() ? a.drafter : (a.draft_path.empty() ? "ngram" : "model");
  draft::DrafterOptions dopt;
  dopt.target = target.get();
  dopt.n_threads = a.model.threads;
  dopt.device = a.model.device;
  dopt.cache_types = cache_types(a.model);
  dopt.ngram_min = a.ngram_min;
  dopt.ngram_max = a.ngram_max;
  dopt.exit_layer = a.exit_layer;
  dopt.draft_vocab = a.draft_vocab;
  if (a.draft_vocab > 0 && drafter_name != "model" && drafter_name != "layerskip" && drafter_name != "mtp" &&
      drafter_name != "eagle3")
    throw_error(ErrorKind::InvalidArgument,
                "--draft-vocab applies to the model, layerskip, mtp and eagle3 drafters, not '{}'", drafter_name);
  dopt.n_ctx = n_ctx + draft_rows + 1;
  if (drafter_name == "model" || drafter_name == "eagle3" || drafter_name == "dflash" ||
      (drafter_name == "mtp" && !a.draft_path.empty())) {
    // mtp: -md names a file with the block (llama.cpp's --mtp export) beside a target without it;
    // eagle3: the EAGLE-3 head, dflash: the DFlash draft (llama.cpp's converters of their checkpoints)
    if (a.draft_path.empty())
      throw_error(ErrorKind::InvalidArgument, "--drafter {} needs a draft model: -md FILE{}", drafter_name,
                  drafter_name == "eagle3"   ? " (an EAGLE-3 head)"
                  : drafter_name == "dflash" ? " (a DFlash draft)"
                                             : "");
    ModelOptions draft_opt = a.model;  // --moe-k / --moe-capacity are the target's
    draft_opt.moe_k = 0;
    draft_opt.moe_capacity = 0;
    dopt.draft_model = load_model(draft_opt, a.draft_path);
  } else if (!a.draft_path.empty()) {
    throw_error(ErrorKind::InvalidArgument, "-md is only used by --drafter model, mtp, eagle3 and dflash (got --drafter {})",
                drafter_name);
  }
  auto drafter = draft::make_drafter(drafter_name, dopt);
  auto verifier = verify::make_verifier(a.verifier, {target->device()});

  verify::DecodeOptions opt;
  opt.max_tokens = std::min(a.input.n_predict, n_ctx - static_cast<int>(prompt.size()));
  opt.draft_max = a.draft_max;
  opt.draft_min = a.draft_min;
  opt.draft_p_min = a.draft_p_min;
  opt.tree = tree;
  opt.record_steps = a.steps;
  opt.n_ctx = n_ctx + draft_rows + 1;
  opt.validate();

  // One untimed forward pages the memory-mapped weights in, so neither timed run pays for it.
  {
    core::KVCache warm = target->new_cache(8);
    const int32_t first[1] = {prompt[0]};
    target->forward(first, warm).logits.argmax();
  }

  // --compare: baseline and speculative runs alternate, --repeat pairs, so both see the same
  // machine load; the speedups are the medians over the pairs (metrics are the last run's).
  verify::GenerationResult base, spec;
  verify::SpeculativeDecoder decoder(*target, *drafter, *verifier, a.sampling, opt);
  std::vector<double> speedups, decode_speedups;
  const int pairs = a.compare ? a.repeat : 1;
  for (int i = 0; i < pairs; ++i) {
    if (a.compare) base = verify::generate_autoregressive(*target, prompt, a.sampling, opt);
    spec = decoder.generate(prompt);
    if (!a.compare) break;
    const auto& sm = spec.metrics;
    const auto& bm = base.metrics;
    if (sm.n_generated > 0 && bm.n_generated > 0 && sm.total_s > 0)
      speedups.push_back((bm.total_s / bm.n_generated) / (sm.total_s / sm.n_generated));
    if (sm.decode_tokens_per_second() > 0 && bm.decode_tokens_per_second() > 0)
      decode_speedups.push_back(sm.decode_tokens_per_second() / bm.decode_tokens_per_second());
  }
  const double speedup = speedups.empty() ? 0.0 : exp::median(speedups);
  const double decode_speedup = decode_speedups.empty() ? 0.0 : exp::median(decode_speedups);
  const bool identical = a.compare && base.tokens == spec.tokens;

  if (a.input.json) {
    nlohmann::json j;
    exp::set_text(j, "model", a.model.model_path);  // paths are bytes too
    j["device"] = target->device().name();
    j["cache_type_k"] = core::kv_cache_type_name(target->cache_types().k);
    j["cache_type_v"] = core::kv_cache_type_name(target->cache_types().v);
    exp::set_text(j, "draft_model", a.draft_path);
    j["drafter"] = drafter_name;
    j["verifier"] = a.verifier;
    exp::set_text(j, "prompt", prompt_text);
    j["chat_template"] = prompt_ids.chat.templated() ? nlohmann::json(prompt_ids.chat.format) : nlohmann::json(nullptr);
    exp::set_text(j, "chat_template_reason", prompt_ids.chat.reason);
    j["prompt_tokens"] = prompt;
    j["tokens"] = spec.tokens;
    exp::set_text(j, "text", pieces(tok, spec.tokens));  // the bytes stdout gets, as valid UTF-8 (+ b64)
    j["seed"] = a.sampling.seed;
    j["sampling"] = {{"temperature", a.sampling.temperature}, {"top_k", a.sampling.top_k},
                     {"top_p", a.sampling.top_p}, {"min_p", a.sampling.min_p}};
    j["draft"] = {{"draft_max", a.draft_max}, {"draft_min", a.draft_min}, {"draft_p_min", a.draft_p_min}};
    if (drafter_name == "layerskip") j["draft"]["exit_layer"] = a.exit_layer;
    if (a.draft_vocab > 0) j["draft"]["draft_vocab"] = a.draft_vocab;
    if (!tree.empty())
      j["draft"]["tree"] = {{"widths", draft::format_tree_widths(tree.widths)}, {"nodes", tree.nodes},
                            {"depth", tree.depth}, {"top_k", tree.top_k},
                            {"sampling", draft::tree_sampling_name(tree.sampling)}, {"shape", tree.describe()}};
    j["metrics"] = exp::metrics_to_json(spec.metrics);
    if (a.steps) {
      nlohmann::json steps = nlohmann::json::array();
      for (const verify::StepRecord& r : spec.steps) {
        nlohmann::json st = {{"drafted", r.drafted}, {"accepted", r.accepted}, {"next", r.next_token}};
        if (!r.parents.empty()) st["parents"] = r.parents;
        steps.push_back(std::move(st));
      }
      j["steps"] = std::move(steps);
    }
    if (a.compare) {
      j["baseline"] = {{"tokens", base.tokens}, {"metrics", exp::metrics_to_json(base.metrics)}};
      j["speedup"] = speedup;
      j["decode_speedup"] = decode_speedups.empty() ? nlohmann::json(nullptr) : nlohmann::json(decode_speedup);
      j["repeat"] = pairs;
      j["identical_to_baseline"] = identical;
    }
    std::printf("%s\n", exp::dump_json(j).c_str());
    return;
  }
  std::printf("%s\n", pieces(tok, spec.tokens).c_str());
  std::fflush(stdout);
  print_chat_template(prompt_ids.chat);
  const std::string shape = tree.empty() ? fmt::format("g={}", a.draft_max) : "tree " + tree.describe();
  std::fprintf(stderr, "speculative (%s drafter, %s verifier, %s): %lld tokens\n", drafter_name.c_str(),
               a.verifier.c_str(), shape.c_str(), static_cast<long long>(spec.metrics.n_generated));
  print_metrics(spec.metrics);
  for (size_t i = 0; a.steps && i < spec.steps.size(); ++i) {
    const verify::StepRecord& r = spec.steps[i];
    std::string line = fmt::format("step {}: drafted", i + 1);
    for (size_t k = 0; k < r.drafted.size(); ++k)
      line += r.parents.empty() ? fmt::format(" {}", r.drafted[k]) : fmt::format(" {}<{}", r.drafted[k], r.parents[k]);
    line += fmt::format(" | accepted {} | next {}\n", r.accepted.size(), r.next_token);
    std::fputs(line.c_str(), stderr);
  }
  if (a.compare) {
    std::fprintf(stderr, "baseline (autoregressive): %lld tokens, %.2f tokens/s (decode phase %.2f)\n",
                 static_cast<long long>(base.metrics.n_generated), base.metrics.tokens_per_second(),
                 base.metrics.decode_tokens_per_second());
    const double predicted = spec.metrics.predicted_speedup();
    // A decode phase needs a token after the first (the baseline's first comes from its prefill).
    const std::string decode =
        decode_speedups.empty()
            ? std::string("decode phase n/a (no decoded tokens to time)")
            : fmt::format("decode phase {:.3f}x vs {:.3f}x predicted ({:.0f}% of it)", decode_speedup, predicted,
                          predicted > 0 ? 100.0 * decode_speedup / predicted : 0.0);
    std::fprintf(stderr, "speedup %.3fx (wall, prompt included) | %s%s | identical to baseline: %s%s\n", speedup,
                 decode.c_str(), pairs > 1 ? fmt::format(" | median of {} pairs", pairs).c_str() : "",
                 identical ? "yes" : "no",
                 a.sampling.greedy() ? "" : " (temperature > 0: outputs match in distribution, not token for token)");
  }
}

}  // namespace

void add_speculate_command(CLI::App& app) {
  auto a = std::make_shared<SpeculateArgs>();
  CLI::App* cmd = app.add_subcommand("speculate", "speculative decoding (draft, verify in one batched forward)");
  add_model_options(cmd, a->model);
  add_input_options(cmd, a->input);
  add_sampling_options(cmd, a->sampling);
  cmd->add_option("--model-draft", a->draft_path, "draft model GGUF (alias -md); --drafter mtp: a file with the "
                  "multi-token-prediction block (llama.cpp's --mtp export) for a target without it; --drafter eagle3: "
                  "the EAGLE-3 head; --drafter dflash: the DFlash draft");
  cmd->add_option("--drafter", a->drafter, "model | ngram | layerskip | mtp (the target's own multi-token-prediction "
                  "block) | eagle3 (an EAGLE-3 head, -md, drafting from the target's features) | dflash (a DFlash "
                  "draft, -md: a block of up to its block size - 1 tokens in one forward from the target's features); "
                  "default: model with -md, else ngram");
  cmd->add_option("--verifier", a->verifier, "greedy | speculative")->capture_default_str();
  cmd->add_option("--exit-layer", a->exit_layer, "layer-skip drafter: layers the draft runs before the head (0 = half)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--layerskip-layers", a->exit_layer, "deprecated spelling of --exit-layer")
      ->check(CLI::NonNegativeNumber)
      ->each([](const std::string&) { exp::note_deprecated("--layerskip-layers", "--exit-layer"); });
  cmd->add_option("--draft-vocab", a->draft_vocab,
                  "model / layer-skip / mtp drafters: draft from the vocabulary's first N ids only, a cheaper draft head "
                  "(0 = all; e.g. 32768)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ngram-min", a->ngram_min, "shortest n-gram matched")->capture_default_str();
  cmd->add_option("--ngram-max", a->ngram_max, "longest n-gram matched")->capture_default_str();
  cmd->add_option("--draft-max,--draft", a->draft_max, "draft tokens per step (g)")->capture_default_str();
  cmd->add_option("--draft-min", a->draft_min, "drafts shorter than this are not verified")->capture_default_str();
  cmd->add_option("--draft-p-min", a->draft_p_min, "stop drafting below this draft probability")
      ->capture_default_str();
  cmd->add_option("--tree-widths", a->tree_widths,
                  "static token tree: children per node at each depth, e.g. 4,2,2,1 (4+8+16+16 nodes)");
  cmd->add_option("--tree-nodes", a->tree_nodes, "dynamic (EAGLE-2 style) token tree of at most N nodes; the ngram "
                  "drafter's trie budget")
      ->check(CLI::Range(0, 512));
  cmd->add_option("--tree-depth", a->tree_depth, "dynamic tree depth (0: --draft-max)")->check(CLI::Range(0, 16));
  cmd->add_option("--tree-top-k", a->tree_top_k, "dynamic tree: children per expansion and nodes expanded per "
                  "level (0: 4)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--tree-sampling", a->tree_sampling, "children as topk (one-hot candidates), stochastic (drawn "
                  "from q with replacement) or stochastic-noreplace")
      ->capture_default_str();
  cmd->add_flag("--steps", a->steps, "print each step's drafted tokens (a tree's as token<parent), how many were "
                "accepted and the token emitted after them (--json: a \"steps\" array)");
  cmd->add_flag("--compare", a->compare, "also run the autoregressive baseline and report the speedup");
  cmd->add_option("--repeat", a->repeat, "--compare: alternated baseline/speculative pairs (median speedup)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->callback([a] { run_speculate(*a); });
}

}  // namespace specmoe::cli
