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
  int n_threads = 0;  // 0 = all hardware threads
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
  // Bytes of weights one single-token forward reads (for bandwidth figures).
  size_t weight_bytes_per_token() const;

  // A cache for up to n_ctx tokens (<= 0: the model's training context).
  KVCache new_cache(int n_ctx = 0) const;

  // Appends the new tokens' keys/values to kv (positions empty = kv.size(), kv.size()+1, ...)
  // and writes logits, row-major [n_tokens, n_vocab] (or [1, n_vocab] when !logits_all), into
  // `logits`. Reads every weight once for the whole batch. Throws Error(Limit) when the cache is
  // full.
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KVCache& kv,
               std::vector<float>& logits, const ForwardOptions& options = {});

 private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specmoe::core
