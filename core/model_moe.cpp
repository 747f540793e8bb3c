// MoE feed-forward: tensor binding and router choice from GGUF metadata (llama.cpp conventions:
// llama-arch.cpp tensor names, llama-model.cpp shapes and build_moe_ffn's gating/normalisation).
#include "core/model_moe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "core/gguf.h"
#include "moe/sigmoid_group_router.h"
#include "moe/softmax_router.h"

namespace specmoe::core {

namespace {

// A tensor of `n_dims` dimensions with GGUF ne = want (unused trailing entries 1), as a view into
// the memory map. Throws Error(Format) naming the file and tensor.
moe::WeightView bind_view(const TensorBinder& b, const std::string& name, std::array<int64_t, 3> want, int n_dims) {
  const GGUFFile& f = b.file();
  const GGUFTensorInfo* t = f.find_tensor(name);
  if (!t) throw_error(ErrorKind::Format, "{}: tensor '{}' is missing", f.path(), name);
  const std::vector<int64_t> expect(want.begin(), want.begin() + n_dims);
  if (t->ne != expect)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape [{}], expected [{}]", f.path(), name,
                fmt::join(t->ne, ", "), fmt::join(expect, ", "));
  const int64_t block = dtype_info(t->type).block_size;
  if (want[0] % block != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has rows of {} elements, not a multiple of {}",
                f.path(), name, dtype_name(t->type), want[0], block);
  moe::WeightView v{t->data, t->type, want, name};
  if (v.nbytes() != t->nbytes)
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds {} bytes, expected {}", f.path(), name, t->nbytes,
                v.nbytes());
  return v;
}

}  // namespace

std::unique_ptr<moe::Router> make_config_router(const ModelConfig& c, std::vector<float> bias) {
  if (c.expert_gating == ExpertGating::Sigmoid) {
    moe::SigmoidGroupOptions o;
    o.n_group = c.n_expert_group;
    o.topk_group = c.n_expert_group_used;
    o.normalize = c.expert_weights_norm;
    o.scale = c.expert_weights_scale;
    o.bias = std::move(bias);
    return std::make_unique<moe::SigmoidGroupRouter>(c.n_expert, c.n_expert_used, std::move(o));
  }
  // Softmax over the logits, top-k; Mixtral renormalises the k weights, Qwen-MoE does not.
  return std::make_unique<moe::SoftmaxTopKRouter>(c.n_expert, c.n_expert_used, c.expert_weights_norm);
}

MoEFeedForward::MoEFeedForward(const TensorBinder& b, const ModelConfig& c, int l) {
  const std::string p = fmt::format("blk.{}.", l);
  const int64_t d = c.n_embd, E = c.n_expert, ff = c.n_ff_expert;
  if (!b.has(p + "ffn_gate_exps.weight") && b.has(p + "ffn_gate.0.weight"))
    throw_error(ErrorKind::Unsupported,
                "{}: tensor '{}ffn_gate.0.weight': one tensor per expert is the old Mixtral GGUF layout; "
                "specmoe reads the merged '{}ffn_gate_exps.weight' (re-convert with a current llama.cpp)",
                b.file().path(), p, p);
  moe::MoEWeights w;
  w.gate_inp = bind_view(b, p + "ffn_gate_inp.weight", {d, E, 1}, 2);
  w.gate_exps = bind_view(b, p + "ffn_gate_exps.weight", {d, ff, E}, 3);
  w.up_exps = bind_view(b, p + "ffn_up_exps.weight", {d, ff, E}, 3);
  w.down_exps = bind_view(b, p + "ffn_down_exps.weight", {ff, d, E}, 3);
  if (c.arch == Arch::Qwen2Moe) {
    const int64_t sh = c.n_ff_shared_expert;
    w.gate_shexp = bind_view(b, p + "ffn_gate_shexp.weight", {d, sh, 1}, 2);
    w.up_shexp = bind_view(b, p + "ffn_up_shexp.weight", {d, sh, 1}, 2);
    w.down_shexp = bind_view(b, p + "ffn_down_shexp.weight", {sh, d, 1}, 2);
    w.gate_inp_shexp = bind_view(b, p + "ffn_gate_inp_shexp.weight", {d, 1, 1}, 1);
  }
  std::vector<float> bias;
  if (c.expert_gating == ExpertGating::Sigmoid && b.has(p + "exp_probs_b.bias"))
    bias = b.vector(p + "exp_probs_b.bias", E);
  try {
    layer_ = std::make_unique<moe::MoELayer>(std::move(w), make_config_router(c, std::move(bias)));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: layer {}: {}", b.file().path(), l, e.what()));
  }
  stats_ = moe::ExpertStats(c.n_expert, c.n_expert_used, l);
}

void MoEFeedForward::forward(kernels::cpu::ThreadPool& pool, const float* x, int64_t T, float* out) {
  routed_elsewhere_ = false;
  layer_->forward(pool, x, static_cast<int>(T), out, &stats_);
}

void MoEFeedForward::record_routing(moe::Routing routing, std::span<const int64_t> tokens_per_expert) {
  const size_t n = static_cast<size_t>(routing.n_tokens) * routing.k;
  if (routing.n_expert != layer_->n_expert() || routing.expert.size() != n || routing.weight.size() != n ||
      tokens_per_expert.size() != static_cast<size_t>(layer_->n_expert()))
    throw_error(ErrorKind::InvalidArgument,
                "moe layer {}: device routing of {} tokens x {} slots over {} experts ({} ids, {} weights, {} counts) "
                "does not fit the layer's {} experts",
                stats_.layer(), routing.n_tokens, routing.k, routing.n_expert, routing.expert.size(),
                routing.weight.size(), tokens_per_expert.size(), layer_->n_expert());
  elsewhere_distinct_ = 0;
  for (int64_t c : tokens_per_expert) elsewhere_distinct_ += c > 0;
  stats_.record_forward(tokens_per_expert, routing.n_tokens, routing.k, routing.n_dropped_assignments,
                        routing.n_dropped_tokens, layer_->expert_bytes());
  elsewhere_routing_ = std::move(routing);
  routed_elsewhere_ = true;
}

size_t MoEFeedForward::weight_bytes_per_token() const {
  return layer_->router_bytes() + static_cast<size_t>(layer_->router().k()) * layer_->expert_bytes() +
         layer_->shared_bytes();
}

void MoEFeedForward::reset_stats() { stats_.clear(); }

}  // namespace specmoe::core
