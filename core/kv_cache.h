// KVCache: per-layer keys and values of every token seen so far, in the order they were appended.
// Speculative decoding rolls it back (truncate) after a rejection and compacts it after tree
// verification (keep). Draft and target each own one.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace specmoe::core {

class KVCache {
 public:
  KVCache() = default;
  // Room for `capacity` tokens of a model with n_layer layers and kv_dim = n_head_kv * head_dim.
  KVCache(int n_layer, int capacity, int kv_dim);

  int size() const { return size_; }          // tokens stored
  int capacity() const { return capacity_; }
  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }

  void clear() { size_ = 0; }
  // Drops every token after the first n (n <= size()). O(1).
  void truncate(int n);
  // Keeps the tokens at the given cache indices (strictly increasing, all < size()) in that order,
  // e.g. the prefix plus the accepted branch of a token tree.
  void keep(std::span<const int> indices);

  // Row of token t's keys/values in layer l: kv_dim floats. // (n_layer, capacity, kv_dim)
  float* k(int layer, int t) { return &k_[(static_cast<size_t>(layer) * capacity_ + t) * kv_dim_]; }
  float* v(int layer, int t) { return &v_[(static_cast<size_t>(layer) * capacity_ + t) * kv_dim_]; }
  const float* k(int layer, int t) const { return &k_[(static_cast<size_t>(layer) * capacity_ + t) * kv_dim_]; }
  const float* v(int layer, int t) const { return &v_[(static_cast<size_t>(layer) * capacity_ + t) * kv_dim_]; }
  // Positions (for RoPE) of the stored tokens.
  int position(int t) const { return pos_[t]; }

  // Used by the forward: marks n more tokens as stored at the given positions.
  void append(std::span<const int32_t> positions);

 private:
  int n_layer_ = 0, capacity_ = 0, kv_dim_ = 0, size_ = 0;
  std::vector<float> k_, v_;
  std::vector<int32_t> pos_;
};

}  // namespace specmoe::core
