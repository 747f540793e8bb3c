// Scaled dot-product attention of new tokens over a KV cache, grouped-query heads, optional mask
// among the new tokens, optional sliding window over positions, optional soft-capping of the
// scores, optional attention sinks, optional ALiBi biases, keys and values of F32, F16 or Q8_0 rows. Keys are visited in cache order (cached rows,
// then the allowed new rows), so a token's output is the same whether it is computed in a batch
// or alone after its predecessors were appended: the property speculative verification relies on.
//
// The reference dequantizes each visible row (kernels/cpu/quant.h) and runs the float math. The
// fast path reads the rows as they are stored: F32 and F16 keys against the float query (halves
// widened exactly), Q8_0 keys by an integer dot with the query quantized to 8 bits per block (as
// llama.cpp's CPU attention does for quantized K), values accumulated from each type directly.
// Both take the softmax's exponentials from kernels/cpu/exp.h (libm's expf bits): the reference
// one at a time (exp_f32), the fast path 8 per instruction (exp_shifted).
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/attention_avx2.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/attention_avx512.h"
#include "kernels/cpu/exp.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu {

namespace {

bool kv_type_ok(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::Q8_0; }

void check(const AttentionParams& p, const KVView& kv, const uint8_t* allowed) {
  if (kv.mask_past < 0 || kv.mask_past > kv.n_past || (kv.mask_past > 0 && allowed == nullptr))
    throw_error(ErrorKind::InvalidArgument, "attention: a mask over the last {} of {} cached rows needs 0 <= {} <= {} "
                "and a mask", kv.mask_past, kv.n_past, kv.mask_past, kv.n_past);
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.n_head % p.n_head_kv != 0)
    throw_error(ErrorKind::InvalidArgument, "attention: n_head {} must be a positive multiple of n_head_kv {}",
                p.n_head, p.n_head_kv);
  if (p.window < 0) throw_error(ErrorKind::InvalidArgument, "attention: window {} is negative", p.window);
  if (!(p.softcap >= 0.0f)) throw_error(ErrorKind::InvalidArgument, "attention: softcap {} is negative", p.softcap);
  if (p.window > 0 && kv.positions == nullptr)
    throw_error(ErrorKind::InvalidArgument, "attention: a sliding window of {} needs the rows' positions", p.window);
  if (p.chunk < 0) throw_error(ErrorKind::InvalidArgument, "attention: chunk {} is negative", p.chunk);
  if (p.chunk > 0 && kv.positions == nullptr)
    throw_error(ErrorKind::InvalidArgument, "attention: chunks of {} need the rows' positions", p.chunk);
  if (p.alibi_slopes != nullptr && kv.positions == nullptr)
    throw_error(ErrorKind::InvalidArgument, "attention: ALiBi needs the rows' positions");
  for (const auto& [type, bytes, what] : {std::tuple{kv.k_type, kv.k_row_bytes, "key"},
                                          std::tuple{kv.v_type, kv.v_row_bytes, "value"}}) {
    if (!kv_type_ok(type))
      throw_error(ErrorKind::InvalidArgument, "attention: {} rows of type {}: KV rows are F32, F16 or Q8_0", what,
                  dtype_name(type));
    if (p.head_dim % dtype_info(type).block_size != 0)
      throw_error(ErrorKind::InvalidArgument,
                  "attention: {} {} rows need head_dim {} to be a multiple of {} (a head must start on a block)",
                  dtype_name(type), what, p.head_dim, dtype_info(type).block_size);
    if (bytes < dtype_row_bytes(type, int64_t{p.n_head_kv} * p.head_dim))
      throw_error(ErrorKind::InvalidArgument, "attention: {} rows {} bytes apart hold fewer than n_head_kv {} x "
                  "head_dim {} {} elements", what, bytes, p.n_head_kv, p.head_dim, dtype_name(type));
  }
}

using detail::visible_rows;

// ALiBi: the scores of one head over its n visible rows get -slope * |pq - pk|, pq the position
// of new token i (ggml adds slope times the mask's -|pq - pk|: the same float).
void add_alibi(float* scores, int64_t n, const int64_t* rows, const KVView& kv, int64_t i, float slope) {
  const int64_t pq = kv.positions[kv.n_past + i];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t dist = pq - static_cast<int64_t>(kv.positions[rows[t]]);
    scores[t] += slope * -static_cast<float>(dist < 0 ? -dist : dist);
  }
}

