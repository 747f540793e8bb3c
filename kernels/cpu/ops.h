// CPU ops of the transformer forward: a plain scalar reference for every op (`*_ref`, the
// definition the fast paths are tested against) and the fast paths the model runs (threaded,
// AVX2+FMA+F16C where the CPU has it, portable otherwise).
//
// Determinism contract: the fast paths split work by OUTPUT element (weight rows, tokens, heads),
// never along a reduction, and each output is computed in an order that does not depend on the
// thread count or on how many tokens share the batch. Results are therefore bit-identical for
// any n_threads, and a token's result in a batch equals the result of a one-token call.
#pragma once
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/matrix_view.h"
#include "kernels/op_params.h"

namespace specmoe::kernels::cpu {

// RoPE, attention and KV-cache parameters: kernels/op_params.h (shared with the CUDA ops).
using kernels::AttentionParams;
using kernels::DeltaNetParams;
using kernels::Mamba2Params;
using kernels::KVView;
using kernels::MlaAttentionParams;
using kernels::MlaKVView;
using kernels::RopePairing;
using kernels::RopeParams;

// ---------------------------------------------------------------------------------------------
// Thread pool: persistent workers owned by one instance (a draft and a target model each own one).

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each chunk `grain` items (the last
  // one shorter), spread over the workers and the caller; returns when all are done. Chunks are
  // handed out dynamically, so callers must make each item's result independent of which thread
  // runs it. An exception thrown by fn is rethrown here. A call made from inside fn (nested) or
  // while another thread is using the pool runs serially on the calling thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The same for any callable (a lambda), without wrapping it in a std::function: no allocation
  // per call (a lambda capturing more than two references does not fit std::function's buffer).
  template <class F>
    requires std::is_invocable_v<F&, int64_t, int64_t>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_job(n, grain, const_cast<void*>(static_cast<const void*>(&fn)),
            [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); });
  }

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
  void run_job(int64_t n, int64_t grain, void* ctx, ChunkFn fn);
  void worker_loop();
  void run_chunks();
  void leave_job();

  // A job is published by writing its fields, opening `state_` (count of workers inside it, with
  // kClosed clear) and bumping `generation_`. Workers spin briefly on generation_, then sleep on
  // cv_start_. The caller runs chunks too; when they run out it closes the job and waits only for
  // the workers that joined it, never for one that has not woken up yet (on a loaded machine a
  // sleeping worker may not be scheduled for milliseconds).
  static constexpr int64_t kClosed = int64_t{1} << 40;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> state_{kClosed};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  void* ctx_ = nullptr;
  ChunkFn fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

// Streaming-read bandwidth of this machine, GB/s (1e9 bytes/s), once per pass: the pool's threads
// sum a `bytes` buffer (rounded to MiB; a few times the last-level cache or more) in 1 MiB chunks.
// The ceiling of a memory-bound decode at this thread count (specmoe bench prints it).
std::vector<double> read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{512} << 20, int passes = 5);

// ---------------------------------------------------------------------------------------------
// Instruction-set selection.

// Avx2 = AVX2 + FMA + F16C; Avx512 = that + AVX-512 F/BW/VL/DQ + VNNI (Ice Lake, Sapphire Rapids,
// Zen 4 and later); Amx = Avx512 + AMX-TILE/AMX-INT8 (Sapphire Rapids and later), with the tile
// state granted to the process by the kernel (Linux arch_prctl). Each gives the same results as
// Avx2 bit for bit (its kernels reproduce the AVX2 arithmetic, kernels/cpu/simd_avx512.h,
// simd_amx.h), only faster; ops without a kernel of their own on a path run the one below it
// (Amx: integer matmuls of 2+ tokens on tiles, everything else AVX-512).
enum class Isa { Scalar, Avx2, Avx512, Amx };
// The best path this CPU supports (checked once at runtime with CPUID), or the one
// SPECMOE_CPU_ISA names (scalar, avx2, avx512, amx) when the CPU supports it: to compare paths on
// one machine.
Isa best_isa();
// `want` if the CPU supports it, else the best supported path below it (Amx -> Avx512 -> Avx2 ->
// Scalar).
Isa usable_isa(Isa want);
const char* isa_name(Isa isa);
// Whether the AVX-512 kernels prefetch weight blocks ahead in software in one-token products
// (decode). Batches always do. Measured with 2 threads: on Sapphire Rapids the prefetches raised
// the small models' decode by 13-56% (the cores' prefetchers are slow to pick up each chunk of
// rows), on Zen 4 they slowed it (no prefetch against 4 KB ahead, median of 10 alternating pairs
// of `specmoe bench -n 64 -p 0 -r 1 --max-batch 1`: Qwen2.5-Coder-1.5B Q4_K_M 1.19x, its 0.5B
// requantized to Q4_0 1.17x, SmolLM2-135M Q4_1 1.08x, the synth F16 target 1.07x), and on Zen 5
// decode streamed as fast without them. So: on for Intel CPUs, off for AMD ones;
// SPECMOE_DECODE_PREFETCH=1 or 0 overrides. It changes timing only, never a result.
bool decode_prefetch();

