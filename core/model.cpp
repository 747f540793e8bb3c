// Model: the transformer forward over a batch of new tokens (llama, qwen2, gpt2). One code path,
// configured by ModelConfig: pre-norm blocks x += attn(norm(x)); x += ffn(norm(x)); then the
// final norm and the output head. Every matmul reads its weights once for the whole batch.
#include "core/model.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model_backend.h"
#include "core/model_ffn.h"
#include "core/model_moe.h"
#include "core/model_weights.h"
#include "core/sampling.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specmoe::core {

namespace cpu = kernels::cpu;

AttentionMask AttentionMask::causal(int n) {
  AttentionMask m;
  m.n = n;
  m.allowed.assign(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) m.allowed[static_cast<size_t>(i) * n + j] = 1;
  return m;
}

struct Model::Impl {
  std::shared_ptr<GGUFFile> file;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelWeights w;
  std::unique_ptr<cpu::ThreadPool> pool;
  std::vector<int> last_distinct;  // [n_layer] U(T) of the last forward per MoE layer, -1 otherwise
  Device device;                          // cpu, or the device `backend` runs on
  std::unique_ptr<ModelBackend> backend;  // null on the CPU

  // Activations, resized per call. // [T, n_embd] unless noted
  std::vector<float> x, xn, q /*[T, q_dim]*/, kv_new /*[T, 2*kv_dim] or qkv [T, q_dim+2*kv_dim]*/,
      att /*[T, q_dim]*/, tmp;

  bool norm_is_layernorm() const { return config.arch == Arch::Gpt2; }
  void norm(const std::vector<float>& wt, const std::vector<float>& bias, const float* in, float* out, int64_t T) {
    if (norm_is_layernorm())
      cpu::layernorm(*pool, in, wt.data(), bias.empty() ? nullptr : bias.data(), out, T, config.n_embd,
                     config.norm_eps);
    else
      cpu::rmsnorm(*pool, in, wt.data(), out, T, config.n_embd, config.norm_eps);
  }
  void attention_block(int l, int64_t T, std::span<const int32_t> positions, KVCache& kv, const uint8_t* allowed);
  // Checks a forward's arguments (throwing as Model::forward documents) and resolves them into a
  // batch; pos_storage holds the default positions the batch points to.
  ForwardBatch prepare(std::span<const int32_t> tokens, std::span<const int32_t> positions, const KVCache& kv,
                       const ForwardOptions& options, std::vector<int32_t>& pos_storage);
  void forward_cpu(const ForwardBatch& b, KVCache& kv, std::vector<float>& logits);
  // After a backend forward: each MoE layer it ran is recorded as the CPU forward records it.
  void record_backend_moe(const ForwardBatch& b);

  std::vector<MoELayerRecord> moe_records;  // [n_layer] filled by a backend forward
  std::vector<float> argmax_logits;         // CPU forward_argmax scratch
  std::vector<int32_t> placeholder_ids;     // forward_device_ids: what the host checks see
  // forward_device / forward_device_ids (`what` names the caller in errors): the backend forward
  // with the logits left on the device.
  const float* forward_on_device(const char* what, std::span<const int32_t> tokens, const int32_t* device_tokens,
                                 std::span<const int32_t> positions, KVCache& kv, int64_t* n_rows,
                                 const ForwardOptions& options);
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  Impl& I = *m->impl_;
  I.device = parse_device(options.device);  // a mistyped device fails before the file is read
  I.file = GGUFFile::open(path);
  I.config = ModelConfig::from_gguf(*I.file);
  I.config.validate();
  const ModelConfig& c = I.config;
  if (c.arch == Arch::Gpt2 && c.rope_style != RopeStyle::None)
    throw_error(ErrorKind::Format, "{}: gpt2 uses learned positions, not RoPE", path);
  if (c.arch != Arch::Gpt2 && c.rope_style == RopeStyle::None)
    throw_error(ErrorKind::Format, "{}: architecture '{}' needs RoPE", path, c.arch_name);
  if (c.rope_style != RopeStyle::None && (c.rope_dims <= 0 || c.rope_dims > c.head_dim || c.rope_dims % 2))
    throw_error(ErrorKind::Format, "{}: rope dimension count {} must be even and at most head_dim {}", path,
                c.rope_dims, c.head_dim);
  I.w = bind_weights(*I.file, c);
  I.tokenizer = Tokenizer::from_gguf(*I.file);
  if (I.tokenizer->n_vocab() != c.n_vocab)
    throw_error(ErrorKind::Format, "{}: tokenizer has {} tokens but the model's vocabulary is {}", path,
                I.tokenizer->n_vocab(), c.n_vocab);
  I.pool = std::make_unique<cpu::ThreadPool>(options.n_threads);
  I.last_distinct.assign(c.n_layer, -1);
  // The backend first: a device that cannot run the MoE options refuses them (set_moe_*).
  if (I.device.kind != Device::Kind::Cpu) I.backend = make_model_backend(I.device, *I.file, c, I.w);
  if (options.moe_k_override != 0 || options.moe_capacity_factor != 0.0) {
    if (!c.is_moe())
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k override / capacity factor given for a dense model", path);
    if (options.moe_k_override != 0) m->set_moe_k(options.moe_k_override);
    m->set_moe_capacity_factor(options.moe_capacity_factor);
  }
  return m;
}

