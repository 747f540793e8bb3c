// Verifier helpers: see verifier.h.
#include "verify/verifier.h"

#include "base/error.h"

namespace specmoe::verify {

void check_verify_inputs(const char* verifier, const draft::Draft& draft, const core::Rows& p) {
  const int g = draft.size();
  if (p.rows != g + 1)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} target distributions for {} draft tokens (need {})",
                verifier, p.rows, g, g + 1);
  const int64_t n_vocab = p.cols;
  if (n_vocab <= 0 || p.backend == nullptr)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: empty target distribution", verifier);
  if (!draft.one_hot && g > 0) {
    if (draft.q.rows < g || draft.q.backend == nullptr)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: {} draft distributions for {} draft tokens", verifier,
                  draft.q.rows, g);
    if (draft.q.cols != n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: draft distributions have {} entries, expected {}",
                  verifier, draft.q.cols, n_vocab);
  }
  for (int i = 0; i < g; ++i) {
    const int32_t x = draft.tokens[i];
    if (x < 0 || x >= n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: draft token {} = {} outside the vocabulary of {}",
                  verifier, i, x, n_vocab);
  }
}

int32_t sample_weights(std::span<const float> w, core::Rng& rng) {
  double total = 0.0;
  for (float v : w) total += v;
  if (!(total > 0.0)) return -1;
  const double target = rng.uniform() * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    cum += w[i];
    last_positive = static_cast<int32_t>(i);
    if (cum > target) return last_positive;
  }
  return last_positive;  // rounding left target just above the accumulated sum
}

}  // namespace specmoe::verify
