// KVCache storage and rollback. Keys and values are one allocation each in the cache's memory,
// layer after layer; truncate is O(1), keep compacts rows in place (indices strictly increasing,
// so a row is never overwritten before it is read), one row copy per moved row and layer.
#include "core/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "core/backend.h"

namespace specmoe::core {

DType parse_kv_cache_type(std::string_view name, std::string_view what) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "f32") return DType::F32;
  if (lower == "f16") return DType::F16;
  if (lower == "q8_0") return DType::Q8_0;
  throw_error(ErrorKind::InvalidArgument, "{} '{}': not a KV cache type this build supports ({})", what, name,
              kv_cache_type_names());
}

const char* kv_cache_type_name(DType type) {
  switch (type) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::Q8_0: return "q8_0";
    default: return dtype_name(type);
  }
}

const char* kv_cache_type_names() { return "f32, f16, q8_0"; }

KVCache::KVCache(std::shared_ptr<Memory> memory, std::vector<KVLayerLayout> layers, int capacity)
    : memory_(std::move(memory)), layers_(std::move(layers)), capacity_(capacity) {
  allocate();
}

KVCache::KVCache(int n_layer, int capacity, int kv_dim)
    : memory_(host_memory()), capacity_(capacity) {
  if (n_layer <= 0 || kv_dim <= 0)
    throw_error(ErrorKind::InvalidArgument, "KVCache: n_layer {}, capacity {} and kv_dim {} must be positive",
                n_layer, capacity, kv_dim);
  layers_.assign(static_cast<size_t>(n_layer), KVLayerLayout{kv_dim, kv_dim, DType::F32, DType::F32, 0});
  allocate();
}

void KVCache::allocate() {
  if (!memory_) throw_error(ErrorKind::InvalidArgument, "KVCache: no memory to hold the rows");
  if (layers_.empty() || capacity_ <= 0)
    throw_error(ErrorKind::InvalidArgument, "KVCache: {} layers and capacity {} must be positive", layers_.size(),
                capacity_);
  // A model's training context can be 128k tokens or more; at the default (new_cache(0)) the cache
  // of a mid-size model then needs tens of GiB. Compute the bytes first and refuse, with the
  // numbers, what this machine's physical memory cannot hold, instead of dying in the allocator.
  size_t k_bytes = 0, v_bytes = 0;
  bool overflow = false;
  k_offset_.resize(layers_.size());
  v_offset_.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const KVLayerLayout& L = layers_[l];
    if (L.k_width <= 0 || L.v_width < 0 || L.window < 0)
      throw_error(ErrorKind::InvalidArgument, "KVCache: layer {} has key width {}, value width {}, window {}", l,
                  L.k_width, L.v_width, L.window);
    for (const auto& [type, width, what] :
         {std::tuple{L.k_type, L.k_width, "key"}, std::tuple{L.v_type, L.v_width, "value"}}) {
      if (type != DType::F32 && type != DType::F16 && type != DType::Q8_0)
        throw_error(ErrorKind::InvalidArgument, "KVCache: layer {} {} rows of {}: a KV cache holds {}", l, what,
                    dtype_name(type), kv_cache_type_names());
      if (width % dtype_info(type).block_size != 0)
        throw_error(ErrorKind::InvalidArgument, "KVCache: layer {} {} width {} is not a multiple of {}'s {}-element "
                    "blocks", l, what, width, kv_cache_type_name(type), dtype_info(type).block_size);
    }
    size_t kl = 0, vl = 0;
    overflow |= __builtin_mul_overflow(dtype_row_bytes(L.k_type, L.k_width), static_cast<size_t>(capacity_), &kl);
    overflow |= __builtin_mul_overflow(L.v_width ? dtype_row_bytes(L.v_type, L.v_width) : size_t{0},
                                       static_cast<size_t>(capacity_), &vl);
    k_offset_[l] = k_bytes;
    v_offset_[l] = v_bytes;
    overflow |= __builtin_add_overflow(k_bytes, kl, &k_bytes);
    overflow |= __builtin_add_overflow(v_bytes, vl, &v_bytes);
  }
  size_t bytes = SIZE_MAX;
  if (!overflow && __builtin_add_overflow(k_bytes, v_bytes, &bytes)) bytes = SIZE_MAX;
  if (memory_->device().is_cpu()) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t physical = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
    if (bytes > physical)
      throw_error(ErrorKind::Limit,
                  "KV cache of {} tokens x {} layers x {} key + {} value elements needs {:.1f} GiB, more than this "
                  "machine's {:.1f} GiB of memory; use a shorter context",
                  capacity_, layers_.size(), layers_[0].k_width, layers_[0].v_width,
                  static_cast<double>(bytes) / (1u << 30), static_cast<double>(physical) / (1u << 30));
  } else if (bytes == SIZE_MAX) {
    throw_error(ErrorKind::Limit, "KV cache of {} tokens x {} layers overflows the address space", capacity_,
                layers_.size());
  }
  k_mem_ = memory_->allocate(std::max<size_t>(k_bytes, 1));
  v_mem_ = memory_->allocate(std::max<size_t>(v_bytes, 1));
  pos_.assign(static_cast<size_t>(capacity_), 0);
  size_ = 0;
}

