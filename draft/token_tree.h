// Token trees: the candidate continuations of one speculative step as data (SpecInfer, Miao et al.
// 2024; Medusa, Cai et al. 2024; EAGLE-2, Li et al. 2024). A TokenTree is the nodes below a root,
// the last accepted token, which is not stored: node i holds a token and the index of its parent
// (an earlier node, or -1 for a child of the root), so the nodes are in topological order. A chain
// is the one-child tree and needs no parents at all. The target verifies the whole tree in one
// forward: the batch is the root followed by the nodes (TokenTree::verify_batch), its attention
// mask and positions (committed length + depth) come from the parents (core::Batch::parents,
// built by Model::forward), and after verification the KV rows of the accepted path are kept
// (core::KVCache::keep).
//
// TreeSpec is the shape a tree drafter grows: a static tree, written as the number of children of
// every node at each depth (Medusa / Sequoia style, `4,2,2,1` = 4 + 8 + 16 + 16 nodes), or a
// dynamic tree in the manner of EAGLE-2 (a node budget, a depth, and k children per expansion),
// with children chosen as the top-k of the draft distribution q (deterministic candidates) or
// drawn from q with or without replacement (stochastic candidates, which the multi-draft
// verifier needs to know: verify/speculative_verifier.h).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specmoe::draft {

// How a tree drafter chooses the children of a node from its draft distribution q.
enum class TreeSampling {
  TopK,                 // the k most probable tokens: deterministic candidates (one-hot drafts)
  Stochastic,           // k draws from q with replacement (SpecInfer's multi-step speculative sampling)
  StochasticNoReplace,  // k draws from q without replacement (recursive rejection sampling, Jeon et al. 2024)
};
const char* tree_sampling_name(TreeSampling s);  // "topk", "stochastic", "stochastic-noreplace"
// Throws Error(InvalidArgument) naming the accepted spellings.
TreeSampling parse_tree_sampling(std::string_view name);

// The shape of the trees a drafter grows. Neither widths nor nodes: a chain (the drafter's
// ordinary draft of up to draft_max tokens).
struct TreeSpec {
  std::vector<int> widths;  // static tree: children of each node at depth d (d = 0: the root's)
  int nodes = 0;            // dynamic tree: at most this many nodes (the n-gram trie's budget too)
  int depth = 0;            // dynamic tree: at most this deep (0: the decoder's draft_max)
  int top_k = 0;            // dynamic tree: children per expansion, and nodes expanded per level (0: 4)
  TreeSampling sampling = TreeSampling::TopK;

  bool empty() const { return widths.empty() && nodes <= 0; }
  bool is_static() const { return !widths.empty(); }
  // Depth (fallback_depth when a dynamic tree gives none) and node count of the largest tree of
  // this shape.
  int max_depth(int fallback_depth) const;
  int max_nodes() const;
  int expansion_k() const { return top_k > 0 ? top_k : 4; }
  // Throws Error(InvalidArgument) naming the field ("tree widths: ...").
  void validate() const;
  std::string describe() const;  // "widths 4,2,2,1, topk" / "nodes 16, depth 4, top-k 4, stochastic"
  bool operator==(const TreeSpec&) const = default;
};

// "4,2,2,1" -> {4, 2, 2, 1}; Error(InvalidArgument) naming the text unless every width is 1..64
// and there are 1..16 of them.
std::vector<int> parse_tree_widths(std::string_view text);
std::string format_tree_widths(std::span<const int> widths);  // {4, 2, 2, 1} -> "4,2,2,1"

struct TokenTree {
  std::vector<int32_t> tokens;   // node i's token
  std::vector<int32_t> parents;  // node i's parent (< i), -1 for a child of the root; empty: a chain

  int size() const { return static_cast<int>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  bool is_chain() const { return parents.empty(); }
  int parent(int i) const { return parents.empty() ? i - 1 : parents[static_cast<size_t>(i)]; }
  int depth(int i) const;  // 1 for a child of the root
  int max_depth() const;   // 0 for an empty tree
  // The children of `node` (-1: the root's), in index order.
  std::vector<int32_t> children(int node) const;
  // The node indices from the root's child down to node i (its depth many).
  void path_to(int i, std::vector<int32_t>& out) const;

  // Throws Error(InvalidArgument) for a parent that is not an earlier node, a parents array of
  // the wrong size, or a token outside [0, n_vocab).
  void validate(int64_t n_vocab) const;

  // The batch of the target's verification forward: the root, then the nodes; parents shifted
  // by one (root: -1), or left empty for a chain.
  void verify_batch(int32_t root, std::vector<int32_t>& batch_tokens, std::vector<int32_t>& batch_parents) const;

  // Keeps the nodes of depth <= max_depth, then the first max_nodes of those (a node is never
  // kept without its parent); returns the kept nodes' old indices in order (parents re-indexed).
  std::vector<int32_t> truncate(int max_nodes, int max_depth);
};

}  // namespace specmoe::draft