const ModelConfig& Model::config() const { return impl_->config; }
const Tokenizer& Model::tokenizer() const { return *impl_->tokenizer; }
const GGUFFile& Model::file() const { return *impl_->file; }
void Model::set_threads(int n_threads) { impl_->pool = std::make_unique<cpu::ThreadPool>(n_threads); }
int Model::threads() const { return impl_->pool->n_threads(); }
std::string Model::device() const { return impl_->device.name(); }

size_t Model::weight_bytes_per_token() const {
  const ModelWeights& w = impl_->w;
  size_t total = w.output.bytes();
  for (const LayerWeights& L : w.layers) {
    total += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wqkv.bytes() + L.wo.bytes();
    total += L.ffn->weight_bytes_per_token();
  }
  return total;
}

KVCache Model::new_cache(int n_ctx) const {
  const ModelConfig& c = impl_->config;
  if (n_ctx <= 0) n_ctx = c.n_ctx_train;
  if (c.arch == Arch::Gpt2 && n_ctx > c.n_ctx_train)
    throw_error(ErrorKind::Limit, "{}: gpt2 context {} exceeds its {} learned positions", impl_->file->path(), n_ctx,
                c.n_ctx_train);
  if (impl_->backend) return KVCache(c.n_layer, n_ctx, c.kv_dim(), impl_->backend->new_kv_storage(n_ctx));
  return KVCache(c.n_layer, n_ctx, c.kv_dim());
}

// x += attn_output(attention(rope(q), rope(k), v)) for layer l; writes the new tokens' K/V into
// cache rows kv.size() .. kv.size()+T-1 (marked as stored by the caller after the last layer).
void Model::Impl::attention_block(int l, int64_t T, std::span<const int32_t> positions, KVCache& kv,
                                  const uint8_t* allowed) {
  const ModelConfig& c = config;
  const LayerWeights& L = w.layers[l];
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kvd = c.kv_dim();
  const int64_t n_past = kv.size();
  norm(L.attn_norm, L.attn_norm_b, x.data(), xn.data(), T);

  q.resize(T * q_dim);
  tmp.resize(T * kvd * 2);  // new keys [T, kvd] then values [T, kvd]
  float* k_new = tmp.data();
  float* v_new = tmp.data() + T * kvd;
  if (L.fused_qkv()) {
    kv_new.resize(T * (q_dim + 2 * kvd));  // [T, q_dim + 2 kvd]
    cpu::matmul(*pool, xn.data(), T, L.wqkv, kv_new.data());
    cpu::add_bias(kv_new.data(), L.bqkv.data(), T, q_dim + 2 * kvd);
    for (int64_t t = 0; t < T; ++t) {
      const float* row = kv_new.data() + t * (q_dim + 2 * kvd);
      std::copy(row, row + q_dim, q.data() + t * q_dim);
      std::copy(row + q_dim, row + q_dim + kvd, k_new + t * kvd);
      std::copy(row + q_dim + kvd, row + q_dim + 2 * kvd, v_new + t * kvd);
    }
  } else {
    cpu::matmul(*pool, xn.data(), T, L.wq, q.data());
    cpu::matmul(*pool, xn.data(), T, L.wk, k_new);
    cpu::matmul(*pool, xn.data(), T, L.wv, v_new);
    if (!L.bq.empty()) {
      cpu::add_bias(q.data(), L.bq.data(), T, q_dim);
      cpu::add_bias(k_new, L.bk.data(), T, kvd);
      cpu::add_bias(v_new, L.bv.data(), T, kvd);
    }
  }
  if (c.rope_style != RopeStyle::None) {
    cpu::RopeParams rp;
    rp.head_dim = c.head_dim;
    rp.rope_dims = c.rope_dims;
    rp.freq_base = c.rope_freq_base;
    rp.freq_scale = c.rope_freq_scale;
    rp.pairing = c.rope_style == RopeStyle::SplitHalves ? cpu::RopePairing::SplitHalves : cpu::RopePairing::Adjacent;
    rp.n_head = c.n_head;
    cpu::rope(*pool, q.data(), T, positions, rp);
    rp.n_head = c.n_head_kv;
    cpu::rope(*pool, k_new, T, positions, rp);
  }
  for (int64_t t = 0; t < T; ++t) {
    std::copy(k_new + t * kvd, k_new + (t + 1) * kvd, kv.k(l, static_cast<int>(n_past + t)));
    std::copy(v_new + t * kvd, v_new + (t + 1) * kvd, kv.v(l, static_cast<int>(n_past + t)));
  }

  cpu::KVView view;
  view.k = kv.k(l, 0);
  view.v = kv.v(l, 0);
  view.kv_stride = kvd;
  view.n_past = n_past;
  cpu::AttentionParams ap;
  ap.n_head = c.n_head;
  ap.n_head_kv = c.n_head_kv;
  ap.head_dim = c.head_dim;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  att.resize(T * q_dim);
  cpu::attention(*pool, q.data(), T, view, allowed, ap, att.data());

  cpu::matmul(*pool, att.data(), T, L.wo, xn.data());
  if (!L.bo.empty()) cpu::add_bias(xn.data(), L.bo.data(), T, c.n_embd);
  cpu::add_inplace(x.data(), xn.data(), T * c.n_embd);
}

