// Fuzz entry point of whole models (target fuzz_model): a GGUF file through Model::load (the
// ModelConfig of its architecture, every tensor bound against it, the tokenizer, the backend),
// then short forwards on whatever weights it holds. Shared by tests/fuzz/model_fuzz.cpp and the
// regression replay (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Oracles for a model that loaded:
//  - a forward on a small cache never throws: whatever the file holds was checked at load, so
//    ids in the vocabulary and positions in the context must run;
//  - logits have the size asked for;
//  - a token's logits are the same computed in a batch of three and one token at a time (the
//    determinism contract of kernels/cpu/ops.h: NaN only where the other side is NaN too);
//  - a tree batch, an early exit, the MoE k override and a cache rollback run;
//  - a tree node fed over its cached ancestors (Batch::cached_parents) gets the logits it gets in
//    its whole tree's batch;
//  - a multi-token-prediction block runs over the model's hidden rows, a batch equal to one token
//    at a time (a file of the block alone runs the block only, over hidden rows of ones).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fuzz_entry.h"

namespace specmoe::fuzz {

inline constexpr const char* kModelName = "fuzz-model.gguf";

// a and b equal as the determinism contract promises: the same float, or both NaN.
inline bool same_logit(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

inline std::vector<float> forward_logits(core::Model& m, core::KVCache& kv, const core::Batch& batch,
                                         const core::ForwardOptions& options = {}) {
  std::vector<float> out;
  m.forward(batch, kv, options).logits.to_host(out);
  return out;
}

// A draft head's forward (`forward(batch, rows, kv)`, an MTP block's or an EAGLE-3 head's) over
// `chain` with one input row of `rows` per token: in one batch into cache a, then one token at a
// time into cache b, the same logits (of V ids) bit for bit.
template <class Forward>
void head_batch_is_one_at_a_time(const char* what, std::span<const int32_t> chain, const core::Rows& rows, size_t V,
                                 core::KVCache& a, core::KVCache& b, const Forward& forward) {
  const size_t n = chain.size();
  std::vector<float> all, one;
  forward(core::Batch(chain), rows.data, a).to_host(all);
  SPECMOE_FUZZ_CHECK(all.size() == n * V, fmt::format("an {} forward wrote the wrong logits size", what));
  for (size_t t = 0; t < n; ++t) {
    forward(core::Batch(chain.subspan(t, 1)), rows.row(static_cast<int64_t>(t)), b).to_host(one);
    for (size_t v = 0; v < V; ++v)
      SPECMOE_FUZZ_CHECK(same_logit(one[v], all[t * V + v]),
                         fmt::format("token {}'s {} logit {} differs between a batch ({}) and one token at a time ({})",
                                     t, what, v, all[t * V + v], one[v]));
  }
}

// The block over `chain` with hidden rows `rows` ([n, n_embd]), in one batch and one token at a
// time (the same determinism contract).
inline void exercise_mtp(core::Model& m, std::span<const int32_t> chain, const std::vector<float>& rows, int n_ctx) {
  const core::ModelConfig& c = m.config();
  const size_t V = static_cast<size_t>(c.n_vocab), n = chain.size();
  core::RowBuffer buf(m.backend());
  m.backend().upload(buf.reserve(static_cast<int64_t>(n), c.n_embd), rows.data(), rows.size() * sizeof(float));
  const core::Rows hr = buf.view(static_cast<int64_t>(n), c.n_embd);
  core::KVCache a = m.new_mtp_cache(n_ctx), b = m.new_mtp_cache(n_ctx);
  head_batch_is_one_at_a_time("MTP", chain, hr, V, a, b, [&](const core::Batch& batch, const float* h, core::KVCache& kv) {
    return m.forward_mtp(batch, h, kv).logits;
  });
}

// An EAGLE-3 head: its fusion over feature rows of ones, and, when the file has its own embedding
// and head (no target needed), its decoder over `chain` in one batch and one token at a time.
inline void exercise_eagle3(core::Model& m) {
  const core::ModelConfig& c = m.config();
  const std::vector<int32_t> chain = {0, std::min(1, c.n_vocab - 1), c.n_vocab - 1};
  const int n_ctx = std::min(8, c.n_ctx_train);
  const size_t n = std::min<size_t>(chain.size(), static_cast<size_t>(n_ctx)), V = static_cast<size_t>(c.n_vocab);
  const std::vector<float> ones(n * static_cast<size_t>(c.head_feature_width()), 1.0f);
  core::RowBuffer fbuf(m.backend());
  m.backend().upload(fbuf.reserve(static_cast<int64_t>(n), c.head_feature_width()), ones.data(), ones.size() * sizeof(float));
  const core::Rows g = m.eagle3_fuse(fbuf.view(static_cast<int64_t>(n), c.head_feature_width()).data, static_cast<int64_t>(n));
  SPECMOE_FUZZ_CHECK(g.rows == static_cast<int64_t>(n) && g.cols == c.n_embd, "EAGLE-3 fusion wrote the wrong size");
  core::RowBuffer gbuf(m.backend());
  m.backend().copy(gbuf.reserve(g.rows, g.cols), g.data, static_cast<size_t>(g.rows * g.cols) * sizeof(float));
  const core::Rows gr = gbuf.view(g.rows, g.cols);
  core::KVCache a = m.new_cache(n_ctx), b = m.new_cache(n_ctx);
  try {
    head_batch_is_one_at_a_time("EAGLE-3", std::span<const int32_t>(chain.data(), n), gr, V, a, b,
                                [&](const core::Batch& batch, const float* h, core::KVCache& kv) {
                                  return m.forward_eagle3(batch, h, kv).logits;
                                });
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Unsupported) return;  // the target's embedding or head: no target here
    throw;
  }
}

// A DFlash draft: its injection of feature rows of ones in one batch and one position at a time,
// the same cache (the next block's logits equal bit for bit), when the file has its own embedding
// and head (no target needed).
inline void exercise_dflash(core::Model& m) {
  const core::ModelConfig& c = m.config();
  const int n_ctx = std::min(8, c.n_ctx_train);
  const int64_t n = std::min(3, n_ctx - 2), F = c.head_feature_width();
  if (n <= 0) return;
  const std::vector<float> ones(static_cast<size_t>(n * F), 1.0f);
  core::RowBuffer fbuf(m.backend());
  m.backend().upload(fbuf.reserve(n, F), ones.data(), ones.size() * sizeof(float));
  core::KVCache a = m.new_cache(n_ctx), b = m.new_cache(n_ctx);
  m.dflash_inject(fbuf.view(n, F).data, n, a);
  for (int64_t t = 0; t < n; ++t) m.dflash_inject(fbuf.view(n, F).row(t), 1, b);
  SPECMOE_FUZZ_CHECK(a.size() == n && b.size() == n, "a DFlash injection stored the wrong number of rows");
  const std::vector<int32_t> block = {std::min(1, c.n_vocab - 1), c.mask_token_id};
  std::vector<float> la, lb;
  try {
    m.forward_dflash(block, a).logits.to_host(la);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Unsupported) return;  // the target's embedding or head: no target here
    throw;
  }
  m.forward_dflash(block, b).logits.to_host(lb);
  SPECMOE_FUZZ_CHECK(la.size() == block.size() * static_cast<size_t>(c.n_vocab), "a DFlash block wrote the wrong logits size");
  for (size_t v = 0; v < la.size(); ++v)
    SPECMOE_FUZZ_CHECK(same_logit(la[v], lb[v]),
                       fmt::format("DFlash block logit {} differs between a cache injected in one batch ({}) and one "
                                   "position at a time ({})", v, la[v], lb[v]));
}

