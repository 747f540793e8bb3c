// Fuzz entry point of the token trees (target fuzz_tree): trees as a drafter or a hostile caller
// could hand them to the verifier, tree shapes as a config or the CLI spells them, and the n-gram
// drafter's trie grown from hostile contexts. Shared by tests/fuzz/tree_fuzz.cpp and the
// regression replay (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: byte 0 picks the mode (mod 3).
//  0 TokenTree: byte 1 n_vocab - 1, byte 2 bit 0 a chain (no parents), byte 3 truncate's
//    max_nodes, byte 4 its max_depth, byte 5 the root token; then (token, parent) byte pairs,
//    the token read as byte - 1 (so -1 and n_vocab come up), the parent as a signed byte.
//  1 TreeSpec: byte 1 the sampling name's length; then that name, then the widths text up to a
//    0x1E byte, then nodes, depth and top_k as signed bytes.
//  2 the n-gram trie: bytes 1-5 ngram_min, ngram_max, max_depth, max_nodes and the number of
//    widths (0..4), in the ranges the drafter guarantees; then the widths, then the context, one
//    token per byte mod 8 (a small alphabet, so patterns repeat).
//
// Oracles:
//  - validate accepts exactly the trees whose parents are earlier nodes (or -1) and whose tokens
//    are in the vocabulary; for those, depth(), max_depth(), children(), path_to() and
//    verify_batch() agree with the parents; truncate keeps at most max_nodes nodes, none deeper
//    than max_depth, never a node without its parent, tokens and parents carried over;
//  - a TreeSpec validates or throws Error(InvalidArgument); a valid static spec's max_nodes is the
//    sum of the widths' running products; widths text round-trips through format_tree_widths;
//  - lookup_tree gives a valid tree within max_nodes, max_depth and the widths, and every path
//    of it is a sequence of tokens that occurs in the context.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>

#include "draft/ngram_drafter.h"
#include "draft/token_tree.h"
#include "fuzz_entry.h"

namespace specmoe::fuzz {

inline void check_tree_shape(const draft::TokenTree& t, const std::string& what) {
  const int n = t.size();
  int max_d = 0;
  std::vector<int32_t> path;
  for (int i = 0; i < n; ++i) {
    const int p = t.parent(i);
    SPECMOE_FUZZ_CHECK(p >= -1 && p < i, fmt::format("{}: node {} has parent {}", what, i, p));
    const int d = t.depth(i);
    SPECMOE_FUZZ_CHECK(d == (p < 0 ? 1 : t.depth(p) + 1), fmt::format("{}: node {} has depth {}", what, i, d));
    max_d = std::max(max_d, d);
    t.path_to(i, path);
    SPECMOE_FUZZ_CHECK(static_cast<int>(path.size()) == d && !path.empty() && path.back() == i,
                       fmt::format("{}: the path to node {} is wrong", what, i));
    for (size_t k = 0; k < path.size(); ++k)
      SPECMOE_FUZZ_CHECK(t.parent(path[k]) == (k == 0 ? -1 : path[k - 1]),
                         fmt::format("{}: the path to node {} skips a parent", what, i));
  }
  SPECMOE_FUZZ_CHECK(t.max_depth() == max_d, what + ": max_depth disagrees with the depths");
  for (int node = -1; node < n; ++node) {
    std::vector<int32_t> want;
    for (int i = 0; i < n; ++i)
      if (t.parent(i) == node) want.push_back(i);
    SPECMOE_FUZZ_CHECK(t.children(node) == want, fmt::format("{}: children of {} are wrong", what, node));
  }
}

inline Outcome run_token_tree(std::span<const uint8_t> bytes) {
  if (bytes.size() < 6) return Outcome::Rejected;
  const int64_t n_vocab = 1 + bytes[1];
  draft::TokenTree t;
  const bool chain = bytes[2] & 1;
  for (size_t at = 6; at + 1 < bytes.size(); at += 2) {
    t.tokens.push_back(static_cast<int32_t>(bytes[at]) - 1);
    if (!chain) t.parents.push_back(static_cast<int8_t>(bytes[at + 1]));
  }
  bool valid = true;
  for (int i = 0; i < t.size(); ++i) {
    valid &= t.tokens[static_cast<size_t>(i)] >= 0 && t.tokens[static_cast<size_t>(i)] < n_vocab;
    if (!chain) valid &= t.parents[static_cast<size_t>(i)] >= -1 && t.parents[static_cast<size_t>(i)] < i;
  }
  try {
    t.validate(n_vocab);
    SPECMOE_FUZZ_CHECK(valid, "validate accepted a tree with a bad parent or token");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(!valid, std::string("validate refused a valid tree: ") + e.what());
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "validate threw the wrong kind");
    return Outcome::Rejected;
  }
  check_tree_shape(t, "tree");

