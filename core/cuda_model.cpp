// The transformer forward on one NVIDIA GPU, device-resident: the same pre-norm blocks as the CPU
// forward (core/model.cpp: x += attn(norm(x)); x += ffn(norm(x)); final norm; head), with the
// weights uploaded once at load, activations and the KV cache in device memory, and every op a
// kernels/cuda launcher queued on the model's one stream. Per forward the host uploads the token
// ids, positions and mask (one copy) and downloads the logits (one copy); sampling stays on the
// host, on those logits, or for greedy decoding only the argmax ids come back (forward_argmax), or
// nothing comes back (forward_device) when sampling and verification run on the device too
// (core/device_sampler.h).
// MoE blocks (Mixtral-style llama, qwen2moe) route (softmax top-k, or sigmoid + bias +
// group-limited top-k as DeepSeek-V3), apply the Switch capacity limit when one is set, group and
// combine on the device (kernels/cuda/moe_ops.h) and run one SwiGLU per active expert on its
// slice of the stacked expert tensors; their routing (dropped slots included) is copied back per
// layer for the host statistics. Only in builds with SPECMOE_HAVE_CUDA.
#ifdef SPECMOE_HAVE_CUDA
#include "core/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model_ffn.h"
#include "core/model_weights.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/moe_ops.h"
#include "kernels/cuda/ops.h"
#include "moe/router.h"

namespace specmoe::core {

namespace cu = kernels::cuda;
namespace cpu = kernels::cpu;

namespace {

cudaStream_t stream_of(const cu::Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// Keys and values of one cache on the device, in the CPU cache's layout: (n_layer, capacity,
// kv_dim) floats each, so layer l's rows [0, capacity) are contiguous and a forward's T new rows
// are one contiguous [T, kv_dim] block that the K/V projections write straight into.
class CudaKVStorage final : public KVDeviceStorage {
 public:
  CudaKVStorage(std::shared_ptr<cu::Context> ctx, int n_layer, int capacity, int kv_dim)
      : ctx_(std::move(ctx)), n_layer_(n_layer), capacity_(capacity), kv_dim_(kv_dim) {
    const size_t bytes = layer_floats() * static_cast<size_t>(n_layer_) * sizeof(float);
    k_ = cu::DeviceBuffer(bytes, ctx_->device());
    v_ = cu::DeviceBuffer(bytes, ctx_->device());
    // Rows are always written before they are read; zeros make a bug read zeros, not garbage.
    ctx_->zero(k_.data(), bytes);
    ctx_->zero(v_.data(), bytes);
  }

  size_t layer_floats() const { return static_cast<size_t>(capacity_) * static_cast<size_t>(kv_dim_); }
  float* k(int layer) const { return k_.as<float>() + static_cast<size_t>(layer) * layer_floats(); }
  float* v(int layer) const { return v_.as<float>() + static_cast<size_t>(layer) * layer_floats(); }
  const cu::Context* context() const { return ctx_.get(); }
  int capacity() const { return capacity_; }

  std::unique_ptr<KVDeviceStorage> clone() const override {
    auto copy = std::make_unique<CudaKVStorage>(ctx_, n_layer_, capacity_, kv_dim_);
    cu::DeviceGuard guard(ctx_->device());
    SPECMOE_CUDA_CHECK(
        cudaMemcpyAsync(copy->k_.data(), k_.data(), k_.bytes(), cudaMemcpyDeviceToDevice, stream_of(*ctx_)));
    SPECMOE_CUDA_CHECK(
        cudaMemcpyAsync(copy->v_.data(), v_.data(), v_.bytes(), cudaMemcpyDeviceToDevice, stream_of(*ctx_)));
    ctx_->synchronize();
    return copy;
  }

  // Row i := row indices[i], in increasing i, exactly as the CPU cache does: indices are strictly
  // increasing, so indices[i] >= i and row indices[i] is still unchanged when it is read. Copies on
  // one stream run in order. One 2-D copy per moved row covers that row in every layer (height
  // n_layer, pitch one layer); its source and destination rows differ, so it never overlaps itself.
  void keep(std::span<const int> indices) override {
    cu::DeviceGuard guard(ctx_->device());
    const size_t row_bytes = static_cast<size_t>(kv_dim_) * sizeof(float);
    const size_t pitch = layer_floats() * sizeof(float);
    for (size_t i = 0; i < indices.size(); ++i) {
      const size_t src = static_cast<size_t>(indices[i]);
      if (src == i) continue;
      for (float* base : {k_.as<float>(), v_.as<float>()}) {
        SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(base + i * kv_dim_, pitch, base + src * kv_dim_, pitch, row_bytes,
                                             static_cast<size_t>(n_layer_), cudaMemcpyDeviceToDevice,
                                             stream_of(*ctx_)));
      }
    }
  }

  std::string device() const override { return "cuda:" + std::to_string(ctx_->device()); }

 private:
  std::shared_ptr<cu::Context> ctx_;  // shared with the model: a cache may outlive it
  int n_layer_, capacity_, kv_dim_;
  cu::DeviceBuffer k_, v_;
};

// One block's weights on the device. Absent tensors have null pointers.
struct CudaLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  const float* attn_norm_b = nullptr;
  cu::DeviceMatrix wq, wk, wv;       // (n_embd -> q_dim), (n_embd -> kv_dim) x2
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
  cu::DeviceMatrix wqkv;             // gpt2: (n_embd -> q_dim + 2 kv_dim), rows [q | k | v]
  const float* bqkv = nullptr;
  cu::DeviceMatrix wo;               // (q_dim -> n_embd)
  const float* bo = nullptr;
  const float* ffn_norm = nullptr;   // [n_embd]
  const float* ffn_norm_b = nullptr;
  cu::DeviceMatrix gate, up, down;   // SwiGLU: gate/up (n_embd -> n_ff), down (n_ff -> n_embd); gpt2: no gate
  const float *b_up = nullptr, *b_down = nullptr;  // gpt2
  // MoE blocks: the router and the stacked experts as one matrix each, expert e being rows
  // [e * n_ff_expert, (e + 1) * n_ff_expert) of gate_exps/up_exps and [e * n_embd, (e + 1) * n_embd)
  // of down_exps (GGUF ne {n_in, n_out, n_expert}: experts are contiguous slices).
  cu::DeviceMatrix gate_inp;                      // (n_embd -> n_expert)
  cu::DeviceMatrix gate_exps, up_exps, down_exps;  // (n_embd -> E * n_ff_exp) x2, (n_ff_exp -> E * n_embd)
  cu::DeviceMatrix gate_sh, up_sh, down_sh;        // qwen2moe shared expert (n_embd -> n_ff_sh) x2, (n_ff_sh -> n_embd)
  cu::DeviceMatrix gate_inp_sh;                    // qwen2moe: (n_embd -> 1), F32; absent = shared weight 1
  const float* exp_probs_b = nullptr;              // sigmoid gating: [n_expert] selection bias; null = none
  bool fused_qkv() const { return wqkv.data != nullptr; }
  bool moe() const { return gate_inp.data != nullptr; }
};

// Rows [r0, r0 + n) of m as a matrix of n outputs.
cu::DeviceMatrix row_slice(const cu::DeviceMatrix& m, int64_t r0, int64_t n) {
  cu::DeviceMatrix s = m;
  s.data = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(r0) * m.row_bytes;
  s.n_out = n;
  return s;
}

class CudaBackend final : public ModelBackend {
 public:
  CudaBackend(int device, const GGUFFile& file, const ModelConfig& config, const ModelWeights& w);

