#include "moe/router.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace specmoe::moe {

void Routing::reset(int T, int k_, int E) {
  n_tokens = T;
  k = k_;
  n_expert = E;
  expert.assign(static_cast<size_t>(T) * k_, kDropped);
  weight.assign(static_cast<size_t>(T) * k_, 0.0f);
  n_dropped_assignments = 0;
  n_dropped_tokens = 0;
}

std::vector<int64_t> Routing::tokens_per_expert() const {
  std::vector<int64_t> counts(n_expert, 0);
  for (int32_t e : expert)
    if (e >= 0 && e < n_expert) ++counts[e];
  return counts;
}

int64_t expert_capacity(double capacity_factor, int T, int k, int E) {
  if (E <= 0) throw_error(ErrorKind::InvalidArgument, "expert_capacity: n_expert must be > 0");
  if (std::isnan(capacity_factor))
    throw_error(ErrorKind::InvalidArgument, "expert_capacity: the capacity factor is NaN");
  // The product is computed in double; ceil of an exact integer stays exact for the sizes used
  // (T * k < 2^53). A batch holds T * k assignments, so a larger capacity drops nothing: the
  // clamp to [0, T * k] changes no routing and keeps the conversion defined for any factor
  // (1e300 or infinity would overflow int64_t).
  const double all = static_cast<double>(T) * k;
  const double cap = std::ceil(capacity_factor * T * k / E);
  if (!(cap > 0.0)) return 0;
  return static_cast<int64_t>(std::min(cap, all));
}

void apply_capacity(Routing& r, double capacity_factor) {
  if (capacity_factor <= 0.0) return;
  const int64_t cap = expert_capacity(capacity_factor, r.n_tokens, r.k, r.n_expert);
  std::vector<int64_t> used(r.n_expert, 0);
  for (int t = 0; t < r.n_tokens; ++t) {
    int kept = 0;
    for (int j = 0; j < r.k; ++j) {
      const size_t i = static_cast<size_t>(t) * r.k + j;
      const int32_t e = r.expert[i];
      if (e == Routing::kDropped) continue;
      if (used[e] < cap) {
        ++used[e];
        ++kept;
      } else {
        r.expert[i] = Routing::kDropped;
        r.weight[i] = 0.0f;
        ++r.n_dropped_assignments;
      }
    }
    if (kept == 0 && r.k > 0) ++r.n_dropped_tokens;
  }
}

void count_drops(Routing& r) {
  if (r.n_tokens < 0 || r.k < 0 || r.expert.size() != static_cast<size_t>(r.n_tokens) * r.k)
    throw_error(ErrorKind::InvalidArgument, "count_drops: {} expert ids for {} tokens x {} slots", r.expert.size(),
                r.n_tokens, r.k);
  r.n_dropped_assignments = 0;
  r.n_dropped_tokens = 0;
  for (int t = 0; t < r.n_tokens; ++t) {
    int dropped = 0;
    for (int j = 0; j < r.k; ++j) dropped += r.expert[static_cast<size_t>(t) * r.k + j] == Routing::kDropped;
    r.n_dropped_assignments += dropped;
    if (r.k > 0 && dropped == r.k) ++r.n_dropped_tokens;
  }
}

void top_k_indices(const float* scores, int n, int k, int32_t* out, const uint8_t* allowed) {
  // k scans of n (k <= 8 and n <= 256 in released models): simple, stable, and safe with NaN,
  // unlike a sort whose comparator NaN would break. The scan keeps the first index among equal
  // scores because it only replaces the best on a strictly greater score.
  std::vector<uint8_t> taken(n, 0);
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (taken[i] || (allowed && !allowed[i])) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const float s = scores[i], b = scores[best];
      if (s > b || (std::isnan(b) && !std::isnan(s))) best = i;
    }
    if (best < 0)
      throw_error(ErrorKind::InvalidArgument, "top_k_indices: k = {} exceeds the {} eligible entries",
                  k, j);
    taken[best] = 1;
    out[j] = best;
  }
}

Router::Router(int n_expert, int k) : n_expert_(n_expert), k_(k) {
  if (n_expert < 1)
    throw_error(ErrorKind::InvalidArgument, "router: n_expert = {} must be >= 1", n_expert);
  if (k < 1 || k > n_expert)
    throw_error(ErrorKind::InvalidArgument, "router: k = {} must be in [1, n_expert = {}]", k,
                n_expert);
}

void Router::set_k(int k) {
  if (k < 1 || k > max_k())
    throw_error(ErrorKind::InvalidArgument, "{} router: k = {} must be in [1, {}]", name(), k,
                max_k());
  k_ = k;
}

void Router::route(const float* logits, const float* hidden, int T, Routing& out) {
  if (T < 0) throw_error(ErrorKind::InvalidArgument, "{} router: T = {} < 0", name(), T);
  if (T > 0 && !logits)
    throw_error(ErrorKind::InvalidArgument, "{} router: logits are null", name());
  if (T > 0 && hidden_size() > 0 && !hidden)
    throw_error(ErrorKind::InvalidArgument, "{} router: needs the hidden state, got null", name());
  out.reset(T, k_, n_expert_);
  begin_batch(T);
  for (int t = 0; t < T; ++t) {
    const size_t o = static_cast<size_t>(t) * k_;
    select(logits + static_cast<size_t>(t) * n_expert_, hidden, t, k_, out.expert.data() + o,
           out.weight.data() + o);
  }
  apply_capacity(out, capacity_factor_);
}

const char* router_kind_name(RouterKind kind) {
  switch (kind) {
    case RouterKind::SoftmaxTopK: return "softmax_topk";
    case RouterKind::SoftmaxTopKRaw: return "softmax_topk_raw";
    case RouterKind::NoisyTopK: return "noisy_topk";
    case RouterKind::SigmoidGroup: return "sigmoid_group";
    case RouterKind::SoftmaxGroup: return "softmax_group";
  }
  return "unknown";
}

RouterKind router_kind_from_name(std::string_view name) {
  for (RouterKind k : {RouterKind::SoftmaxTopK, RouterKind::SoftmaxTopKRaw, RouterKind::NoisyTopK,
                       RouterKind::SigmoidGroup, RouterKind::SoftmaxGroup})
    if (name == router_kind_name(k)) return k;
  throw_error(ErrorKind::Config,
              "unknown router '{}' (expected softmax_topk, softmax_topk_raw, noisy_topk, "
              "sigmoid_group or softmax_group)",
              name);
}

}  // namespace specmoe::moe