ForwardBatch Model::Impl::prepare(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                                  const KVCache& kv, const ForwardOptions& options,
                                  std::vector<int32_t>& pos_storage) {
  const ModelConfig& c = config;
  const std::string& path = file->path();
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) throw_error(ErrorKind::InvalidArgument, "{}: forward called with no tokens", path);
  if (kv.n_layer() != c.n_layer || kv.kv_dim() != c.kv_dim())
    throw_error(ErrorKind::InvalidArgument, "{}: KV cache made for {} layers x {} kv dims, model has {} x {}", path,
                kv.n_layer(), kv.kv_dim(), c.n_layer, c.kv_dim());
  if ((kv.device_storage() != nullptr) != (backend != nullptr))
    throw_error(ErrorKind::InvalidArgument, "{}: KV cache lives on {} but the model runs on {}: make the cache with "
                "this model's new_cache", path, kv.device_storage() ? kv.device_storage()->device() : "cpu",
                device.name());
  if (kv.size() + T > kv.capacity())
    throw_error(ErrorKind::Limit, "{}: KV cache full: {} tokens stored + {} new > capacity {}", path, kv.size(), T,
                kv.capacity());
  if (!positions.empty() && static_cast<int64_t>(positions.size()) != T)
    throw_error(ErrorKind::InvalidArgument, "{}: {} positions for {} tokens", path, positions.size(), T);
  if (positions.empty()) {
    pos_storage.resize(T);
    for (int64_t t = 0; t < T; ++t) pos_storage[t] = static_cast<int32_t>(kv.size() + t);
    positions = pos_storage;
  }
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{}: token id {} outside the vocabulary [0, {})", path, tokens[t],
                  c.n_vocab);
    if (positions[t] < 0 || (c.arch == Arch::Gpt2 && positions[t] >= c.n_ctx_train))
      throw_error(ErrorKind::Limit, "{}: position {} outside [0, {})", path, positions[t],
                  c.arch == Arch::Gpt2 ? c.n_ctx_train : INT32_MAX);
  }
  const uint8_t* allowed = nullptr;
  if (options.mask) {
    if (options.mask->n != T || options.mask->allowed.size() != static_cast<size_t>(T * T))
      throw_error(ErrorKind::InvalidArgument, "{}: attention mask is {}x{} ({} entries) for {} tokens", path,
                  options.mask->n, options.mask->n, options.mask->allowed.size(), T);
    allowed = options.mask->allowed.data();
  }
  const int n_layers = options.n_layers < 0 ? c.n_layer : options.n_layers;
  if (n_layers > c.n_layer)
    throw_error(ErrorKind::InvalidArgument, "{}: early exit after {} layers, model has {}", path, n_layers, c.n_layer);

  ForwardBatch batch;
  batch.tokens = tokens;
  batch.positions = positions;
  batch.allowed = allowed;
  batch.n_layers = n_layers;
  batch.logits_all = options.logits_all;
  for (LayerWeights& L : w.layers)
    if (MoEFeedForward* moe = L.ffn->moe()) {
      batch.moe_k = moe->layer().router().k();
      batch.moe_capacity_factor = moe->layer().router().capacity_factor();
      moe_records.resize(c.n_layer);
      batch.moe_records = &moe_records;
      break;
    }
  return batch;
}