  std::string device() const override { return "cuda:" + std::to_string(ctx_->device()); }
  std::unique_ptr<KVDeviceStorage> new_kv_storage(int capacity) override {
    return std::make_unique<CudaKVStorage>(ctx_, c_.n_layer, capacity, c_.kv_dim());
  }
  void forward(const ForwardBatch& batch, KVCache& kv, std::vector<float>& logits) override;
  void forward_argmax(const ForwardBatch& batch, KVCache& kv, std::vector<int32_t>& ids) override;
  const float* forward_device(const ForwardBatch& batch, KVCache& kv, int64_t* rows) override {
    return run(batch, kv, rows);
  }
  cu::Context& cuda_context() override { return *ctx_; }

 private:
  // The forward up to the head; returns the device logits [*n_out, n_vocab].
  const float* run(const ForwardBatch& b, KVCache& kv, int64_t* n_out);
  // --- load
  // Copies `bytes` at `host` to a new device buffer. `stable` host memory (the file's memory map)
  // is uploaded once per address, so a tied head shares the embedding's copy; temporaries are not
  // (a later temporary may reuse the address).
  const void* upload(const void* host, size_t bytes, bool stable);
  cu::DeviceMatrix upload_matrix(const cpu::MatrixView& m, const std::string& name);
  const float* upload_vector(const std::vector<float>& v);
  // --- forward pieces (T new tokens; x, xn: [T, n_embd])
  void norm(const float* w, const float* b, const float* in, float* out, int64_t rows);
  void attention_block(int l, int64_t T, int64_t n_past, const int32_t* d_pos, const uint8_t* d_mask,
                       CudaKVStorage& kv);
  void ffn_block(int l, int64_t T);
  // x += moe(norm(x)) with k experts per token; the routing goes to *rec (when non-null).
  void moe_block(int l, int64_t T, int k, MoELayerRecord* rec);
  // Stacked expert tensor `name` (GGUF ne {n_in, n_out, E}) as one matrix of n_out * E rows.
  cu::DeviceMatrix upload_stacked(const GGUFFile& file, const std::string& name, int64_t n_in, int64_t n_rows);
  template <typename E>
  E* ensure(cu::DeviceBuffer& buf, size_t count);

