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
  size_t k_bytes = 0, v_bytes = 0, state_bytes = 0;
  bool overflow = false;
  k_offset_.resize(layers_.size());
  v_offset_.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const KVLayerLayout& L = layers_[l];
    // A recurrent layer has a state and no rows; a layer without a mixer (nemotron_h's MLPs) neither.
    const bool recurrent = L.state_floats > 0, empty = L.k_width == 0 && L.v_width == 0 && L.state_floats == 0;
    if ((recurrent ? L.k_width != 0 || L.v_width != 0 : L.k_width <= 0 && !empty) || L.v_width < 0 || L.window < 0 ||
        L.state_floats < 0)
      throw_error(ErrorKind::InvalidArgument, "KVCache: layer {} has key width {}, value width {}, window {}, state {}",
                  l, L.k_width, L.v_width, L.window, L.state_floats);
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
    overflow |= __builtin_add_overflow(state_bytes, static_cast<size_t>(L.state_floats) * sizeof(float), &state_bytes);
    k_offset_[l] = k_bytes;
    v_offset_[l] = v_bytes;
    overflow |= __builtin_add_overflow(k_bytes, kl, &k_bytes);
    overflow |= __builtin_add_overflow(v_bytes, vl, &v_bytes);
  }
  size_t bytes = SIZE_MAX;
  size_t ring = 0;
  if (!overflow && (__builtin_mul_overflow(state_bytes, static_cast<size_t>(rollback_) + 1, &ring) ||
                    __builtin_add_overflow(k_bytes, v_bytes, &bytes) || __builtin_add_overflow(bytes, ring, &bytes)))
    bytes = SIZE_MAX;
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
  state_bytes_ = state_bytes;
  allocate_states(rollback_);
  pos_.assign(static_cast<size_t>(capacity_), 0);
  size_ = 0;
  state_low_ = -1;
}

void KVCache::allocate_states(int rollback) {
  s_offset_.assign(layers_.size(), 0);
  size_t at = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    s_offset_[l] = at;
    at += static_cast<size_t>(layers_[l].state_floats) * sizeof(float) * (static_cast<size_t>(rollback) + 1);
  }
  s_mem_ = at ? memory_->allocate(at) : nullptr;
}

float* KVCache::state_data(int layer) const {
  if (!s_mem_ || layers_[layer].state_floats == 0) return nullptr;
  return reinterpret_cast<float*>(slot_data(layer, 0));
}

void KVCache::reserve_rollback(int rows) {
  if (rows <= rollback_) return;
  if (!has_states()) {
    rollback_ = rows;
    return;
  }
  // A new ring, the states it held placed at their tokens' new slots.
  const std::shared_ptr<void> old_mem = s_mem_;  // freed when the copies are done
  const std::vector<size_t> old_offset = s_offset_;
  const int old_slots = rollback_ + 1;
  allocate_states(rows);
  rollback_ = rows;
  for (int t = std::max(state_low_, 0); t < size_; ++t)
    for (int l = 0; l < n_layer(); ++l)
      if (const size_t bytes = state_bytes(l))
        memory_->copy(slot_data(l, state_slot(t)),
                      static_cast<const uint8_t*>(old_mem.get()) + old_offset[l] + static_cast<size_t>(t % old_slots) * bytes,
                      bytes);
  memory_->synchronize();  // the old ring is freed on return
}

