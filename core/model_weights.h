// Binding a GGUF file's tensors to the transformer's weights (llama.cpp tensor names), with every
// tensor's shape and type checked at load. Matrices stay in the memory map; 1-D tensors (norms,
// biases) are converted to small float vectors.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/model_config.h"
#include "kernels/cpu/ops.h"

namespace specmoe::core {

class FeedForward;

// Looks tensors up by name and checks them; errors name the file, the tensor and the problem.
class TensorBinder {
 public:
  explicit TensorBinder(const GGUFFile& file) : file_(file) {}

  // A matrix with GGUF ne = {n_in, n_out} (row j = output j). Throws Error(Format) when missing
  // or shaped otherwise, Error(Unsupported) for a type no matmul kernel handles.
  kernels::cpu::MatrixView matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A vector of n elements as floats (any float or quantized type is converted).
  std::vector<float> vector(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  const GGUFFile& file() const { return file_; }

 private:
  const GGUFTensorInfo& find(const std::string& name) const;
  const GGUFFile& file_;
};

// One transformer block. Empty vectors mean "absent" (no bias, no LayerNorm bias).
struct LayerWeights {
  std::vector<float> attn_norm, attn_norm_b;   // [n_embd]
  // Separate projections (llama, qwen2) ...
  kernels::cpu::MatrixView wq;                 // (n_embd -> n_head * head_dim)
  kernels::cpu::MatrixView wk, wv;             // (n_embd -> kv_dim)
  std::vector<float> bq, bk, bv;               // qwen2 biases
  // ... or one fused projection (gpt2): rows [q | k | v].
  kernels::cpu::MatrixView wqkv;               // (n_embd -> n_head*head_dim + 2*kv_dim)
  std::vector<float> bqkv;
  kernels::cpu::MatrixView wo;                 // (n_head * head_dim -> n_embd)
  std::vector<float> bo;
  std::vector<float> ffn_norm, ffn_norm_b;     // [n_embd]
  std::unique_ptr<FeedForward> ffn;
  bool fused_qkv() const { return wqkv.data != nullptr; }
};

struct ModelWeights {
  kernels::cpu::MatrixView token_embd;         // (n_embd, n_vocab): row = one token's embedding
  kernels::cpu::MatrixView position_embd;      // gpt2 only: (n_embd, n_ctx_train)
  std::vector<float> output_norm, output_norm_b;
  kernels::cpu::MatrixView output;             // (n_embd -> n_vocab); token_embd when tied
  std::vector<LayerWeights> layers;
};

// Binds every tensor the architecture needs; throws Error naming the file and the tensor.
ModelWeights bind_weights(const GGUFFile& file, const ModelConfig& config);

}  // namespace specmoe::core