  std::string path_;
  ModelConfig c_;
  std::shared_ptr<cu::Context> ctx_;
  std::vector<cu::DeviceBuffer> weights_;
  std::unordered_map<const void*, const void*> uploaded_;  // host -> device, so a tied head is one copy
  cu::DeviceMatrix token_embd_, position_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* output_norm_b_ = nullptr;
  std::vector<CudaLayer> layers_;

  // Activations, grown on demand and reused. // [T, n_embd] unless noted
  cu::DeviceBuffer x_, xn_, q_ /*[T, q_dim]*/, qkv_ /*[T, q_dim + 2 kv_dim]*/, att_ /*[T, q_dim]*/,
      g_ /*[T, n_ff]*/, u_ /*[T, n_ff]*/, logits_ /*[T, n_vocab]*/, io_ /*ids, positions, mask*/,
      ids_ /*[T] argmax ids*/;
  std::vector<uint8_t> io_host_;
  // MoE activations (n = T * k assignments): router logits [T, E]; the record [E + 2n] int32
  // words (tokens per expert | expert ids [T, k] | weights [T, k] as float bits), copied back
  // per layer; the grouping [E + 1 + 2n] (offsets | sorted assignments | slot positions);
  // gathered inputs xs [n, n_embd], hidden [n, n_ff_exp] x2, expert outputs [n, n_embd]; the
  // shared expert's hidden [T, n_ff_sh] x2, output [T, n_embd] and gate logit [T].
  cu::DeviceBuffer rl_, rec_, grp_, xs_, eh_, eu_, ey_, sh_h_, sh_u_, sh_y_, sh_z_;
  std::vector<int32_t> rec_host_;
  double moe_capacity_factor_ = 0.0;  // of the forward in progress (run() sets it; <= 0: dropless)
};

CudaBackend::CudaBackend(int device, const GGUFFile& file, const ModelConfig& config, const ModelWeights& w)
    : path_(file.path()), c_(config) {
  const int count = cu::cuda_device_count();
  if (device >= count) {
    const cu::CudaInfo info = cu::query_cuda();
    throw_error(ErrorKind::Runtime, "{}: device cuda:{} is not available: {} CUDA device(s) present ({})", path_,
                device, count, info.available() ? "ok" : info.status);
  }
  ctx_ = std::make_shared<cu::Context>(device);

  // Fail with a clear message before uploading what cannot fit.
  size_t need = w.token_embd.bytes() + w.position_embd.bytes() + (w.output.data == w.token_embd.data ? 0 : w.output.bytes());
  const TensorBinder binder(file);
  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    need += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wqkv.bytes() + L.wo.bytes();
    if (!c_.is_moe()) {
      need += L.ffn->weight_bytes_per_token();
      continue;
    }
    for (const char* t : {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp",
                          "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp"})  // every expert is uploaded
      if (const GGUFTensorInfo* ti = file.find_tensor(fmt::format("blk.{}.{}.weight", l, t))) need += ti->nbytes;
  }
  {
    cu::DeviceGuard guard(device);
    size_t free_bytes = 0, total_bytes = 0;
    SPECMOE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need > free_bytes)
      throw_error(ErrorKind::Runtime, "{}: the weights need {:.2f} GiB but cuda:{} has {:.2f} GiB free", path_,
                  need / 1073741824.0, device, free_bytes / 1073741824.0);
  }

  const bool gpt2 = c_.arch == Arch::Gpt2;
  token_embd_ = upload_matrix(w.token_embd, "token_embd.weight");
  if (gpt2) position_embd_ = upload_matrix(w.position_embd, "position_embd.weight");
  output_norm_ = upload_vector(w.output_norm);
  output_norm_b_ = upload_vector(w.output_norm_b);
  output_ = upload_matrix(w.output, w.output.data == w.token_embd.data ? "token_embd.weight" : "output.weight");

  layers_.resize(c_.n_layer);
  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    CudaLayer& D = layers_[l];
    const std::string p = fmt::format("blk.{}.", l);
    D.attn_norm = upload_vector(L.attn_norm);
    D.attn_norm_b = upload_vector(L.attn_norm_b);
    D.ffn_norm = upload_vector(L.ffn_norm);
    D.ffn_norm_b = upload_vector(L.ffn_norm_b);
    if (L.fused_qkv()) {
      D.wqkv = upload_matrix(L.wqkv, p + "attn_qkv.weight");
      D.bqkv = upload_vector(L.bqkv);
    } else {
      D.wq = upload_matrix(L.wq, p + "attn_q.weight");
      D.wk = upload_matrix(L.wk, p + "attn_k.weight");
      D.wv = upload_matrix(L.wv, p + "attn_v.weight");
      D.bq = upload_vector(L.bq);
      D.bk = upload_vector(L.bk);
      D.bv = upload_vector(L.bv);
    }
    D.wo = upload_matrix(L.wo, p + "attn_output.weight");
    D.bo = upload_vector(L.bo);
    // The FFN's tensors are private to the CPU FeedForward: bind them again by name (the same
    // names and shapes as core/model_ffn.cpp checks).
    if (c_.is_moe()) {
      // Shapes were checked when the CPU side bound them (core/model_moe.cpp).
      const int64_t d = c_.n_embd, E = c_.n_expert, ff = c_.n_ff_expert;
      D.gate_inp = upload_matrix(binder.matrix(p + "ffn_gate_inp.weight", d, E), p + "ffn_gate_inp.weight");
      D.gate_exps = upload_stacked(file, p + "ffn_gate_exps.weight", d, ff * E);
      D.up_exps = upload_stacked(file, p + "ffn_up_exps.weight", d, ff * E);
      D.down_exps = upload_stacked(file, p + "ffn_down_exps.weight", ff, d * E);
      // The sigmoid router's bias, read as the CPU side reads it (core/model_moe.cpp).
      if (c_.expert_gating == ExpertGating::Sigmoid && binder.has(p + "exp_probs_b.bias"))
        D.exp_probs_b = upload_vector(binder.vector(p + "exp_probs_b.bias", E));
      if (c_.arch == Arch::Qwen2Moe) {
        const int64_t sh = c_.n_ff_shared_expert;
        D.gate_sh = upload_matrix(binder.matrix(p + "ffn_gate_shexp.weight", d, sh), p + "ffn_gate_shexp.weight");
        D.up_sh = upload_matrix(binder.matrix(p + "ffn_up_shexp.weight", d, sh), p + "ffn_up_shexp.weight");
        D.down_sh = upload_matrix(binder.matrix(p + "ffn_down_shexp.weight", sh, d), p + "ffn_down_shexp.weight");
        // The gate vector as F32 (the CPU dequantizes it too), one output row.
        if (binder.has(p + "ffn_gate_inp_shexp.weight")) {
          D.gate_inp_sh.type = DType::F32;
          D.gate_inp_sh.data = upload_vector(binder.vector(p + "ffn_gate_inp_shexp.weight", d));
          D.gate_inp_sh.n_in = d;
          D.gate_inp_sh.n_out = 1;
          D.gate_inp_sh.row_bytes = static_cast<size_t>(d) * sizeof(float);
        }
      }
    } else if (gpt2) {
      D.up = upload_matrix(binder.matrix(p + "ffn_up.weight", c_.n_embd, c_.n_ff), p + "ffn_up.weight");
      D.b_up = upload_vector(binder.vector(p + "ffn_up.bias", c_.n_ff));
      D.down = upload_matrix(binder.matrix(p + "ffn_down.weight", c_.n_ff, c_.n_embd), p + "ffn_down.weight");
      D.b_down = upload_vector(binder.vector(p + "ffn_down.bias", c_.n_embd));
    } else {
      D.gate = upload_matrix(binder.matrix(p + "ffn_gate.weight", c_.n_embd, c_.n_ff), p + "ffn_gate.weight");
      D.up = upload_matrix(binder.matrix(p + "ffn_up.weight", c_.n_embd, c_.n_ff), p + "ffn_up.weight");
      D.down = upload_matrix(binder.matrix(p + "ffn_down.weight", c_.n_ff, c_.n_embd), p + "ffn_down.weight");
    }
  }
}