  const int32_t root = bytes[5];
  std::vector<int32_t> bt, bp;
  t.verify_batch(root, bt, bp);
  SPECMOE_FUZZ_CHECK(static_cast<int>(bt.size()) == t.size() + 1 && bt[0] == root, "verify_batch: wrong tokens");
  for (int i = 0; i < t.size(); ++i) SPECMOE_FUZZ_CHECK(bt[static_cast<size_t>(i) + 1] == t.tokens[static_cast<size_t>(i)], "verify_batch: wrong tokens");
  if (t.is_chain()) {  // no parents: asked for a chain, or a tree of no nodes
    SPECMOE_FUZZ_CHECK(bp.empty(), "verify_batch gave a chain parents");
  } else {
    SPECMOE_FUZZ_CHECK(static_cast<int>(bp.size()) == t.size() + 1 && bp[0] == -1, "verify_batch: wrong parents");
    for (int i = 0; i < t.size(); ++i)
      SPECMOE_FUZZ_CHECK(bp[static_cast<size_t>(i) + 1] == t.parent(i) + 1, "verify_batch: parents not shifted by one");
  }

  const int max_nodes = bytes[3] % 72, max_depth = bytes[4] % 20;
  const draft::TokenTree before = t;
  const std::vector<int32_t> kept = t.truncate(max_nodes, max_depth);
  const std::string what = fmt::format("truncate({}, {})", max_nodes, max_depth);
  SPECMOE_FUZZ_CHECK(static_cast<int>(kept.size()) == t.size() && t.size() <= max_nodes, what + ": too many nodes");
  SPECMOE_FUZZ_CHECK(std::is_sorted(kept.begin(), kept.end()), what + ": kept nodes out of order");
  t.validate(n_vocab);
  check_tree_shape(t, what);
  for (int i = 0; i < t.size(); ++i) {
    const int old = kept[static_cast<size_t>(i)];
    SPECMOE_FUZZ_CHECK(t.tokens[static_cast<size_t>(i)] == before.tokens[static_cast<size_t>(old)], what + ": a token changed");
    SPECMOE_FUZZ_CHECK(before.depth(old) <= max_depth, what + ": kept a node too deep");
    const int p = t.parent(i);
    SPECMOE_FUZZ_CHECK(before.parent(old) == (p < 0 ? -1 : kept[static_cast<size_t>(p)]), what + ": a parent changed");
  }
  return Outcome::Accepted;
}