// ---------------------------------------------------------------------------------------------
// Matrix multiplication y[T, n_out] = x[T, n_in] * W^T.

// Weight matrices: kernels/matrix_view.h (one view type for the CPU and CUDA ops).
using kernels::MatrixView;

// Reference: dequantizes each row and accumulates in float, index order. x: [T, n_in], y: [T, n_out].
void matmul_ref(const float* x, int64_t T, const MatrixView& w, float* y);
// Fast path: threads split the output rows; each weight row is read once for all T tokens.
// On AVX2, block-quantized weights (every quantized type: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
// with 32-element activation blocks; Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS with 256-element ones)
// are multiplied in integers with the activations quantized to 8 bits per block (llama.cpp's
// scheme), so results differ from matmul_ref by the activation rounding (bounded in
// kernels_test); Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K run on their packed copy
// (w.packed, kernels/cpu/packed.h; packed here when the view has none) and give quant_dot_ref's
// value bit for bit. Float weights and the Scalar path dequantize and accumulate in float.
// Either way a token's result is the same for any T, batch position and thread count.
void matmul(ThreadPool& pool, const float* x, int64_t T, const MatrixView& w, float* y,
            Isa isa = best_isa());
// y_i = x * W_i^T for weights that share their input (q/k/v, gate/up): the activations are
// quantized once per block size and all the products run as one job over their rows (one
// hand-off to the threads instead of one per weight). Each y_i is bit-identical to matmul's.
// Every W_i has the same n_in (Error(InvalidArgument) otherwise).
void matmul_multi(ThreadPool& pool, const float* x, int64_t T, std::span<const MatrixView> w,
                  std::span<float* const> y, Isa isa = best_isa());

// Dot product of two float vectors (fixed summation order for a given n and isa).
float dot_f32(const float* a, const float* b, int64_t n, Isa isa = best_isa());

// ---------------------------------------------------------------------------------------------
// Row lookups, row scatters and row reductions (the backends' get_rows, scatter_cols and
// argmax_rows; get_rows and argmax_rows are references only: the CPU backend's loops are these).

// out[i, :] = row ids[i] of `table` dequantized (n_in floats each), for i < n. Ids must be in
// [0, table.n_out) (throws Error(InvalidArgument) naming the id otherwise).
void get_rows_ref(const MatrixView& table, const int32_t* ids, int64_t n, float* out);
// ids[r] = the index of the largest x[r, :] among x [rows, n]: the lowest index among equal
// maxima; NaN never wins; 0 when the whole row is NaN (the CUDA kernel's rule; the CPU backend's
// core::argmax throws there instead).
void argmax_rows_ref(const float* x, int64_t rows, int64_t n, int32_t* ids);
// dst [rows, n_dst] = fill everywhere, then dst[r, cols[j]] = src[r, j] for j < n_src (src [rows,
// n_src], cols [n_src]): an EAGLE-3 head's logits over its draft vocabulary moved into the
// target's (fill -inf), llama.cpp's ggml_fill + ggml_set_rows with the head's d2t map. Ids must be
// in [0, n_dst) (throws Error(InvalidArgument) naming the id otherwise; sizes negative, n_src >
// n_dst or a null pointer with work to do throw too) and distinct (not checked: with a repeat the
// reference keeps the last, the CUDA kernel either). dst must not alias src. The op splits rows
// over the pool's threads when rows * n_dst is large (a plain copy per element: bit-identical).
void scatter_cols_ref(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst, int64_t n_dst,
                      float fill);
void scatter_cols(ThreadPool& pool, const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                  int64_t n_dst, float fill);

// ---------------------------------------------------------------------------------------------
// Norms (one row of n per token; x and out may alias).

// out = x / sqrt(mean(x^2) + eps) * w          (w may be null = 1). x, out: [T, n]
void rms_norm_ref(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps);
void rms_norm(ThreadPool& pool, const float* x, const float* w, float* out, int64_t T, int64_t n, float eps);
// out = (x - mean) / sqrt(var + eps) * w + b   (w, b may be null). x, out: [T, n]
void layer_norm_ref(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n, float eps);
void layer_norm(ThreadPool& pool, const float* x, const float* w, const float* b, float* out, int64_t T,
                int64_t n, float eps);

// ---------------------------------------------------------------------------------------------
// Rotary position embedding (Su et al. 2021, RoFormer), in place.

