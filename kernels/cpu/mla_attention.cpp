// Multi-head latent attention in its absorbed form over a cache of latent rows (DeepSeek-V2): each
// (token, head) scores every visible latent row with its absorbed query, then sums the rows'
// latent parts with the softmax weights. Rows are visited in cache order, as in attention.cpp, so a
// token's output does not depend on the batch it was computed in.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/exp.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu {

namespace {

void check(const MlaAttentionParams& p, const MlaKVView& kv, const uint8_t* allowed) {
  if (kv.mask_past < 0 || kv.mask_past > kv.n_past || (kv.mask_past > 0 && allowed == nullptr))
    throw_error(ErrorKind::InvalidArgument, "mla attention: a mask over the last {} of {} cached rows needs 0 <= {} "
                "<= {} and a mask", kv.mask_past, kv.n_past, kv.mask_past, kv.n_past);
  if (p.n_head <= 0 || p.kv_lora_rank <= 0 || p.rope_dims < 0)
    throw_error(ErrorKind::InvalidArgument, "mla attention: n_head {}, kv_lora_rank {} and rope_dims {} must be positive",
                p.n_head, p.kv_lora_rank, p.rope_dims);
  if (kv.stride < p.row_width())
    throw_error(ErrorKind::InvalidArgument, "mla attention: row stride {} is less than the row width {}", kv.stride,
                p.row_width());
  if (p.window < 0) throw_error(ErrorKind::InvalidArgument, "mla attention: window {} is negative", p.window);
  if (p.window > 0 && kv.positions == nullptr)
    throw_error(ErrorKind::InvalidArgument, "mla attention: a sliding window of {} needs the rows' positions", p.window);
}

template <bool kFast>
void attend_one(const float* q, int64_t T, int64_t i, int h, const MlaKVView& kv, const uint8_t* allowed,
                const MlaAttentionParams& p, float* out, float* scores, int64_t* rows) {
  const int64_t w = p.row_width(), rank = p.kv_lora_rank;
  const float* qh = q + (i * p.n_head + h) * w;
  float* oh = out + (i * p.n_head + h) * rank;
  const int64_t n = detail::visible_rows(kv, p, allowed, T, i, rows);
  std::fill(oh, oh + rank, 0.0f);
  if (n == 0) return;
  float mx = -INFINITY;
  for (int64_t s = 0; s < n; ++s) {
    const float* kr = kv.rows + rows[s] * kv.stride;
    float dot;
    if constexpr (kFast) {
      dot = avx2::dot_f32(qh, kr, w);
    } else {
      dot = 0.0f;
      for (int64_t c = 0; c < w; ++c) dot += qh[c] * kr[c];
    }
    scores[s] = dot * p.scale;
    mx = std::max(mx, scores[s]);
  }
  if constexpr (kFast) {
    exp_shifted(scores, n, mx);
  } else {
    for (int64_t s = 0; s < n; ++s) scores[s] = exp_f32(scores[s] - mx);
  }
  float sum = 0.0f;
  for (int64_t s = 0; s < n; ++s) sum += scores[s];
  const float inv = 1.0f / sum;
  for (int64_t s = 0; s < n; ++s) {
    const float* vr = kv.rows + rows[s] * kv.stride;  // the latent is the value
    const float a = scores[s] * inv;
    if constexpr (kFast) {
      avx2::axpy_f32(a, vr, oh, rank);
    } else {
      for (int64_t c = 0; c < rank; ++c) oh[c] += a * vr[c];
    }
  }
}

}  // namespace

void mla_attention_ref(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                       const MlaAttentionParams& p, float* out) {
  check(p, kv, allowed);
  std::vector<float> scores(kv.n_past + T);
  std::vector<int64_t> rows(kv.n_past + T);
  for (int64_t i = 0; i < T; ++i)
    for (int h = 0; h < p.n_head; ++h) attend_one<false>(q, T, i, h, kv, allowed, p, out, scores.data(), rows.data());
}

void mla_attention(ThreadPool& pool, const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                   const MlaAttentionParams& p, float* out, Isa isa) {
  check(p, kv, allowed);
  const bool fast = usable_isa(isa) != Isa::Scalar;  // the AVX2 loops, on every SIMD path
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
