// Model: loading, the argument checks of a forward, and the KV cache layout; the forward itself
// is core/transformer.cpp, on the backend the model was loaded onto.
#include "core/model.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/backend_profile.h"
#include "core/gguf.h"
#include "core/model_weights.h"
#include "core/transformer.h"

namespace specmoe::core {

AttentionMask AttentionMask::causal(int n) {
  AttentionMask m;
  m.n = n;
  m.allowed.assign(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) m.allowed[static_cast<size_t>(i) * n + j] = 1;
  return m;
}

AttentionMask AttentionMask::from_parents(std::span<const int32_t> parents) {
  const int n = static_cast<int>(parents.size());
  AttentionMask m;
  m.n = n;
  m.allowed.assign(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t p = parents[i];
    if (p < -1 || p >= i)
      throw_error(ErrorKind::InvalidArgument, "tree batch: token {} has parent {}; a parent must be an earlier token "
                  "or -1 (the last cached token)", i, p);
    uint8_t* row = m.allowed.data() + static_cast<size_t>(i) * n;
    if (p >= 0) std::copy_n(m.allowed.data() + static_cast<size_t>(p) * n, n, row);  // the parent's ancestors
    row[i] = 1;
  }
  return m;
}

int ForwardStats::distinct_experts(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(moe.size())) return -1;
  const moe::Routing& r = moe[layer];
  if (r.n_tokens == 0) return -1;
  std::vector<uint8_t> seen(static_cast<size_t>(r.n_expert), 0);
  int u = 0;
  for (int32_t e : r.expert)
    if (e >= 0 && !seen[e]) seen[e] = 1, ++u;
  return u;
}

namespace {

// The element types a cache of this model holds: the requested ones, except for MLA
// (deepseek2), whose latent rows the mla_attention op reads as F32 only.
KVCacheTypes effective_types(const ModelConfig& c, const KVCacheTypes& t) {
  return c.is_mla() ? KVCacheTypes{DType::F32, DType::F32} : t;
}

// Layer l's cache rows: keys and values of kv_dim elements of the given types (MLA: the latent
// and RoPE key rows of kv_lora_rank + rope_dims F32, no values), and the layer's sliding window.
// lfm2's short-convolution layers: one F32 row of B * x (n_embd) per token, the convolution's
// input, whatever the cache types (llama.cpp keeps recurrent state in F32 too).
KVLayerLayout kv_layout(const ModelConfig& c, int l, const KVCacheTypes& t) {
  if (c.is_conv_layer(l)) return {c.n_embd, 0, DType::F32, DType::F32, 0};
  if (!c.has_mixer(l)) return {0, 0, DType::F32, DType::F32, 0, 0};  // nemotron_h's MLP layers: nothing
  // qwen35's gated DeltaNet layers: no rows, a state per token in the cache's ring (F32, as
  // llama.cpp keeps recurrent state).
  if (c.is_recurrent_layer(l))
    return {0, 0, DType::F32, DType::F32, 0, static_cast<int>(c.recurrent_state_floats())};
  const KVCacheTypes e = effective_types(c, t);
  return {c.kv_key_width(), c.kv_value_width(), e.k, e.v, c.window(l)};
}

// Types a cache of this model can hold: F32, F16, or Q8_0 when every KV head of a row starts on
// a 32-element block (attention reads one head's elements of a row; llama.cpp refuses the same).
// Every layer has the same heads, so the first one that fails is layer 0.
void check_cache_types(const ModelConfig& c, const KVCacheTypes& t, const std::string& path) {
  for (const auto& [type, what] : {std::pair{t.k, "K"}, std::pair{t.v, "V"}}) {
    if (type != DType::F32 && type != DType::F16 && type != DType::Q8_0)
      throw_error(ErrorKind::InvalidArgument, "{}: {} cache type {}: supported are {}", path, what,
                  kv_cache_type_name(type), kv_cache_type_names());
    const int64_t block = dtype_info(type).block_size;
    if (c.is_mla()) continue;  // F32 latent rows whatever is asked (effective_types)
    if (c.head_dim % block != 0)
      throw_error(ErrorKind::InvalidArgument,
                  "{}: {} cache type {} needs heads of whole {}-element blocks, but layer 0 has {} KV heads of {} "
                  "(width {}); use f16 or f32", path, what, kv_cache_type_name(type), block, c.n_head_kv,
                  c.head_dim, c.kv_dim());
  }
}

std::vector<KVLayerLayout> kv_layouts(const ModelConfig& c, const KVCacheTypes& t) {
  std::vector<KVLayerLayout> out;
  for (int l = 0; l < c.n_layer; ++l) out.push_back(kv_layout(c, l, t));
  return out;
}

}  // namespace

