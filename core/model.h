// Model: one transformer implementation configured from GGUF metadata (llama, qwen2, gpt2, and
// MoE variants), running a batch of new tokens against a KV cache.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/tokenizer.h"

namespace specmoe::moe {
class ExpertStats;
struct Routing;
}  // namespace specmoe::moe

namespace specmoe::kernels::cuda {
class Context;
}  // namespace specmoe::kernels::cuda

namespace specmoe::core {

class GGUFFile;

// Which new tokens each new token may attend to (all cached tokens are always visible).
// allowed[i * n + j] != 0: new token i sees new token j. Causal: j <= i. Tree verification
// passes each node's ancestors.
struct AttentionMask {
  int n = 0;
  std::vector<uint8_t> allowed;
  static AttentionMask causal(int n);
};

struct ForwardOptions {
  int n_layers = -1;                      // early exit: run only the first n_layers blocks, then
                                          // the final norm and head (-1 = all layers). The cache
                                          // still counts the new tokens, but layers >= n_layers
                                          // hold no keys/values for them: truncate them away
                                          // before a full-depth forward reads those rows.
  const AttentionMask* mask = nullptr;    // nullptr = causal among the new tokens
  bool logits_all = true;                 // false: only the last token's logits are computed
};

struct LoadOptions {
  int n_threads = 0;           // 0 = all hardware threads
  std::string device = "cpu";  // "cpu", "cuda" (= cuda:0) or "cuda:N": where the forward runs.
                               // On a device the weights are uploaded once at load, caches from
                               // new_cache live in device memory, and logits come back to the
                               // host. No CUDA in this build: Error(Unsupported); no such
                               // device: Error(Runtime) naming it.
  // MoE models only (an error on a dense model): experts per token instead of the file's
  // expert_used_count (0 = the file's), and the Switch capacity factor (0 = dropless).
  int moe_k_override = 0;
  double moe_capacity_factor = 0.0;
};

class Model {
 public:
  // Loads (memory-maps) a GGUF model; throws Error naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  virtual ~Model();

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const GGUFFile& file() const;
  void set_threads(int n_threads);
  int threads() const;
  // Where the forward runs: "cpu" or "cuda:N".
  std::string device() const;
  // Bytes of weights one single-token forward reads (for bandwidth figures).
  size_t weight_bytes_per_token() const;

  // A cache for up to n_ctx tokens (<= 0: the model's training context), on the model's device.
  KVCache new_cache(int n_ctx = 0) const;

  // Appends the new tokens' keys/values to kv (positions empty = kv.size(), kv.size()+1, ...)
  // and writes logits, row-major [n_tokens, n_vocab] (or [1, n_vocab] when !logits_all), into
  // `logits`. Reads every weight once for the whole batch. Throws Error(Limit) when the cache is
  // full.
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
               std::vector<float>& logits, const ForwardOptions& options = {});
  // The same forward, returning only each logits row's argmax ([n_tokens] or [1] ids; lowest id
  // among equal maxima, NaN never wins: core::argmax) for greedy decoding. On the CPU it is
  // forward + core::argmax (bit-identical to taking the argmax of forward's logits); on a device
  // the argmax runs there and only the ids are copied back (a row of all NaN gives id 0 there
  // instead of the CPU's Error). MoE statistics are recorded as by forward.
  void forward_argmax(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                      std::vector<int32_t>& argmax, const ForwardOptions& options = {});

  // A model on a device only (Error(Unsupported) on the CPU): the same forward, but the logits
  // stay in device memory. Returns a device pointer to them, row-major [*n_rows, n_vocab] F32
  // (n_rows = n_tokens, or 1 when !logits_all), valid until this model's next forward; the
  // forward is queued on cuda_context()'s stream and not waited for. For decoding loops that
  // sample and verify on the device (core/device_sampler.h).
  const float* forward_device(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
                              int64_t* n_rows, const ForwardOptions& options = {});
  // The same, with the n_tokens ids read from device memory on this model's device (ids sampled
  // there: nothing goes through the host). They are not range-checked on the host; an id outside
  // the vocabulary gives NaN embeddings (kernels/cuda/ops.h get_rows), never a wild read.
  const float* forward_device_ids(const int32_t* device_tokens, int n_tokens, std::span<const int32_t> positions,
                                  KVCache& kv, int64_t* n_rows, const ForwardOptions& options = {});
  // The CUDA context this model's forwards run on; nullptr for a CPU model.
  kernels::cuda::Context* cuda_context() const;

  // Mixture of experts. Every forward records each MoE layer's routing into that layer's
  // statistics (tokens per expert, balance, drops, U(T) per forward size).
  int moe_k() const;  // experts per token now (0 for a dense model)
  // Throw Error(InvalidArgument) on a dense model or outside [1, the router's max k].
  void set_moe_k(int k);
  // <= 0: dropless. A CUDA model accepts only dropless routing (> 0: Error(Unsupported)).
  void set_moe_capacity_factor(double capacity_factor);
  // Layer `layer`'s statistics; nullptr for a dense layer or a layer out of range.
  const moe::ExpertStats* expert_stats(int layer) const;
  void reset_expert_stats();
  // Per layer: distinct routed experts the last forward ran, U(T) (-1: dense, or not run).
  const std::vector<int>& last_distinct_experts() const;
  // Layer `layer`'s routing in the last forward that ran it; nullptr for a dense layer.
  const moe::Routing* last_routing(int layer) const;
  // Weight bytes of one routed expert of layer `layer` (gate + up + down slices); 0 if dense.
  size_t moe_expert_bytes(int layer) const;

 private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specmoe::core
