// Expert statistics of an MoE model for the CLI: a per-layer table on stderr and a JSON object
// (DESIGN.md, Metrics: tokens per expert, load CV, max/mean, Jain, routing entropy, drops, and
// the distinct experts per forward U(T) next to the uniform-routing expectation, the router and the
// expert bytes read per token).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/model_weights.h"
#include "moe/expert_stats.h"

namespace specmoe::cli {
namespace {

// "T=1: 2.00 (2.00)" for each forward size seen: mean U(T) and, in brackets, E(1-(1-k/E)^T).
std::string distinct_by_size(const moe::ExpertStats& s) {
  std::string out;
  for (const auto& [key, f] : s.by_size())
    out += fmt::format("{}T={}: {:.2f} ({:.2f})", out.empty() ? "" : ", ", f.n_tokens, f.mean_distinct(),
                       moe::uniform_distinct_experts(s.n_expert(), f.k, f.n_tokens));
  return out;
}

std::string loads(const moe::ExpertStats& s) {
  const auto& x = s.expert_tokens();
  if (x.size() > 16) {
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    return fmt::format("{}..{}", *lo, *hi);
  }
  std::string out;
  for (int64_t v : x) out += fmt::format("{}{}", out.empty() ? "" : " ", v);
  return out;
}

const moe::ExpertStats* layer_stats(const std::vector<moe::ExpertStats>& layers, int l) {
  return l < static_cast<int>(layers.size()) && layers[l].n_expert() > 0 ? &layers[l] : nullptr;
}

moe::ExpertStats merged(const core::Model& model, const std::vector<moe::ExpertStats>& layers) {
  moe::ExpertStats all;
  bool first = true;
  for (int l = 0; l < model.config().n_layer; ++l)
    if (const moe::ExpertStats* s = layer_stats(layers, l)) {
      if (first) {
        all = moe::ExpertStats(s->n_expert(), s->k(), -1);
        first = false;
      }
      all.merge(*s);
    }
  return all;
}

// The router as the model runs it in its first MoE layer (a selection bias makes a group router):
// its family and, for the group routers, groups, normalisation and scale; shared experts and dense
// layers.
std::string router_line(const core::Model& model) {
  const core::ModelConfig& c = model.config();
  const moe::RouterSpec r = model.moe_router(c.first_moe_layer());
  std::string s = moe::router_kind_name(r.kind);
  if (r.kind == moe::RouterKind::SigmoidGroup || r.kind == moe::RouterKind::SoftmaxGroup) {
    if (r.group.n_group > 1) s += fmt::format(", {} groups keep {}", r.group.n_group, r.group.topk_group);
    s += r.group.normalize ? ", renormalised" : ", not renormalised";
    if (r.group.scale != 1.0f) s += fmt::format(", scale {:g}", r.group.scale);
  }
  if (c.n_expert_shared > 0) s += fmt::format("; {} shared experts", c.n_expert_shared);
  else if (c.n_ff_shared_expert > 0) s += c.arch == core::Arch::Qwen2Moe ? "; a gated shared expert" : "; a shared expert";
  if (c.n_layer_dense_lead > 0) s += fmt::format("; layers 0-{} dense", c.n_layer_dense_lead - 1);
  if (c.n_moe_layer_step > 1) s += fmt::format("; experts every {} layers", c.n_moe_layer_step);
  return s;
}

// Routed-expert weight bytes read per token of the recorded forwards (every touched expert once
// per forward and layer), and those tokens.
std::pair<double, int64_t> expert_bytes_per_token(const core::Model& model, const std::vector<moe::ExpertStats>& layers) {
  double bytes = 0;
  int64_t tokens = 0;
  for (int l = 0; l < model.config().n_layer; ++l)
    if (const moe::ExpertStats* s = layer_stats(layers, l)) {
      bytes += static_cast<double>(s->expert_bytes());
      tokens = std::max(tokens, s->n_tokens());
    }
  return {tokens > 0 ? bytes / static_cast<double>(tokens) : 0.0, tokens};
}

}  // namespace

void print_moe_stats(const core::Model& model, const std::vector<moe::ExpertStats>& layers, std::FILE* out) {
  const core::ModelConfig& c = model.config();
  if (!c.is_moe()) {
    std::fprintf(out, "moe stats: %s is a dense model (no experts)\n", c.arch_name.c_str());
    return;
  }
  std::fprintf(out, "MoE expert statistics: %d experts, k %d, entropy in bits (max %.2f); U(T): mean distinct "
               "experts per forward of T tokens (uniform routing expectation)\n",
               c.n_expert, model.moe_k(), std::log2(static_cast<double>(c.n_expert)));
  const auto [bytes_per_token, tokens] = expert_bytes_per_token(model, layers);
  std::fprintf(out, "router: %s; expert weights read: %.3f MB per token over %lld tokens\n", router_line(model).c_str(),
               bytes_per_token / 1e6, static_cast<long long>(tokens));
  std::fprintf(out, "%5s %8s  %-32s %6s %8s %6s %7s %7s  %s\n", "layer", "tokens", "tokens per expert", "CV",
               "max/mean", "Jain", "entropy", "dropped", "U(T)");
  auto row = [&](const std::string& name, const moe::ExpertStats& s) {
    std::fprintf(out, "%5s %8lld  %-32s %6.3f %8.3f %6.3f %7.3f %7lld  %s\n", name.c_str(),
                 static_cast<long long>(s.n_tokens()), loads(s).c_str(), s.load_cv(), s.max_over_mean(),
                 s.jain_index(), s.routing_entropy_bits(), static_cast<long long>(s.dropped_assignments()),
                 distinct_by_size(s).c_str());
  };
  for (int l = 0; l < c.n_layer; ++l)
    if (const moe::ExpertStats* s = layer_stats(layers, l)) row(std::to_string(l), *s);
  row("all", merged(model, layers));
}

nlohmann::json moe_stats_json(const core::Model& model, const std::vector<moe::ExpertStats>& layers) {
  const core::ModelConfig& c = model.config();
  nlohmann::json j;
  if (!c.is_moe()) return j;  // null
  j["n_expert"] = c.n_expert;
  j["k"] = model.moe_k();
  j["router"] = router_line(model);
  j["expert_bytes_per_token"] = expert_bytes_per_token(model, layers).first;
  auto& out = j["layers"] = nlohmann::json::array();
  for (int l = 0; l < c.n_layer; ++l)
    if (const moe::ExpertStats* s = layer_stats(layers, l)) out.push_back(s->to_json());
  j["all_layers"] = merged(model, layers).to_json();
  return j;
}

}  // namespace specmoe::cli