struct Model::Impl {
  std::shared_ptr<GGUFFile> file;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Transformer> transformer;
  int moe_k = 0;
  double moe_capacity = 0.0;
  KVCacheTypes cache_types;
  // Scratch of one forward's checks: resolved positions and a tree's mask (its new tokens' rows).
  std::vector<int32_t> positions;
  AttentionMask tree_mask;
  std::vector<int32_t> tree_parents;  // cached rows' parents, then the batch's
  const Model* eagle3_target = nullptr;  // an EAGLE-3 or DFlash head's target (bind_target)
  bool dflash_block = false;             // forward() runs a DFlash draft's block (forward_dflash)
  AttentionMask block_mask;              // its bidirectional mask

  // A batch's mask (a tree's over the cached tree rows and the new tokens, or the explicit one;
  // null: causal), the cached tree rows it covers, and the positions (resolved when not given),
  // checked against the cache. Throws Error(InvalidArgument) naming the file.
  struct Resolved {
    const uint8_t* mask = nullptr;
    int64_t M = 0;
    std::span<const int32_t> positions;
  };
  Resolved resolve(const Batch& batch, const KVCache& kv, const AttentionMask* explicit_mask);
  // A draft head's batch (the multi-token-prediction block's, an EAGLE-3 head's) of `what` ("MTP",
  // "EAGLE-3"): the cache's room, the batch resolved and its ids checked, then the options.
  TransformerBatch head_batch(const char* what, const Batch& batch, const KVCache& kv, const ForwardOptions& options,
                              int n_layers);
};

Model::Impl::Resolved Model::Impl::resolve(const Batch& batch, const KVCache& kv, const AttentionMask* explicit_mask) {
  const std::string& path = file->path();
  const int64_t T = static_cast<int64_t>(batch.tokens.size());
  if (!batch.parents.empty() && static_cast<int64_t>(batch.parents.size()) != T)
    throw_error(ErrorKind::InvalidArgument, "{}: {} parents for {} tokens", path, batch.parents.size(), T);
  if (!batch.parents.empty() && explicit_mask)
    throw_error(ErrorKind::InvalidArgument, "{}: a tree batch and an explicit attention mask given together", path);
  if (!batch.positions.empty() && static_cast<int64_t>(batch.positions.size()) != T)
    throw_error(ErrorKind::InvalidArgument, "{}: {} positions for {} tokens", path, batch.positions.size(), T);

  const int64_t M = static_cast<int64_t>(batch.cached_parents.size());  // cached tree rows the mask covers
  if (M > 0 && batch.parents.empty())
    throw_error(ErrorKind::InvalidArgument, "{}: parents of {} cached tree rows given without a tree batch", path, M);
  if (M > kv.size())
    throw_error(ErrorKind::InvalidArgument, "{}: parents of {} cached tree rows given, the cache holds {}", path, M,
                kv.size());
  const uint8_t* mask = nullptr;
  if (!batch.parents.empty()) {
    // The whole tree's mask (the cached rows' parents first, when given), of which the new
    // tokens' rows: [T, M + T].
    std::span<const int32_t> tree = batch.parents;
    if (M > 0) {
      tree_parents.assign(batch.cached_parents.begin(), batch.cached_parents.end());
      tree_parents.insert(tree_parents.end(), batch.parents.begin(), batch.parents.end());
      tree = tree_parents;
    }
    tree_mask = AttentionMask::from_parents(tree);
    tree_mask.allowed.erase(tree_mask.allowed.begin(), tree_mask.allowed.begin() + M * (M + T));
    mask = tree_mask.allowed.data();
  } else if (explicit_mask) {
    if (explicit_mask->n != T || explicit_mask->allowed.size() != static_cast<size_t>(T * T))
      throw_error(ErrorKind::InvalidArgument, "{}: attention mask is {}x{} ({} entries) for {} tokens", path,
                  explicit_mask->n, explicit_mask->n, explicit_mask->allowed.size(), T);
    mask = explicit_mask->allowed.data();
  }
  if (!batch.positions.empty()) return {mask, M, batch.positions};
  positions.resize(static_cast<size_t>(T));
  const int base = kv.size() - static_cast<int>(M);  // the first cached tree row
  for (int64_t t = 0; t < T; ++t) {
    // a chain's token t sits at depth t; a tree node one below its parent (a cached one's
    // position is the cache's)
    if (batch.parents.empty()) {
      positions[t] = static_cast<int32_t>(kv.size() + t);
      continue;
    }
    const int32_t p = batch.parents[t];
    positions[t] = p < 0 ? base : p < M ? kv.position(base + p) + 1 : positions[p - M] + 1;
  }
  return {mask, M, positions};
}