// x: [T, n_head * head_dim]; token t is at positions[t]. Pair i (i < rope_dims/2) turns by
// angle pos * freq_scale * freq_base^(-2i/rope_dims); dims >= rope_dims are left unchanged.
void rope_ref(float* x, int64_t T, std::span<const int32_t> positions, const RopeParams& p);
void rope(ThreadPool& pool, float* x, int64_t T, std::span<const int32_t> positions, const RopeParams& p);

// ---------------------------------------------------------------------------------------------
// Attention over a KV cache (scaled dot product, Vaswani et al. 2017) with grouped-query heads
// (Ainslie et al. 2023): query head h reads KV head h / (n_head / n_head_kv). The keys/values
// are described by a KVView (kernels/op_params.h).

// q: [T, n_head * head_dim]; out: [T, n_head * head_dim]. allowed: null = causal among the new
// tokens, else allowed[i * (M + T) + M + j] != 0 lets new token i see new token j, and
// allowed[i * (M + T) + c] cached row n_past - M + c (M = KVView::mask_past, 0 unless a tree's
// earlier levels are cached). A token that sees
// nothing at all gets a zero output. K and V rows are F32, F16 or Q8_0 (KVView::k_type, v_type;
// Q8_0 needs head_dim % 32 == 0). The reference dequantizes each row and computes in float; the
// fast path widens F16 exactly and multiplies Q8_0 keys in integers with the query quantized to
// 8 bits per block of 32, so with Q8_0 keys it differs from the reference by that rounding.
void attention_ref(const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
                   const AttentionParams& p, float* out);
void attention(ThreadPool& pool, const float* q, int64_t T, const KVView& kv, const uint8_t* allowed,
               const AttentionParams& p, float* out, Isa isa = best_isa());

// Multi-head latent attention, absorbed form (kernels/op_params.h MlaAttentionParams): q: [T,
// n_head * row_width]; out: [T, n_head * kv_lora_rank]; allowed as for attention. A token that
// sees nothing gets a zero output.
void mla_attention_ref(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                       const MlaAttentionParams& p, float* out);
void mla_attention(ThreadPool& pool, const float* q, int64_t T, const MlaKVView& kv, const uint8_t* allowed,
                   const MlaAttentionParams& p, float* out, Isa isa = best_isa());

// ---------------------------------------------------------------------------------------------
// Softmax and activations.

// In place over one row of n: x = exp(x - max) / sum. Both reference and fast path (the op is a
// negligible share of a forward, so there is one implementation).
void softmax(float* x, int64_t n);
// x: [T, n], softmax over each row.
void softmax_rows(ThreadPool& pool, float* x, int64_t T, int64_t n);

// w[i] = exp((x[i] - shift) / temperature) for n elements, w may alias x; returns the sum of the
// w[i], accumulated in double. Sampling's softmax weights (core/logits_processors.cpp), one row of
// a vocabulary at a time on the caller's thread: the reference calls libm's expf per element, the
// fast path uses the vectorised exp of the activations (within 2 ulp of it; an element's value
// depends only on its inputs).
double exp_weights_ref(const float* x, float shift, float temperature, float* w, int64_t n);
double exp_weights(const float* x, float shift, float temperature, float* w, int64_t n, Isa isa = best_isa());

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// GELU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2 and llama.cpp use.
float gelu(float x);

// out[i] = silu(gate[i]) * up[i]  (SwiGLU, Shazeer 2020); out may alias gate or up. The fast path
// gives the same bits on AVX2 and AVX-512 (`isa`: the best usable path at or below it).
void swiglu_ref(const float* gate, const float* up, float* out, int64_t n);
void swiglu(ThreadPool& pool, const float* gate, const float* up, float* out, int64_t n, Isa isa = best_isa());
// y[i] = gelu(x[i]); y may alias x. The same ISA rule as swiglu.
void gelu_ref(const float* x, float* y, int64_t n);
void gelu(ThreadPool& pool, const float* x, float* y, int64_t n, Isa isa = best_isa());
// y[i] = max(x[i], 0)^2 (squared ReLU, So et al. 2021 "Primer"; Nemotron's and Arcee's MLPs); y may
// alias x. The op is the reference's loop on the pool's threads (one product per element: the
// compiler vectorises it, and the bits are the same on every backend).
void relu_sqr_ref(const float* x, float* y, int64_t n);
void relu_sqr(ThreadPool& pool, const float* x, float* y, int64_t n);
// y = xIELU(x) with `p` (kernels/op_params.h XIeluParams; Apertus's MLP); y may alias x. The op is
// the reference's loop on the pool's threads (libm's expm1f for the negative side).
void xielu_ref(const float* x, float* y, int64_t n, const XIeluParams& p);
void xielu(ThreadPool& pool, const float* x, float* y, int64_t n, const XIeluParams& p);
// y[i] = min(max(x[i], -limit), limit) (mpt's clamp of q, k and v, as ggml_clamp); y may alias x.
// The op is the reference's loop on the pool's threads.
void clamp_ref(const float* x, float limit, float* y, int64_t n);
void clamp(ThreadPool& pool, const float* x, float limit, float* y, int64_t n);
// y[i] = cap * tanh(x[i] / cap): soft-capping of logits (Gemma 2; gemma3 files may ask for it).
// cap > 0; y may alias x.
void softcap_ref(const float* x, float cap, float* y, int64_t n);
void softcap(ThreadPool& pool, const float* x, float cap, float* y, int64_t n);