void Model::Impl::record_backend_moe(const ForwardBatch& b) {
  if (b.moe_records == nullptr) return;
  std::fill(last_distinct.begin(), last_distinct.end(), -1);
  for (int l = 0; l < b.n_layers; ++l) {
    MoEFeedForward* moe = w.layers[l].ffn->moe();
    MoELayerRecord& rec = moe_records[l];
    if (moe == nullptr || !rec.ran) continue;
    moe::Routing r;
    r.reset(rec.n_tokens, rec.k, config.n_expert);
    r.expert = std::move(rec.experts);
    r.weight = std::move(rec.weights);
    moe::count_drops(r);  // the backend marks capacity-dropped slots kDropped, as apply_capacity
    moe->record_routing(std::move(r), rec.tokens_per_expert);
    last_distinct[l] = moe->last_distinct();
    rec = MoELayerRecord{};
  }
}

void Model::forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                    std::vector<float>& logits, const ForwardOptions& options) {
  Impl& I = *impl_;
  std::vector<int32_t> pos_storage;
  const ForwardBatch b = I.prepare(tokens, positions, kv, options, pos_storage);
  if (I.backend) {
    I.backend->forward(b, kv, logits);
    I.record_backend_moe(b);
    kv.append(b.positions);
    return;
  }
  I.forward_cpu(b, kv, logits);
}

void Model::forward_argmax(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                           std::vector<int32_t>& argmax, const ForwardOptions& options) {
  Impl& I = *impl_;
  std::vector<int32_t> pos_storage;
  const ForwardBatch b = I.prepare(tokens, positions, kv, options, pos_storage);
  if (I.backend) {
    I.backend->forward_argmax(b, kv, argmax);
    I.record_backend_moe(b);
    kv.append(b.positions);
    return;
  }
  I.forward_cpu(b, kv, I.argmax_logits);
  const size_t n_vocab = static_cast<size_t>(I.config.n_vocab);
  const size_t rows = I.argmax_logits.size() / n_vocab;
  argmax.resize(rows);
  for (size_t r = 0; r < rows; ++r)
    argmax[r] = core::argmax(std::span<const float>(I.argmax_logits.data() + r * n_vocab, n_vocab));
}

const float* Model::Impl::forward_on_device(const char* what, std::span<const int32_t> tokens,
                                            const int32_t* device_tokens, std::span<const int32_t> positions,
                                            KVCache& kv, int64_t* n_rows, const ForwardOptions& options) {
  if (!backend)
    throw_error(ErrorKind::Unsupported, "{}: {} needs a model on a device; this one runs on the cpu", file->path(),
                what);
  std::vector<int32_t> pos_storage;
  ForwardBatch b = prepare(tokens, positions, kv, options, pos_storage);
  b.device_tokens = device_tokens;
  int64_t rows = 0;
  const float* logits = backend->forward_device(b, kv, &rows);
  record_backend_moe(b);
  kv.append(b.positions);
  if (n_rows != nullptr) *n_rows = rows;
  return logits;
}

const float* Model::forward_device(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                                   int64_t* n_rows, const ForwardOptions& options) {
  return impl_->forward_on_device("forward_device", tokens, nullptr, positions, kv, n_rows, options);
}

const float* Model::forward_device_ids(const int32_t* device_tokens, int n_tokens, std::span<const int32_t> positions,
                                       KVCache& kv, int64_t* n_rows, const ForwardOptions& options) {
  Impl& I = *impl_;
  if (device_tokens == nullptr || n_tokens <= 0)
    throw_error(ErrorKind::InvalidArgument, "{}: forward_device_ids needs {} device ids at a non-null address",
                I.file->path(), n_tokens);
  // The host checks see placeholder ids (0 is always in the vocabulary); the backend reads the
  // real ones from device_tokens.
  I.placeholder_ids.assign(static_cast<size_t>(n_tokens), 0);
  return I.forward_on_device("forward_device_ids", I.placeholder_ids, device_tokens, positions, kv, n_rows, options);
}

kernels::cuda::Context* Model::cuda_context() const {
  return impl_->backend ? &impl_->backend->cuda_context() : nullptr;
}

