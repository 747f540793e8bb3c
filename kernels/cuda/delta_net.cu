// The gated DeltaNet recurrence of Qwen3-Next / Qwen3.5 linear-attention layers
// (kernels/op_params.h DeltaNetParams is the definition; kernels/cpu/delta_net.cpp the CPU op).
// One block per query/key head and the value heads that read it, head_dim threads: thread j owns
// channel j of the head's convolution (its tail in the token's state slot) and row j of each value
// head's state, so every value a thread reads from a slot it or the same thread wrote for an
// earlier token; tokens run in order in the block. Dots are summed in index order without FMA, as
// the CPU op sums them; the L2 norms' sums run on one thread in the same order.
#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

__device__ __forceinline__ float dn_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

// y = silu(conv) of channel c for one token; the token's tail written from the parent's.
__device__ float dn_conv(const float* x, const float* conv_w, const float* tail_in, float* tail_out, int64_t c,
                         int64_t C, int d_conv) {
  const int P = d_conv - 1;
  const float* w = conv_w + c * d_conv;
  float s = 0.0f;
  for (int k = 0; k < P; ++k) s = __fadd_rn(s, __fmul_rn(tail_in ? tail_in[k * C + c] : 0.0f, w[k]));
  s = __fadd_rn(s, __fmul_rn(x[c], w[P]));
  for (int k = 0; k + 1 < P; ++k) tail_out[k * C + c] = tail_in ? tail_in[(k + 1) * C + c] : 0.0f;
  if (P > 0) tail_out[(P - 1) * C + c] = x[c];
  return s / (1.0f + expf(-s));
}

__global__ void delta_net_kernel(const float* qkv, const float* alpha, const float* beta, const float* conv_w,
                                 const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
                                 DeltaNetParams p, float* out) {
  extern __shared__ float sh[];  // q [S] | k [S] | norms [2]
  const int S = p.head_dim, j = threadIdx.x, kh = blockIdx.x;
  // DeltaNetParams' size helpers are host functions: the same sizes from its fields.
  const int64_t K = static_cast<int64_t>(p.n_k_heads) * S, V = static_cast<int64_t>(p.n_v_heads) * S, C = 2 * K + V;
  const int64_t conv_floats = (p.d_conv - 1) * C, slot_floats = conv_floats + V * S;
  const int group = p.n_v_heads / p.n_k_heads;
  const float scale = 1.0f / sqrtf(static_cast<float>(S));
  float* q = sh;
  float* k = sh + S;
  float* norms = sh + 2 * S;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t in = slots[2 * t], own = slots[2 * t + 1];
    const float* s_in = in >= 0 ? states + in * slot_floats : nullptr;
    float* s_out = states + own * slot_floats;
    const float* x = qkv + t * C;
    q[j] = dn_conv(x, conv_w, s_in, s_out, static_cast<int64_t>(kh) * S + j, C, p.d_conv);
    k[j] = dn_conv(x, conv_w, s_in, s_out, K + static_cast<int64_t>(kh) * S + j, C, p.d_conv);
    __syncthreads();
    if (j == 0) {
      float sq = 0.0f, sk = 0.0f;
      for (int i = 0; i < S; ++i) {
        sq = __fadd_rn(sq, __fmul_rn(q[i], q[i]));
        sk = __fadd_rn(sk, __fmul_rn(k[i], k[i]));
      }
      norms[0] = 1.0f / sqrtf(sq + p.eps);
      norms[1] = 1.0f / sqrtf(sk + p.eps);
    }
    __syncthreads();
    q[j] *= norms[0];
    k[j] *= norms[1];
    __syncthreads();
    for (int g = 0; g < group; ++g) {
      const int h = p.kv_interleaved ? kh * group + g : kh + g * p.n_k_heads;
      const float v = dn_conv(x, conv_w, s_in, s_out, 2 * K + static_cast<int64_t>(h) * S + j, C, p.d_conv);
      const float decay = expf(dn_softplus(alpha[t * p.n_v_heads + h] + dt_bias[h]) * a[h]);
      const float b = 1.0f / (1.0f + expf(-beta[t * p.n_v_heads + h]));
      const size_t head = static_cast<size_t>(h) * S * S;
      const float* src = s_in ? s_in + conv_floats + head + static_cast<size_t>(j) * S : nullptr;
      float* row = s_out + conv_floats + head + static_cast<size_t>(j) * S;
      float dk = 0.0f;
      for (int i = 0; i < S; ++i) {
        const float m = src ? __fmul_rn(src[i], decay) : 0.0f;
        row[i] = m;
        dk = __fadd_rn(dk, __fmul_rn(m, k[i]));
      }
      const float d = __fmul_rn(__fsub_rn(v, dk), b);
      float o = 0.0f;
      for (int i = 0; i < S; ++i) {
        const float m = __fadd_rn(row[i], __fmul_rn(k[i], d));
        row[i] = m;
        o = __fadd_rn(o, __fmul_rn(m, q[i]));
      }
      out[t * V + static_cast<int64_t>(h) * S + j] = __fmul_rn(o, scale);
    }
    __syncthreads();  // q and k are rewritten by the next token
  }
}

__global__ void sigmoid_mul_kernel(const float* gate, const float* x, float* y, int64_t n, int64_t group) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * (1.0f / (1.0f + expf(-gate[i / group])));
}

}  // namespace detail

void delta_net(Context& ctx, const float* qkv, const float* alpha, const float* beta, const float* conv_w,
               const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
               const DeltaNetParams& p, float* out) {
  detail::require(T >= 0, "delta_net", "negative size");
  detail::require(p.n_k_heads > 0 && p.n_v_heads > 0 && p.n_v_heads % p.n_k_heads == 0, "delta_net",
                  "value heads must be a positive multiple of the key heads");
  detail::require(p.head_dim > 0 && p.head_dim <= 1024, "delta_net", "head_dim must be 1 to 1024");
  detail::require(p.d_conv >= 1, "delta_net", "d_conv < 1");
  if (T == 0) return;
  for (const void* ptr : {static_cast<const void*>(qkv), static_cast<const void*>(alpha), static_cast<const void*>(beta),
                          static_cast<const void*>(conv_w), static_cast<const void*>(dt_bias), static_cast<const void*>(a),
                          static_cast<const void*>(states), static_cast<const void*>(slots), static_cast<const void*>(out)})
    detail::require_ptr(ptr, "delta_net", "an argument");
  DeviceGuard guard(ctx.device());
  const size_t shared = (2 * static_cast<size_t>(p.head_dim) + 2) * sizeof(float);
  detail::delta_net_kernel<<<p.n_k_heads, p.head_dim, shared, detail::stream_of(ctx)>>>(
      qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void sigmoid_mul(Context& ctx, const float* gate, const float* x, float* y, int64_t n, int64_t group) {
  detail::require(n >= 0, "sigmoid_mul", "negative size");
  detail::require(group >= 1 && n % group == 0, "sigmoid_mul", "the elements are not whole groups");
  if (n == 0) return;
  detail::require_ptr(gate, "sigmoid_mul", "gate");
  detail::require_ptr(x, "sigmoid_mul", "x");
  detail::require_ptr(y, "sigmoid_mul", "y");
  DeviceGuard guard(ctx.device());
  constexpr int kThreads = 256;
  detail::sigmoid_mul_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, detail::stream_of(ctx)>>>(gate, x, y, n, group);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
