// Verifier: decides how many drafted tokens the target accepts and which token it emits next
// (the correction at the first rejection, or the bonus token after a full acceptance). A verifier
// runs where the target's distributions live: each rule has an implementation per device,
// registered under one name (verify/registry.h), and the same rule draws its random numbers in
// the same layout on every device.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "draft/drafter.h"

namespace specmoe::verify {

struct VerifyResult {
  int n_accepted = 0;        // draft tokens kept: a chain's first n_accepted, a tree's path
  int32_t next_token = -1;   // emitted after them
  // Trees: the accepted nodes from the root down (n_accepted of them, each a child of the one
  // before). Chains may leave it empty: the path is then 0..n_accepted-1 (accepted_node()).
  std::vector<int32_t> path;

  int32_t accepted_node(int i) const { return path.empty() ? i : path[static_cast<size_t>(i)]; }
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual std::string name() const = 0;

  // draft: g >= 0 tokens x_1..x_g and their q rows (unless one_hot), or a tree of g nodes. p: the
  // target's processed distributions [g + 1, n_vocab]: row 0 after the last context token (the
  // root), row i + 1 after node i (for a chain: row i predicts x_{i+1}; row g gives the bonus
  // token). Throws Error(InvalidArgument) on mismatched sizes, a malformed tree, out-of-range
  // draft tokens or q rows, or p rows on a device this implementation does not run on.
  virtual VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const = 0;
};

// Shared argument checks for verifiers.
void check_verify_inputs(const char* verifier, const draft::Draft& draft, const core::Rows& p);

// The children of every node of a tree in index order, as offsets into one list: the children of
// node v (-1: the root) are list[start[v + 1] .. start[v + 2]). start has size() + 2 entries.
struct TreeChildren {
  std::vector<int32_t> start, list;
  explicit TreeChildren(const draft::TokenTree& tree);
  std::span<const int32_t> of(int node) const {
    const size_t b = static_cast<size_t>(start[static_cast<size_t>(node + 1)]);
    const size_t e = static_cast<size_t>(start[static_cast<size_t>(node + 2)]);
    return std::span<const int32_t>(list).subspan(b, e - b);
  }
};

// Draws an index with probability w[i] / sum(w) by inverse CDF over one uniform from rng (w >= 0,
// not necessarily normalized). Returns -1 when sum(w) <= 0.
int32_t sample_weights(std::span<const float> w, core::Rng& rng);
int32_t sample_weights(std::span<const double> w, core::Rng& rng);  // the same over doubles

}  // namespace specmoe::verify