inline Outcome run_tree_spec(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2) return Outcome::Rejected;
  const std::string_view rest(reinterpret_cast<const char*>(bytes.data() + 2), bytes.size() - 2);
  const std::string_view sampling_name = rest.substr(0, std::min<size_t>(bytes[1], rest.size()));
  std::string_view tail = rest.substr(sampling_name.size());
  const size_t sep = tail.find('\x1e');
  const std::string_view widths_text = tail.substr(0, sep);
  tail = sep == std::string_view::npos ? std::string_view{} : tail.substr(sep + 1);
  auto signed_at = [&](size_t i) { return i < tail.size() ? static_cast<int>(static_cast<int8_t>(tail[i])) : 0; };

  draft::TreeSpec spec;
  try {
    spec.sampling = draft::parse_tree_sampling(sampling_name);
    SPECMOE_FUZZ_CHECK(draft::tree_sampling_name(spec.sampling) == sampling_name, "a sampling name does not round-trip");
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "parse_tree_sampling threw the wrong kind");
  }
  if (!widths_text.empty()) {
    try {
      spec.widths = draft::parse_tree_widths(widths_text);
      SPECMOE_FUZZ_CHECK(!spec.widths.empty() && spec.widths.size() <= 16, "parse_tree_widths: wrong count");
      for (int w : spec.widths) SPECMOE_FUZZ_CHECK(w >= 1 && w <= 64, "parse_tree_widths accepted a width outside 1..64");
      SPECMOE_FUZZ_CHECK(draft::parse_tree_widths(draft::format_tree_widths(spec.widths)) == spec.widths,
                         "tree widths do not round-trip");
    } catch (const Error& e) {
      SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "parse_tree_widths threw the wrong kind");
    }
  }
  spec.nodes = signed_at(0);
  spec.depth = signed_at(1);
  spec.top_k = signed_at(2);
  try {
    spec.validate();
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "TreeSpec::validate threw the wrong kind");
    return Outcome::Rejected;
  }
  SPECMOE_FUZZ_CHECK(!spec.describe().empty() || spec.empty(), "a tree spec describes as nothing");
  if (spec.is_static()) {
    int64_t total = 0, level = 1;
    for (int w : spec.widths) total += (level *= w);
    SPECMOE_FUZZ_CHECK(spec.max_nodes() == total, "max_nodes is not the sum of the widths' products");
    SPECMOE_FUZZ_CHECK(spec.max_depth(7) == static_cast<int>(spec.widths.size()), "a static tree's depth is its levels");
  }
  return Outcome::Accepted;
}

inline Outcome run_ngram_tree(std::span<const uint8_t> bytes) {
  if (bytes.size() < 6) return Outcome::Rejected;
  // Parameters in the ranges the drafter guarantees (NgramDrafter's constructor, TreeSpec::validate).
  const int ngram_min = 1 + bytes[1] % 6, ngram_max = ngram_min + bytes[2] % 4;
  const int max_depth = bytes[3] % 20, max_nodes = bytes[4] % 128;
  const size_t n_widths = bytes[5] % 5;
  std::vector<int> widths;
  size_t at = 6;
  for (; widths.size() < n_widths && at < bytes.size(); ++at) widths.push_back(1 + bytes[at] % 5);
  std::vector<int32_t> context;
  for (; at < bytes.size(); ++at) context.push_back(bytes[at] % 8);

  draft::TokenTree t;
  try {
    draft::NgramDrafter::lookup_tree(context, ngram_min, ngram_max, max_depth, max_nodes, widths, t);
  } catch (const Error& e) {
    SPECMOE_FUZZ_CHECK(e.kind() == ErrorKind::InvalidArgument, "lookup_tree threw the wrong kind");
    return Outcome::Rejected;
  }
  const std::string what = fmt::format("lookup_tree(min {}, max {}, depth {}, nodes {})", ngram_min, ngram_max,
                                       max_depth, max_nodes);
  t.validate(8);
  check_tree_shape(t, what);
  SPECMOE_FUZZ_CHECK(t.size() <= max_nodes, what + ": too many nodes");
  SPECMOE_FUZZ_CHECK(t.max_depth() <= max_depth, what + ": too deep");
  for (int node = -1; node < t.size() && !widths.empty(); ++node) {
    const int d = node < 0 ? 0 : t.depth(node);
    if (d < static_cast<int>(widths.size()))
      SPECMOE_FUZZ_CHECK(static_cast<int>(t.children(node).size()) <= widths[static_cast<size_t>(d)],
                         fmt::format("{}: node {} has more children than width {}", what, node, widths[static_cast<size_t>(d)]));
  }
  std::vector<int32_t> path, seq;
  for (int i = 0; i < t.size(); ++i) {
    t.path_to(i, path);
    seq.clear();
    for (int32_t k : path) seq.push_back(t.tokens[static_cast<size_t>(k)]);
    SPECMOE_FUZZ_CHECK(std::search(context.begin(), context.end(), seq.begin(), seq.end()) != context.end(),
                       fmt::format("{}: the path to node {} is not in the context", what, i));
  }
  return t.empty() ? Outcome::Rejected : Outcome::Accepted;
}

inline Outcome run_tree(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome::Rejected;
  switch (bytes[0] % 3) {
    case 0: return run_token_tree(bytes);
    case 1: return run_tree_spec(bytes);
    default: return run_ngram_tree(bytes);
  }
}

}  // namespace specmoe::fuzz