TransformerBatch Model::Impl::head_batch(const char* what, const Batch& batch, const KVCache& kv,
                                         const ForwardOptions& options, int n_layers) {
  const std::string& path = file->path();
  const int64_t T = static_cast<int64_t>(batch.tokens.size());
  if (kv.size() + T > kv.capacity())
    throw_error(ErrorKind::Limit, "{}: {} cache full: {} tokens stored + {} new > capacity {}", path, what, kv.size(), T,
                kv.capacity());
  const Resolved in = resolve(batch, kv, options.mask);
  for (int64_t t = 0; t < T; ++t)
    if (batch.tokens[t] < 0 || batch.tokens[t] >= config.n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{}: token id {} outside the vocabulary [0, {})", path, batch.tokens[t],
                  config.n_vocab);
  TransformerBatch b;
  b.tokens = batch.tokens;
  b.positions = in.positions;
  b.mask = in.mask;
  b.mask_past = in.M;
  b.n_layers = n_layers;
  b.logits_all = options.logits_all;
  b.hidden_all = options.hidden;
  b.head_rows = options.head_rows;
  b.moe_k = options.moe_k != 0 ? options.moe_k : moe_k;
  b.moe_capacity_factor = moe_capacity;
  return b;
}

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  Impl& I = *m->impl_;
  const Device device = parse_device(options.device);  // a mistyped device fails before the file is read
  I.file = GGUFFile::open(path);
  I.config = ModelConfig::from_gguf(*I.file);
  I.config.validate();
  const ModelConfig& c = I.config;
  if (c.learned_positions() && c.rope_style != RopeStyle::None)
    throw_error(ErrorKind::Format, "{}: {} uses learned positions, not RoPE", path, c.arch_name);
  if (!c.rope_free() && c.rope_style == RopeStyle::None)
    throw_error(ErrorKind::Format, "{}: architecture '{}' needs RoPE", path, c.arch_name);
  if (c.rope_style != RopeStyle::None && (c.rope_dims <= 0 || c.rope_dims > c.head_dim || c.rope_dims % 2))
    throw_error(ErrorKind::Format, "{}: rope dimension count {} must be even and at most head_dim {}", path,
                c.rope_dims, c.head_dim);
  ModelWeights host = bind_weights(*I.file, c);
  I.tokenizer = Tokenizer::from_gguf(*I.file);
  if (I.tokenizer->n_vocab() != c.n_vocab)
    throw_error(ErrorKind::Format, "{}: tokenizer has {} tokens but the model's vocabulary is {}", path,
                I.tokenizer->n_vocab(), c.n_vocab);

  if (options.moe_k_override != 0 || options.moe_capacity_factor != 0.0) {
    if (!c.is_moe())
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k override / capacity factor given for a dense model", path);
    if (!std::isfinite(options.moe_capacity_factor))
      throw_error(ErrorKind::InvalidArgument, "{}: MoE capacity factor {} is not finite", path,
                  options.moe_capacity_factor);
  }
  check_cache_types(c, options.cache_types, path);
  I.cache_types = effective_types(c, options.cache_types);
  I.moe_k = c.n_expert_used;
  I.moe_capacity = options.moe_capacity_factor;
  if (c.is_moe() && options.moe_k_override != 0) {
    const int k = options.moe_k_override;
    // the first MoE layer (a file of the block alone: the block's)
    const auto router = moe::make_router((c.mtp_only ? host.nextn.block : host.layers[c.first_moe_layer()]).moe.router);
    if (k < 1 || k > router->max_k())
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k {} is outside [1, {}] ({} experts, {} router)", path, k,
                  router->max_k(), c.n_expert, router->name());
    I.moe_k = k;
    for (LayerWeights& L : host.layers) L.moe.router.k = k;  // weight_bytes_per_token reads k experts
    host.nextn.block.moe.router.k = k;
  }

  try {
    I.backend = make_backend(device, options.n_threads, options.huge_pages);
    if (options.profile_ops) I.backend = std::make_shared<ProfilingBackend>(I.backend);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", path, e.what()));
  }
  I.transformer = std::make_unique<Transformer>(I.backend, c, resident_weights(*I.backend, host));
  return m;
}

