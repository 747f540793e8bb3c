// Draft-model drafting: see model_drafter.h.
#include "draft/model_drafter.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace specmoe::draft {

ModelDrafter::ModelDrafter(std::shared_ptr<core::Model> model, int target_n_vocab, int n_layers, int n_ctx)
    : owned_(std::move(model)), model_(owned_.get()), target_n_vocab_(target_n_vocab), n_layers_(n_layers) {
  init(n_ctx);
}

ModelDrafter::ModelDrafter(core::Model* model, int target_n_vocab, int n_layers, int n_ctx)
    : model_(model), target_n_vocab_(target_n_vocab), n_layers_(n_layers) {
  init(n_ctx);
}

void ModelDrafter::init(int n_ctx) {
  if (model_ == nullptr) throw_error(ErrorKind::InvalidArgument, "model drafter: no draft model given");
  const auto& cfg = model_->config();
  if (target_n_vocab_ <= 0)
    throw_error(ErrorKind::InvalidArgument, "model drafter: target vocabulary size {} must be positive",
                target_n_vocab_);
  if (n_layers_ == 0 || n_layers_ > cfg.n_layer || n_layers_ < -1)
    throw_error(ErrorKind::InvalidArgument, "model drafter: exit layer {} outside 1..{} (or -1 = all)", n_layers_,
                cfg.n_layer);
  if (n_layers_ == cfg.n_layer) n_layers_ = -1;
  // A full-depth cache even for early exit: Model::forward checks that the cache was made for the
  // model's layer count; only the first n_layers layers' rows are ever written.
  cache_ = model_->new_cache(n_ctx);
}

void ModelDrafter::forward(std::span<const int32_t> tokens, bool on_device) {
  positions_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions_[i] = cache_.size() + static_cast<int32_t>(i);
  core::ForwardOptions opt;
  opt.n_layers = n_layers_;
  opt.logits_all = false;
  if (on_device)
    d_logits_ = model_->forward_device(tokens, positions_, cache_, nullptr, opt);
  else
    model_->forward(tokens, positions_, cache_, logits_, opt);
  cached_.insert(cached_.end(), tokens.begin(), tokens.end());
}

void ModelDrafter::begin(std::span<const int32_t> prompt) {
  cache_.clear();
  cached_.clear();
  // Prefill all but the last prompt token; the first proposal feeds it and gets its logits. The
  // prefill's logits are not used: on a device they need not come back.
  if (prompt.size() > 1) forward(prompt.first(prompt.size() - 1), model_->cuda_context() != nullptr);
}

void ModelDrafter::sync(std::span<const int32_t> context, bool on_device) {
  if (context.empty()) throw_error(ErrorKind::InvalidArgument, "model drafter: empty context");
  const size_t c = context.size();
  size_t common = 0;
  const size_t limit = std::min(cached_.size(), c);
  while (common < limit && cached_[common] == context[common]) ++common;
  common = std::min(common, c - 1);  // always re-feed the last token to get its logits
  cache_.truncate(static_cast<int>(common));
  cached_.resize(common);
  forward(context.subspan(common), on_device);
}

void ModelDrafter::accepted(int n_accepted, int32_t) {
  // The cache holds context + x_1..x_{g-1}: roll back to context + x_1..x_n now. What is still
  // missing (x_g after a full acceptance, and next_token) is fed by the next proposal's sync(),
  // batched with the token whose logits it needs.
  const size_t keep = std::min(cached_.size(), proposed_from_ + static_cast<size_t>(std::max(n_accepted, 0)));
  cache_.truncate(static_cast<int>(keep));
  cached_.resize(keep);
}

void ModelDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = false;
  if (params.sampler == nullptr || params.rng == nullptr)
    throw_error(ErrorKind::InvalidArgument, "model drafter: propose needs a sampler and an rng");
  // Room in the cache: context (c) + g - 1 drafted tokens are stored.
  const int room = cache_.capacity() - static_cast<int>(context.size()) + 1;
  const int g = std::min(params.max_tokens, room);
  if (g <= 0) return;
  const bool on_device = !params.device.empty() && params.device == model_->device() &&
                         core::DeviceSampler::supported(*model_, params.sampler->params());
  sync(context, on_device);
  proposed_from_ = context.size();
  history_.assign(context.begin(), context.end());
  if (on_device) {
    propose_on_device(params, g, out);
    return;
  }
  const int n_vocab_draft = static_cast<int>(logits_.size());
  const bool greedy = params.sampler->params().greedy();
  for (int i = 0; i < g; ++i) {
    if (static_cast<int>(out.q.size()) <= i) out.q.emplace_back();
    std::vector<float>& q = out.q[i];
    params.sampler->distribution(logits_, history_, q);
    if (n_vocab_draft > target_n_vocab_) {
      // Ids the target does not have are padding: mask them out so x is always a target id and
      // q stays exactly the distribution x is drawn from.
      q.resize(target_n_vocab_);
      double sum = 0.0;
      for (float v : q) sum += v;
      if (sum <= 0.0) break;
      const float inv = static_cast<float>(1.0 / sum);
      for (float& v : q) v *= inv;
    } else if (n_vocab_draft < target_n_vocab_) {
      q.resize(target_n_vocab_, 0.0f);
    }
    if (params.p_min > 0.0f) {
      float confidence;
      if (!greedy) {
        confidence = *std::max_element(q.begin(), q.end());
      } else {
        // Processed q is one-hot at temperature 0; use the plain softmax's top probability.
        const float mx = *std::max_element(logits_.begin(), logits_.end());
        double z = 0.0;
        for (float l : logits_) z += std::exp(static_cast<double>(l - mx));
        confidence = static_cast<float>(1.0 / z);
      }
      if (confidence < params.p_min) break;
    }
    const int32_t x = params.sampler->sample(q, *params.rng);
    out.tokens.push_back(x);
    history_.push_back(x);
    if (i + 1 < g) {
      const int32_t tok = x;
      forward(std::span<const int32_t>(&tok, 1), false);
    }
  }
}

void ModelDrafter::propose_on_device(const DraftParams& params, int g, Draft& out) {
  if (!device_sampler_) device_sampler_ = std::make_unique<core::DeviceSampler>(*model_);
  core::DeviceSampler& dev = *device_sampler_;
  const core::SamplingParams& sp = params.sampler->params();
  const int64_t n_draft = model_->config().n_vocab, n_target = target_n_vocab_;
  // Slot 0: the q rows handed to the verifier; slot 1: a draft-vocabulary row (distribution before
  // it is moved into the target's vocabulary, or the plain softmax for a greedy confidence).
  float* q_rows = dev.buffer(0, static_cast<size_t>(g) * static_cast<size_t>(n_target));
  float* row = dev.buffer(1, static_cast<size_t>(n_draft));
  int32_t* ids = dev.id_slots(static_cast<size_t>(g));
  // Without adaptive drafting nothing needs the host inside the loop: each id is drawn into a
  // device slot and fed to the next draft forward from there, and the g ids come back in one copy
  // at the end. Adaptive drafting reads the confidence per token (one wait per token).
  const bool adaptive = params.p_min > 0.0f;
  core::ForwardOptions opt;
  opt.n_layers = n_layers_;
  opt.logits_all = false;
  for (int i = 0; i < g; ++i) {
    float* q = q_rows + static_cast<size_t>(i) * static_cast<size_t>(n_target);
    if (n_draft == n_target) {
      dev.distributions(d_logits_, 1, n_draft, sp, q);
    } else {
      dev.distributions(d_logits_, 1, n_draft, sp, row);
      dev.restrict_to(row, n_draft, q, n_target);
    }
    if (!adaptive) {
      dev.sample_into(q, n_target, *params.rng, ids + i);
      if (i + 1 < g) d_logits_ = model_->forward_device_ids(ids + i, 1, {}, cache_, nullptr, opt);
      continue;
    }
    const float* confidence_row = q;
    int64_t confidence_n = n_target;
    if (sp.greedy()) {  // q is one-hot: the plain softmax's top probability, as on the host
      dev.softmax(d_logits_, n_draft, row);
      confidence_row = row;
      confidence_n = n_draft;
    }
    float confidence = 1.0f;
    const int32_t x = dev.sample(q, n_target, *params.rng, confidence_row, confidence_n, &confidence);
    if (confidence < params.p_min) break;
    out.tokens.push_back(x);
    history_.push_back(x);
    if (i + 1 < g) forward(std::span<const int32_t>(&x, 1), true);
  }
  if (!adaptive) {
    out.tokens.resize(static_cast<size_t>(g));
    dev.download_ids(ids, g, out.tokens.data());  // the step's one wait for the draft
    history_.insert(history_.end(), out.tokens.begin(), out.tokens.end());
    // The cache now holds x_1..x_{g-1} too (fed from the device): mirror them.
    cached_.insert(cached_.end(), out.tokens.begin(), out.tokens.end() - 1);
  }
  if (!out.tokens.empty()) out.q_device = q_rows;
}

}  // namespace specmoe::draft