// One KV head's elements in the rows of a cache: row r starts at base + r * pitch.
struct HeadRows {
  const uint8_t* base;
  size_t pitch;
  DType type;
  const uint8_t* row(int64_t r) const { return base + static_cast<size_t>(r) * pitch; }
};

HeadRows head_rows(const void* data, size_t pitch, DType type, int kvh, int64_t d) {
  return {static_cast<const uint8_t*>(data) + dtype_row_bytes(type, kvh * d), pitch, type};
}

// Per-thread scratch: scores and visible rows (n_past + T), a dequantized row and the quantized
// query (head_dim).
struct Scratch {
  std::vector<float> scores, row;
  std::vector<int64_t> rows;
  std::vector<avx2::QueryQ8> query;
  std::vector<const uint16_t*> row_ptrs;  // the visible key rows, then the value rows
  Scratch(int64_t n, int64_t d) : scores(n), row(d), rows(n), query((d + 31) / 32) {}
};

// One (token i, head h) output.
template <bool kFast>
void attend_one(const float* q, int64_t T, int64_t i, int h, const KVView& kv, const uint8_t* allowed,
                const AttentionParams& p, float* out, Scratch& s) {
  const int kvh = h / (p.n_head / p.n_head_kv);
  const int64_t d = p.head_dim;
  const float* qh = q + (i * p.n_head + h) * d;
  float* oh = out + (i * p.n_head + h) * d;
  const HeadRows K = head_rows(kv.k, kv.k_row_bytes, kv.k_type, kvh, d);
  const HeadRows V = head_rows(kv.v, kv.v_row_bytes, kv.v_type, kvh, d);
  const int64_t n = visible_rows(kv, p, allowed, T, i, s.rows.data());
  std::fill(oh, oh + d, 0.0f);
  if (n == 0) return;
  if (kFast && K.type == DType::Q8_0) avx2::quantize_query_q8(qh, d / 32, s.query.data());
  float mx = -INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* kr = K.row(s.rows[t]);
    float dot;
    if constexpr (kFast) {
      switch (K.type) {
        case DType::F16: dot = avx2::dot_f16(qh, reinterpret_cast<const uint16_t*>(kr), d); break;
        case DType::Q8_0: dot = avx2::dot_q8_0(s.query.data(), kr, d / 32); break;
        default: dot = avx2::dot_f32(qh, reinterpret_cast<const float*>(kr), d);
      }
    } else {
      const float* kf = reinterpret_cast<const float*>(kr);
      if (K.type != DType::F32) dequantize_row(K.type, kr, s.row.data(), d), kf = s.row.data();
      dot = 0.0f;
      for (int64_t c = 0; c < d; ++c) dot += qh[c] * kf[c];
    }
    s.scores[t] = dot * p.scale;
    if (p.softcap > 0.0f) s.scores[t] = p.softcap * std::tanh(s.scores[t] / p.softcap);
  }
  if (p.alibi_slopes != nullptr) add_alibi(s.scores.data(), n, s.rows.data(), kv, i, p.alibi_slopes[h]);
  for (int64_t t = 0; t < n; ++t) mx = std::max(mx, s.scores[t]);
  if (p.sinks != nullptr) mx = std::max(mx, p.sinks[h]);
  if constexpr (kFast) {
    exp_shifted(s.scores.data(), n, mx);
  } else {
    for (int64_t t = 0; t < n; ++t) s.scores[t] = exp_f32(s.scores[t] - mx);
  }
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) sum += s.scores[t];
  if (p.sinks != nullptr) sum += exp_f32(p.sinks[h] - mx);  // the sink's share, with no value
  const float inv = 1.0f / sum;
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* vr = V.row(s.rows[t]);
    const float a = s.scores[t] * inv;
    if constexpr (kFast) {
      switch (V.type) {
        case DType::F16: avx2::axpy_f16(a, reinterpret_cast<const uint16_t*>(vr), oh, d); break;
        case DType::Q8_0: avx2::axpy_q8_0(a, vr, oh, d / 32); break;
        default: avx2::axpy_f32(a, reinterpret_cast<const float*>(vr), oh, d);
      }
    } else {
      const float* vf = reinterpret_cast<const float*>(vr);
      if (V.type != DType::F32) dequantize_row(V.type, vr, s.row.data(), d), vf = s.row.data();
      for (int64_t c = 0; c < d; ++c) oh[c] += a * vf[c];
    }
  }
}