const void* CudaBackend::upload(const void* host, size_t bytes, bool stable) {
  if (stable)
    if (auto it = uploaded_.find(host); it != uploaded_.end()) return it->second;
  cu::DeviceBuffer buf(bytes, ctx_->device());
  ctx_->upload(buf.data(), host, bytes);
  const void* dev = buf.data();
  weights_.push_back(std::move(buf));
  if (stable) uploaded_.emplace(host, dev);
  return dev;
}

cu::DeviceMatrix CudaBackend::upload_matrix(const cpu::MatrixView& m, const std::string& name) {
  switch (m.type) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: break;
    default:
      throw_error(ErrorKind::Unsupported, "{}: tensor '{}' has type {}, which the CUDA backend cannot multiply", path_,
                  name, dtype_name(m.type));
  }
  cu::DeviceMatrix d;
  d.type = m.type;
  d.n_in = m.n_in;
  d.n_out = m.n_out;
  d.row_bytes = m.row_bytes;
  d.data = upload(m.data, m.bytes(), /*stable=*/true);  // matrices point into the memory map
  return d;
}

cu::DeviceMatrix CudaBackend::upload_stacked(const GGUFFile& file, const std::string& name, int64_t n_in,
                                             int64_t n_rows) {
  const GGUFTensorInfo* t = file.find_tensor(name);
  if (t == nullptr) throw_error(ErrorKind::Format, "{}: tensor '{}' is missing", path_, name);
  const cpu::MatrixView m = cpu::MatrixView::make(t->type, t->data, n_in, n_rows);
  if (m.bytes() != t->nbytes)
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds {} bytes, expected {}", path_, name, t->nbytes, m.bytes());
  return upload_matrix(m, name);
}

