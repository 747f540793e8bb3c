// KVCache: per-layer keys and values of every token seen so far, in the order they were appended.
// Speculative decoding rolls it back (truncate) after a rejection and compacts it after tree
// verification (keep). Draft and target each own one.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace specmoe::core {

// Keys and values kept in an accelerator's memory (the CUDA backend's, core/cuda_model.cpp).
// KVCache owns one when a device model made it; the cache's size and positions stay on the host,
// so truncate is still an O(1) length change and only keep() touches the device rows.
class KVDeviceStorage {
 public:
  virtual ~KVDeviceStorage() = default;
  // A deep copy of every row (same device), for copying a KVCache.
  virtual std::unique_ptr<KVDeviceStorage> clone() const = 0;
  // Row i := row indices[i] in every layer, keys and values (indices strictly increasing and
  // already checked by KVCache::keep).
  virtual void keep(std::span<const int> indices) = 0;
  // "cuda:0": where the rows live (for error messages).
  virtual std::string device() const = 0;
};

class KVCache {
 public:
  KVCache() = default;
  // Room for `capacity` tokens of a model with n_layer layers and kv_dim = n_head_kv * head_dim.
  KVCache(int n_layer, int capacity, int kv_dim);
  // The same, with the rows in device memory (`storage`, made by a device model's new_cache):
  // the host accessors k() and v() below must not be used on such a cache.
  KVCache(int n_layer, int capacity, int kv_dim, std::unique_ptr<KVDeviceStorage> storage);
  KVCache(const KVCache& other);
  KVCache& operator=(const KVCache& other);
  KVCache(KVCache&&) noexcept = default;
  KVCache& operator=(KVCache&&) noexcept = default;
  ~KVCache() = default;

  // Non-null when the keys/values live on a device.
  KVDeviceStorage* device_storage() const { return device_.get(); }

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
  std::unique_ptr<KVDeviceStorage> device_;
};

}  // namespace specmoe::core
