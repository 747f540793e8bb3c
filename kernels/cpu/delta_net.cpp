// The gated DeltaNet recurrence of Qwen3-Next / Qwen3.5 linear-attention layers (kernels/cpu/ops.h
// delta_net; kernels/op_params.h DeltaNetParams is the definition). A token's state continues its
// parent's, so tokens run in order; a query/key head and the value heads that read it form one
// task, since they share that head's convolution channels (each channel's tail is read and
// written by exactly one task). A value head's step is one pass over its state: each row j of M
// is decayed, dotted with k, updated by d_j k and dotted with q while it is in L1, which is the
// arithmetic of ggml's four loops (decay, delta, rank-1 update, output) in one sweep, each dot
// summed in index order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/recurrent_rows.h"

namespace specmoe::kernels::cpu {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }  // ggml's threshold
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y = silu(conv(x)) over channels [c0, c0 + n) of one token, and the token's conv tail (the last
// d_conv - 1 rows of its path) written to tail_out from the parent's tail_in (null: zeros).
void conv_channels(const float* x, const float* conv_w, const float* tail_in, float* tail_out, int64_t c0, int64_t n,
                   const DeltaNetParams& p, float* y) {
  const int P = p.d_conv - 1;
  const int64_t C = p.conv_dim();
  for (int64_t c = c0; c < c0 + n; ++c) {
    const float* w = conv_w + c * p.d_conv;
    float s = 0.0f;
    for (int k = 0; k < P; ++k) s += (tail_in ? tail_in[k * C + c] : 0.0f) * w[k];
    s += x[c] * w[P];
    y[c - c0] = s / (1.0f + std::exp(-s));  // silu
    for (int k = 0; k + 1 < P; ++k) tail_out[k * C + c] = tail_in ? tail_in[(k + 1) * C + c] : 0.0f;
    if (P > 0) tail_out[(P - 1) * C + c] = x[c];
  }
}

void l2_normalize(float* x, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + eps);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// Query/key head kh and its value heads kh, kh + n_k_heads, ... (kv_interleaved: kh r .. kh r + r - 1)
// over all T tokens.
void delta_net_group(const float* qkv, const float* alpha, const float* beta, const float* conv_w,
                     const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
                     const DeltaNetParams& p, float* out, int kh, bool simd) {
  const int S = p.head_dim;
  const int64_t C = p.conv_dim(), K = p.key_dim(), V = p.value_dim();
  const int64_t slot_floats = p.state_floats(), conv_floats = p.conv_state_floats();
  const int group = p.n_v_heads / p.n_k_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  std::vector<float> q(S), k(S), v(S);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t in = slots[2 * t], own = slots[2 * t + 1];
    const float* s_in = in >= 0 ? states + in * slot_floats : nullptr;
    float* s_out = states + own * slot_floats;
    const float* x = qkv + t * C;
    conv_channels(x, conv_w, s_in, s_out, kh * S, S, p, q.data());
    conv_channels(x, conv_w, s_in, s_out, K + kh * S, S, p, k.data());
    l2_normalize(q.data(), S, p.eps);
    l2_normalize(k.data(), S, p.eps);
    for (int g = 0; g < group; ++g) {
      const int h = p.kv_interleaved ? kh * group + g : kh + g * p.n_k_heads;
      conv_channels(x, conv_w, s_in, s_out, 2 * K + static_cast<int64_t>(h) * S, S, p, v.data());
      const float decay = std::exp(softplus(alpha[t * p.n_v_heads + h] + dt_bias[h]) * a[h]);
      const float b = sigmoid(beta[t * p.n_v_heads + h]);
      const size_t head = static_cast<size_t>(h) * S * S;
      const float* m_in = s_in ? s_in + conv_floats + head : nullptr;
      float* m_out = s_out + conv_floats + head;
      float* o = out + t * V + static_cast<int64_t>(h) * S;
      if (simd) {
        avx2::delta_net_head_step(m_in, m_out, q.data(), k.data(), v.data(), S, decay, b, scale, o);
        continue;
      }
      for (int j = 0; j < S; ++j) {
        float* row = m_out + static_cast<size_t>(j) * S;
        if (m_in) {
          const float* src = m_in + static_cast<size_t>(j) * S;
          for (int i = 0; i < S; ++i) row[i] = src[i] * decay;
        } else {
          std::fill(row, row + S, 0.0f);
        }
        const float d = (v[j] - dot(row, k.data(), S)) * b;
        for (int i = 0; i < S; ++i) row[i] += k[i] * d;
        o[j] = dot(row, q.data(), S) * scale;
      }
    }
  }
}

}  // namespace

void delta_net_ref(const float* qkv, const float* alpha, const float* beta, const float* conv_w, const float* dt_bias,
                   const float* a, float* states, const int32_t* slots, int64_t T, const DeltaNetParams& p, float* out) {
  for (int kh = 0; kh < p.n_k_heads; ++kh)
    delta_net_group(qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out, kh, false);
}

void delta_net(ThreadPool& pool, const float* qkv, const float* alpha, const float* beta, const float* conv_w,
               const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
               const DeltaNetParams& p, float* out) {
  const bool simd = best_isa() != Isa::Scalar;
  pool.parallel_for(p.n_k_heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t kh = h0; kh < h1; ++kh)
      delta_net_group(qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out, static_cast<int>(kh), simd);
  });
}

void sigmoid_mul_ref(const float* gate, const float* x, float* y, int64_t n, int64_t group) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (1.0f / (1.0f + std::exp(-gate[i / group])));
}

void sigmoid_mul(ThreadPool& pool, const float* gate, const float* x, float* y, int64_t n, int64_t group) {
  if (group < 1 || n % group != 0)
    throw_error(ErrorKind::InvalidArgument, "sigmoid_mul: {} elements are not whole groups of {}", n, group);
  // Chunks of whole groups, so each chunk's gates start at its first element's.
  const int64_t groups = n / group, grain = std::max<int64_t>(1, 4096 / group);
  pool.parallel_for(groups, grain, [&](int64_t g0, int64_t g1) {
    sigmoid_mul_ref(gate + g0, x + g0 * group, y + g0 * group, (g1 - g0) * group, group);
  });
}

}  // namespace specmoe::kernels::cpu
