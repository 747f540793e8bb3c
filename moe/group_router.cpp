#include "moe/group_router.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace specmoe::moe {

void gate_scores(const float* logits, int n, GateScore score, float* out) {
  if (score == GateScore::Sigmoid) {
    for (int e = 0; e < n; ++e) out[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[e]))));
    return;
  }
  float mx = -INFINITY;
  for (int e = 0; e < n; ++e)
    if (!std::isnan(logits[e])) mx = std::max(mx, logits[e]);
  if (!std::isfinite(mx)) mx = 0.0f;  // all NaN or -inf: the scores are NaN or 0, and rank as such
  double sum = 0.0;
  for (int e = 0; e < n; ++e) sum += std::exp(static_cast<double>(logits[e]) - mx);
  for (int e = 0; e < n; ++e) out[e] = static_cast<float>(std::exp(static_cast<double>(logits[e]) - mx) / sum);
}

GroupRouter::GroupRouter(int n_expert, int k, GroupRouterOptions options)
    : Router(n_expert, k), opt_(std::move(options)) {
  const std::string nm = name();
  if (opt_.n_group < 1 || n_expert % opt_.n_group != 0)
    throw_error(ErrorKind::InvalidArgument, "{} router: n_group = {} must be >= 1 and divide n_expert = {}", nm,
                opt_.n_group, n_expert);
  if (opt_.topk_group < 1 || opt_.topk_group > opt_.n_group)
    throw_error(ErrorKind::InvalidArgument, "{} router: topk_group = {} must be in [1, n_group = {}]", nm,
                opt_.topk_group, opt_.n_group);
  if (!opt_.bias.empty() && opt_.bias.size() != static_cast<size_t>(n_expert))
    throw_error(ErrorKind::InvalidArgument, "{} router: bias has {} values, expected n_expert = {}", nm,
                opt_.bias.size(), n_expert);
  if (!std::isfinite(opt_.scale)) throw_error(ErrorKind::InvalidArgument, "{} router: scale is not finite", nm);
  group_size_ = n_expert / opt_.n_group;
  if (k > max_k())
    throw_error(ErrorKind::InvalidArgument, "{} router: k = {} exceeds the {} experts of {} kept groups", nm, k,
                max_k(), opt_.topk_group);
  score_.resize(n_expert);
  biased_.resize(n_expert);
  allowed_.resize(n_expert);
  group_score_.resize(opt_.n_group);
  group_pick_.resize(opt_.topk_group);
}

int GroupRouter::max_k() const { return opt_.topk_group * (n_expert() / opt_.n_group); }

void GroupRouter::select(const float* logits_row, const float* /*hidden*/, int /*t*/, int k, int32_t* experts,
                         float* weights) {
  const int E = n_expert();
  gate_scores(logits_row, E, opt_.score, score_.data());
  for (int e = 0; e < E; ++e) biased_[e] = score_[e] + (opt_.bias.empty() ? 0.0f : opt_.bias[e]);
  if (opt_.n_group > 1) {
    // A group's score: the sum of its (up to) two best biased scores.
    const int top = group_size_ >= 2 ? 2 : 1;
    int32_t best[2];
    for (int g = 0; g < opt_.n_group; ++g) {
      const float* s = biased_.data() + static_cast<size_t>(g) * group_size_;
      top_k_indices(s, group_size_, top, best);
      group_score_[g] = s[best[0]] + (top == 2 ? s[best[1]] : 0.0f);
    }
    top_k_indices(group_score_.data(), opt_.n_group, opt_.topk_group, group_pick_.data());
    std::fill(allowed_.begin(), allowed_.end(), 0);
    for (int32_t g : group_pick_)
      std::fill(allowed_.begin() + static_cast<size_t>(g) * group_size_,
                allowed_.begin() + static_cast<size_t>(g + 1) * group_size_, 1);
    top_k_indices(biased_.data(), E, k, experts, allowed_.data());
  } else {
    top_k_indices(biased_.data(), E, k, experts);
  }
  // Weights from the unbiased scores: the bias steers load, never the output mix.
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += score_[experts[j]];
  for (int j = 0; j < k; ++j) {
    const double w = opt_.normalize ? score_[experts[j]] / (sum + 1e-20) : score_[experts[j]];
    weights[j] = static_cast<float>(w * opt_.scale);
  }
}

}  // namespace specmoe::moe
