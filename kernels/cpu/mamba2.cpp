// The Mamba-2 mixer's recurrence (kernels/cpu/ops.h mamba2; kernels/op_params.h Mamba2Params is
// the definition). Three passes: the causal convolution channel by channel (a channel's tail in
// each token's state slot is read and written by that channel's task only), the scan head by head
// (a head's block of each slot likewise), then the gate and the grouped RMS norm row by row. Sums
// run in ggml's reference order: the taps from the oldest, then the bias; each state element
// s = s * dA + B x dt, then y += s C in state order.
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/recurrent_rows.h"

namespace specmoe::kernels::cpu {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }  // ggml's threshold

void conv_channels(const float* zxbcdt, const float* conv_w, const float* conv_b, float* states, const int32_t* slots,
                   int64_t T, const Mamba2Params& p, float* xbc, int64_t c0, int64_t c1) {
  const int P = p.d_conv - 1;
  const int64_t C = p.conv_dim(), F = p.state_floats(), in = p.in_proj(), di = p.d_inner();
  for (int64_t t = 0; t < T; ++t) {
    const float* tail_in = slots[2 * t] >= 0 ? states + slots[2 * t] * F : nullptr;
    float* tail_out = states + slots[2 * t + 1] * F;
    const float* x = zxbcdt + t * in + di;  // xBC
    for (int64_t c = c0; c < c1; ++c) {
      const float* w = conv_w + c * p.d_conv;
      float s = 0.0f;
      for (int k = 0; k < P; ++k) s += (tail_in ? tail_in[k * C + c] : 0.0f) * w[k];
      s += x[c] * w[P];
      if (conv_b) s += conv_b[c];
      xbc[t * C + c] = s / (1.0f + std::exp(-s));  // silu
      for (int k = 0; k + 1 < P; ++k) tail_out[k * C + c] = tail_in ? tail_in[(k + 1) * C + c] : 0.0f;
      if (P > 0) tail_out[(P - 1) * C + c] = x[c];
    }
  }
}

void scan_heads(const float* zxbcdt, const float* dt_bias, const float* a, const float* d, float* states,
                const int32_t* slots, int64_t T, const Mamba2Params& p, const float* xbc, float* out, int64_t h0,
                int64_t h1, bool simd) {
  const int64_t C = p.conv_dim(), F = p.state_floats(), in = p.in_proj(), di = p.d_inner();
  const int64_t conv_floats = p.conv_state_floats(), N = p.d_state, hd = p.head_dim;
  const int64_t heads_per_group = p.n_head / p.n_group;
  for (int64_t t = 0; t < T; ++t) {
    const float* s_in = slots[2 * t] >= 0 ? states + slots[2 * t] * F + conv_floats : nullptr;
    float* s_out = states + slots[2 * t + 1] * F + conv_floats;
    const float* x = xbc + t * C;
    const float* dt_raw = zxbcdt + t * in + di + C;
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / heads_per_group;
      const float* B = x + di + g * N;
      const float* Cg = x + di + p.n_group * N + g * N;
      const float dt = softplus(dt_raw[h] + dt_bias[h]);
      const float dA = std::exp(dt * a[h]);
      for (int64_t i = 0; i < hd; ++i) {
        const int64_t ii = h * hd + i;
        const float x_dt = x[ii] * dt;
        const float* src = s_in ? s_in + ii * N : nullptr;
        float* dst = s_out + ii * N;
        if (simd) {
          out[t * di + ii] = avx2::mamba2_row_step(src, dst, B, Cg, N, dA, x_dt) + x[ii] * d[h];
          continue;
        }
        float y = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
          const float s = (src ? src[n] * dA : 0.0f) + B[n] * x_dt;
          dst[n] = s;
          y += s * Cg[n];
        }
        out[t * di + ii] = y + x[ii] * d[h];
      }
    }
  }
}

// y * silu(z), then the RMS norm of group g of token t's row (norm_w null: gated only).
void gate_norm_row(const float* zxbcdt, const float* norm_w, int64_t t, int64_t g, const Mamba2Params& p, float* out) {
  const int64_t di = p.d_inner(), w = di / p.n_group;
  const float* z = zxbcdt + t * p.in_proj() + g * w;
  float* y = out + t * di + g * w;
  for (int64_t i = 0; i < w; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
  if (!norm_w) return;
  float ss = 0.0f;
  for (int64_t i = 0; i < w; ++i) ss += y[i] * y[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(w) + p.eps);
  for (int64_t i = 0; i < w; ++i) y[i] = y[i] * scale * norm_w[g * w + i];
}

}  // namespace

void mamba2_ref(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias, const float* a,
                const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
                const Mamba2Params& p, float* xbc, float* out) {
  conv_channels(zxbcdt, conv_w, conv_b, states, slots, T, p, xbc, 0, p.conv_dim());
  scan_heads(zxbcdt, dt_bias, a, d, states, slots, T, p, xbc, out, 0, p.n_head, false);
  for (int64_t r = 0; r < T * p.n_group; ++r) gate_norm_row(zxbcdt, norm_w, r / p.n_group, r % p.n_group, p, out);
}

void mamba2(ThreadPool& pool, const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
            const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
            const Mamba2Params& p, float* xbc, float* out) {
  pool.parallel_for(p.conv_dim(), 256, [&](int64_t c0, int64_t c1) {
    conv_channels(zxbcdt, conv_w, conv_b, states, slots, T, p, xbc, c0, c1);
  });
  const bool simd = best_isa() != Isa::Scalar;
  pool.parallel_for(p.n_head, 1, [&](int64_t h0, int64_t h1) {
    scan_heads(zxbcdt, dt_bias, a, d, states, slots, T, p, xbc, out, h0, h1, simd);
  });
  pool.parallel_for(T * p.n_group, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) gate_norm_row(zxbcdt, norm_w, r / p.n_group, r % p.n_group, p, out);
  });
}

}  // namespace specmoe::kernels::cpu
