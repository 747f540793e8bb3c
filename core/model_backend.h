// The seam between Model and the device that runs its forward. Model keeps the file, the config,
// the tokenizer, the argument checks and the CPU forward; a ModelBackend (today only CUDA,
// core/cuda_model.cpp) owns device copies of the weights and runs the same forward there,
// returning logits (or, for greedy decoding, only the argmax ids) to the host. Selected by
// LoadOptions::device ("cpu", "cuda", "cuda:N").
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/device.h"
#include "core/kv_cache.h"
#include "core/model_config.h"

namespace specmoe::kernels::cuda {
class Context;
}  // namespace specmoe::kernels::cuda

namespace specmoe::core {

class GGUFFile;
struct ModelWeights;

// One MoE layer's routing in a backend forward, copied back to the host so that Model records it
// into the layer's statistics and last routing exactly as the CPU forward does.
struct MoELayerRecord {
  bool ran = false;                        // the forward ran this MoE layer
  int n_tokens = 0, k = 0;
  std::vector<int32_t> experts;            // [T, k], rank order (best first); -1 (kDropped): capacity-dropped
  std::vector<float> weights;              // [T, k] combine weights (0 for a dropped slot)
  std::vector<int64_t> tokens_per_expert;  // [n_expert] kept assignments, counted on the device (histogram)
};

// One forward's inputs, already checked by Model::forward (token ids in the vocabulary,
// positions in range, mask n x n, n_layers <= the model's, the cache has room).
struct ForwardBatch {
  std::span<const int32_t> tokens;     // [T]
  std::span<const int32_t> positions;  // [T] (resolved: never empty)
  // When set: the T ids are already in the backend's device memory here (tokens then only gives
  // T; a drafter feeding back the token it sampled on the device needs no copy to the host).
  const int32_t* device_tokens = nullptr;
  const uint8_t* allowed = nullptr;    // host [T, T] mask (AttentionMask::allowed) or null = causal
  int n_layers = 0;                    // blocks to run (early exit when < n_layer)
  bool logits_all = true;              // false: only the last token's logits
  // MoE models: experts per token (Model's current k), the router's capacity factor (<= 0:
  // dropless), and where the backend reports each MoE layer it ran ([n_layer], may be null).
  int moe_k = 0;
  double moe_capacity_factor = 0.0;
  std::vector<MoELayerRecord>* moe_records = nullptr;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  // "cuda:0"
  virtual std::string device() const = 0;
  // Device rows for a cache of `capacity` tokens (Model::new_cache wraps them in a KVCache).
  virtual std::unique_ptr<KVDeviceStorage> new_kv_storage(int capacity) = 0;
  // Writes the new tokens' keys/values into cache rows kv.size() .. kv.size()+T-1 and the logits,
  // row-major [T or 1, n_vocab], into `logits` (host). Does not mark the tokens stored: Model
  // calls kv.append afterwards, as on the CPU path. Throws Error(InvalidArgument) for a cache this
  // backend did not make.
  virtual void forward(const ForwardBatch& batch, KVCache& kv, std::vector<float>& logits) = 0;
  // The same forward, but returns only the argmax of each logits row ([T or 1] ids: the lowest
  // index among equal maxima, NaN never wins) instead of the logits: greedy decoding then copies
  // T int32 ids instead of T x n_vocab floats. The default runs forward() and takes the argmax on
  // the host (core::argmax).
  virtual void forward_argmax(const ForwardBatch& batch, KVCache& kv, std::vector<int32_t>& ids);
  // The same forward, leaving the logits in device memory: returns a device pointer to them,
  // row-major [*rows = T or 1, n_vocab] F32, valid until this backend's next forward. Nothing is
  // copied back (MoE routing records aside), and the call does not wait for the forward.
  virtual const float* forward_device(const ForwardBatch& batch, KVCache& kv, int64_t* rows) = 0;
  // The CUDA context (device, stream) every forward of this backend is queued on: work queued
  // there after forward_device runs after it.
  virtual kernels::cuda::Context& cuda_context() = 0;
};

// The backend of `device` (not Kind::Cpu) for a loaded model. Throws Error(Unsupported) when this
// build has no CUDA backend or the model has a tensor type the backend cannot multiply, and
// Error(Runtime) naming the device when it is absent or the upload fails.
std::unique_ptr<ModelBackend> make_model_backend(const Device& device, const GGUFFile& file, const ModelConfig& config,
                                                 const ModelWeights& weights);

}  // namespace specmoe::core