const ModelConfig& Model::config() const { return impl_->config; }
const Tokenizer& Model::tokenizer() const { return *impl_->tokenizer; }
const GGUFFile& Model::file() const { return *impl_->file; }
Backend& Model::backend() const { return *impl_->backend; }
Device Model::device() const { return impl_->backend->device(); }
size_t Model::weight_bytes_per_token() const { return impl_->transformer->weights().bytes_per_token(); }
int Model::moe_k() const { return impl_->config.is_moe() ? impl_->moe_k : 0; }
double Model::moe_capacity_factor() const { return impl_->moe_capacity; }

size_t Model::moe_expert_bytes(int layer) const {
  const auto& layers = impl_->transformer->weights().layers;
  if (layer < 0 || layer >= static_cast<int>(layers.size())) return 0;
  return layers[layer].is_moe() ? layers[layer].moe.weights.expert_bytes() : 0;
}

moe::RouterSpec Model::moe_router(int layer) const {
  const ModelConfig& c = impl_->config;
  if (!c.is_moe()) return {};
  if (c.mtp_only) return impl_->transformer->weights().nextn.block.moe.router;
  if (!c.is_moe_layer(layer)) layer = c.first_moe_layer();
  return impl_->transformer->weights().layers[layer].moe.router;
}

const KVCacheTypes& Model::cache_types() const { return impl_->cache_types; }

KVCache Model::new_cache(int n_ctx) const { return new_cache(n_ctx, impl_->cache_types); }

KVCache Model::new_cache(int n_ctx, const KVCacheTypes& types) const {
  const ModelConfig& c = impl_->config;
  check_cache_types(c, types, impl_->file->path());
  if (n_ctx <= 0) n_ctx = c.n_ctx_train;
  if (c.learned_positions() && n_ctx > c.n_ctx_train)
    throw_error(ErrorKind::Limit, "{}: {} context {} exceeds its {} learned positions", impl_->file->path(),
                c.arch_name, n_ctx, c.n_ctx_train);
  return KVCache(impl_->backend, kv_layouts(c, types), n_ctx);
}

