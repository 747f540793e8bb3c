// KVCache storage and rollback. Layout (n_layer, capacity, kv_dim) floats for keys and values,
// allocated once; truncate is O(1), keep compacts rows in place (indices strictly increasing, so
// a row is never overwritten before it is read).
#include "core/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace specmoe::core {

KVCache::KVCache(int n_layer, int capacity, int kv_dim)
    : n_layer_(n_layer), capacity_(capacity), kv_dim_(kv_dim) {
  if (n_layer <= 0 || capacity <= 0 || kv_dim <= 0)
    throw_error(ErrorKind::InvalidArgument, "KVCache: n_layer {}, capacity {} and kv_dim {} must be positive",
                n_layer, capacity, kv_dim);
  // A model's training context can be 128k tokens or more; at the default (new_cache(0)) the cache
  // of a mid-size model then needs tens of GiB. Compute the bytes first and refuse, with the
  // numbers, what this machine's physical memory cannot hold, instead of dying in the allocator.
  size_t n = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n_layer) * static_cast<size_t>(capacity), static_cast<size_t>(kv_dim),
                             &n) ||
      __builtin_mul_overflow(n, 2 * sizeof(float), &bytes))
    bytes = SIZE_MAX;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t physical = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
  if (bytes > physical)
    throw_error(ErrorKind::Limit,
                "KV cache of {} tokens x {} layers x {} kv dims needs {:.1f} GiB, more than this machine's {:.1f} GiB "
                "of memory; use a shorter context",
                capacity, n_layer, kv_dim, static_cast<double>(bytes) / (1u << 30),
                static_cast<double>(physical) / (1u << 30));
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  pos_.assign(capacity, 0);
}

KVCache::KVCache(int n_layer, int capacity, int kv_dim, std::unique_ptr<KVDeviceStorage> storage)
    : n_layer_(n_layer), capacity_(capacity), kv_dim_(kv_dim), device_(std::move(storage)) {
  if (n_layer <= 0 || capacity <= 0 || kv_dim <= 0)
    throw_error(ErrorKind::InvalidArgument, "KVCache: n_layer {}, capacity {} and kv_dim {} must be positive",
                n_layer, capacity, kv_dim);
  if (!device_) throw_error(ErrorKind::InvalidArgument, "KVCache: device storage is null");
  pos_.assign(capacity, 0);
}

KVCache::KVCache(const KVCache& o)
    : n_layer_(o.n_layer_), capacity_(o.capacity_), kv_dim_(o.kv_dim_), size_(o.size_), k_(o.k_), v_(o.v_),
      pos_(o.pos_), device_(o.device_ ? o.device_->clone() : nullptr) {}

KVCache& KVCache::operator=(const KVCache& o) {
  if (this != &o) {
    KVCache copy(o);
    *this = std::move(copy);
  }
  return *this;
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
  if (device_) device_->keep(indices);  // the rows; positions below, on the host
  const size_t row_bytes = static_cast<size_t>(kv_dim_) * sizeof(float);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int src = indices[i];
    const int dst = static_cast<int>(i);
    if (src == dst) continue;
    for (int l = 0; l < n_layer_ && !device_; ++l) {  // host rows (a device cache moved its rows above)
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
