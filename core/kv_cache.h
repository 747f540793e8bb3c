// KVCache: per-layer keys and values of every token seen so far, in the order they were appended,
// held in the memory of the backend that made it (Model::new_cache). Speculative decoding rolls
// it back (truncate) after a rejection and compacts it after tree verification (keep). Draft and
// target each own one.
//
// Every layer has its own layout (KVLayerLayout): key and value widths (they differ for an
// MLA-style latent cache, whose "key" row is the compressed latent plus the decoupled RoPE part
// and whose value width is 0), the element types of key and value rows (F32, F16 or Q8_0,
// llama.cpp's --cache-type-k/-v; rows laid out by dtype_row_bytes: IEEE halves, ggml's
// block_q8_0), and a sliding window (a layer that attends to the last `window` positions only).
// A recurrent layer keeps a fixed-size state per token instead (KVLayerLayout::state_floats), for
// the last rollback() + 1 tokens only: truncate and keep may go back that far (reserve_rollback).
// Rows of layer l are contiguous: row t starts at k_data(l) + t * k_row_bytes(l). Every
// operation here (truncate, keep, copies, read_layer) moves rows as bytes, whatever their type.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/device.h"
#include "kernels/dtype.h"

namespace specmoe::core {

class Memory;

struct KVLayerLayout {
  int k_width = 0;             // elements per key row (n_head_kv * head_dim; MLA: latent + rope dims)
  int v_width = 0;             // elements per value row (0: no separate values, e.g. MLA)
  DType k_type = DType::F32;   // element type of key rows: F32, F16 or Q8_0
  DType v_type = DType::F32;   // element type of value rows
  int window = 0;              // sliding window in positions (0: the whole context)
  // A recurrent layer (Qwen3.5's gated DeltaNet): floats of one token's state (the layer then has
  // no key or value rows, k_width = v_width = 0). The cache keeps the states of the last
  // rollback() + 1 tokens of such layers in a ring of slots (state_data): a token's state is what
  // the layer carries after it on its path, so truncate and keep within that reach restore it.
  int state_floats = 0;
  // A layer without a mixer (nemotron_h's MLP layers) caches nothing: widths and state 0.
  bool operator==(const KVLayerLayout&) const = default;
};

// The element types of a model's KV cache (LoadOptions, Model::new_cache): llama.cpp's
// --cache-type-k / --cache-type-v, with its default F16.
struct KVCacheTypes {
  DType k = DType::F16;
  DType v = DType::F16;
  bool operator==(const KVCacheTypes&) const = default;
};

// "f32", "f16", "q8_0" (case-insensitive, llama.cpp's spellings) -> the type. Anything else throws
// Error(InvalidArgument) "<what> '<name>': ..." listing the supported names (what: "--cache-type-k").
DType parse_kv_cache_type(std::string_view name, std::string_view what);
// "f32", "f16", "q8_0": llama.cpp's lowercase spelling of a KV cache type.
const char* kv_cache_type_name(DType type);
// The supported names for messages: "f32, f16, q8_0".
const char* kv_cache_type_names();

class KVCache {
 public:
  KVCache() = default;
  // Room for `capacity` tokens with the given per-layer layouts, in `memory` (kept alive with the
  // cache; a cache may outlive the model that made it). Throws Error(Limit) when the rows would
  // not fit this machine's memory, Error(InvalidArgument) for empty sizes.
  KVCache(std::shared_ptr<Memory> memory, std::vector<KVLayerLayout> layers, int capacity);
  // A host cache of n_layer layers with k_width = v_width = kv_dim F32 (tests, tools).
  KVCache(int n_layer, int capacity, int kv_dim);
  // Throws Error(InvalidArgument) for a key or value type other than F32, F16 and Q8_0, or a
  // width that is not a whole number of the type's blocks.
  KVCache(const KVCache& other);  // a deep copy, in the same memory
  KVCache& operator=(const KVCache& other);
  KVCache(KVCache&&) noexcept = default;
  KVCache& operator=(KVCache&&) noexcept = default;
  ~KVCache() = default;

  int size() const { return size_; }  // tokens stored
  int capacity() const { return capacity_; }
  int n_layer() const { return static_cast<int>(layers_.size()); }
  const KVLayerLayout& layout(int layer) const { return layers_[layer]; }
  Device where() const;
  const Memory* memory() const { return memory_.get(); }
  // The common key width when every layer has the same F32 layout (0 otherwise).
  int kv_dim() const;