// lfm2's short causal convolution (Liquid AI's LFM2; ggml_ssm_conv over the layer's state and
// new rows): rows holds a convolution layer's cache rows of `width` floats (B * x per token), the
// T new tokens' at row0 .. row0 + T - 1; prev [T, n_taps - 1] names each new token's predecessors
// on its path, oldest first (-1: before the sequence's start, a zero row). Then
//   out[t, c] = sum_{k < n_taps - 1} taps[c, k] rows[prev[t, k], c] + taps[c, n_taps - 1] rows[row0 + t, c],
// the products added in k order from 0 (ggml's order; a skipped zero row adds nothing). The op is
// the reference's loop over channel ranges on the pool's threads. out must not alias rows.
void short_conv_ref(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                    const float* taps, float* out);
void short_conv(ThreadPool& pool, const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                int n_taps, const float* taps, float* out);

// A gated DeltaNet layer over T new tokens (kernels/op_params.h DeltaNetParams is the
// definition): qkv [T, conv_dim], alpha and beta [T, n_v_heads] the token's projections; conv_w
// [conv_dim, d_conv] (ggml's ssm_conv1d, tap 0 the oldest), dt_bias and a [n_v_heads]. states
// holds state slots of p.state_floats() floats; slots [T, 2] gives each token the slot of its
// parent's state (-1: the sequence's start, a zero state) and the slot its own state goes to (a
// token's parent is an earlier token of the batch or a cached one; every slot a token reads is
// distinct from every slot written before it, which the caller's ring of slots guarantees). out
// [T, n_v_heads * head_dim]. Tokens run in order; the work of a query/key head and its value heads
// is one task (they share the convolution's channels), tasks on the pool's threads. The products
// of a dot are added in index order, as ggml's reference loop.
void delta_net_ref(const float* qkv, const float* alpha, const float* beta, const float* conv_w, const float* dt_bias,
                   const float* a, float* states, const int32_t* slots, int64_t T, const DeltaNetParams& p, float* out);
void delta_net(ThreadPool& pool, const float* qkv, const float* alpha, const float* beta, const float* conv_w,
               const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
               const DeltaNetParams& p, float* out);
// A Mamba-2 mixer over T new tokens (kernels/op_params.h Mamba2Params is the definition): zxbcdt
// [T, in_proj] the tokens' projections; conv_w [conv_dim, d_conv] (tap 0 the oldest), conv_b
// [conv_dim] or null, dt_bias, a and d [n_head], norm_w [d_inner] or null (no norm); states and
// slots as delta_net's; xbc [T, conv_dim] scratch (the convolution's output). out [T, d_inner]:
// the gated, normed y (ssm_out's input). Three passes, each split over the pool's threads: the
// convolution by channel, the scan by head, the gate and norm by (token, group); every token's
// scan reads its parent's state, so tokens run in order within a head.
void mamba2_ref(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias, const float* a,
                const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
                const Mamba2Params& p, float* xbc, float* out);
void mamba2(ThreadPool& pool, const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
            const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
            const Mamba2Params& p, float* xbc, float* out);
// y[i] = x[i] * sigmoid(gate[i / group]) = x[i] / (1 + exp(-gate[i / group])): one gate per element
// (group 1: Qwen3-Next's and Qwen3.5's gated attention output) or per run of `group` elements
// (spark2_5's gate per head: group = head_dim); n a multiple of group; y may alias x (or gate when
// group is 1).
void sigmoid_mul_ref(const float* gate, const float* x, float* y, int64_t n, int64_t group = 1);
void sigmoid_mul(ThreadPool& pool, const float* gate, const float* x, float* y, int64_t n, int64_t group = 1);

// Small helpers the forward uses (one implementation each: the reference is the op).
// y[t, i] += b[i] for each of T rows of n.
void add_bias(float* y, const float* b, int64_t T, int64_t n);
// y[i] = a[i] + b[i]; y may alias a or b.
void add(const float* a, const float* b, float* y, int64_t n);
// y[i] = a[i] * b[i] (a gated FFN's gate times up); y may alias a or b.
void mul(const float* a, const float* b, float* y, int64_t n);
// y[i] = s * x[i] (gemma's embedding scale); y may alias x.
void scale(const float* x, float s, float* y, int64_t n);

}  // namespace specmoe::kernels::cpu
