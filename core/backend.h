// The backend seam: the one interface the transformer (core/transformer.cpp), the KV cache, the
// samplers and the drafters run on. A Backend owns memory (where activations, KV rows, logits and
// distributions live), the resident copy of a model's weights, and the ops of the forward and of
// sampling. Two implementations: CpuBackend (core/backend_cpu.cpp: kernels/cpu on a thread pool)
// and CudaBackend (core/backend_cuda.cpp: kernels/cuda on one stream, in CUDA builds). Nothing
// here names a device type: data says where it lives (Rows::where, KVCache::where), and code that
// must know a device's own types lives in files named for it (*_cuda.cpp).
//
// Conventions of every op: pointers are in this backend's memory (from allocate(), resident(), or
// a KV cache it made); shapes and semantics are those of the CPU reference ops (kernels/cpu/ops.h,
// the *_ref functions); work may be queued and run later (CUDA), in call order; results reach the
// host only through download() and the ops that return host values, which wait.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/device.h"
#include "core/sampling.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/matrix_view.h"
#include "kernels/op_params.h"
#include "moe/moe_layer.h"
#include "moe/router_factory.h"

namespace specmoe::core {

using kernels::AttentionParams;
using kernels::DeltaNetParams;
using kernels::Mamba2Params;
using kernels::KVView;
using kernels::MatrixView;
using kernels::MlaAttentionParams;
using kernels::MlaKVView;
using kernels::RopeParams;

class Backend;

// A float vector of n elements in a backend's memory (norm weights, biases). data null: absent.
struct VectorView {
  const float* data = nullptr;
  int64_t n = 0;
  bool empty() const { return data == nullptr; }
};

// Memory of one place (the host, or one GPU): what a KV cache or a buffer needs to allocate and
// move its bytes. Backend extends it with the ops; host_memory() serves caches made without a
// model (tests, tools).
class Memory {
 public:
  virtual ~Memory() = default;
  virtual Device device() const = 0;
  // `bytes` zero-filled bytes in this memory, freed when the last owner lets go. Throws
  // Error(Runtime) naming the device when the allocation fails.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  // Copies within this memory (regions must not overlap), after the work already queued.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // `rows` rows of row_bytes each, from src (rows src_pitch bytes apart) to dst (dst_pitch apart).
  virtual void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                         int64_t rows) = 0;
  // Host <-> this memory. download waits for the queued work and the copy; upload returns when the
  // host bytes may be reused.
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  // Waits until all queued work has finished (for timing).
  virtual void synchronize() = 0;
};

// The host's memory (aligned malloc, memcpy); stateless, shared by every host cache.
std::shared_ptr<Memory> host_memory();

// A matrix of float rows [rows, cols] in some memory: logits, processed distributions (the
// target's p, a draft's q). A view: valid while its owner (a model's forward, a RowBuffer) is.
struct Rows {
  const float* data = nullptr;
  int64_t rows = 0, cols = 0;
  Backend* backend = nullptr;  // whose memory; null only for an empty view

  Device where() const;
  bool empty() const { return rows == 0; }
  const float* row(int64_t r) const { return data + r * cols; }
  Rows slice(int64_t r0, int64_t n) const { return {row(r0), n, cols, backend}; }
  // Host copies (a download on a device; a copy on the host).
  void to_host(std::vector<float>& out) const;
  std::vector<float> to_host() const;
  // The argmax of every row, computed where the rows live (lowest id among equal maxima, NaN never
  // wins): a device copies back `rows` ids instead of rows x cols floats.
  std::vector<int32_t> argmax() const;
};

// Rows owned in a backend's memory, grown on demand (growing discards what they held).
class RowBuffer {
 public:
  RowBuffer() = default;
  explicit RowBuffer(Backend& backend) : backend_(&backend) {}
  // At least rows x cols floats; returns the start.
  float* reserve(int64_t rows, int64_t cols);
  Rows view(int64_t rows, int64_t cols) const { return {static_cast<const float*>(mem_.get()), rows, cols, backend_}; }
  Backend* backend() const { return backend_; }

 private:
  Backend* backend_ = nullptr;
  std::shared_ptr<void> mem_;
  size_t bytes_ = 0;
};

// A token drawn from a distribution row by Backend::draw (see there).
struct Draw {
  int32_t token = -1;       // -1: nothing drawn (the row has no mass)
  float confidence = 1.0f;  // the row's top probability, when asked for
};

