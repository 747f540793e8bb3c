// Internal to kernels/cpu: the cache rows a new token attends to, in the order the softmax visits
// them, shared by attention.cpp (KVView) and mla_attention.cpp (MlaKVView). Visiting rows in
// cache order is what makes a token's output the same whether it is computed in a batch or alone.
#pragma once
#include <cstdint>

namespace specmoe::kernels::cpu::detail {

// The sliding window: row r is within reach of new token i (positions pq - pk < window); with a
// chunk (AttentionParams only), r is in i's chunk (pk >= pq - pq % chunk).
template <class View, class Params>
inline bool in_window(const View& kv, const Params& p, int64_t i, int64_t r) {
  if constexpr (requires { p.chunk; }) {
    if (p.chunk > 0) {
      const int64_t pq = kv.positions[kv.n_past + i];
      if (static_cast<int64_t>(kv.positions[r]) < pq - pq % p.chunk) return false;
    }
  }
  return p.window <= 0 ||
         static_cast<int64_t>(kv.positions[kv.n_past + i]) - static_cast<int64_t>(kv.positions[r]) < p.window;
}

// The rows new token i sees, in cache order: the cached rows before the mask's columns, then the
// rows its mask row allows (the cache's last mask_past rows, then the new tokens; causal among
// the new tokens without a mask), within the window and the chunk. Returns how many, written to rows.
template <class View, class Params>
int64_t visible_rows(const View& kv, const Params& p, const uint8_t* allowed, int64_t T, int64_t i, int64_t* rows) {
  int64_t n = 0;
  const int64_t first = kv.n_past - kv.mask_past, cols = kv.mask_past + T;
  for (int64_t r = 0; r < first; ++r)
    if (in_window(kv, p, i, r)) rows[n++] = r;
  for (int64_t c = 0; c < cols; ++c) {
    const bool seen = allowed ? allowed[i * cols + c] != 0 : c <= i;
    if (seen && in_window(kv, p, i, first + c)) rows[n++] = first + c;
  }
  return n;
}

}  // namespace specmoe::kernels::cpu::detail
