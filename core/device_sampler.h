// DeviceSampler: the sampling and speculative-verification steps of a decoding loop, run on the
// GPU a model lives on, so that logits, the processed distributions (the target's p, the draft's
// q) and the verification never leave device memory; only token ids (and a confidence float for
// adaptive drafting) come back. The chain is core::SamplerChain's (temperature, top-k, top-p,
// min-p; kernels/cuda/ops.h sampling_distribution); random numbers are Philox blocks reserved from
// the loop's core::Rng (Rng::take_blocks), so the same seed and stream give the same tokens.
// Repetition penalties and the n-gram ban need the token history and stay on the host path:
// supported() is false for them.
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "core/model.h"
#include "core/rng.h"
#include "core/sampling.h"

namespace specmoe::core {

class DeviceSampler {
 public:
  // True when sampling with `params` can run on `model`'s device: a model on a device, a build
  // with the CUDA backend, no repetition penalty and no n-gram ban.
  static bool supported(const Model& model, const SamplingParams& params);

  // Works on `model`'s CUDA context (its stream: ordered after the model's forwards). The model
  // must outlive the sampler. Throws Error(Unsupported) for a CPU model or a build without CUDA.
  explicit DeviceSampler(const Model& model);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // Device memory owned by the sampler, at least `floats` floats, per slot (0..3), grown on demand
  // (growing invalidates what the slot held). Slots let a loop keep p rows, q rows and scratch.
  float* buffer(int slot, size_t floats);

  // dst[r, :] = the processed distribution of logits[r, :] for r < rows (device rows of n).
  void distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params, float* dst);
  // A draft row moved into the target's vocabulary (kernels/cuda/ops.h restrict_distribution).
  void restrict_to(const float* src, int64_t n_src, float* dst, int64_t n_dst);
  // dst = softmax(logits) of one device row of n (the plain distribution, for the confidence of a
  // greedy drafter).
  void softmax(const float* logits, int64_t n, float* dst);

  // Draws a token from a device distribution row of n by inverse CDF with the uniform of one
  // Philox block reserved from rng, waits, and returns it. With confidence_row, also sets
  // *confidence = max(confidence_row[0, confidence_n)) (same copy back).
  int32_t sample(const float* probs, int64_t n, Rng& rng, const float* confidence_row = nullptr,
                 int64_t confidence_n = 0, float* confidence = nullptr);

  // Device int32 slots owned by the sampler (at least n; growing invalidates what they held).
  int32_t* id_slots(size_t n);
  // Queues the same draw as sample() into *device_token without waiting: the id can feed the
  // next forward on the device (Model::forward_device_ids) before the host sees it.
  void sample_into(const float* probs, int64_t n, Rng& rng, int32_t* device_token);
  // Copies n ids back to the host (waits for what is queued).
  void download_ids(const int32_t* device_ids, int n, int32_t* host);

  // Lossless speculative verification on the device (kernels/cuda/ops.h speculative_verify) in
  // two calls: stage_draft uploads the g drafted ids (call it before queuing the target forward:
  // the upload then does not wait for that forward), verify runs the rule on p: device
  // [g + 1, n_vocab] target distributions and q: device [g, n_vocab] draft distributions (null for
  // a one-hot draft), reserves g + 1 Philox blocks from rng and copies back two ids.
  struct Verdict {
    int n_accepted = 0;
    int32_t next_token = -1;
  };
  void stage_draft(std::span<const int32_t> draft);
  Verdict verify(const float* p, const float* q, int64_t n_vocab, Rng& rng);

  // Waits until everything queued on the model's stream (forwards included) has finished: for
  // timing a device forward.
  void wait();

  // Copies host rows (g rows of n floats) into device memory at dst (for a draft whose q lives on
  // the host while the target verifies on the device).
  void upload_rows(std::span<const std::vector<float>> rows, int64_t n, float* dst);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specmoe::core