const float* CudaBackend::upload_vector(const std::vector<float>& v) {
  if (v.empty()) return nullptr;
  return static_cast<const float*>(upload(v.data(), v.size() * sizeof(float), /*stable=*/false));
}

template <typename E>
E* CudaBackend::ensure(cu::DeviceBuffer& buf, size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(E);
  if (buf.bytes() < bytes) {
    ctx_->synchronize();  // queued kernels may still use the old region
    buf = cu::DeviceBuffer(bytes, ctx_->device());
  }
  return buf.as<E>();
}

void CudaBackend::norm(const float* w, const float* b, const float* in, float* out, int64_t rows) {
  if (c_.arch == Arch::Gpt2)
    cu::layer_norm(*ctx_, in, w, b, out, rows, c_.n_embd, c_.norm_eps);
  else
    cu::rms_norm(*ctx_, in, w, out, rows, c_.n_embd, c_.norm_eps);
}

// x += attn_output(attention(rope(q), rope(k), v)) for layer l. The new keys/values go straight
// into cache rows n_past .. n_past+T-1 of layer l (contiguous [T, kv_dim]).
void CudaBackend::attention_block(int l, int64_t T, int64_t n_past, const int32_t* d_pos, const uint8_t* d_mask,
                                  CudaKVStorage& kv) {
  cu::Context& ctx = *ctx_;
  const CudaLayer& L = layers_[l];
  const int64_t d = c_.n_embd;
  const int64_t q_dim = static_cast<int64_t>(c_.n_head) * c_.head_dim;
  const int64_t kvd = c_.kv_dim();
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();
  float* q = q_.as<float>();
  float* att = att_.as<float>();
  float* k_new = kv.k(l) + n_past * kvd;  // [T, kvd]
  float* v_new = kv.v(l) + n_past * kvd;  // [T, kvd]

  norm(L.attn_norm, L.attn_norm_b, x, xn, T);
  if (L.fused_qkv()) {
    float* qkv = qkv_.as<float>();  // [T, q_dim + 2 kvd]
    const int64_t w3 = q_dim + 2 * kvd;
    cu::matmul(ctx, xn, T, L.wqkv, qkv);
    if (L.bqkv) cu::add_bias(ctx, qkv, L.bqkv, T, w3);
    // Split the rows [q | k | v] into q and the cache rows (strided 2-D copies, T rows each).
    const size_t src_pitch = static_cast<size_t>(w3) * sizeof(float);
    SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(q, q_dim * sizeof(float), qkv, src_pitch, q_dim * sizeof(float),
                                         static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_of(ctx)));
    SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(k_new, kvd * sizeof(float), qkv + q_dim, src_pitch, kvd * sizeof(float),
                                         static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_of(ctx)));
    SPECMOE_CUDA_CHECK(cudaMemcpy2DAsync(v_new, kvd * sizeof(float), qkv + q_dim + kvd, src_pitch,
                                         kvd * sizeof(float), static_cast<size_t>(T), cudaMemcpyDeviceToDevice,
                                         stream_of(ctx)));
  } else {
    cu::matmul(ctx, xn, T, L.wq, q);
    cu::matmul(ctx, xn, T, L.wk, k_new);
    cu::matmul(ctx, xn, T, L.wv, v_new);
    if (L.bq) cu::add_bias(ctx, q, L.bq, T, q_dim);
    if (L.bk) cu::add_bias(ctx, k_new, L.bk, T, kvd);
    if (L.bv) cu::add_bias(ctx, v_new, L.bv, T, kvd);
  }
  if (c_.rope_style != RopeStyle::None) {
    cu::RopeParams rp;
    rp.head_dim = c_.head_dim;
    rp.rope_dims = c_.rope_dims;
    rp.freq_base = c_.rope_freq_base;
    rp.freq_scale = c_.rope_freq_scale;
    rp.pairing = c_.rope_style == RopeStyle::SplitHalves ? cu::RopePairing::SplitHalves : cu::RopePairing::Adjacent;
    rp.n_head = c_.n_head;
    cu::rope(ctx, q, T, d_pos, rp);
    rp.n_head = c_.n_head_kv;
    cu::rope(ctx, k_new, T, d_pos, rp);
  }

  cu::KVView view;
  view.k = kv.k(l);
  view.v = kv.v(l);
  view.kv_stride = kvd;
  view.n_past = n_past;
  cu::AttentionParams ap;
  ap.n_head = c_.n_head;
  ap.n_head_kv = c_.n_head_kv;
  ap.head_dim = c_.head_dim;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  cu::attention(ctx, q, T, view, d_mask, ap, att);

  cu::matmul(ctx, att, T, L.wo, xn);
  if (L.bo) cu::add_bias(ctx, xn, L.bo, T, d);
  cu::add(ctx, x, xn, x, T * d);
}