void Model::Impl::forward_cpu(const ForwardBatch& b, KVCache& kv, std::vector<float>& logits) {
  Impl& I = *this;
  const ModelConfig& c = I.config;
  const std::span<const int32_t> tokens = b.tokens, positions = b.positions;
  const uint8_t* allowed = b.allowed;
  const int n_layers = b.n_layers;
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t d = c.n_embd;
  I.x.resize(T * d);
  I.xn.resize(T * d);
  // Embeddings: one row of token_embd per token (+ learned position row for gpt2).
  for (int64_t t = 0; t < T; ++t) {
    float* xt = I.x.data() + t * d;
    cpu::dequantize_row(I.w.token_embd.type, I.w.token_embd.row(tokens[t]), xt, d);
    if (c.arch == Arch::Gpt2) {
      cpu::dequantize_row(I.w.position_embd.type, I.w.position_embd.row(positions[t]), I.xn.data(), d);
      cpu::add_inplace(xt, I.xn.data(), d);
    }
  }

  std::fill(I.last_distinct.begin(), I.last_distinct.end(), -1);
  for (int l = 0; l < n_layers; ++l) {
    I.attention_block(l, T, positions, kv, allowed);
    LayerWeights& L = I.w.layers[l];
    I.norm(L.ffn_norm, L.ffn_norm_b, I.x.data(), I.xn.data(), T);
    I.tmp.resize(T * d);
    L.ffn->forward(*I.pool, I.xn.data(), T, I.tmp.data());
    if (MoEFeedForward* moe = L.ffn->moe()) I.last_distinct[l] = moe->last_distinct();
    cpu::add_inplace(I.x.data(), I.tmp.data(), T * d);
  }

  // Final norm and head, for all tokens or only the last one.
  const int64_t first = b.logits_all ? 0 : T - 1;
  const int64_t n_out = T - first;
  I.norm(I.w.output_norm, I.w.output_norm_b, I.x.data() + first * d, I.xn.data(), n_out);
  logits.resize(static_cast<size_t>(n_out) * c.n_vocab);
  cpu::matmul(*I.pool, I.xn.data(), n_out, I.w.output, logits.data());
  kv.append(positions);
}

// ---- mixture of experts ----------------------------------------------------------------------

int Model::moe_k() const {
  for (const LayerWeights& L : impl_->w.layers)
    if (MoEFeedForward* moe = L.ffn->moe()) return moe->layer().router().k();
  return 0;
}

void Model::set_moe_k(int k) {
  const ModelConfig& c = impl_->config;
  if (!c.is_moe()) throw_error(ErrorKind::InvalidArgument, "{}: MoE k {} given for a dense model", impl_->file->path(), k);
  for (LayerWeights& L : impl_->w.layers)
    if (MoEFeedForward* moe = L.ffn->moe()) {
      moe::Router& r = moe->layer().router();
      if (k < 1 || k > r.max_k())
        throw_error(ErrorKind::InvalidArgument, "{}: MoE k {} is outside [1, {}] ({} experts, {} router)",
                    impl_->file->path(), k, r.max_k(), c.n_expert, r.name());
      r.set_k(k);
    }
}

void Model::set_moe_capacity_factor(double capacity_factor) {
  if (!impl_->config.is_moe())
    throw_error(ErrorKind::InvalidArgument, "{}: MoE capacity factor given for a dense model", impl_->file->path());
  if (!std::isfinite(capacity_factor))
    throw_error(ErrorKind::InvalidArgument, "{}: MoE capacity factor {} is not finite", impl_->file->path(),
                capacity_factor);
  for (LayerWeights& L : impl_->w.layers)
    if (MoEFeedForward* moe = L.ffn->moe()) moe->layer().router().set_capacity_factor(capacity_factor);
}

const moe::ExpertStats* Model::expert_stats(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(impl_->w.layers.size())) return nullptr;
  const MoEFeedForward* moe = impl_->w.layers[layer].ffn->moe();
  return moe ? &moe->stats() : nullptr;
}

void Model::reset_expert_stats() {
  for (LayerWeights& L : impl_->w.layers)
    if (MoEFeedForward* moe = L.ffn->moe()) moe->reset_stats();
}

size_t Model::moe_expert_bytes(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(impl_->w.layers.size())) return 0;
  const MoEFeedForward* moe = impl_->w.layers[layer].ffn->moe();
  return moe ? moe->layer().expert_bytes() : 0;
}

const std::vector<int>& Model::last_distinct_experts() const { return impl_->last_distinct; }

const moe::Routing* Model::last_routing(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(impl_->w.layers.size())) return nullptr;
  const MoEFeedForward* moe = impl_->w.layers[layer].ffn->moe();
  return moe ? &moe->last_routing() : nullptr;
}

}  // namespace specmoe::core