KVCache::KVCache(const KVCache& o)
    : memory_(o.memory_), layers_(o.layers_), k_offset_(o.k_offset_), v_offset_(o.v_offset_),
      capacity_(o.capacity_), size_(0), pos_(o.pos_), rollback_(o.rollback_) {
  if (!o.memory_) return;  // a default-constructed cache
  allocate();
  size_ = o.size_;
  pos_ = o.pos_;
  for (int l = 0; l < n_layer(); ++l) {
    if (k_row_bytes(l)) memory_->copy(k_data(l), o.k_data(l), k_row_bytes(l) * static_cast<size_t>(capacity_));
    if (v_row_bytes(l)) memory_->copy(v_data(l), o.v_data(l), v_row_bytes(l) * static_cast<size_t>(capacity_));
  }
  if (o.has_states()) {
    allocate_states(o.rollback_);
    memory_->copy(s_mem_.get(), o.s_mem_.get(), state_bytes_ * (static_cast<size_t>(o.rollback_) + 1));
  }
  rollback_ = o.rollback_;
  state_low_ = o.state_low_;
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
  if (!can_truncate(n))
    throw_error(ErrorKind::InvalidArgument,
                "KVCache::truncate({}): the recurrent layers keep the states of the last {} tokens only "
                "(KVCache::reserve_rollback), not of token {} of {}",
                n, rollback_ + 1, n - 1, size_);
  size_ = n;
  if (n == 0) state_low_ = -1;
}

void KVCache::keep(std::span<const int> indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size_ || (i > 0 && indices[i] <= indices[i - 1]))
      throw_error(ErrorKind::InvalidArgument,
                  "KVCache::keep: index {} at {} must be strictly increasing and below size {}",
                  indices[i], i, size_);
  }
  const int m = static_cast<int>(indices.size());
  int first_moved = 0;  // indices[i] == i before it
  while (first_moved < m && indices[first_moved] == first_moved) ++first_moved;
  if (has_states() && first_moved == m && !can_truncate(m))
    throw_error(ErrorKind::InvalidArgument,
                "KVCache::keep: the recurrent layers keep the states of the last {} tokens only "
                "(KVCache::reserve_rollback), not of token {} of {}",
                rollback_ + 1, m - 1, size_);
  if (has_states() && first_moved < m) {
    // The kept tokens' states follow them: those of the new last rollback() + 1 tokens are needed,
    // each read (all of them first: a ring slot may be both a source and a destination) from where
    // its token was.
    int lo = std::max(first_moved, m - 1 - rollback_);
    while (lo < m && indices[lo] < state_low_) ++lo;  // states already dropped stay dropped
    if (lo == m)
      throw_error(ErrorKind::InvalidArgument,
                  "KVCache::keep: the recurrent layers keep the states of the last {} tokens only "
                  "(KVCache::reserve_rollback), not of token {} of {}",
                  rollback_ + 1, indices[m - 1], size_);
    // Staged through a scratch block (state_bytes_ per kept token), all sources read first.
    std::shared_ptr<void> tmp = memory_->allocate(state_bytes_ * static_cast<size_t>(m - lo));
    for (int to_ring = 0; to_ring < 2; ++to_ring)
      for (int j = lo; j < m; ++j) {
        uint8_t* staged = static_cast<uint8_t*>(tmp.get()) + static_cast<size_t>(j - lo) * state_bytes_;
        for (int l = 0; l < n_layer(); ++l) {
          const size_t bytes = state_bytes(l);
          if (bytes == 0) continue;
          if (to_ring)
            memory_->copy(slot_data(l, state_slot(j)), staged, bytes);
          else
            memory_->copy(staged, slot_data(l, state_slot(indices[j])), bytes);
          staged += bytes;
        }
      }
    memory_->synchronize();  // tmp is freed on return
    state_low_ = lo > first_moved ? lo : std::max(state_low_, m - 1 - rollback_);
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    const size_t src = static_cast<size_t>(indices[i]);
    if (src == i) continue;
    for (int l = 0; l < n_layer(); ++l) {
      const size_t kb = k_row_bytes(l), vb = v_row_bytes(l);
      if (kb) memory_->copy(static_cast<uint8_t*>(k_data(l)) + i * kb, static_cast<uint8_t*>(k_data(l)) + src * kb, kb);
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
  if (has_states()) state_low_ = std::max(state_low_, size_ - 1 - rollback_);
}

}  // namespace specmoe::core