ForwardResult Model::forward(const Batch& batch, KVCache& kv, const ForwardOptions& options) {
  Impl& I = *impl_;
  const ModelConfig& c = I.config;
  const std::string& path = I.file->path();
  const std::span<const int32_t> tokens = batch.tokens;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (c.mtp_only)
    throw_error(ErrorKind::Unsupported, "{}: the file holds only a multi-token-prediction block (llama.cpp's --mtp "
                "export): use it as the mtp drafter's draft model (-md) beside its target", path);
  if (c.is_eagle3())
    throw_error(ErrorKind::Unsupported, "{}: the file is an EAGLE-3 draft head, which drafts from a target's features: "
                "use it as the eagle3 drafter's draft model (-md) beside its target", path);
  if (c.is_dflash() && !I.dflash_block)
    throw_error(ErrorKind::Unsupported, "{}: the file is a DFlash draft, which drafts from a target's features: use "
                "it as the dflash drafter's draft model (-md) beside its target", path);
  if (T == 0) throw_error(ErrorKind::InvalidArgument, "{}: forward called with no tokens", path);
  if (kv.memory() != I.backend.get())
    throw_error(ErrorKind::InvalidArgument, "{}: the KV cache ({}) was not made by this model ({}): make it with this "
                "model's new_cache", path, kv.where().name(), I.backend->device().name());
  if (kv.n_layer() != c.n_layer)
    throw_error(ErrorKind::InvalidArgument, "{}: KV cache made for {} layers, model has {}", path, kv.n_layer(),
                c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    // Any element types the cache was made with (new_cache checked them); widths and window must match.
    const KVLayerLayout have = kv.layout(l), want = kv_layout(c, l, {have.k_type, have.v_type});
    if (!(have == want))
      throw_error(ErrorKind::InvalidArgument,
                  "{}: KV cache layer {} holds keys of {} and values of {} (window {}); the model needs {} and {} "
                  "(window {})", path, l, have.k_width, have.v_width, have.window, want.k_width, want.v_width,
                  want.window);
  }
  if (kv.size() + T > kv.capacity())
    throw_error(ErrorKind::Limit, "{}: KV cache full: {} tokens stored + {} new > capacity {}", path, kv.size(), T,
                kv.capacity());
  const Impl::Resolved in = I.resolve(batch, kv, options.mask);
  const uint8_t* mask = in.mask;
  const int64_t M = in.M;
  const std::span<const int32_t> positions = in.positions;
  // A tree's nodes continue their parents' recurrent states (qwen35): the cache's ring must hold
  // the states of the cached tree rows and of the batch.
  if (kv.has_states() && mask) kv.reserve_rollback(static_cast<int>(M + T));
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.n_vocab)
      throw_error(ErrorKind::InvalidArgument, "{}: token id {} outside the vocabulary [0, {})", path, tokens[t],
                  c.n_vocab);
    if (positions[t] < 0 || (c.learned_positions() && positions[t] >= c.n_ctx_train))
      throw_error(ErrorKind::Limit, "{}: position {} outside [0, {})", path, positions[t],
                  c.learned_positions() ? c.n_ctx_train : INT32_MAX);
  }
  if (options.head_rows < 0 || options.head_rows > c.n_vocab)
    throw_error(ErrorKind::InvalidArgument, "{}: head rows {} outside [0, {}]", path, options.head_rows, c.n_vocab);
  const int n_layers = options.exit_layer < 0 ? c.n_layer : options.exit_layer;
  if (n_layers > c.n_layer)
    throw_error(ErrorKind::InvalidArgument, "{}: early exit after {} layers, model has {}", path, n_layers, c.n_layer);
  int moe_k = I.moe_k;
  if (options.moe_k != 0) {
    if (!c.is_moe())
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k {} given for a dense model", path, options.moe_k);
    if (options.moe_k < 1 || options.moe_k > c.n_expert)
      throw_error(ErrorKind::InvalidArgument, "{}: MoE k {} is outside [1, {}]", path, options.moe_k, c.n_expert);
    moe_k = options.moe_k;
  }

  TransformerBatch b;
  b.tokens = tokens;
  b.positions = positions;
  b.mask = mask;
  b.mask_past = M;
  b.n_layers = n_layers;
  b.logits_all = options.logits_all;
  b.head_rows = options.head_rows;
  b.moe_k = moe_k;
  b.moe_capacity_factor = I.moe_capacity;
  b.hidden_all = options.hidden;
  if (!options.hidden_layers.empty()) {
    if (options.hidden)
      throw_error(ErrorKind::InvalidArgument, "{}: hidden rows and layer rows asked together", path);
    for (int l : options.hidden_layers)
      if (l < 0 || l > c.n_layer || (l >= n_layers && n_layers < c.n_layer))
        throw_error(ErrorKind::InvalidArgument, "{}: the rows of layer {} asked of a forward of {} of its {} layers", path,
                    l, n_layers, c.n_layer);
    b.capture_layers = options.hidden_layers;
  }
  ForwardResult r;
  r.logits = I.transformer->forward(b, kv, r.stats.moe);
  if (options.hidden || !options.hidden_layers.empty()) r.hidden = I.transformer->hidden();
  return r;
}

