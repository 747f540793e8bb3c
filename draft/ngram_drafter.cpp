// Prompt lookup decoding: see ngram_drafter.h.
#include "draft/ngram_drafter.h"

#include <algorithm>
#include <unordered_map>

#include "base/error.h"

namespace specmoe::draft {

NgramDrafter::NgramDrafter(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_max < ngram_min)
    throw_error(ErrorKind::InvalidArgument,
                "ngram drafter: need 1 <= ngram_min <= ngram_max, got ngram_min {} and ngram_max {}",
                ngram_min, ngram_max);
}

void NgramDrafter::begin(std::span<const int32_t>) {}  // stateless: the context is the state

void NgramDrafter::accepted(int, int32_t) {}

void NgramDrafter::lookup(std::span<const int32_t> context, int ngram_min, int ngram_max, int max_tokens,
                          std::vector<int32_t>& out) {
  out.clear();
  const int c = static_cast<int>(context.size());
  if (max_tokens <= 0) return;
  for (int n = std::min(ngram_max, c - 1); n >= ngram_min; --n) {
    const auto pattern = context.subspan(c - n);  // the last n tokens
    // A match ends at j (tokens [j-n, j)), j < c so at least one token follows it; scan from the
    // most recent match backwards.
    for (int j = c - 1; j >= n; --j) {
      if (!std::equal(pattern.begin(), pattern.end(), context.begin() + (j - n))) continue;
      const int end = std::min(c, j + max_tokens);
      out.assign(context.begin() + j, context.begin() + end);
      return;
    }
  }
}

void NgramDrafter::lookup_tree(std::span<const int32_t> context, int ngram_min, int ngram_max, int max_depth,
                               int max_nodes, std::span<const int> widths, TokenTree& out) {
  out.tokens.clear();
  out.parents.clear();
  const int c = static_cast<int>(context.size());
  if (max_depth <= 0 || max_nodes <= 0) return;
  // The trie: node t's token, parent, match count, and the rank of the first match reaching it.
  struct Node {
    int32_t token, parent;
    int count, first;
  };
  std::vector<Node> trie;
  std::unordered_map<uint64_t, int32_t> child;  // (parent + 1, token) -> trie node
  for (int n = std::min(ngram_max, c - 1); n >= ngram_min && trie.empty(); --n) {
    const auto pattern = context.subspan(static_cast<size_t>(c - n));
    int rank = 0;
    for (int j = c - 1; j >= n; --j) {  // most recent match first
      if (!std::equal(pattern.begin(), pattern.end(), context.begin() + (j - n))) continue;
      int32_t parent = -1;
      for (int t = j; t < std::min(c, j + max_depth); ++t) {
        const int32_t token = context[static_cast<size_t>(t)];
        const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent + 1)) << 32) | static_cast<uint32_t>(token);
        auto [it, inserted] = child.try_emplace(key, static_cast<int32_t>(trie.size()));
        if (inserted) trie.push_back({token, parent, 0, rank});
        const int32_t found = it->second;
        ++trie[static_cast<size_t>(found)].count;
        parent = found;
      }
      ++rank;
    }
  }
  // Best first: among the children of the kept nodes, the most frequent (earliest match on ties).
  std::vector<int32_t> kept_index(trie.size(), -1), depth(trie.size(), 0), n_children(trie.size() + 1, 0);
  for (size_t i = 0; i < trie.size(); ++i)
    depth[i] = trie[i].parent < 0 ? 0 : depth[static_cast<size_t>(trie[i].parent)] + 1;
  while (out.size() < max_nodes) {
    int best = -1;
    for (size_t i = 0; i < trie.size(); ++i) {
      const Node& t = trie[i];
      if (kept_index[i] >= 0 || (t.parent >= 0 && kept_index[static_cast<size_t>(t.parent)] < 0)) continue;
      const int d = depth[i];
      if (d < static_cast<int>(widths.size()) && n_children[static_cast<size_t>(t.parent + 1)] >= widths[static_cast<size_t>(d)])
        continue;
      if (best < 0 || t.count > trie[static_cast<size_t>(best)].count ||
          (t.count == trie[static_cast<size_t>(best)].count && t.first < trie[static_cast<size_t>(best)].first))
        best = static_cast<int>(i);
    }
    if (best < 0) break;
    const Node& t = trie[static_cast<size_t>(best)];
    kept_index[static_cast<size_t>(best)] = out.size();
    ++n_children[static_cast<size_t>(t.parent + 1)];
    out.tokens.push_back(t.token);
    out.parents.push_back(t.parent < 0 ? -1 : kept_index[static_cast<size_t>(t.parent)]);
  }
}

void NgramDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = true;
  out.without_replacement = false;
  if (params.wants_tree()) {
    const TreeSpec& spec = *params.tree;
    const int depth = std::min(spec.max_depth(params.draft_max), params.draft_max);
    const int nodes = params.node_max > 0 ? std::min(spec.max_nodes(), params.node_max) : spec.max_nodes();
    lookup_tree(context, ngram_min_, ngram_max_, depth, nodes, spec.widths, out);
    return;
  }
  lookup(context, ngram_min_, ngram_max_, params.draft_max, out.tokens);
}

}  // namespace specmoe::draft
