// Sampling and verification on the model's GPU: see device_sampler.h.
#include "core/device_sampler.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "core/gguf.h"
#ifdef SPECMOE_HAVE_CUDA
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#endif

namespace specmoe::core {

bool DeviceSampler::supported(const Model& model, const SamplingParams& params) {
#ifdef SPECMOE_HAVE_CUDA
  return model.cuda_context() != nullptr && params.repeat_penalty == 1.0f && params.no_repeat_ngram == 0;
#else
  (void)model;
  (void)params;
  return false;
#endif
}

#ifdef SPECMOE_HAVE_CUDA
namespace cu = kernels::cuda;

struct DeviceSampler::Impl {
  cu::Context* ctx = nullptr;
  cu::DeviceBuffer slots[4];
  cu::DeviceBuffer io;  // [0, 16): token / verdict / confidence; then uploaded draft ids
  cu::DeviceBuffer ids;  // id_slots
  std::vector<float> staging;
  int staged = 0;  // draft ids staged for the next verify

  void* ensure(cu::DeviceBuffer& b, size_t bytes) {
    if (b.bytes() < bytes) {
      b.reset();
      b = cu::DeviceBuffer(bytes, ctx->device());
    }
    return b.data();
  }
};

DeviceSampler::DeviceSampler(const Model& model) : impl_(std::make_unique<Impl>()) {
  impl_->ctx = model.cuda_context();
  if (impl_->ctx == nullptr)
    throw_error(ErrorKind::Unsupported, "{}: sampling on the device needs a model on a device; this one runs on {}",
                model.file().path(), model.device());
}

DeviceSampler::~DeviceSampler() = default;

float* DeviceSampler::buffer(int slot, size_t floats) {
  if (slot < 0 || slot >= 4)
    throw_error(ErrorKind::InvalidArgument, "device sampler: buffer slot {} outside 0..3", slot);
  return static_cast<float*>(impl_->ensure(impl_->slots[slot], std::max<size_t>(floats, 1) * sizeof(float)));
}

void DeviceSampler::distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                                  float* dst) {
  cu::SamplingConfig c;
  c.temperature = params.temperature;
  c.top_k = params.top_k;
  c.top_p = params.top_p;
  c.min_p = params.min_p;
  cu::sampling_distribution(*impl_->ctx, logits, dst, rows, n, c);
}

void DeviceSampler::restrict_to(const float* src, int64_t n_src, float* dst, int64_t n_dst) {
  cu::restrict_distribution(*impl_->ctx, src, n_src, dst, n_dst);
}

void DeviceSampler::softmax(const float* logits, int64_t n, float* dst) {
  cu::softmax_rows(*impl_->ctx, logits, dst, 1, n);
}

int32_t DeviceSampler::sample(const float* probs, int64_t n, Rng& rng, const float* confidence_row,
                              int64_t confidence_n, float* confidence) {
  Impl& I = *impl_;
  auto* out = static_cast<int32_t*>(I.ensure(I.io, 16));
  sample_into(probs, n, rng, out);
  int32_t host[2] = {-1, 0};
  if (confidence_row != nullptr) {
    cu::row_max(*I.ctx, confidence_row, confidence_n, reinterpret_cast<float*>(out + 1));
    I.ctx->download(host, out, 2 * sizeof(int32_t));  // token and confidence in one copy
    if (confidence != nullptr) std::memcpy(confidence, &host[1], sizeof(float));
  } else {
    I.ctx->download(host, out, sizeof(int32_t));
  }
  return host[0];
}

int32_t* DeviceSampler::id_slots(size_t n) {
  return static_cast<int32_t*>(impl_->ensure(impl_->ids, std::max<size_t>(n, 1) * sizeof(int32_t)));
}

void DeviceSampler::sample_into(const float* probs, int64_t n, Rng& rng, int32_t* device_token) {
  const uint64_t block = rng.take_blocks(1);
  cu::sample_philox(*impl_->ctx, probs, n, rng.seed(), rng.stream(), block, device_token);
}

