// Token trees and tree shapes: see token_tree.h.
#include "draft/token_tree.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "base/error.h"

namespace specmoe::draft {

const char* tree_sampling_name(TreeSampling s) {
  switch (s) {
    case TreeSampling::TopK: return "topk";
    case TreeSampling::Stochastic: return "stochastic";
    case TreeSampling::StochasticNoReplace: return "stochastic-noreplace";
  }
  return "?";
}

TreeSampling parse_tree_sampling(std::string_view name) {
  for (TreeSampling s : {TreeSampling::TopK, TreeSampling::Stochastic, TreeSampling::StochasticNoReplace})
    if (name == tree_sampling_name(s)) return s;
  throw_error(ErrorKind::InvalidArgument, "tree sampling '{}': expected topk, stochastic or stochastic-noreplace",
              name);
}

// Limits: a verification batch of more than a few hundred tokens is no longer "one cheap forward".
constexpr int kMaxWidth = 64, kMaxDepth = 16, kMaxNodes = 512;

int TreeSpec::max_depth(int fallback_depth) const {
  if (is_static()) return static_cast<int>(widths.size());
  return depth > 0 ? depth : fallback_depth;
}

int TreeSpec::max_nodes() const {
  if (!is_static()) return nodes;
  int64_t total = 0, level = 1;
  for (int w : widths) {
    level *= w;
    total += level;
    if (total > kMaxNodes) return kMaxNodes + 1;  // validate() names it
  }
  return static_cast<int>(total);
}

void TreeSpec::validate() const {
  if (is_static() && nodes > 0)
    throw_error(ErrorKind::InvalidArgument,
                "tree: give either widths (a static tree) or nodes (a dynamic tree), not both");
  if (is_static()) {
    if (widths.size() > static_cast<size_t>(kMaxDepth))
      throw_error(ErrorKind::InvalidArgument, "tree widths: {} levels, at most {}", widths.size(), kMaxDepth);
    for (int w : widths)
      if (w < 1 || w > kMaxWidth)
        throw_error(ErrorKind::InvalidArgument, "tree widths: width {} outside 1..{}", w, kMaxWidth);
    if (max_nodes() > kMaxNodes)
      throw_error(ErrorKind::InvalidArgument, "tree widths {}: more than {} nodes", format_tree_widths(widths),
                  kMaxNodes);
  }
  if (nodes < 0 || nodes > kMaxNodes)
    throw_error(ErrorKind::InvalidArgument, "tree nodes: {} outside 0..{}", nodes, kMaxNodes);
  if (depth < 0 || depth > kMaxDepth)
    throw_error(ErrorKind::InvalidArgument, "tree depth: {} outside 0..{} (0: the draft length)", depth, kMaxDepth);
  if (top_k < 0 || top_k > kMaxWidth)
    throw_error(ErrorKind::InvalidArgument, "tree top-k: {} outside 0..{} (0: 4)", top_k, kMaxWidth);
  if (is_static() && (depth > 0 || top_k > 0))
    throw_error(ErrorKind::InvalidArgument, "tree depth and top-k shape a dynamic tree (nodes), not static widths");
}

std::string TreeSpec::describe() const {
  if (empty()) return "chain";
  if (is_static()) return fmt::format("widths {}, {}", format_tree_widths(widths), tree_sampling_name(sampling));
  return fmt::format("nodes {}, depth {}, top-k {}, {}", nodes, depth, expansion_k(), tree_sampling_name(sampling));
}

std::vector<int> parse_tree_widths(std::string_view text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int w = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), w);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || w < 1 || w > kMaxWidth)
      throw_error(ErrorKind::InvalidArgument,
                  "tree widths '{}': expected comma-separated widths 1..{} (children per node at each depth, e.g. "
                  "4,2,2,1)", text, kMaxWidth);
    out.push_back(w);
    start = comma + 1;
  }
  if (out.size() > static_cast<size_t>(kMaxDepth))
    throw_error(ErrorKind::InvalidArgument, "tree widths '{}': {} levels, at most {}", text, out.size(), kMaxDepth);
  return out;
}

std::string format_tree_widths(std::span<const int> widths) {
  std::string s;
  for (int w : widths) {
    if (!s.empty()) s += ',';
    s += std::to_string(w);
  }
  return s;
}

int TokenTree::depth(int i) const {
  if (parents.empty()) return i + 1;
  int d = 0;
  for (int v = i; v >= 0; v = parents[static_cast<size_t>(v)]) ++d;
  return d;
}

int TokenTree::max_depth() const {
  if (parents.empty()) return size();
  std::vector<int> d(tokens.size());
  int best = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i] = parents[i] < 0 ? 1 : d[static_cast<size_t>(parents[i])] + 1;
    best = std::max(best, d[i]);
  }
  return best;
}

std::vector<int32_t> TokenTree::children(int node) const {
  std::vector<int32_t> out;
  for (int i = std::max(node + 1, 0); i < size(); ++i)
    if (parent(i) == node) out.push_back(i);
  return out;
}

void TokenTree::path_to(int i, std::vector<int32_t>& out) const {
  out.clear();
  for (int v = i; v >= 0; v = parent(v)) out.push_back(v);
  std::reverse(out.begin(), out.end());
}

void TokenTree::validate(int64_t n_vocab) const {
  if (!parents.empty() && parents.size() != tokens.size())
    throw_error(ErrorKind::InvalidArgument, "token tree: {} parents for {} tokens", parents.size(), tokens.size());
  for (int i = 0; i < size(); ++i) {
    const int p = parent(i);
    if (p < -1 || p >= i)
      throw_error(ErrorKind::InvalidArgument, "token tree: node {} has parent {}, not an earlier node or -1 (the root)",
                  i, p);
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= n_vocab)
      throw_error(ErrorKind::InvalidArgument, "token tree: node {} token {} outside the vocabulary of {}", i,
                  tokens[static_cast<size_t>(i)], n_vocab);
  }
}

void TokenTree::verify_batch(int32_t root, std::vector<int32_t>& batch_tokens,
                             std::vector<int32_t>& batch_parents) const {
  batch_tokens.assign(1, root);
  batch_tokens.insert(batch_tokens.end(), tokens.begin(), tokens.end());
  batch_parents.clear();
  if (parents.empty()) return;
  batch_parents.push_back(-1);
  for (int32_t p : parents) batch_parents.push_back(p + 1);  // node i is batch row i + 1, the root row 0
}

std::vector<int32_t> TokenTree::truncate(int max_nodes, int max_depth) {
  std::vector<int32_t> kept, new_index(tokens.size(), -1);
  std::vector<int> d(tokens.size());
  for (int i = 0; i < size() && static_cast<int>(kept.size()) < max_nodes; ++i) {
    const int p = parent(i);
    d[static_cast<size_t>(i)] = p < 0 ? 1 : d[static_cast<size_t>(p)] + 1;
    if (d[static_cast<size_t>(i)] > max_depth || (p >= 0 && new_index[static_cast<size_t>(p)] < 0)) continue;
    new_index[static_cast<size_t>(i)] = static_cast<int32_t>(kept.size());
    kept.push_back(i);
  }
  if (static_cast<int>(kept.size()) == size()) return kept;
  std::vector<int32_t> t, par;
  for (int32_t i : kept) {
    t.push_back(tokens[static_cast<size_t>(i)]);
    if (!parents.empty()) {
      const int p = parents[static_cast<size_t>(i)];
      par.push_back(p < 0 ? -1 : new_index[static_cast<size_t>(p)]);
    }
  }
  tokens = std::move(t);
  parents = std::move(par);
  return kept;
}

}  // namespace specmoe::draft