// attend_one's softmax for each of G heads, scores[g * n + t] in place (with head g's sink
// sinks[g] when sinks is not null). The heads' maxima and sums run side by side, each still in row
// order (the same bits), so their chains of dependent adds overlap; G is a compile-time constant so
// that the loops over the heads unroll.
template <int G>
void softmax_heads(float* scores, int64_t n, const float* sinks) {
  float mx[G], sum[G];
  for (int g = 0; g < G; ++g) mx[g] = -INFINITY, sum[g] = 0.0f;
  for (int64_t t = 0; t < n; ++t)
    for (int g = 0; g < G; ++g) mx[g] = std::max(mx[g], scores[g * n + t]);
  if (sinks != nullptr)
    for (int g = 0; g < G; ++g) mx[g] = std::max(mx[g], sinks[g]);
  for (int g = 0; g < G; ++g) exp_shifted(scores + g * n, n, mx[g]);
  for (int64_t t = 0; t < n; ++t)
    for (int g = 0; g < G; ++g) sum[g] += scores[g * n + t];
  if (sinks != nullptr)
    for (int g = 0; g < G; ++g) sum[g] += exp_f32(sinks[g] - mx[g]);
  for (int g = 0; g < G; ++g) {
    const float inv = 1.0f / sum[g];
    for (int64_t t = 0; t < n; ++t) scores[g * n + t] *= inv;
  }
}

// The query heads h0 .. h0 + G - 1 of token i, which share one KV head, with F16 keys and values
// (the default cache): each key and value row is read and widened once for all of them
// (attention_avx2.h), and every head's arithmetic is attend_one's, so the outputs are its bits.
// The f16 head-group kernels of one instruction set (the same results from each).
struct F16HeadKernels {
  void (*dots)(const float* const*, int, const uint16_t*, int64_t, float*);
  void (*weighted_sum)(const float*, int, const uint16_t* const*, int64_t, int64_t, float* const*);
  // Every row's scaled dots at once (nullptr: dots row by row).
  void (*scores)(const float* const*, int, const uint16_t* const*, int64_t, int64_t, float, float*);
};
F16HeadKernels f16_head_kernels(Isa isa) {
  if (usable_isa(isa) >= Isa::Avx512)
    return {&avx512::dot_f16_heads, &avx512::weighted_sum_f16_heads, &avx512::scores_f16_heads};
  return {&avx2::dot_f16_heads, &avx2::weighted_sum_f16_heads, nullptr};
}

