// Verifier helpers: see verifier.h.
#include "verify/verifier.h"

#include <algorithm>

#include "base/error.h"

namespace specmoe::verify {

void check_verify_inputs(const char* verifier, const draft::Draft& draft, const core::Rows& p) {
  const int g = draft.size();
  if (!draft.parents.empty() && draft.parents.size() != draft.tokens.size())
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} parents for {} draft tokens", verifier,
                draft.parents.size(), g);
  if (!draft.q_row.empty() && draft.q_row.size() != draft.tokens.size())
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} q row indices for {} draft tokens", verifier,
                draft.q_row.size(), g);
  for (int i = 0; i < g; ++i) {
    const int parent = draft.parent(i);
    if (parent < -1 || parent >= i)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: draft node {} has parent {}, not an earlier node or -1",
                  verifier, i, parent);
  }
  if (p.rows != g + 1)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: {} target distributions for {} draft tokens (need {})",
                verifier, p.rows, g, g + 1);
  const int64_t n_vocab = p.cols;
  if (n_vocab <= 0 || p.backend == nullptr)
    throw_error(ErrorKind::InvalidArgument, "{} verifier: empty target distribution", verifier);
  if (!draft.one_hot && g > 0) {
    int rows_needed = g;
    if (!draft.q_row.empty()) {
      rows_needed = 0;
      for (int32_t r : draft.q_row) {
        if (r < 0)
          throw_error(ErrorKind::InvalidArgument, "{} verifier: negative draft distribution row {}", verifier, r);
        rows_needed = std::max(rows_needed, r + 1);
      }
    }
    if (draft.q.rows < rows_needed || draft.q.backend == nullptr)
      throw_error(ErrorKind::InvalidArgument, "{} verifier: {} draft distributions for {} draft tokens (need {})",
                  verifier, draft.q.rows, g, rows_needed);
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

TreeChildren::TreeChildren(const draft::TokenTree& tree) {
  const int n = tree.size();
  start.assign(static_cast<size_t>(n) + 2, 0);
  for (int i = 0; i < n; ++i) ++start[static_cast<size_t>(tree.parent(i) + 2)];
  for (size_t v = 1; v < start.size(); ++v) start[v] += start[v - 1];
  list.resize(static_cast<size_t>(n));
  std::vector<int32_t> fill(start.begin(), start.end() - 1);
  for (int i = 0; i < n; ++i) list[static_cast<size_t>(fill[static_cast<size_t>(tree.parent(i) + 1)]++)] = i;
}

namespace {

template <class T>
int32_t sample_weights_of(std::span<const T> w, core::Rng& rng) {
  double total = 0.0;
  for (T v : w) total += v;
  if (!(total > 0.0)) return -1;
  const double target = rng.uniform() * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    cum += w[i];
    last_positive = static_cast<int32_t>(i);
    if (cum > target) return last_positive;
  }
  return last_positive;  // rounding left target just above the accumulated sum
}

}  // namespace

int32_t sample_weights(std::span<const float> w, core::Rng& rng) { return sample_weights_of(w, rng); }
int32_t sample_weights(std::span<const double> w, core::Rng& rng) { return sample_weights_of(w, rng); }

}  // namespace specmoe::verify
