// Lossless speculative sampling on the host: see speculative_verifier.h.
#include "verify/speculative_verifier.h"

#include <algorithm>

#include "base/error.h"

namespace specmoe::verify {
namespace {

// Samples from norm(max(0, p - q)) without materialising it: one pass for the mass, one for the
// inverse CDF. q is one-hot on `x` when q_row is empty. Returns -1 when the residual is empty.
int32_t sample_residual(std::span<const float> p, std::span<const float> q_row, int32_t x, core::Rng& rng) {
  auto residual = [&](size_t i) -> double {
    const double qi = q_row.empty() ? (static_cast<int32_t>(i) == x ? 1.0 : 0.0) : q_row[i];
    return std::max(0.0, static_cast<double>(p[i]) - qi);
  };
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) total += residual(i);
  if (!(total > 0.0)) return -1;
  const double target = rng.uniform() * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double r = residual(i);
    if (r <= 0.0) continue;
    cum += r;
    last_positive = static_cast<int32_t>(i);
    if (cum > target) break;
  }
  return last_positive;
}

}  // namespace

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
      draft.q.slice(0, g).to_host(q_host_);
      q = q_host_.data();
    }
  }
  auto p_row = [&](int i) { return std::span<const float>(p.row(i), n); };
  VerifyResult r;
  for (int i = 0; i < g; ++i) {
    const int32_t x = draft.tokens[i];
    const double px = p.row(i)[x];
    const double qx = draft.one_hot ? 1.0 : static_cast<double>(q[static_cast<size_t>(i) * n + x]);
    // q(x) = 0 cannot happen for a token drawn from q; treat it as "accept if the target allows".
    const double ratio = qx > 0.0 ? px / qx : (px > 0.0 ? 1.0 : 0.0);
    // Draw only when the outcome is uncertain, so temperature 0 consumes no randomness here.
    bool accept;
    if (ratio >= 1.0) accept = true;
    else if (ratio <= 0.0) accept = false;
    else accept = rng.uniform() < ratio;
    if (accept) continue;
    r.n_accepted = i;
    const std::span<const float> q_row =
        draft.one_hot ? std::span<const float>() : std::span<const float>(q + static_cast<size_t>(i) * n, n);
    r.next_token = sample_residual(p_row(i), q_row, x, rng);
    // An empty residual means p <= q everywhere, i.e. p == q up to rounding: then p itself is
    // the right fallback.
    if (r.next_token < 0) r.next_token = sample_weights(p_row(i), rng);
    return r;
  }
  r.n_accepted = g;
  r.next_token = sample_weights(p_row(g), rng);
  return r;
}

}  // namespace specmoe::verify
