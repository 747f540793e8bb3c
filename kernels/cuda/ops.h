// Host launchers of the CUDA ops of the transformer forward and of sampling. Plain C++ (no CUDA
// headers), so .cpp files compiled without nvcc can call them.
//
// Conventions, for every function below:
// - Pointers are device pointers (cudaMalloc'ed, e.g. DeviceBuffer), row-major, F32 unless stated.
// - Work is queued on ctx.stream() and returns before it finishes (ctx.synchronize() or
//   ctx.download() to wait). Ops of one Context run in call order.
// - Arguments are checked on the host: a bad size, type or null pointer throws
//   Error(InvalidArgument); a failed CUDA/cuBLAS call throws Error(Runtime) (kernels/cuda/check.h).
// - Semantics match the CPU reference ops (kernels/cpu/ops.h); both take the parameter structs
//   of kernels/op_params.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device.h"
#include "kernels/dtype.h"
#include "kernels/matrix_view.h"
#include "kernels/op_params.h"

namespace specmoe::kernels::cuda {

// RoPE, attention and KV-cache parameters: kernels/op_params.h (shared with the CPU ops).
using kernels::AttentionParams;
using kernels::DeltaNetParams;
using kernels::Mamba2Params;
using kernels::KVView;
using kernels::MlaAttentionParams;
using kernels::MlaKVView;
using kernels::RopePairing;
using kernels::RopeParams;

// ---------------------------------------------------------------------------------------------
// Matrix multiplication y[T, n_out] = x[T, n_in] * W^T.

// Weight matrices: kernels/matrix_view.h, the view the CPU ops take too; here `data` is device
// memory and row_bytes >= dtype_row_bytes.
using kernels::MatrixView;

// Row bytes of n elements of `type` (n a multiple of the block size; throws Error(InvalidArgument)
// otherwise). Same as dtype_row_bytes, local to this library.
size_t row_bytes_of(DType type, int64_t n);

// x: [T, n_in], y: [T, n_out] (must not alias x).
// - F32, F16, BF16 weights: cuBLAS GEMM (cublasGemmEx, fp32 accumulation, CUBLAS_COMPUTE_32F).
//   For F16/BF16 the activations are first rounded to the weight type (cuBLAS needs A and B of
//   one type); F16 rounding saturates at +-65504 instead of overflowing to infinity.
// - Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
//   IQ4_XS): for T <= kMatvecMaxTokens a
//   dequantizing matrix-vector kernel that reads each weight once for all T tokens; for larger T
//   the weights are dequantized to F16 in slices of at most kDequantSliceBytes and multiplied by
//   cuBLAS.
constexpr int64_t kMatvecMaxTokens = 8;
constexpr size_t kDequantSliceBytes = size_t{64} << 20;
void matmul(Context& ctx, const float* x, int64_t T, const MatrixView& w, float* y);

// ---------------------------------------------------------------------------------------------
// Dequantization (GGUF block layouts, kernels/dtype.h).

// n elements (a multiple of the block size) at src -> dst as IEEE half bits / as F32.
// Supported: every DType (F32/F16/BF16 are converted).
void dequantize_f16(Context& ctx, DType type, const void* src, int64_t n, uint16_t* dst);
void dequantize_f32(Context& ctx, DType type, const void* src, int64_t n, float* dst);

// Embedding lookup: out[i, :] = dequantized row ids[i] of `table` (n_in elements each).
// ids: [n_ids] int32 on the device. An id outside [0, n_out) cannot be reported from the device:
// its output row is filled with NaN so that it cannot pass unnoticed.
void get_rows(Context& ctx, const MatrixView& table, const int32_t* ids, int64_t n_ids, float* out);

// ---------------------------------------------------------------------------------------------
// Norms (one row of n per token; x and out may alias). x, out: [T, n]; w, b: [n] or null.

// out = x / sqrt(mean(x^2) + eps) * w          (Zhang & Sennrich 2019)
void rms_norm(Context& ctx, const float* x, const float* w, float* out, int64_t T, int64_t n, float eps);
// out = (x - mean) / sqrt(var + eps) * w + b   (Ba et al. 2016; biased variance, two passes)
void layer_norm(Context& ctx, const float* x, const float* w, const float* b, float* out, int64_t T,
                int64_t n, float eps);

// ---------------------------------------------------------------------------------------------
// Rotary position embedding (Su et al. 2021, RoFormer), in place.

// x: [T, n_head * head_dim]; positions: [T] int32 on the device. Pair i (i < rope_dims/2) turns
// by angle pos * freq_scale * freq_base^(-2i/rope_dims) / freq_factors[i] (a device array or
// null), mixed with the extrapolated angle by YaRN and with cos/sin scaled by attn_factor as
// RopeParams (kernels/op_params.h) defines; dims >= rope_dims are left unchanged.
void rope(Context& ctx, float* x, int64_t T, const int32_t* positions, const RopeParams& p);

// ---------------------------------------------------------------------------------------------
// Attention over a KV cache (Vaswani et al. 2017) with grouped-query heads (Ainslie et al. 2023):
// query head h reads KV head h / (n_head / n_head_kv). KVView (kernels/op_params.h) points at
// device rows; row n_past + j is new token j, whose K/V must already be written there.

// KV cache rows: `rows` rows of n floats (src, contiguous) written as rows of `type` dst_pitch
// bytes apart: F32 copied, F16 rounded to nearest even, Q8_0 (n a multiple of 32) quantized as
// kernels/cpu quantize_row does; the bytes equal the CPU's. The forward stores new keys and
// values with it.
void convert_rows(Context& ctx, const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch);

// q, out: [T, n_head * head_dim] (must not alias). K/V rows of kv.k_type / kv.v_type: F32, F16 or
// Q8_0 (head_dim a multiple of 32), widened to fp32 element by element. allowed: null = causal
// among the new tokens, else a device [T, M + T] uint8 mask (M = kv.mask_past, 0 but for a tree
// drafted level by level), allowed[i * (M + T) + M + j] != 0 lets new token i see new token j
// (tree verification) and allowed[i * (M + T) + c] cached row n_past - M + c. With p.window > 0,
// kv.positions (device, [n_past + T]) limits every token to the keys less than `window`
// positions behind it. A token that sees nothing gets a zero output.
// Decode is T = 1.
// One block per (token, head); scores go to context scratch (tokens are processed in chunks so
// that scratch stays under kDequantSliceBytes).
void attention(Context& ctx, const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
               const AttentionParams& p, float* out);
// Multi-head latent attention, absorbed form (kernels/op_params.h; kernels/cpu/ops.h
// mla_attention_ref is the definition): q [T, n_head * (kv_lora_rank + rope_dims)], out [T, n_head *
// kv_lora_rank]. The attention kernel's scheme with one shared latent row per token as key and
// value (mla_attention.cu).
void mla_attention(Context& ctx, const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                   const MlaAttentionParams& p, float* out);

// ---------------------------------------------------------------------------------------------
// Softmax, argmax, activations, elementwise helpers.

// y[r, :] = softmax(x[r, :]) for rows r < rows (x and y may alias).
void softmax_rows(Context& ctx, const float* x, float* y, int64_t rows, int64_t n);
// out[r] = index of the largest x[r, :] (lowest index among ties; NaN never wins; 0 if all NaN).
void argmax_rows(Context& ctx, const float* x, int64_t rows, int64_t n, int32_t* out);
// dst [rows, n_dst] = fill, then dst[r, cols[j]] = src[r, j] for j < n_src (kernels/cpu/ops.h
// scatter_cols_ref; cols [n_src] int32 on the device, distinct ids in [0, n_dst): one outside is
// skipped, as the device cannot report it). dst must not alias src.
void scatter_cols(Context& ctx, const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                  int64_t n_dst, float fill);

// y = x / (1 + exp(-x))  (SiLU, Elfwing et al. 2017). x and y may alias.
void silu(Context& ctx, const float* x, float* y, int64_t n);
// out = silu(gate) * up  (SwiGLU, Shazeer 2020). out may alias gate or up.
void swiglu(Context& ctx, const float* gate, const float* up, float* out, int64_t n);
// gpt-oss's clamped SwiGLU (moe::swiglu_oai): out = g' sigmoid(1.702 g') (u' + 1) with g' = min(g, 7),
// u' = clamp(u, -7, 7); out may alias gate or up.
void swiglu_oai(Context& ctx, const float* gate, const float* up, float* out, int64_t n);
// maple's clamped SwiGLU (moe::swiglu_clamped, llama.cpp's swiglu_clamp): out = silu(min(g, limit)) *
// clamp(u, -limit, limit); out may alias gate or up.
void swiglu_clamp(Context& ctx, const float* gate, const float* up, float* out, int64_t n, float limit);
// smallthinker's ReLU-gated GLU (moe::MoEActivation::ReGLU): out = max(gate, 0) * up; out may alias
// gate or up.
void reglu(Context& ctx, const float* gate, const float* up, float* out, int64_t n);
// y = GELU(x), tanh approximation (Hendrycks & Gimpel 2016) as GPT-2 and llama.cpp use.
void gelu(Context& ctx, const float* x, float* y, int64_t n);
// y = max(x, 0)^2; y may alias x.
void relu_sqr(Context& ctx, const float* x, float* y, int64_t n);
// y = xIELU(x) with `p` (kernels/op_params.h); y may alias x.
void xielu(Context& ctx, const float* x, float* y, int64_t n, const XIeluParams& p);
// y = min(max(x, -limit), limit); y may alias x.
void clamp(Context& ctx, const float* x, float limit, float* y, int64_t n);
// lfm2's short causal convolution over a convolution layer's cache rows (kernels/cpu/ops.h
// short_conv: the same sums in the same order); out must not alias rows.
void short_conv(Context& ctx, const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                int n_taps, const float* taps, float* out);
// A gated DeltaNet layer over T tokens (kernels/cpu/ops.h delta_net; states and slots as there).
void delta_net(Context& ctx, const float* qkv, const float* alpha, const float* beta, const float* conv_w,
               const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
               const DeltaNetParams& p, float* out);
// A Mamba-2 mixer over T tokens (kernels/cpu/ops.h mamba2; states, slots and scratch as there).
void mamba2(Context& ctx, const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
            const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
            const Mamba2Params& p, float* xbc, float* out);
// y[i] = x[i] * sigmoid(gate[i / group]) (cpu::sigmoid_mul; group 1: elementwise, y may alias x or
// gate; larger: one gate per run of group elements, y may alias x).
void sigmoid_mul(Context& ctx, const float* gate, const float* x, float* y, int64_t n, int64_t group = 1);
// y = a + b (y may alias a or b).
void add(Context& ctx, const float* a, const float* b, float* y, int64_t n);
// y = a * b elementwise (y may alias a or b).
void mul(Context& ctx, const float* a, const float* b, float* y, int64_t n);
// y = s * x (y may alias x).
void scale(Context& ctx, const float* x, float s, float* y, int64_t n);
// y = cap * tanh(x / cap), cap > 0 (logit soft-capping; y may alias x).
void softcap(Context& ctx, const float* x, float cap, float* y, int64_t n);
// y[t, i] += b[i] for T rows of n.
void add_bias(Context& ctx, float* y, const float* b, int64_t T, int64_t n);

// ---------------------------------------------------------------------------------------------
// Sampling on the device (same chain and order as core::SamplerChain; penalties are applied
// before, with repeat_penalty).

struct SamplingConfig {
  float temperature = 0.8f;  // <= 0: greedy, the distribution is one-hot on the argmax
  int top_k = 40;            // <= 0 (or >= n_vocab) disables
  float top_p = 0.95f;       // 1 disables; in (0, 1]
  float min_p = 0.05f;       // 0 disables; in [0, 1]
};

// probs[r, :] = the processed distribution of logits[r, :]: logits / temperature; keep the top_k
// largest (ties: lower id first); keep the smallest prefix of them, in descending order, whose
// probability mass reaches top_p (Holtzman et al. 2020); keep those with p >= min_p * p_max
// (Nguyen et al. 2024); softmax over the kept set, zero elsewhere. Sorting uses CUB radix sort,
// the cumulative mass a CUB scan. logits and probs: [rows, n_vocab], must not alias.
void sampling_distribution(Context& ctx, const float* logits, float* probs, int64_t rows, int64_t n_vocab,
                           const SamplingConfig& config);

// CTRL repetition penalty (Keskar et al. 2019) in place on one row of logits: every distinct
// token id among tokens[0, n_tokens) has its logit divided by penalty if positive, else
// multiplied by it. Ids outside [0, n_vocab) are ignored.
void repeat_penalty(Context& ctx, float* logits, int64_t n_vocab, const int32_t* tokens, int64_t n_tokens,
                    float penalty);

// No-repeat-n-gram ban (core::apply_no_repeat_ngram with the banned ids computed on the host):
// logits[ids[i]] = -inf for i < n; ids outside [0, n_vocab) are ignored.
void ban_tokens(Context& ctx, float* logits, int64_t n_vocab, const int32_t* ids, int64_t n);

// ---------------------------------------------------------------------------------------------
// Draws with uniforms drawn on the host from core::Rng (kernels/cuda/speculative.cu), consumed in
// the CPU's order so that the same seed gives the same draws: one block each, the inverse CDF
// summing in double (a block scan, so only a uniform within rounding of a boundary can pick a
// different token than the CPU's id-order sum).

// *token = the first id whose cumulative probability exceeds u * sum(probs) (the last positive id
// when rounding leaves the target past the sum; -1 when probs has no mass), as
// core::SamplerChain::sample_with. u in [0, 1).
void sample_from_probs(Context& ctx, const float* probs, int64_t n_vocab, double u, int32_t* token);

// Lossless speculative verification, the rule of verify::SpeculativeVerifier (Leviathan et al.
// 2023, Alg. 1): draft token x_i = draft_tokens[i] (device, i < g) is accepted with probability
// min(1, p_i(x_i) / q_i(x_i)); at the first rejection the emitted token is drawn from
// norm(max(0, p_i - q_i)) (from p_i when that is empty), after g acceptances from p_g.
// p: [g + 1, n_vocab]; q: [g, n_vocab], or null for a one-hot draft (q_i(x_i) = 1).
// uniforms: device [g + 2] doubles from the host's stream, taken in order: one per acceptance
// test whose ratio is strictly between 0 and 1 (certain outcomes take none, so one-hot p and q
// reproduce the greedy rule), then one per draw. result (device int32[3]): n_accepted, emitted
// token (-1 only when p's row has no mass), uniforms consumed.
void speculative_verify(Context& ctx, const float* p, const float* q, const int32_t* draft_tokens, int g,
                        int64_t n_vocab, const double* uniforms, int32_t* result);

// The same rule over a token tree (verify::SpeculativeVerifier: multi-draft speculative sampling,
// Miao et al. 2024; recursive rejection sampling without replacement, Jeon et al. 2024). p:
// [n_nodes + 1, n_vocab] (row 0 the root's, row i + 1 node i's); q: draft rows (null: one-hot
// candidates), node i drawn from row q_rows[i]; tokens[i]: node i's token; the children of node v
// (-1: the root) are child_list[child_start[v + 1] .. child_start[v + 2]) in index order (at most
// 64 per node when without_replacement). uniforms: device [n_nodes + 2], taken as on the host: one
// per child tested with a ratio strictly between 0 and 1, walking down from the root, then one per
// draw. residual: device scratch of n_vocab doubles. result (device int32[3 + n_nodes]): accepted
// path length, emitted token, uniforms consumed, then the path's nodes.
void speculative_tree_verify(Context& ctx, const float* p, const float* q, const int32_t* q_rows,
                             const int32_t* tokens, const int32_t* child_start, const int32_t* child_list, int n_nodes,
                             bool without_replacement, int64_t n_vocab, const double* uniforms, double* residual,
                             int32_t* result);

// A drafter's draw (core::Backend::draw): q_out[0, n_out) = probs[0, n) moved into n_out ids
// (n > n_out: ids >= n_out masked out and the rest renormalised, result token -1 when that leaves
// no mass; n < n_out: ids >= n get 0; probs may alias q_out when n == n_out); the confidence
// (confidence_logits non-null: greedy, the top probability of softmax(confidence_logits[0, n));
// else max(q_out)); then the token: the argmax of q_out when greedy, else drawn from q_out with u.
// result (device int32[2]): token, confidence (float bits; 1 when not asked for).
void draft_draw(Context& ctx, const float* probs, int64_t n, float* q_out, int64_t n_out, bool greedy, double u,
                const float* confidence_logits, int32_t* result);

}  // namespace specmoe::kernels::cuda