KVCache::KVCache(const KVCache& o)
    : memory_(o.memory_), layers_(o.layers_), k_offset_(o.k_offset_), v_offset_(o.v_offset_),
      capacity_(o.capacity_), size_(0), pos_(o.pos_) {
  if (!o.memory_) return;  // a default-constructed cache
  allocate();
  size_ = o.size_;
  pos_ = o.pos_;
  for (int l = 0; l < n_layer(); ++l) {
    memory_->copy(k_data(l), o.k_data(l), k_row_bytes(l) * static_cast<size_t>(capacity_));
    if (v_row_bytes(l)) memory_->copy(v_data(l), o.v_data(l), v_row_bytes(l) * static_cast<size_t>(capacity_));
  }
}

KVCache& KVCache::operator=(const KVCache& o) {
  if (this != &o) {
    KVCache copy(o);
    *this = std::move(copy);
  }
  return *this;
}

Device KVCache::where() const { return memory_ ? memory_->device() : Device{}; }

int KVCache::kv_dim() const {
  if (layers_.empty()) return 0;
  for (const KVLayerLayout& L : layers_)
    if (!(L == layers_[0]) || L.k_width != L.v_width || L.k_type != DType::F32 || L.v_type != DType::F32) return 0;
  return layers_[0].k_width;
}

void* KVCache::k_data(int layer) const { return static_cast<uint8_t*>(k_mem_.get()) + k_offset_[layer]; }
void* KVCache::v_data(int layer) const { return static_cast<uint8_t*>(v_mem_.get()) + v_offset_[layer]; }
size_t KVCache::k_row_bytes(int layer) const { return dtype_row_bytes(layers_[layer].k_type, layers_[layer].k_width); }
size_t KVCache::v_row_bytes(int layer) const {
  return layers_[layer].v_width ? dtype_row_bytes(layers_[layer].v_type, layers_[layer].v_width) : 0;
}

size_t KVCache::bytes_per_token() const {
  size_t bytes = 0;
  for (int l = 0; l < n_layer(); ++l) bytes += k_row_bytes(l) + v_row_bytes(l);
  return bytes;
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
  for (size_t i = 0; i < indices.size(); ++i) {
    const size_t src = static_cast<size_t>(indices[i]);
    if (src == i) continue;
    for (int l = 0; l < n_layer(); ++l) {
      const size_t kb = k_row_bytes(l), vb = v_row_bytes(l);
      memory_->copy(static_cast<uint8_t*>(k_data(l)) + i * kb, static_cast<uint8_t*>(k_data(l)) + src * kb, kb);
      if (vb) memory_->copy(static_cast<uint8_t*>(v_data(l)) + i * vb, static_cast<uint8_t*>(v_data(l)) + src * vb, vb);
    }
    pos_[i] = pos_[src];
  }
  size_ = static_cast<int>(indices.size());
}

std::vector<uint8_t> KVCache::read_layer(int layer) const {
  const size_t kb = k_row_bytes(layer) * static_cast<size_t>(size_), vb = v_row_bytes(layer) * static_cast<size_t>(size_);
  std::vector<uint8_t> out(kb + vb);
  if (kb) memory_->download(out.data(), k_data(layer), kb);
  if (vb) memory_->download(out.data() + kb, v_data(layer), vb);
  return out;
}

void KVCache::append(std::span<const int32_t> positions) {
  if (size_ + static_cast<int64_t>(positions.size()) > capacity_)
    throw_error(ErrorKind::Limit, "KV cache full: {} tokens stored + {} new > capacity {}", size_,
                positions.size(), capacity_);
  std::copy(positions.begin(), positions.end(), pos_.begin() + size_);
  size_ += static_cast<int>(positions.size());
}

}  // namespace specmoe::core