// One MoE block as the backend runs it: the experts, the router's description (family, the file's
// k, the selection bias and groups) and the bias in this backend's memory (group routers; empty =
// none).
struct MoEBlock {
  moe::MoEWeights weights;  // resident views
  moe::RouterSpec router;   // host description; router.group.bias holds the host bias
  VectorView bias;          // resident copy of router.group.bias
};

class Backend : public Memory {
 public:
  // "cpu (avx2, 2 threads)", "cuda:0 NVIDIA H200 (sm_90, ...)"
  virtual std::string describe() const = 0;
  // Host threads the ops use (1 on a device).
  virtual int threads() const { return 1; }

  // ---- weights: this backend's copy of host weights. The CPU returns the same views; a device
  // uploads each tensor once (one copy per host address, so a tied head shares the embedding's).
  virtual MatrixView resident(const MatrixView& host) = 0;
  virtual VectorView resident(const VectorView& host) = 0;

  // ---- ops of the transformer forward (kernels/cpu/ops.h for the shapes). ids, positions: T
  // int32 in this memory; mask: [T, T] bytes or null (causal). Pointers inside the parameter
  // structs (RopeParams::freq_factors, KVView) are in this memory too.
  virtual void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) = 0;
  virtual void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) = 0;
  virtual void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                          float eps) = 0;  // norms: out may alias x
  virtual void matmul(const float* x, int64_t T, const MatrixView& w, float* y) = 0;
  // y[i] = x * w[i]^T for weights that share x (q/k/v, gate/up), each as matmul computes it: one
  // call lets a backend quantize x once and run all the rows as one job. Default: matmul each.
  virtual void matmul_multi(const float* x, int64_t T, std::span<const MatrixView> w, std::span<float* const> y) {
    for (size_t i = 0; i < w.size() && i < y.size(); ++i) matmul(x, T, w[i], y[i]);
  }
  virtual void add_bias(float* y, const float* b, int64_t T, int64_t n) = 0;
  virtual void add(const float* a, const float* b, float* y, int64_t n) = 0;
  virtual void rope(float* x, int64_t T, const int32_t* positions, const RopeParams& p) = 0;
  // Writes `rows` rows of n floats (src, contiguous) as rows of `type` dst_pitch bytes apart:
  // F32 copied, F16 rounded to nearest even, Q8_0 as kernels/cpu quantize_row makes ggml's
  // block_q8_0 (n a multiple of 32), the same bytes on every backend. The forward stores its new
  // keys and values into the KV cache with it.
  virtual void convert_rows(const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch) = 0;
  // Attention over K/V rows of F32, F16 or Q8_0 (KVView::k_type, v_type).
  virtual void attention(const float* q, int64_t T, const KVView& kv, const uint8_t* mask, const AttentionParams& p,
                         float* out) = 0;
  // Multi-head latent attention in its absorbed form (deepseek2; kernels/op_params.h): q [T,
  // n_head * (kv_lora_rank + rope_dims)] over the latent rows of kv -> out [T, n_head *
  // kv_lora_rank]; mask as for attention.
  virtual void mla_attention(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* mask,
                             const MlaAttentionParams& p, float* out) = 0;
  // lfm2's short causal convolution (kernels/cpu/ops.h short_conv): rows are a convolution layer's
  // F32 cache rows of width floats, the T new tokens' at row0 ..; prev [T, n_taps - 1] int32 in
  // this memory, each token's predecessors on its path (oldest first, -1: none); taps [width,
  // n_taps]. out [T, width] must not alias rows.
  virtual void short_conv(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                          const float* taps, float* out) = 0;
  // A gated DeltaNet layer (Qwen3-Next, Qwen3.5; kernels/cpu/ops.h delta_net): states is the
  // layer's ring of state slots in this memory (KVCache::state_data), slots [T, 2] int32 in this
  // memory (each token's parent slot, -1 for a zero state, and its own).
  virtual void delta_net(const float* qkv, const float* alpha, const float* beta, const float* conv_w,
                         const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
                         const DeltaNetParams& p, float* out) = 0;
  // A Mamba-2 mixer (granitehybrid; kernels/cpu/ops.h mamba2): states and slots as delta_net's, xbc
  // [T, conv_dim] scratch in this memory; out [T, d_inner] the gated, normed y.
  virtual void mamba2(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
                      const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots,
                      int64_t T, const Mamba2Params& p, float* xbc, float* out) = 0;
  // y[i] = x[i] * sigmoid(gate[i / group]): elementwise with group 1 (Qwen3.5's gated attention
  // output; y may alias x or gate), one gate per run of group elements otherwise (spark2_5's gate
  // per head, group = head_dim; y may alias x). n is a multiple of group.
  virtual void sigmoid_mul(const float* gate, const float* x, float* y, int64_t n, int64_t group) = 0;
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t n) = 0;
  virtual void gelu(const float* x, float* y, int64_t n) = 0;
  // y = max(x, 0)^2 elementwise (squared ReLU); y may alias x.
  virtual void relu_sqr(const float* x, float* y, int64_t n) = 0;
  // y = xIELU(x) elementwise (kernels/op_params.h XIeluParams; Apertus); y may alias x.
  virtual void xielu(const float* x, float* y, int64_t n, const kernels::XIeluParams& p) = 0;
  // y = min(max(x, -limit), limit) elementwise (mpt's clamp_kqv); y may alias x.
  virtual void clamp(const float* x, float limit, float* y, int64_t n) = 0;
  // y = a * b elementwise; y = s * x; y = cap * tanh(x / cap). Outputs may alias inputs.
  virtual void mul(const float* a, const float* b, float* y, int64_t n) = 0;
  virtual void scale(const float* x, float s, float* y, int64_t n) = 0;
  virtual void softcap(const float* x, float cap, float* y, int64_t n) = 0;
  // dst [rows, n_dst] = fill everywhere, then dst[r, cols[j]] = src[r, j] for j < n_src (src [rows, n_src],
  // cols [n_src] int32 in this memory, distinct ids in [0, n_dst)). dst must not alias src.
  // (An EAGLE-3 head's logits over its draft vocabulary placed in the target's: llama.cpp's
  // ggml_fill(-INF) + ggml_set_rows with the head's d2t map.)
  virtual void scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                            int64_t n_dst, float fill) = 0;
  // The MoE feed-forward of one block over T tokens x: [T, n_embd] -> out [T, n_embd]
  // (overwritten): router logits, routing (block.router with k experts per token and the given
  // capacity factor, <= 0 dropless), each routed expert's SwiGLU over the tokens grouped to it
  // (every active expert's weights read once per forward), the combine in slot order, plus the
  // shared expert. `routing` receives this forward's routing on the host. router_x [T, n_embd]:
  // the router's input when it is not x (smallthinker routes the layer's input), else null.
  virtual void moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x, const float* router_x,
                       int64_t T, float* out, moe::Routing& routing) = 0;
  // host_ids[r] = argmax of row r of x [rows, n] (lowest index among ties; NaN never wins).
  virtual void argmax_rows(const float* x, int64_t rows, int64_t n, int32_t* host_ids) = 0;

  // ---- sampling (core/sampler.h is the front end; core::SamplerChain the definition).
  // out[r] = the processed distribution of logits row r; the penalties of row r see history
  // followed by extra[0, r) (the drafted prefix of a verification). rows <= extra.size() + 1.
  virtual void distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                             std::span<const int32_t> history, std::span<const int32_t> extra, float* out) = 0;
  // A token from the distribution probs [n] by inverse CDF against u * sum(probs) (SamplerChain's
  // rule; the argmax when params are greedy, u unused).
  virtual int32_t sample(const float* probs, int64_t n, const SamplingParams& params, double u) = 0;
  // A drafter's draw (draft/model_drafter.cpp): q_out [n_out] = the distribution probs [n]
  // moved into a vocabulary of n_out ids (ids >= n_out masked out and the rest renormalised, ids
  // >= n given 0; probs may be q_out when n == n_out); token = -1 when that leaves no mass. With
  // confidence_logits (the draft logits [n] probs came from), confidence = the top probability of
  // softmax(confidence_logits) for greedy params (q is one-hot then), else max(q_out). Then the
  // token as sample() draws it from q_out with u.
  virtual Draw draw(const float* probs, int64_t n, float* q_out, int64_t n_out, const SamplingParams& params,
                    double u, const float* confidence_logits) = 0;
};

// The pages of the CPU backend's packed weights (kernels/cpu/huge_pages.h).
using HugePages = kernels::cpu::HugePages;

// The backend of `device` with n_threads host threads (CPU; 0 = all cores) and, on the CPU, its
// packed weights on the pages `huge_pages` asks for. Throws Error(Unsupported) when this build has
// no CUDA backend, Error(Runtime) naming the device when it is absent.
std::shared_ptr<Backend> make_backend(const Device& device, int n_threads = 0, HugePages huge_pages = HugePages::On);

}  // namespace specmoe::core