// x += ffn(norm(x)): SwiGLU down(silu(gate xn) * up xn), or gpt2's down(gelu(up xn + b_up)) + b_down.
void CudaBackend::ffn_block(int l, int64_t T) {
  cu::Context& ctx = *ctx_;
  const CudaLayer& L = layers_[l];
  const int64_t d = c_.n_embd;
  const int64_t n_ff = L.up.n_out;
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();
  float* g = g_.as<float>();  // [T, n_ff]
  norm(L.ffn_norm, L.ffn_norm_b, x, xn, T);
  if (L.gate.data != nullptr) {
    float* u = u_.as<float>();  // [T, n_ff]
    cu::matmul(ctx, xn, T, L.gate, g);
    cu::matmul(ctx, xn, T, L.up, u);
    cu::swiglu(ctx, g, u, g, T * n_ff);
  } else {
    cu::matmul(ctx, xn, T, L.up, g);
    if (L.b_up) cu::add_bias(ctx, g, L.b_up, T, n_ff);
    cu::gelu(ctx, g, g, T * n_ff);
  }
  cu::matmul(ctx, g, T, L.down, xn);
  if (L.b_down) cu::add_bias(ctx, xn, L.b_down, T, d);
  cu::add(ctx, x, xn, x, T * d);
}

// x += moe(norm(x)) (moe::MoELayer on the device):
//   logits = xn W_inp^T; (experts, weights) = softmax top-k or sigmoid group-limited top-k (the
//   router core/model_moe.cpp builds from the same metadata); with a capacity factor, the Switch
//   limit marks assignments beyond each expert's capacity dropped (-1, weight 0); group the kept
//   assignments by expert (histogram, scan, stable radix sort; dropped ones sort last) and
//   gather their inputs; per active expert e, in expert order: y = down_e(silu(gate_e xs) *
//   up_e xs) over its contiguous rows; shared expert over all T tokens; combine per token over
//   its kept slots in rank order (+ sigmoid-gated shared output).
// The host needs the tokens per expert to size each expert's GEMM: the record (kept counts, ids
// with -1 for dropped slots, weights) is copied back once per MoE layer, which also gives Model
// the routing it records.
void CudaBackend::moe_block(int l, int64_t T, int k, MoELayerRecord* rec) {
  cu::Context& ctx = *ctx_;
  const CudaLayer& L = layers_[l];
  const int64_t d = c_.n_embd, ff = c_.n_ff_expert;
  const int E = c_.n_expert;
  const int64_t n = T * k;
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();
  norm(L.ffn_norm, L.ffn_norm_b, x, xn, T);

  float* rl = rl_.as<float>();                     // [T, E]
  int32_t* counts = rec_.as<int32_t>();            // [E]
  int32_t* experts = counts + E;                   // [T, k]
  float* weights = reinterpret_cast<float*>(experts + n);  // [T, k]
  int32_t* offsets = grp_.as<int32_t>();           // [E + 1]
  int32_t* sorted = offsets + E + 1;               // [n]
  int32_t* slot_pos = sorted + n;                  // [n]
  cu::matmul(ctx, xn, T, L.gate_inp, rl);
  if (c_.expert_gating == ExpertGating::Sigmoid) {
    cu::SigmoidGroupParams sp;
    sp.n_group = c_.n_expert_group;
    sp.topk_group = c_.n_expert_group_used;
    sp.normalize = c_.expert_weights_norm;
    sp.scale = c_.expert_weights_scale;
    sp.bias = L.exp_probs_b;
    cu::moe_sigmoid_group_topk(ctx, rl, T, E, k, sp, experts, weights);
  } else {
    cu::moe_softmax_topk(ctx, rl, T, E, k, c_.expert_weights_norm, experts, weights);
  }
  const bool capacity = moe_capacity_factor_ > 0.0;
  if (capacity)
    cu::moe_apply_capacity(ctx, experts, weights, T, k, E,
                           moe::expert_capacity(moe_capacity_factor_, static_cast<int>(T), k, E));
  cu::moe_group_by_expert(ctx, experts, n, E, counts, offsets, sorted);
  cu::moe_gather(ctx, xn, d, sorted, n, k, xs_.as<float>(), slot_pos, capacity ? experts : nullptr);

  // The shared expert does not depend on the routing: queue it before the host waits.
  const float* sh_y = nullptr;
  const float* sh_z = nullptr;
  if (L.gate_sh.data != nullptr) {
    const int64_t sh = L.gate_sh.n_out;
    cu::matmul(ctx, xn, T, L.gate_sh, sh_h_.as<float>());
    cu::matmul(ctx, xn, T, L.up_sh, sh_u_.as<float>());
    cu::swiglu(ctx, sh_h_.as<float>(), sh_u_.as<float>(), sh_h_.as<float>(), T * sh);
    cu::matmul(ctx, sh_h_.as<float>(), T, L.down_sh, sh_y_.as<float>());
    sh_y = sh_y_.as<float>();
    if (L.gate_inp_sh.data != nullptr) {
      cu::matmul(ctx, xn, T, L.gate_inp_sh, sh_z_.as<float>());  // [T, 1]
      sh_z = sh_z_.as<float>();
    }
  }

  rec_host_.resize(static_cast<size_t>(E + 2 * n));
  ctx.download(rec_host_.data(), counts, rec_host_.size() * sizeof(int32_t));  // waits for the routing
  int64_t off = 0;
  for (int e = 0; e < E; ++e) {
    const int64_t ne = rec_host_[e];
    if (ne == 0) continue;  // an expert no token chose is never read
    float* h = eh_.as<float>() + off * ff;
    float* u = eu_.as<float>() + off * ff;
    cu::matmul(ctx, xs_.as<float>() + off * d, ne, row_slice(L.gate_exps, e * ff, ff), h);
    cu::matmul(ctx, xs_.as<float>() + off * d, ne, row_slice(L.up_exps, e * ff, ff), u);
    cu::swiglu(ctx, h, u, h, ne * ff);
    cu::matmul(ctx, h, ne, row_slice(L.down_exps, e * d, d), ey_.as<float>() + off * d);
    off += ne;
  }
  // Every assignment is kept (counted once) or dropped (-1).
  const int64_t n_dropped =
      std::count(rec_host_.begin() + E, rec_host_.begin() + E + n, static_cast<int32_t>(moe::Routing::kDropped));
  if (off + n_dropped != n)
    throw_error(ErrorKind::Runtime,
                "{}: layer {}: the device routed {} and dropped {} of {} (token, expert) assignments", path_, l,
                off, n_dropped, n);
  cu::moe_combine(ctx, x, T, d, k, ey_.as<float>(), slot_pos, weights, sh_y, sh_z);

  if (rec != nullptr) {
    rec->ran = true;
    rec->n_tokens = static_cast<int>(T);
    rec->k = k;
    rec->tokens_per_expert.assign(rec_host_.begin(), rec_host_.begin() + E);
    rec->experts.assign(rec_host_.begin() + E, rec_host_.begin() + E + n);
    rec->weights.resize(static_cast<size_t>(n));
    std::memcpy(rec->weights.data(), rec_host_.data() + E + n, static_cast<size_t>(n) * sizeof(float));
  }
}