void DeviceSampler::download_ids(const int32_t* device_ids, int n, int32_t* host) {
  if (n > 0) impl_->ctx->download(host, device_ids, static_cast<size_t>(n) * sizeof(int32_t));
}

void DeviceSampler::stage_draft(std::span<const int32_t> draft) {
  Impl& I = *impl_;
  auto* io = static_cast<int32_t*>(I.ensure(I.io, 16 + draft.size() * sizeof(int32_t)));
  if (!draft.empty()) I.ctx->upload(io + 4, draft.data(), draft.size() * sizeof(int32_t));
  I.staged = static_cast<int>(draft.size());
}

DeviceSampler::Verdict DeviceSampler::verify(const float* p, const float* q, int64_t n_vocab, Rng& rng) {
  Impl& I = *impl_;
  const int g = I.staged;
  auto* io = static_cast<int32_t*>(I.ensure(I.io, 16));
  const uint64_t first = rng.take_blocks(static_cast<uint64_t>(g) + 1);
  cu::speculative_verify(*I.ctx, p, q, g > 0 ? io + 4 : nullptr, g, n_vocab, rng.seed(), rng.stream(), first, io);
  int32_t host[2] = {0, -1};
  I.ctx->download(host, io, sizeof(host));  // waits for the verification: the only copy back
  if (host[0] < 0 || host[0] > g || host[1] < 0 || host[1] >= n_vocab)
    throw_error(ErrorKind::Runtime, "device verification returned ({}, {}) for {} draft tokens over {} ids: the target "
                "distribution has no mass", host[0], host[1], g, n_vocab);
  return {host[0], host[1]};
}

void DeviceSampler::wait() { impl_->ctx->synchronize(); }

void DeviceSampler::upload_rows(std::span<const std::vector<float>> rows, int64_t n, float* dst) {
  Impl& I = *impl_;
  I.staging.resize(rows.size() * static_cast<size_t>(n));
  for (size_t r = 0; r < rows.size(); ++r) {
    if (static_cast<int64_t>(rows[r].size()) != n)
      throw_error(ErrorKind::InvalidArgument, "device sampler: row {} has {} entries, expected {}", r, rows[r].size(),
                  n);
    std::memcpy(I.staging.data() + r * static_cast<size_t>(n), rows[r].data(), static_cast<size_t>(n) * sizeof(float));
  }
  if (!I.staging.empty()) I.ctx->upload(dst, I.staging.data(), I.staging.size() * sizeof(float));
}

#else  // no CUDA backend in this build

struct DeviceSampler::Impl {};

DeviceSampler::DeviceSampler(const Model& model) {
  throw_error(ErrorKind::Unsupported,
              "{}: sampling on the device needs the CUDA backend (rebuild with -DSPECMOE_CUDA=ON)",
              model.file().path());
}
DeviceSampler::~DeviceSampler() = default;
float* DeviceSampler::buffer(int, size_t) { return nullptr; }
void DeviceSampler::distributions(const float*, int64_t, int64_t, const SamplingParams&, float*) {}
void DeviceSampler::restrict_to(const float*, int64_t, float*, int64_t) {}
void DeviceSampler::softmax(const float*, int64_t, float*) {}
int32_t DeviceSampler::sample(const float*, int64_t, Rng&, const float*, int64_t, float*) { return -1; }
int32_t* DeviceSampler::id_slots(size_t) { return nullptr; }
void DeviceSampler::sample_into(const float*, int64_t, Rng&, int32_t*) {}
void DeviceSampler::download_ids(const int32_t*, int, int32_t*) {}
void DeviceSampler::stage_draft(std::span<const int32_t>) {}
DeviceSampler::Verdict DeviceSampler::verify(const float*, const float*, int64_t, Rng&) { return {}; }
void DeviceSampler::wait() {}
void DeviceSampler::upload_rows(std::span<const std::vector<float>>, int64_t, float*) {}

#endif

}  // namespace specmoe::core
