// Lossless speculative sampling on the host, over chains and trees: see speculative_verifier.h.
#include "verify/speculative_verifier.h"

#include <algorithm>

#include "base/error.h"

namespace specmoe::verify {

VerifyResult SpeculativeVerifier::verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const {
  check_verify_inputs("speculative", draft, p);
  if (!p.where().is_cpu())
    throw_error(ErrorKind::InvalidArgument, "speculative verifier (cpu): the target's distributions live on {}; "
                "make the verifier for that device (verify::make_verifier)", p.where().name());
  const int g = draft.size();
  const size_t n = static_cast<size_t>(p.cols);
  const float* q = nullptr;
  if (!draft.one_hot && g > 0) {
    q = draft.q.data;
    if (!draft.q.where().is_cpu()) {  // a draft model on another device
      int rows = 0;
      for (int i = 0; i < g; ++i) rows = std::max(rows, draft.q_row_of(i) + 1);
      draft.q.slice(0, rows).to_host(q_host_);
      q = q_host_.data();
    }
  }
  const TreeChildren kids(draft);
  VerifyResult r;
  std::vector<int32_t> tried;  // without replacement: the current node's rejected children's tokens
  int node = -1;               // the root: the last context token
  for (;;) {
    const float* p_row = p.row(node + 1);
    // The current target distribution: p_row, or residual_ / z once a child was rejected.
    bool have_residual = false;
    double z = 1.0;
    double q_left = -1.0;  // without replacement: q's mass not yet drawn (summed at the first child)
    tried.clear();
    int next = -1;
    for (int32_t c : kids.of(node)) {
      const int32_t x = draft.tokens[static_cast<size_t>(c)];
      const float* q_row = q ? q + static_cast<size_t>(draft.q_row_of(c)) * n : nullptr;
      double q_scale = 1.0;
      if (q_row && draft.without_replacement) {
        if (q_left < 0.0) {
          q_left = 0.0;
          for (size_t i = 0; i < n; ++i) q_left += q_row[i];
        }
        q_scale = q_left > 0.0 ? 1.0 / q_left : 0.0;
      }
      // q_j: what x was drawn from given the siblings before it (one-hot for deterministic
      // candidates; q; q without the earlier siblings, renormalised).
      auto q_j = [&](size_t i) -> double {
        if (!q_row) return static_cast<int32_t>(i) == x ? 1.0 : 0.0;
        if (!tried.empty() && std::find(tried.begin(), tried.end(), static_cast<int32_t>(i)) != tried.end()) return 0.0;
        return static_cast<double>(q_row[i]) * q_scale;
      };
      auto p_cur = [&](size_t i) -> double {
        return have_residual ? residual_[i] / z : static_cast<double>(p_row[i]);
      };
      const double px = p_cur(static_cast<size_t>(x)), qx = q_j(static_cast<size_t>(x));
      // q(x) = 0 cannot happen for a token drawn from q; treat it as "accept if the target allows".
      const double ratio = qx > 0.0 ? px / qx : (px > 0.0 ? 1.0 : 0.0);
      // Draw only when the outcome is uncertain, so temperature 0 consumes no randomness here.
      bool accept;
      if (ratio >= 1.0) accept = true;
      else if (ratio <= 0.0) accept = false;
      else accept = rng.uniform() < ratio;
      if (accept) {
        next = c;
        break;
      }
      if (fault_ != RuleFault::KeepResidual) {  // p <- norm(max(0, p - q_j)), kept unnormalised
        residual_.resize(n);
        double total = 0.0;
        for (size_t i = 0; i < n; ++i) {
          const double v = std::max(0.0, p_cur(i) - q_j(i));
          residual_[i] = v;
          total += v;
        }
        // An empty residual means p <= q everywhere, i.e. p == q up to rounding: then p itself
        // is the right fallback.
        have_residual = total > 0.0;
        z = have_residual ? total : 1.0;
      }
      if (q_row && draft.without_replacement) {
        q_left -= q_row[static_cast<size_t>(x)];
        tried.push_back(x);
      }
    }
    if (next >= 0) {
      r.path.push_back(next);
      node = next;
      continue;
    }
    int32_t token = have_residual ? sample_weights(std::span<const double>(residual_.data(), n), rng) : -1;
    if (token < 0) token = sample_weights(std::span<const float>(p_row, n), rng);
    r.n_accepted = static_cast<int>(r.path.size());
    r.next_token = token;
    return r;
  }
}

}  // namespace specmoe::verify