void CudaBackend::forward(const ForwardBatch& b, KVCache& kv, std::vector<float>& logits) {
  int64_t n_out = 0;
  const float* d_logits = run(b, kv, &n_out);
  logits.resize(static_cast<size_t>(n_out) * c_.n_vocab);
  ctx_->download(logits.data(), d_logits, logits.size() * sizeof(float));  // waits for the forward
}

void CudaBackend::forward_argmax(const ForwardBatch& b, KVCache& kv, std::vector<int32_t>& ids) {
  int64_t n_out = 0;
  const float* d_logits = run(b, kv, &n_out);
  int32_t* d_ids = ensure<int32_t>(ids_, static_cast<size_t>(n_out));
  cu::argmax_rows(*ctx_, d_logits, n_out, c_.n_vocab, d_ids);
  ids.resize(static_cast<size_t>(n_out));
  ctx_->download(ids.data(), d_ids, ids.size() * sizeof(int32_t));  // T ids instead of T x n_vocab floats
}

const float* CudaBackend::run(const ForwardBatch& b, KVCache& kv, int64_t* n_out_ptr) {
  auto* st = dynamic_cast<CudaKVStorage*>(kv.device_storage());
  if (st == nullptr || st->context() != ctx_.get())
    throw_error(ErrorKind::InvalidArgument,
                "{}: the KV cache ({}) was not made by this model: make it with this model's new_cache", path_,
                kv.device_storage() ? kv.device_storage()->device() : "cpu");
  if (st->capacity() != kv.capacity())
    throw_error(ErrorKind::InvalidArgument, "{}: KV cache capacity {} differs from its device rows ({})", path_,
                kv.capacity(), st->capacity());
  cu::Context& ctx = *ctx_;
  cu::DeviceGuard guard(ctx.device());
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  const int64_t n_past = kv.size();
  const int64_t d = c_.n_embd;
  const int64_t q_dim = static_cast<int64_t>(c_.n_head) * c_.head_dim;
  const int64_t kvd = c_.kv_dim();
  const bool gpt2 = c_.arch == Arch::Gpt2;

  // Inputs in one upload: ids [T] int32, positions [T] int32, mask [T, T] bytes (when given).
  const size_t ids_bytes = static_cast<size_t>(T) * sizeof(int32_t);
  const size_t mask_bytes = b.allowed ? static_cast<size_t>(T * T) : 0;
  io_host_.resize(2 * ids_bytes + mask_bytes);
  std::memcpy(io_host_.data(), b.tokens.data(), ids_bytes);
  std::memcpy(io_host_.data() + ids_bytes, b.positions.data(), ids_bytes);
  if (b.allowed) std::memcpy(io_host_.data() + 2 * ids_bytes, b.allowed, mask_bytes);
  uint8_t* io = ensure<uint8_t>(io_, io_host_.size());
  ctx.upload(io, io_host_.data(), io_host_.size());
  if (b.device_tokens != nullptr)  // ids sampled on the device: a device-to-device copy, no wait
    SPECMOE_CUDA_CHECK(cudaMemcpyAsync(io, b.device_tokens, ids_bytes, cudaMemcpyDeviceToDevice, stream_of(ctx)));
  const auto* d_ids = reinterpret_cast<const int32_t*>(io);
  const auto* d_pos = reinterpret_cast<const int32_t*>(io + ids_bytes);
  const uint8_t* d_mask = b.allowed ? io + 2 * ids_bytes : nullptr;

  // Activations for T tokens (ensure may reallocate; the blocks read the buffers' pointers after).
  ensure<float>(x_, T * d);
  ensure<float>(xn_, T * d);
  ensure<float>(q_, T * q_dim);
  ensure<float>(att_, T * q_dim);
  if (!layers_.empty() && layers_[0].fused_qkv()) ensure<float>(qkv_, T * (q_dim + 2 * kvd));
  const bool moe = c_.is_moe();
  if (moe) {
    const int k = b.moe_k, E = c_.n_expert;
    if (k < 1 || k > E)
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k = {} outside [1, {}]", path_, k, E);
    if (!std::isfinite(b.moe_capacity_factor))
      throw_error(ErrorKind::InvalidArgument, "{}: MoE capacity factor {} is not finite", path_,
                  b.moe_capacity_factor);
    moe_capacity_factor_ = b.moe_capacity_factor;
    const int64_t n = T * k, ff = c_.n_ff_expert, sh = c_.n_ff_shared_expert;
    ensure<float>(rl_, T * E);
    ensure<int32_t>(rec_, E + 2 * n);
    ensure<int32_t>(grp_, E + 1 + 2 * n);
    ensure<float>(xs_, n * d);
    ensure<float>(eh_, n * ff);
    ensure<float>(eu_, n * ff);
    ensure<float>(ey_, n * d);
    if (c_.arch == Arch::Qwen2Moe) {
      ensure<float>(sh_h_, T * sh);
      ensure<float>(sh_u_, T * sh);
      ensure<float>(sh_y_, T * d);
      ensure<float>(sh_z_, T);
    }
    if (b.moe_records != nullptr && static_cast<int>(b.moe_records->size()) < c_.n_layer)
      b.moe_records->resize(c_.n_layer);
  } else {
    ensure<float>(g_, T * c_.n_ff);
    if (!gpt2) ensure<float>(u_, T * c_.n_ff);
  }
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();

  // Embeddings: one row of token_embd per token (+ the learned position row for gpt2).
  cu::get_rows(ctx, token_embd_, d_ids, T, x);
  if (gpt2) {
    cu::get_rows(ctx, position_embd_, d_pos, T, xn);
    cu::add(ctx, x, xn, x, T * d);
  }
  for (int l = 0; l < b.n_layers; ++l) {
    attention_block(l, T, n_past, d_pos, d_mask, *st);
    if (layers_[l].moe())
      moe_block(l, T, b.moe_k, b.moe_records ? &(*b.moe_records)[l] : nullptr);
    else
      ffn_block(l, T);
  }

  // Final norm and head, for all tokens or only the last one; then the one download.
  const int64_t first = b.logits_all ? 0 : T - 1;
  const int64_t n_out = T - first;
  norm(output_norm_, output_norm_b_, x + first * d, xn, n_out);
  float* d_logits = ensure<float>(logits_, static_cast<size_t>(n_out) * c_.n_vocab);
  cu::matmul(ctx, xn, n_out, output_, d_logits);
  *n_out_ptr = n_out;
  return d_logits;
}

}  // namespace

std::unique_ptr<ModelBackend> make_cuda_backend(int device, const GGUFFile& file, const ModelConfig& config,
                                                const ModelWeights& weights) {
  return std::make_unique<CudaBackend>(device, file, config, weights);
}

}  // namespace specmoe::core
#endif  // SPECMOE_HAVE_CUDA