void attend_heads_f16(const float* q, int64_t T, int64_t i, int h0, int G, const KVView& kv, const uint8_t* allowed,
                      const AttentionParams& p, float* out, Scratch& s, const F16HeadKernels& kern) {
  const int kvh = h0 / (p.n_head / p.n_head_kv);
  const int64_t d = p.head_dim;
  const HeadRows K = head_rows(kv.k, kv.k_row_bytes, kv.k_type, kvh, d);
  const HeadRows V = head_rows(kv.v, kv.v_row_bytes, kv.v_type, kvh, d);
  const int64_t n = visible_rows(kv, p, allowed, T, i, s.rows.data());
  const float* qh[8];
  float* oh[8];
  for (int g = 0; g < G; ++g) {
    qh[g] = q + (i * p.n_head + h0 + g) * d;
    oh[g] = out + (i * p.n_head + h0 + g) * d;
    std::fill(oh[g], oh[g] + d, 0.0f);
  }
  if (n == 0) return;
  // scores[g * n + t]
  if (static_cast<int64_t>(s.scores.size()) < G * n) s.scores.resize(static_cast<size_t>(G * n));
  const float scale = p.scale, cap = p.softcap;
  if (static_cast<int64_t>(s.row_ptrs.size()) < n) s.row_ptrs.resize(static_cast<size_t>(n));
  if (kern.scores != nullptr && cap <= 0.0f) {
    for (int64_t t = 0; t < n; ++t) s.row_ptrs[t] = reinterpret_cast<const uint16_t*>(K.row(s.rows[t]));
    kern.scores(qh, G, s.row_ptrs.data(), n, d, scale, s.scores.data());
  } else {
    float dots[8];
    for (int64_t t = 0; t < n; ++t) {
      kern.dots(qh, G, reinterpret_cast<const uint16_t*>(K.row(s.rows[t])), d, dots);
      if (cap > 0.0f) {
        for (int g = 0; g < G; ++g) s.scores[g * n + t] = cap * std::tanh(dots[g] * scale / cap);
      } else {
        for (int g = 0; g < G; ++g) s.scores[g * n + t] = dots[g] * scale;
      }
    }
  }
  if (p.alibi_slopes != nullptr)
    for (int g = 0; g < G; ++g) add_alibi(s.scores.data() + g * n, n, s.rows.data(), kv, i, p.alibi_slopes[h0 + g]);
  const float* sinks = p.sinks != nullptr ? p.sinks + h0 : nullptr;
  switch (G) {
    case 1: softmax_heads<1>(s.scores.data(), n, sinks); break;
    case 2: softmax_heads<2>(s.scores.data(), n, sinks); break;
    case 3: softmax_heads<3>(s.scores.data(), n, sinks); break;
    case 4: softmax_heads<4>(s.scores.data(), n, sinks); break;
    case 5: softmax_heads<5>(s.scores.data(), n, sinks); break;
    case 6: softmax_heads<6>(s.scores.data(), n, sinks); break;
    case 7: softmax_heads<7>(s.scores.data(), n, sinks); break;
    default: softmax_heads<8>(s.scores.data(), n, sinks); break;
  }
  for (int64_t t = 0; t < n; ++t) s.row_ptrs[t] = reinterpret_cast<const uint16_t*>(V.row(s.rows[t]));
  kern.weighted_sum(s.scores.data(), G, s.row_ptrs.data(), n, d, oh);
}

}  // namespace

void attention_ref(const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
                   const AttentionParams& p, float* out) {
  check(p, kv, allowed);
  Scratch s(kv.n_past + T, p.head_dim);
  for (int64_t i = 0; i < T; ++i)
    for (int h = 0; h < p.n_head; ++h) attend_one<false>(q, T, i, h, kv, allowed, p, out, s);
}

void attention(ThreadPool& pool, const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
               const AttentionParams& p, float* out, Isa isa) {
  check(p, kv, allowed);
  const bool fast = usable_isa(isa) != Isa::Scalar;
  if (fast && kv.k_type == DType::F16 && kv.v_type == DType::F16) {
    // One item per (token, up to 8 query heads of one KV head): the heads share the reads of the
    // key and value rows. Each item's outputs are independent of the split.
    const int group = p.n_head / p.n_head_kv, per_item = std::min(group, 8);
    const int items_per_kv = (group + per_item - 1) / per_item;
    const F16HeadKernels kern = f16_head_kernels(isa);
    pool.parallel_for(T * p.n_head_kv * items_per_kv, 1, [&](int64_t b, int64_t e) {
      Scratch s(kv.n_past + T, p.head_dim);
      for (int64_t it = b; it < e; ++it) {
        const int64_t i = it / (p.n_head_kv * items_per_kv);
        const int rest = static_cast<int>(it % (p.n_head_kv * items_per_kv));
        const int kvh = rest / items_per_kv, part = rest % items_per_kv;
        const int h0 = kvh * group + part * per_item;
        attend_heads_f16(q, T, i, h0, std::min(per_item, kvh * group + group - h0), kv, allowed, p, out, s, kern);
      }
    });
    return;
  }
  // One item per (token, head); each is independent, so the split cannot change results.
  pool.parallel_for(T * p.n_head, 1, [&](int64_t b, int64_t e) {
    Scratch s(kv.n_past + T, p.head_dim);
    for (int64_t it = b; it < e; ++it) {
      const int64_t i = it / p.n_head;
      const int h = static_cast<int>(it % p.n_head);
      if (fast)
        attend_one<true>(q, T, i, h, kv, allowed, p, out, s);
      else
        attend_one<false>(q, T, i, h, kv, allowed, p, out, s);
    }
  });
}

}  // namespace specmoe::kernels::cpu