  void clear() {
    size_ = 0;
    state_low_ = -1;
  }
  // Drops every token after the first n (n <= size()). O(1). With recurrent layers n must be 0 or
  // reachable (can_truncate): Error(InvalidArgument) otherwise.
  void truncate(int n);
  // Keeps the tokens at the given cache indices (strictly increasing, all < size()) in that order,
  // e.g. the prefix plus the accepted branch of a token tree: their rows are moved into place in
  // every layer, keys and values (and recurrent states, which must be within reach).
  void keep(std::span<const int> indices);

  // Recurrent layers: whether truncate(n) can restore the state after token n - 1 (always true
  // without recurrent layers, and for n = 0 or n = size()).
  bool can_truncate(int n) const { return n >= 0 && n <= size_ && (n == 0 || n == size_ || n - 1 >= state_low_); }
  // How many of the last tokens truncate and keep may drop (the ring holds rollback() + 1 states
  // per recurrent layer; 1 by default). reserve_rollback grows it, keeping the states it holds.
  int rollback() const { return rollback_; }
  // The oldest token whose state the ring still holds (-1: all of them, and the zero state before
  // the first).
  int oldest_state() const { return state_low_; }
  void reserve_rollback(int rows);
  bool has_states() const { return state_bytes_ > 0; }
  // Layer l's ring of rollback() + 1 state slots (state_floats each; null for other layers); token
  // t's state is in slot state_slot(t) while t >= the oldest state kept.
  float* state_data(int layer) const;
  int state_slot(int t) const { return t % (rollback_ + 1); }

  // Layer l's rows in the cache's memory (dereference on the host only for a host cache).
  void* k_data(int layer) const;
  void* v_data(int layer) const;
  size_t k_row_bytes(int layer) const;
  size_t v_row_bytes(int layer) const;
  // Bytes one token occupies: the key and value rows of every layer.
  size_t bytes_per_token() const;
  // Host F32 caches: token t's key / value row of layer l.
  float* k(int layer, int t) { return static_cast<float*>(k_data(layer)) + static_cast<size_t>(t) * layers_[layer].k_width; }
  float* v(int layer, int t) { return static_cast<float*>(v_data(layer)) + static_cast<size_t>(t) * layers_[layer].v_width; }
  const float* k(int layer, int t) const { return const_cast<KVCache*>(this)->k(layer, t); }
  const float* v(int layer, int t) const { return const_cast<KVCache*>(this)->v(layer, t); }
  // Rows [0, size()) of layer l's keys and values as host bytes, wherever the cache lives (for
  // comparing caches bit for bit).
  std::vector<uint8_t> read_layer(int layer) const;

  // Positions (for RoPE) of the stored tokens.
  int position(int t) const { return pos_[t]; }
  // Used by the forward: marks n more tokens as stored at the given positions.
  void append(std::span<const int32_t> positions);

 private:
  void allocate();
  void allocate_states(int rollback);
  // Bytes of layer l's state, and where ring slot `slot` of it starts.
  size_t state_bytes(int layer) const { return static_cast<size_t>(layers_[layer].state_floats) * sizeof(float); }
  uint8_t* slot_data(int layer, int slot) const {
    return static_cast<uint8_t*>(s_mem_.get()) + s_offset_[layer] + static_cast<size_t>(slot) * state_bytes(layer);
  }
  std::shared_ptr<Memory> memory_;
  std::vector<KVLayerLayout> layers_;
  std::vector<size_t> k_offset_, v_offset_;  // [n_layer] byte offsets into k_mem_ / v_mem_
  int capacity_ = 0, size_ = 0;
  std::shared_ptr<void> k_mem_, v_mem_;
  std::vector<int32_t> pos_;
  // Recurrent states: one allocation, layer l's ring at s_offset_[l] bytes, state_bytes_ per slot
  // over all layers. state_low_: the oldest token whose state the ring still holds (-1: every
  // token's, the zero state before the first one included).
  std::vector<size_t> s_offset_;
  std::shared_ptr<void> s_mem_;
  size_t state_bytes_ = 0;
  int rollback_ = 1;
  int state_low_ = -1;
};

}  // namespace specmoe::core
