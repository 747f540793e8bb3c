// CudaBackend: the Backend of one NVIDIA GPU. Memory is device memory (cudaMalloc, never managed
// memory); every op is a kernels/cuda launcher queued on the backend's one stream, so ops run in
// call order and the host waits only where a value comes back (download, argmax_rows, sample,
// draw, and the per-layer routing of an MoE block, whose expert sizes the GEMMs need). Weights are
// uploaded once (one copy per host address, so a tied head shares the embedding's). Only in
// builds with SPECMOE_HAVE_CUDA.
#ifdef SPECMOE_HAVE_CUDA
#include "core/backend_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "base/error.h"
#include "core/backend_profile.h"
#include "core/logits_processors.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/moe_ops.h"
#include "kernels/cuda/ops.h"

namespace specmoe::core {

namespace cu = kernels::cuda;

namespace {

cudaStream_t stream_of(const cu::Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

bool multiplies(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K:
    case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: case DType::MXFP4: case DType::IQ2_XXS:
    case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ1_S: case DType::IQ1_M:
    case DType::TQ1_0: case DType::TQ2_0: return true;
    default: return false;
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) {
    const int count = cu::cuda_device_count();
    if (device >= count) {
      const cu::CudaInfo info = cu::query_cuda();
      throw_error(ErrorKind::Runtime, "device cuda:{} is not available: {} CUDA device(s) present ({})", device, count,
                  info.available() ? "ok" : info.status);
    }
    ctx_ = std::make_unique<cu::Context>(device);
  }

  Device device() const override { return Device{Device::Kind::Cuda, ctx_->device()}; }
  std::string describe() const override {
    const cu::CudaInfo info = cu::query_cuda();
    for (const cu::DeviceInfo& d : info.devices)
      if (d.index == ctx_->device())
        return fmt::format("cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB)", d.index, d.name, d.cc_major, d.cc_minor,
                           d.multiprocessors, d.total_bytes / 1073741824.0);
    return device().name();
  }
  cu::Context& context() { return *ctx_; }

  // ---- memory
  std::shared_ptr<void> allocate(size_t bytes) override {
    auto buf = std::make_shared<cu::DeviceBuffer>(std::max<size_t>(bytes, 1), ctx_->device());
    ctx_->zero(buf->data(), buf->bytes());
    return std::shared_ptr<void>(buf, buf->data());
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    cu::DeviceGuard guard(ctx_->device());
    SPECMOE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(*ctx_)));
  }
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                 int64_t rows) override {
    if (rows <= 0 || row_bytes == 0) return;
    cu::DeviceGuard guard(ctx_->device());
    SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, static_cast<size_t>(rows),
                                         cudaMemcpyDeviceToDevice, stream_of(*ctx_)));
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    if (bytes) ctx_->download(host_dst, src, bytes);
  }
  void upload(void* dst, const void* host_src, size_t bytes) override {
    if (bytes) ctx_->upload(dst, host_src, bytes);
  }
  void synchronize() override { ctx_->synchronize(); }

  // ---- weights
  MatrixView resident(const MatrixView& host) override {
    if (!multiplies(host.type))
      throw_error(ErrorKind::Unsupported, "a {} weight matrix: the CUDA backend cannot multiply this type",
                  dtype_name(host.type));
    MatrixView d = host;
    d.data = upload_once(host.data, host.bytes());
    return d;
  }
  VectorView resident(const VectorView& host) override {
    return {static_cast<const float*>(upload_once(host.data, static_cast<size_t>(host.n) * sizeof(float))), host.n};
  }

  // ---- forward ops
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override {
    cu::get_rows(*ctx_, table, ids, n, out);
  }
  void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) override {
    cu::rms_norm(*ctx_, x, w, out, T, n, eps);
  }
  void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                  float eps) override {
    cu::layer_norm(*ctx_, x, w, b, out, T, n, eps);
  }
  void matmul(const float* x, int64_t T, const MatrixView& w, float* y) override { cu::matmul(*ctx_, x, T, w, y); }
  void add_bias(float* y, const float* b, int64_t T, int64_t n) override { cu::add_bias(*ctx_, y, b, T, n); }
  void add(const float* a, const float* b, float* y, int64_t n) override { cu::add(*ctx_, a, b, y, n); }
  void rope(float* x, int64_t T, const int32_t* positions, const RopeParams& p) override {
    cu::rope(*ctx_, x, T, positions, p);
  }
  void convert_rows(const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch) override {
    cu::convert_rows(*ctx_, src, rows, n, type, dst, dst_pitch);
  }
  void attention(const float* q, int64_t T, const KVView& kv, const uint8_t* mask, const AttentionParams& p,
                 float* out) override {
    cu::attention(*ctx_, q, T, kv, mask, p, out);
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    cu::swiglu(*ctx_, gate, up, out, n);
  }
  void gelu(const float* x, float* y, int64_t n) override { cu::gelu(*ctx_, x, y, n); }
  void relu_sqr(const float* x, float* y, int64_t n) override { cu::relu_sqr(*ctx_, x, y, n); }
  void xielu(const float* x, float* y, int64_t n, const kernels::XIeluParams& p) override {
    cu::xielu(*ctx_, x, y, n, p);
  }
  void clamp(const float* x, float limit, float* y, int64_t n) override { cu::clamp(*ctx_, x, limit, y, n); }
  void short_conv(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                  const float* taps, float* out) override {
    cu::short_conv(*ctx_, rows, prev, T, row0, width, n_taps, taps, out);
  }
  void delta_net(const float* qkv, const float* alpha, const float* beta, const float* conv_w, const float* dt_bias,
                 const float* a, float* states, const int32_t* slots, int64_t T, const DeltaNetParams& p,
                 float* out) override {
    cu::delta_net(*ctx_, qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out);
  }
  void sigmoid_mul(const float* gate, const float* x, float* y, int64_t n, int64_t group) override {
    cu::sigmoid_mul(*ctx_, gate, x, y, n, group);
  }
  void mamba2(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias, const float* a,
              const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
              const Mamba2Params& p, float* xbc, float* out) override {
    cu::mamba2(*ctx_, zxbcdt, conv_w, conv_b, dt_bias, a, d, norm_w, states, slots, T, p, xbc, out);
  }
  void mul(const float* a, const float* b, float* y, int64_t n) override { cu::mul(*ctx_, a, b, y, n); }
  void scale(const float* x, float s, float* y, int64_t n) override { cu::scale(*ctx_, x, s, y, n); }
  void softcap(const float* x, float cap, float* y, int64_t n) override { cu::softcap(*ctx_, x, cap, y, n); }
  void scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst, int64_t n_dst,
                    float fill) override {
    cu::scatter_cols(*ctx_, src, rows, n_src, cols, dst, n_dst, fill);
  }
  void mla_attention(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* mask, const MlaAttentionParams& p,
                     float* out) override {
    cu::mla_attention(*ctx_, q, T, kv, mask, p, out);
  }
  void moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x, const float* router_x, int64_t T,
               float* out, moe::Routing& routing) override;
  void argmax_rows(const float* x, int64_t rows, int64_t n, int32_t* host_ids) override {
    int32_t* d = scratch<int32_t>(slot_ids_, static_cast<size_t>(rows));
    cu::argmax_rows(*ctx_, x, rows, n, d);
    ctx_->download(host_ids, d, static_cast<size_t>(rows) * sizeof(int32_t));
  }

  // ---- sampling
  void distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                     std::span<const int32_t> history, std::span<const int32_t> extra, float* out) override;
  int32_t sample(const float* probs, int64_t n, const SamplingParams& params, double u) override {
    int32_t* d = scratch<int32_t>(slot_ids_, 1);
    if (params.greedy())
      cu::argmax_rows(*ctx_, probs, 1, n, d);
    else
      cu::sample_from_probs(*ctx_, probs, n, u, d);
    int32_t token = -1;
    ctx_->download(&token, d, sizeof token);
    if (token < 0) throw_error(ErrorKind::InvalidArgument, "sampling: distribution of {} tokens sums to 0", n);
    return token;
  }
  Draw draw(const float* probs, int64_t n, float* q_out, int64_t n_out, const SamplingParams& params, double u,
            const float* confidence_logits) override {
    int32_t* d = scratch<int32_t>(slot_ids_, 2);
    cu::draft_draw(*ctx_, probs, n, q_out, n_out, params.greedy(), u, confidence_logits, d);
    int32_t host[2];
    ctx_->download(host, d, sizeof host);
    Draw r;
    r.token = host[0];
    std::memcpy(&r.confidence, &host[1], sizeof r.confidence);
    return r;
  }

 private:
  const void* upload_once(const void* host, size_t bytes) {
    if (auto it = uploaded_.find(host); it != uploaded_.end()) return it->second.get();
    std::shared_ptr<void> buf = allocate(bytes);
    ctx_->upload(buf.get(), host, bytes);
    uploaded_.emplace(host, buf);
    return buf.get();
  }
  // A device scratch slot of at least `count` elements, grown on demand.
  template <typename E>
  E* scratch(std::shared_ptr<void>& slot_mem, size_t count) {
    size_t& have = scratch_bytes_[&slot_mem];
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(E);
    if (have < bytes) {
      ctx_->synchronize();  // queued kernels may still use the old region
      slot_mem = allocate(bytes);
      have = bytes;
    }
    return static_cast<E*>(slot_mem.get());
  }

  std::unique_ptr<cu::Context> ctx_;
  std::unordered_map<const void*, std::shared_ptr<void>> uploaded_;  // host address -> device copy
  std::unordered_map<const void*, size_t> scratch_bytes_;
  std::shared_ptr<void> slot_ids_, slot_logits_, slot_lists_;
  // MoE activations (n = T * k assignments): router logits [T, E]; the record [E + 2n] int32 words
  // (tokens per expert | expert ids [T, k] | weights [T, k] as float bits), copied back per layer;
  // the grouping [E + 1 + 2n] (offsets | sorted assignments | slot positions); gathered inputs xs
  // [n, n_embd], hidden [n, n_ff] x2, expert outputs [n, n_embd]; the shared expert's hidden
  // [T, n_ff_sh] x2, output [T, n_embd] and gate logit [T].
  std::shared_ptr<void> rl_, rec_, grp_, xs_, eh_, eu_, ey_, sh_h_, sh_u_, sh_y_, sh_z_;
  std::vector<int32_t> rec_host_;
};

