// KVCache storage and rollback. Layout (n_layer, capacity, kv_dim) floats for keys and values,
// allocated once; truncate is O(1), keep compacts rows in place (indices strictly increasing, so
// a row is never overwritten before it is read).
#include "core/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace specmoe::core {

KVCache::KVCache(int n_layer, int capacity, int kv_dim)
    : n_layer_(n_layer), capacity_(capacity), kv_dim_(kv_dim) {
  if (n_layer <= 0 || capacity <= 0 || kv_dim <= 0)
    throw_error(ErrorKind::InvalidArgument, "KVCache: n_layer {}, capacity {} and kv_dim {} must be positive",
                n_layer, capacity, kv_dim);
  const size_t n = static_cast<size_t>(n_layer) * capacity * kv_dim;
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  pos_.assign(capacity, 0);
}

void KVCache::truncate(int n) {
  if (n < 0 || n > size_)
    throw_error(ErrorKind::InvalidArgument, "KVCache::truncate({}): cache holds {} tokens", n, size_);
  size_ = n;
}

void KVCache::keep(std::span<const int> indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size_ || (i > 0 && indices[i] <= indices[i - 1]))
      throw_error(ErrorKind::InvalidArgument,
                  "KVCache::keep: index {} at {} must be strictly increasing and below size {}",
                  indices[i], i, size_);
  }
  const size_t row_bytes = static_cast<size_t>(kv_dim_) * sizeof(float);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int src = indices[i];
    const int dst = static_cast<int>(i);
    if (src == dst) continue;
    for (int l = 0; l < n_layer_; ++l) {
      std::memmove(k(l, dst), k(l, src), row_bytes);
      std::memmove(v(l, dst), v(l, src), row_bytes);
    }
    pos_[dst] = pos_[src];
  }
  size_ = static_cast<int>(indices.size());
}

void KVCache::append(std::span<const int32_t> positions) {
  if (size_ + static_cast<int64_t>(positions.size()) > capacity_)
    throw_error(ErrorKind::Limit, "KV cache full: {} tokens stored + {} new > capacity {}", size_,
                positions.size(), capacity_);
  std::copy(positions.begin(), positions.end(), pos_.begin() + size_);
  size_ += static_cast<int>(positions.size());
}

}  // namespace specmoe::core