inline void exercise_model(core::Model& m) {
  const core::ModelConfig& c = m.config();
  if (c.is_eagle3()) {
    exercise_eagle3(m);
    return;
  }
  if (c.is_dflash()) {
    exercise_dflash(m);
    return;
  }
  if (c.mtp_only) {  // a file of the block alone: the block, over hidden rows of ones
    const std::vector<int32_t> tokens = {0, std::min(1, c.n_vocab - 1), c.n_vocab - 1};
    const int n_ctx = std::min(8, c.n_ctx_train);
    const size_t n = std::min<size_t>(tokens.size(), static_cast<size_t>(n_ctx));
    exercise_mtp(m, std::span<const int32_t>(tokens.data(), n), std::vector<float>(n * static_cast<size_t>(c.n_embd), 1.0f),
                 n_ctx);
    return;
  }
  const size_t V = static_cast<size_t>(c.n_vocab);
  (void)m.weight_bytes_per_token();
  for (int l = 0; l < c.n_layer; ++l) (void)m.moe_expert_bytes(l);

  // Three tokens: the first id, the second and the last (the embedding's last row).
  const int n_ctx = std::min(8, c.n_ctx_train);
  const std::vector<int32_t> tokens = {0, std::min(1, c.n_vocab - 1), c.n_vocab - 1};
  const size_t n = std::min<size_t>(tokens.size(), static_cast<size_t>(n_ctx));
  const std::span<const int32_t> chain(tokens.data(), n);

  core::KVCache batched = m.new_cache(n_ctx);
  const std::vector<float> all = forward_logits(m, batched, core::Batch(chain));
  SPECMOE_FUZZ_CHECK(all.size() == n * V, "a batched forward wrote the wrong logits size");

  core::KVCache stepped = m.new_cache(n_ctx);
  for (size_t t = 0; t < n; ++t) {
    const std::vector<float> one = forward_logits(m, stepped, core::Batch(chain.subspan(t, 1)));
    SPECMOE_FUZZ_CHECK(one.size() == V, "a one-token forward wrote the wrong logits size");
    for (size_t v = 0; v < V; ++v)
      SPECMOE_FUZZ_CHECK(same_logit(one[v], all[t * V + v]),
                         fmt::format("token {}'s logit {} differs between a batch of {} ({}) and one token at a time "
                                     "({})", t, v, n, all[t * V + v], one[v]));
  }

  // A tree of three nodes under the cached chain (two siblings), where the cache has room; then,
  // where it has room for four, a fourth node (a child of the first sibling) fed alone over the
  // three cached ones, as a tree drafted level by level: its logits are the four-node tree's.
  if (stepped.size() + 3 <= stepped.capacity()) {
    const int32_t tree_tokens[] = {tokens[2], tokens[0], tokens[1], tokens[0]};
    const int32_t parents[] = {-1, 0, 0, 1};
    const std::span<const int32_t> tt(tree_tokens), tp(parents);
    core::Batch tree(tt.first(3));
    tree.parents = tp.first(3);
    const std::vector<float> tl = forward_logits(m, stepped, tree);
    SPECMOE_FUZZ_CHECK(tl.size() == 3 * V, "a tree forward wrote the wrong logits size");
    if (stepped.size() + 1 <= stepped.capacity()) {
      core::Batch level(tt.subspan(3));
      level.parents = tp.subspan(3);
      level.cached_parents = tp.first(3);
      const std::vector<float> one = forward_logits(m, stepped, level);
      stepped.truncate(static_cast<int>(n));
      core::Batch whole(tt);
      whole.parents = tp;
      const std::vector<float> all4 = forward_logits(m, stepped, whole);
      SPECMOE_FUZZ_CHECK(one.size() == V && all4.size() == 4 * V, "a tree forward wrote the wrong logits size");
      for (size_t v = 0; v < V; ++v)
        SPECMOE_FUZZ_CHECK(same_logit(one[v], all4[3 * V + v]),
                           fmt::format("a tree node's logit {} differs between its tree in one batch ({}) and fed "
                                       "over its cached ancestors ({})", v, all4[3 * V + v], one[v]));
    }
    stepped.truncate(static_cast<int>(n));
  }
  // A multi-token-prediction block over the model's hidden rows of the chain.
  if (m.has_mtp()) {
    core::KVCache hkv = m.new_cache(n_ctx);
    core::ForwardOptions h;
    h.hidden = true;
    std::vector<float> rows;
    m.forward(core::Batch(chain), hkv, h).hidden.to_host(rows);
    SPECMOE_FUZZ_CHECK(rows.size() == n * static_cast<size_t>(c.n_embd), "a forward wrote the wrong hidden rows size");
    exercise_mtp(m, chain, rows, n_ctx);
  }
  // Early exit halfway, last-token logits only, and (MoE) one expert per token.
  if (stepped.size() < stepped.capacity()) {
    core::ForwardOptions early;
    early.exit_layer = c.n_layer / 2;
    early.logits_all = false;
    if (c.is_moe()) early.moe_k = 1;
    const int32_t one[] = {tokens[1]};
    SPECMOE_FUZZ_CHECK(forward_logits(m, stepped, core::Batch(one), early).size() == V,
                       "an early-exit forward wrote the wrong logits size");
  }
}

inline Outcome run_model(std::span<const uint8_t> bytes) {
  // Model::load takes a path (it memory-maps the file), so the bytes go through a scratch file.
  const std::string path = (scratch_dir() / kModelName).string();
  write_file(path, bytes);
  std::unique_ptr<core::Model> m;
  core::LoadOptions one_thread;
  one_thread.n_threads = 1;
  try {
    m = core::Model::load(path, one_thread);
  } catch (const Error& e) {
    check_names_input(e, kModelName);
    return Outcome::Rejected;
  }
  try {
    exercise_model(*m);
  } catch (const Error& e) {
    throw OracleFailure(std::string("a loaded model failed to run: ") + e.what());
  }
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
