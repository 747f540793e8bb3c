// Verifier helpers: see verifier.h.
#include "verify/verifier.h"

#include "base/error.h"

namespace specmoe::verify {

void check_verify_inputs(const char* verifier, const draft::Draft& draft, std::span<const std::vector<float>> p) {
  const int g = draft.size();
  if (static_cast<int>(p.size()) != g + 1)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} target distributions for {} draft tokens (need {})",
                verifier, p.size(), g, g + 1);
  const size_t n_vocab = p[0].size();
  if (n_vocab == 0) throw_error(ErrorKind::InvalidArgument, "{} verifier: empty target distribution", verifier);
  for (size_t i = 1; i < p.size(); ++i)
    if (p[i].size() != n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: target distribution {} has {} entries, expected {}",
                  verifier, i, p[i].size(), n_vocab);
  if (!draft.one_hot && draft.q_device != nullptr && g > 0)
    throw_error(ErrorKind::InvalidArgument,
                "{} verifier: the draft's q rows live on the device; verify them there (core::DeviceSampler)", verifier);
  if (!draft.one_hot && static_cast<int>(draft.q.size()) < g)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} draft distributions for {} draft tokens", verifier,
                draft.q.size(), g);
  for (int i = 0; i < g; ++i) {
    const int32_t x = draft.tokens[i];
    if (x < 0 || static_cast<size_t>(x) >= n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: draft token {} = {} outside the vocabulary of {}",
                  verifier, i, x, n_vocab);
    if (!draft.one_hot && draft.q[i].size() != n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: draft distribution {} has {} entries, expected {}",
                  verifier, i, draft.q[i].size(), n_vocab);
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