bool Model::has_mtp() const { return impl_->config.has_mtp(); }

KVCache Model::new_mtp_cache(int n_ctx) const {
  const ModelConfig& c = impl_->config;
  if (!c.has_mtp())
    throw_error(ErrorKind::Unsupported, "{}: the model has no multi-token-prediction block specmoe runs{}",
                impl_->file->path(),
                c.n_nextn > 0 ? fmt::format(" ({} has {}, which specmoe does not run)", c.arch_name, c.n_nextn) : "");
  if (n_ctx <= 0) n_ctx = c.n_ctx_train;
  // The trunk's layers cache nothing here; layer n_layer is the block's.
  std::vector<KVLayerLayout> layouts(static_cast<size_t>(c.n_layer), KVLayerLayout{0, 0, DType::F32, DType::F32, 0, 0});
  layouts.push_back(kv_layout(c, c.n_layer, impl_->cache_types));
  return KVCache(impl_->backend, std::move(layouts), n_ctx);
}

ForwardResult Model::forward_mtp(const Batch& batch, const float* hidden, KVCache& kv, const ForwardOptions& options) {
  Impl& I = *impl_;
  const ModelConfig& c = I.config;
  const std::string& path = I.file->path();
  const std::span<const int32_t> tokens = batch.tokens;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (!c.has_mtp())
    throw_error(ErrorKind::Unsupported, "{}: the model has no multi-token-prediction block specmoe runs", path);
  if (T == 0) throw_error(ErrorKind::InvalidArgument, "{}: MTP forward called with no tokens", path);
  if (hidden == nullptr) throw_error(ErrorKind::InvalidArgument, "{}: MTP forward called without hidden rows", path);
  if (kv.memory() != I.backend.get() || kv.n_layer() != c.n_layer + 1 || kv.layout(0).k_width != 0 ||
      kv.layout(c.n_layer).k_width != c.kv_key_width())
    throw_error(ErrorKind::InvalidArgument, "{}: the MTP forward needs a cache made by this model's new_mtp_cache", path);
  if (options.exit_layer >= 0)
    throw_error(ErrorKind::InvalidArgument, "{}: the MTP forward runs the block's one layer (no early exit)", path);
  if (options.head_rows < 0 || options.head_rows > c.n_vocab)
    throw_error(ErrorKind::InvalidArgument, "{}: head rows {} outside [0, {}]", path, options.head_rows, c.n_vocab);
  const TransformerBatch b = I.head_batch("MTP", batch, kv, options, c.n_layer);
  ForwardResult r;
  r.stats.moe.assign(static_cast<size_t>(c.n_layer) + 1, moe::Routing{});
  r.logits = I.transformer->forward_mtp(b, hidden, kv, r.stats.moe.back());
  if (options.hidden) r.hidden = I.transformer->hidden();
  return r;
}


bool Model::is_eagle3() const { return impl_->config.is_eagle3(); }
bool Model::is_dflash() const { return impl_->config.is_dflash(); }

