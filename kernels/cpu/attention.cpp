// Scaled dot-product attention of new tokens over a KV cache, grouped-query heads, optional mask
// among the new tokens, optional sliding window over positions, optional soft-capping of the scores. Keys are visited in cache order (cached rows, then the allowed new
// rows), so a token's output is the same whether it is computed in a batch or alone after its
// predecessors were appended: the property speculative verification relies on.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu {

namespace {

void check(const AttentionParams& p, const KVView& kv) {
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.n_head % p.n_head_kv != 0)
    throw_error(ErrorKind::InvalidArgument, "attention: n_head {} must be a positive multiple of n_head_kv {}",
                p.n_head, p.n_head_kv);
  if (p.window < 0) throw_error(ErrorKind::InvalidArgument, "attention: window {} is negative", p.window);
  if (!(p.softcap >= 0.0f)) throw_error(ErrorKind::InvalidArgument, "attention: softcap {} is negative", p.softcap);
  if (p.window > 0 && kv.positions == nullptr)
    throw_error(ErrorKind::InvalidArgument, "attention: a sliding window of {} needs the rows' positions", p.window);
}

// The sliding window: row r is within reach of new token i (positions pq - pk < window).
inline bool in_window(const KVView& kv, const AttentionParams& p, int64_t i, int64_t r) {
  return p.window <= 0 ||
         static_cast<int64_t>(kv.positions[kv.n_past + i]) - static_cast<int64_t>(kv.positions[r]) < p.window;
}

inline bool visible(const uint8_t* allowed, int64_t T, int64_t i, int64_t j) {
  return allowed ? allowed[i * T + j] != 0 : j <= i;
}

// One (token i, head h) output. scores: scratch of n_past + T floats.
template <bool kFast>
void attend_one(const float* q, int64_t T, int64_t i, int h, const KVView& kv, const uint8_t* allowed,
                const AttentionParams& p, float* out, float* scores, int64_t* rows) {
  const int kvh = h / (p.n_head / p.n_head_kv);
  const int64_t d = p.head_dim;
  const float* qh = q + (i * p.n_head + h) * d;
  float* oh = out + (i * p.n_head + h) * d;
  // Visible rows in cache order.
  int64_t n = 0;
  for (int64_t r = 0; r < kv.n_past; ++r)
    if (in_window(kv, p, i, r)) rows[n++] = r;
  for (int64_t j = 0; j < T; ++j)
    if (visible(allowed, T, i, j) && in_window(kv, p, i, kv.n_past + j)) rows[n++] = kv.n_past + j;
  std::fill(oh, oh + d, 0.0f);
  if (n == 0) return;
  float mx = -INFINITY;
  for (int64_t s = 0; s < n; ++s) {
    const float* kr = kv.k + rows[s] * kv.kv_stride + kvh * d;
    float dot;
    if constexpr (kFast) {
      dot = avx2::dot_f32(qh, kr, d);
    } else {
      dot = 0.0f;
      for (int64_t c = 0; c < d; ++c) dot += qh[c] * kr[c];
    }
    scores[s] = dot * p.scale;
    if (p.softcap > 0.0f) scores[s] = p.softcap * std::tanh(scores[s] / p.softcap);
    mx = std::max(mx, scores[s]);
  }
  float sum = 0.0f;
  for (int64_t s = 0; s < n; ++s) {
    scores[s] = std::exp(scores[s] - mx);
    sum += scores[s];
  }
  const float inv = 1.0f / sum;
  for (int64_t s = 0; s < n; ++s) {
    const float* vr = kv.v + rows[s] * kv.kv_stride + kvh * d;
    const float a = scores[s] * inv;
    if constexpr (kFast) {
      avx2::axpy_f32(a, vr, oh, d);
    } else {
      for (int64_t c = 0; c < d; ++c) oh[c] += a * vr[c];
    }
  }
}

}  // namespace

void attention_ref(const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
                   const AttentionParams& p, float* out) {
  check(p, kv);
  std::vector<float> scores(kv.n_past + T);
  std::vector<int64_t> rows(kv.n_past + T);
  for (int64_t i = 0; i < T; ++i)
    for (int h = 0; h < p.n_head; ++h) attend_one<false>(q, T, i, h, kv, allowed, p, out, scores.data(), rows.data());
}

void attention(ThreadPool& pool, const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
               const AttentionParams& p, float* out, Isa isa) {
  check(p, kv);
  const bool fast = usable_isa(isa) == Isa::Avx2;
  // One item per (token, head); each is independent, so the split cannot change results.
  pool.parallel_for(T * p.n_head, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scores(kv.n_past + T);
    std::vector<int64_t> rows(kv.n_past + T);
    for (int64_t it = b; it < e; ++it) {
      const int64_t i = it / p.n_head;
      const int h = static_cast<int>(it % p.n_head);
      if (fast)
        attend_one<true>(q, T, i, h, kv, allowed, p, out, scores.data(), rows.data());
      else
        attend_one<false>(q, T, i, h, kv, allowed, p, out, scores.data(), rows.data());
    }
  });
}

}  // namespace specmoe::kernels::cpu