// The MoE block (moe::MoELayer on the device):
//   logits = x W_inp^T; (experts, weights) = softmax top-k or sigmoid / softmax group-limited top-k; with a
//   capacity factor, the Switch limit marks assignments beyond each expert's capacity dropped
//   (-1, weight 0); group the kept assignments by expert (histogram, scan, stable radix sort;
//   dropped ones sort last) and gather their inputs; per active expert e, in expert order:
//   y = down_e(silu(gate_e xs) * up_e xs) over its contiguous rows (gpt-oss: the router logits and
//   each expert's gate, up and down outputs plus their biases, the clamped SwiGLU); shared expert over all T
//   tokens; combine per token over its kept slots in rank order (+ sigmoid-gated shared output).
// The host needs the tokens per expert to size each expert's GEMM: the record (kept counts, ids
// with -1 for dropped slots, weights) is copied back once per MoE layer, which also gives the
// routing the forward returns.
void CudaBackend::moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x,
                          const float* router_x, int64_t T, float* out, moe::Routing& routing) {
  cu::Context& ctx = *ctx_;
  const moe::MoEWeights& W = block.weights;
  const int E = W.n_expert();
  const int64_t d = W.gate_inp.n_in, ff = W.n_ff();
  const int64_t n = T * k;
  if (k < 1 || k > E) throw_error(ErrorKind::InvalidArgument, "MoE k = {} outside [1, {}]", k, E);
  if (!std::isfinite(capacity_factor))
    throw_error(ErrorKind::InvalidArgument, "MoE capacity factor {} is not finite", capacity_factor);
  float* rl = scratch<float>(rl_, static_cast<size_t>(T * E));
  int32_t* counts = scratch<int32_t>(rec_, static_cast<size_t>(E + 2 * n));
  int32_t* offsets = scratch<int32_t>(grp_, static_cast<size_t>(E + 1 + 2 * n));
  float* xs = scratch<float>(xs_, static_cast<size_t>(n * d));
  float* eh = scratch<float>(eh_, static_cast<size_t>(n * ff));
  float* eu = scratch<float>(eu_, static_cast<size_t>(n * ff));
  float* ey = scratch<float>(ey_, static_cast<size_t>(n * d));
  int32_t* experts = counts + E;                           // [T, k]
  float* weights = reinterpret_cast<float*>(experts + n);  // [T, k]
  int32_t* sorted = offsets + E + 1;                       // [n]
  int32_t* slot_pos = sorted + n;                          // [n]

  cu::matmul(ctx, router_x != nullptr ? router_x : x, T, W.gate_inp, rl);  // smallthinker: the layer's input
  if (W.gate_inp_b != nullptr) cu::add_bias(ctx, rl, W.gate_inp_b, T, E);  // gpt-oss: routed by the biased logits
  switch (block.router.kind) {
    case moe::RouterKind::SigmoidGroup:
    case moe::RouterKind::SoftmaxGroup: {
      cu::GroupRouterParams sp;
      sp.softmax = block.router.kind == moe::RouterKind::SoftmaxGroup;
      sp.n_group = block.router.group.n_group;
      sp.topk_group = block.router.group.topk_group;
      sp.normalize = block.router.group.normalize;
      sp.scale = block.router.group.scale;
      sp.bias = block.bias.data;
      cu::moe_group_topk(ctx, rl, T, E, k, sp, experts, weights);
      break;
    }
    case moe::RouterKind::SoftmaxTopK:
    case moe::RouterKind::SoftmaxTopKRaw:
      cu::moe_softmax_topk(ctx, rl, T, E, k, block.router.kind == moe::RouterKind::SoftmaxTopK, experts, weights);
      break;
    default:
      throw_error(ErrorKind::Unsupported, "the CUDA backend does not run the {} router",
                  moe::router_kind_name(block.router.kind));
  }
  const bool capacity = capacity_factor > 0.0;
  if (capacity)
    cu::moe_apply_capacity(ctx, experts, weights, T, k, E,
                           moe::expert_capacity(capacity_factor, static_cast<int>(T), k, E));
  cu::moe_group_by_expert(ctx, experts, n, E, counts, offsets, sorted);
  cu::moe_gather(ctx, x, d, sorted, n, k, xs, slot_pos, capacity ? experts : nullptr,
                 W.weight_inputs ? weights : nullptr);  // llama4: the experts read w * x

  // The shared expert does not depend on the routing: queue it before the host waits.
  const float* sh_y = nullptr;
  const float* sh_z = nullptr;
  if (W.has_shared_expert()) {
    const int64_t sh = W.n_ff_shared();
    float* h = scratch<float>(sh_h_, static_cast<size_t>(T * sh));
    float* u = scratch<float>(sh_u_, static_cast<size_t>(T * sh));
    float* y = scratch<float>(sh_y_, static_cast<size_t>(T * d));
    if (W.shared_act == moe::MoEActivation::ReluSqr) {  // nemotron_h_moe: ungated relu(up x)^2
      cu::matmul(ctx, x, T, W.up_shexp, u);
      cu::relu_sqr(ctx, u, h, T * sh);
    } else {
      cu::matmul(ctx, x, T, W.gate_shexp, h);
      cu::matmul(ctx, x, T, W.up_shexp, u);
      cu::swiglu(ctx, h, u, h, T * sh);
    }
    cu::matmul(ctx, h, T, W.down_shexp, y);
    sh_y = y;
    if (!W.gate_inp_shexp.empty()) {
      float* z = scratch<float>(sh_z_, static_cast<size_t>(T));
      cu::matmul(ctx, x, T, W.gate_inp_shexp, z);  // [T, 1]
      sh_z = z;
    }
  }

  rec_host_.resize(static_cast<size_t>(E + 2 * n));
  ctx.download(rec_host_.data(), counts, rec_host_.size() * sizeof(int32_t));  // waits for the routing
  int64_t off = 0;
  for (int e = 0; e < E; ++e) {
    const int64_t ne = rec_host_[e];
    if (ne == 0) continue;  // an expert no token chose is never read
    float* h = eh + off * ff;
    float* u = eu + off * ff;
    const bool gated = W.act != moe::MoEActivation::ReluSqr;  // nemotron_h_moe: no gate, relu(up x)^2
    if (gated) cu::matmul(ctx, xs + off * d, ne, W.gate_exps.rows(e * ff, ff), h);
    cu::matmul(ctx, xs + off * d, ne, W.up_exps.rows(e * ff, ff), u);
    if (W.gate_exps_b != nullptr) cu::add_bias(ctx, h, W.gate_exps_b + e * ff, ne, ff);
    if (W.up_exps_b != nullptr) cu::add_bias(ctx, u, W.up_exps_b + e * ff, ne, ff);
    if (!gated)
      cu::relu_sqr(ctx, u, h, ne * ff);
    else if (W.act == moe::MoEActivation::SwiGLUOai)
      cu::swiglu_oai(ctx, h, u, h, ne * ff);
    else if (W.swiglu_limit > 0.0f)
      cu::swiglu_clamp(ctx, h, u, h, ne * ff, W.swiglu_limit);
    else if (W.act == moe::MoEActivation::ReGLU)
      cu::reglu(ctx, h, u, h, ne * ff);
    else
      cu::swiglu(ctx, h, u, h, ne * ff);
    cu::matmul(ctx, h, ne, W.down_exps.rows(e * d, d), ey + off * d);
    if (W.down_exps_b != nullptr) cu::add_bias(ctx, ey + off * d, W.down_exps_b + e * d, ne, d);
    off += ne;
  }
  // Every assignment is kept (counted once) or dropped (-1).
  const int64_t n_dropped =
      std::count(rec_host_.begin() + E, rec_host_.begin() + E + n, static_cast<int32_t>(moe::Routing::kDropped));
  if (off + n_dropped != n)
    throw_error(ErrorKind::Runtime, "the device routed {} and dropped {} of {} (token, expert) assignments", off,
                n_dropped, n);
  ctx.zero(out, static_cast<size_t>(T * d) * sizeof(float));  // moe_combine adds into its target
  cu::moe_combine(ctx, out, T, d, k, ey, slot_pos, W.weight_inputs ? nullptr : weights, sh_y, sh_z);

  routing.reset(static_cast<int>(T), k, E);
  routing.expert.assign(rec_host_.begin() + E, rec_host_.begin() + E + n);
  std::memcpy(routing.weight.data(), rec_host_.data() + E + n, static_cast<size_t>(n) * sizeof(float));
  moe::count_drops(routing);  // dropped slots are kDropped, as moe::apply_capacity leaves them
}