void Model::bind_target(const Model& target) {
  Impl& I = *impl_;
  const ModelConfig &c = I.config, &t = target.config();
  const std::string& path = I.file->path();
  if (!c.reads_target_features())
    throw_error(ErrorKind::Unsupported, "{}: not an EAGLE-3 or DFlash draft head (general.architecture is {})", path,
                c.arch_name);
  const std::string& tpath = target.file().path();
  const char* kind = c.is_dflash() ? "DFlash" : "EAGLE-3";
  if (target.config().reads_target_features() || target.config().mtp_only)
    throw_error(ErrorKind::InvalidArgument, "{}: its target {} is itself a draft head", path, tpath);
  if (t.n_embd != c.head_target_width)
    throw_error(ErrorKind::InvalidArgument, "{}: the {} head reads target rows of {} floats{}, the target {} "
                "has width {}", path, kind, c.head_target_width, c.is_eagle3() ? " (target_hidden_size)" : "", tpath,
                t.n_embd);
  for (int l : c.head_target_layers)
    if (l > t.n_layer)
      throw_error(ErrorKind::InvalidArgument, "{}: the {} head reads layer {} of the target {}, which has {}", path, kind,
                  l, tpath, t.n_layer);
  if (t.n_vocab != c.n_vocab)
    throw_error(ErrorKind::InvalidArgument, "{}: the {} head's vocabulary has {} ids, the target {}'s {}", path, kind,
                c.n_vocab, tpath, t.n_vocab);
  if (!(target.device() == device()))
    throw_error(ErrorKind::InvalidArgument, "{}: the {} head runs on {}, its target {} on {}: load both on one "
                "device", path, kind, device().name(), tpath, target.device().name());
  const ModelWeights& tw = target.impl_->transformer->weights();
  const ModelWeights& w = I.transformer->weights();
  if (w.token_embd.empty() && t.n_embd != c.n_embd)
    throw_error(ErrorKind::InvalidArgument, "{}: the {} head has no token_embd and its width {} differs from the "
                "target {}'s {}", path, kind, c.n_embd, tpath, t.n_embd);
  if (w.output.empty() && (t.n_embd != c.n_embd || tw.output.n_out != c.n_vocab || !tw.output_b.empty() ||
                           t.logit_scale != 1.0f || t.logit_mult != 1.0f || t.final_logit_softcap > 0.0f))
    throw_error(ErrorKind::InvalidArgument, "{}: the {} head has no output.weight and the target {}'s head does not "
                "fit it (width {} vs {})", path, kind, tpath, c.n_embd, t.n_embd);
  I.transformer->share_target(tw.token_embd, tw.output);
  I.eagle3_target = &target;
}

Rows Model::eagle3_fuse(const float* features, int64_t T) {
  Impl& I = *impl_;
  if (!I.config.is_eagle3())
    throw_error(ErrorKind::Unsupported, "{}: not an EAGLE-3 draft head", I.file->path());
  if (features == nullptr || T <= 0)
    throw_error(ErrorKind::InvalidArgument, "{}: EAGLE-3 fusion of {} rows without features", I.file->path(), T);
  return I.transformer->eagle3_fuse(features, T);
}