// The chain of core::SamplerChain on the device. The penalties need the token history, which the
// host has: it lists, per row, the tokens to penalise and to ban (core/logits_processors.h), and
// the device applies them to a copy of the logits before the distribution.
void CudaBackend::distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                                std::span<const int32_t> history, std::span<const int32_t> extra, float* out) {
  if (rows > static_cast<int64_t>(extra.size()) + 1)
    throw_error(ErrorKind::InvalidArgument, "sampling: {} rows but {} drafted tokens (at most one row more)", rows,
                extra.size());
  cu::SamplingConfig cfg;
  cfg.temperature = params.temperature;
  cfg.top_k = params.top_k;
  cfg.top_p = params.top_p;
  cfg.min_p = params.min_p;
  const bool penalties = (params.repeat_penalty != 1.0f && params.repeat_last_n != 0) || params.no_repeat_ngram > 0;
  if (!penalties) {
    cu::sampling_distribution(*ctx_, logits, out, rows, n, cfg);
    return;
  }
  float* adjusted = scratch<float>(slot_logits_, static_cast<size_t>(rows * n));
  copy(adjusted, logits, static_cast<size_t>(rows * n) * sizeof(float));
  std::vector<int32_t> hist(history.begin(), history.end());
  for (int64_t r = 0; r < rows; ++r) {
    float* row = adjusted + r * n;
    const std::vector<int32_t> pen = params.repeat_penalty != 1.0f ? penalized_tokens(hist, params.repeat_last_n)
                                                                    : std::vector<int32_t>{};
    const std::vector<int32_t> ban = banned_tokens(hist, params.no_repeat_ngram);
    int32_t* lists = scratch<int32_t>(slot_lists_, pen.size() + ban.size());
    if (!pen.empty()) ctx_->upload(lists, pen.data(), pen.size() * sizeof(int32_t));
    if (!ban.empty()) ctx_->upload(lists + pen.size(), ban.data(), ban.size() * sizeof(int32_t));
    if (!pen.empty()) cu::repeat_penalty(*ctx_, row, n, lists, static_cast<int64_t>(pen.size()), params.repeat_penalty);
    if (!ban.empty()) cu::ban_tokens(*ctx_, row, n, lists + pen.size(), static_cast<int64_t>(ban.size()));
    if (r < static_cast<int64_t>(extra.size())) hist.push_back(extra[r]);
  }
  cu::sampling_distribution(*ctx_, adjusted, out, rows, n, cfg);
}

}  // namespace

std::shared_ptr<Backend> make_cuda_backend(int device) { return std::make_shared<CudaBackend>(device); }

cu::Context& cuda_context(Backend& backend) {
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return cuda->context();
  if (ProfilingBackend* profiled = profiling_backend(backend)) return cuda_context(profiled->inner());
  throw_error(ErrorKind::InvalidArgument, "{} is not a CUDA backend", backend.device().name());
}

}  // namespace specmoe::core
#endif  // SPECMOE_HAVE_CUDA