ForwardResult Model::forward_eagle3(const Batch& batch, const float* g, KVCache& kv, const ForwardOptions& options) {
  Impl& I = *impl_;
  const ModelConfig& c = I.config;
  const std::string& path = I.file->path();
  const std::span<const int32_t> tokens = batch.tokens;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (!c.is_eagle3()) throw_error(ErrorKind::Unsupported, "{}: not an EAGLE-3 draft head", path);
  const ModelWeights& w = I.transformer->weights();
  if (I.eagle3_target == nullptr && (w.token_embd.empty() || w.output.empty()))
    throw_error(ErrorKind::Unsupported, "{}: the EAGLE-3 head reads its target's {}: bind it to the target first "
                "(Model::bind_target)", path, w.token_embd.empty() ? "token embedding" : "head");
  if (T == 0) throw_error(ErrorKind::InvalidArgument, "{}: EAGLE-3 forward called with no tokens", path);
  if (g == nullptr) throw_error(ErrorKind::InvalidArgument, "{}: EAGLE-3 forward called without g rows", path);
  if (kv.memory() != I.backend.get() || kv.n_layer() != 1 || !(kv.layout(0) == kv_layout(c, 0, {kv.layout(0).k_type, kv.layout(0).v_type})))
    throw_error(ErrorKind::InvalidArgument, "{}: the EAGLE-3 forward needs a cache made by this model's new_cache", path);
  if (options.exit_layer >= 0 || options.moe_k != 0 || !options.hidden_layers.empty())
    throw_error(ErrorKind::InvalidArgument, "{}: the EAGLE-3 forward runs its one dense layer (no early exit, experts "
                "or layer rows)", path);
  const bool d2t = I.transformer->weights().eagle3.d2t_host != nullptr;
  if (options.head_rows < 0 || options.head_rows > c.n_vocab || (d2t && options.head_rows != 0))
    throw_error(ErrorKind::InvalidArgument, "{}: head rows {} {}", path, options.head_rows,
                d2t ? "for a head with its own draft vocabulary (d2t)" : fmt::format("outside [0, {}]", c.n_vocab));
  const TransformerBatch b = I.head_batch("EAGLE-3", batch, kv, options, 1);
  ForwardResult r;
  r.stats.moe.assign(1, moe::Routing{});
  r.logits = I.transformer->forward_eagle3(b, g, kv, r.stats.moe.back());
  if (options.hidden) r.hidden = I.transformer->hidden();
  return r;
}

void Model::dflash_inject(const float* features, int64_t T, KVCache& kv) {
  Impl& I = *impl_;
  const ModelConfig& c = I.config;
  const std::string& path = I.file->path();
  if (!c.is_dflash()) throw_error(ErrorKind::Unsupported, "{}: not a DFlash draft", path);
  if (features == nullptr || T <= 0)
    throw_error(ErrorKind::InvalidArgument, "{}: DFlash injection of {} rows without features", path, T);
  if (kv.memory() != I.backend.get() || kv.n_layer() != c.n_layer)
    throw_error(ErrorKind::InvalidArgument, "{}: the DFlash injection needs a cache made by this model's new_cache", path);
  if (kv.size() + T > kv.capacity())
    throw_error(ErrorKind::Limit, "{}: KV cache full: {} tokens stored + {} new > capacity {}", path, kv.size(), T,
                kv.capacity());
  I.positions.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) I.positions[static_cast<size_t>(t)] = kv.size() + static_cast<int>(t);
  I.transformer->dflash_inject(features, I.positions, kv);
}

ForwardResult Model::forward_dflash(std::span<const int32_t> block, KVCache& kv, const ForwardOptions& options) {
  Impl& I = *impl_;
  const ModelConfig& c = I.config;
  const std::string& path = I.file->path();
  if (!c.is_dflash()) throw_error(ErrorKind::Unsupported, "{}: not a DFlash draft", path);
  const ModelWeights& w = I.transformer->weights();
  if (I.eagle3_target == nullptr && (w.token_embd.empty() || w.output.empty()))
    throw_error(ErrorKind::Unsupported, "{}: the DFlash draft reads its target's {}: bind it to the target first "
                "(Model::bind_target)", path, w.token_embd.empty() ? "token embedding" : "head");
  if (options.mask != nullptr || options.exit_layer >= 0 || options.moe_k != 0 || !options.hidden_layers.empty() ||
      options.hidden || (w.eagle3.d2t_host != nullptr && options.head_rows != 0))
    throw_error(ErrorKind::InvalidArgument, "{}: a DFlash block runs every layer over its own mask to its logits (no "
                "mask, early exit, experts, hidden or layer rows, or head rows with d2t)", path);
  const int64_t T = static_cast<int64_t>(block.size());
  ForwardOptions o = options;
  if (!c.dflash_causal && T > 0) {
    // Every block token sees every other (and the cache): llama.cpp runs the draft non-causal.
    I.block_mask.n = static_cast<int>(T);
    I.block_mask.allowed.assign(static_cast<size_t>(T * T), 1);
    o.mask = &I.block_mask;
  }
  I.dflash_block = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{I.dflash_block};
  return forward(Batch(block), kv, o);
}

}  // namespace specmoe::core
