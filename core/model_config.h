// ModelConfig: the hyperparameters of a transformer, read from GGUF metadata
// (`<arch>.block_count`, `<arch>.embedding_length`, ... as llama.cpp names them).
#pragma once
#include <cstdint>
#include <string>

namespace specmoe::core {

class GGUFFile;

enum class Arch { Llama, Qwen2, Qwen2Moe, Gpt2 };

// How RoPE pairs the dimensions of a head (llama.cpp's LLAMA_ROPE_TYPE_NORM vs _NEOX):
// Adjacent rotates (x[2i], x[2i+1]) (llama); SplitHalves rotates (x[i], x[i + d/2]) (qwen2).
enum class RopeStyle { Adjacent, SplitHalves, None };

// How router logits become expert scores: llama.cpp's `<arch>.expert_gating_func`
// (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX = 1, _SIGMOID = 2).
enum class ExpertGating { Softmax = 1, Sigmoid = 2 };

struct ModelConfig {
  std::string arch_name;      // general.architecture
  Arch arch = Arch::Llama;
  std::string name;           // general.name (may be empty)
  int n_vocab = 0;
  int n_ctx_train = 0;        // <arch>.context_length
  int n_embd = 0;             // <arch>.embedding_length
  int n_layer = 0;            // <arch>.block_count
  int n_head = 0;             // <arch>.attention.head_count
  int n_head_kv = 0;          // <arch>.attention.head_count_kv (defaults to n_head)
  int head_dim = 0;           // n_embd / n_head unless <arch>.attention.key_length says otherwise
  int n_ff = 0;               // <arch>.feed_forward_length (dense FFN width)
  float norm_eps = 1e-5f;     // rms or layer norm epsilon
  RopeStyle rope_style = RopeStyle::Adjacent;
  int rope_dims = 0;          // <arch>.rope.dimension_count (defaults to head_dim)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / <arch>.rope.scale_linear
  bool tied_output = false;   // no output.weight: the head reuses token_embd

  // Mixture of experts (0 experts = dense). Defaults per architecture as llama.cpp has them.
  int n_expert = 0;           // <arch>.expert_count
  int n_expert_used = 0;      // <arch>.expert_used_count (k)
  int n_ff_expert = 0;        // routed expert width: llama n_ff (llama.cpp binds the expert
                              // tensors with feed_forward_length); qwen2moe
                              // <arch>.expert_feed_forward_length, else n_ff / n_expert_used
  int n_ff_shared_expert = 0; // qwen2moe: <arch>.expert_shared_feed_forward_length, else n_ff
  bool expert_weights_norm = true;  // renormalise the top-k gate weights (Mixtral yes, Qwen-MoE no)
  ExpertGating expert_gating = ExpertGating::Softmax;  // <arch>.expert_gating_func (0 = default)
  float expert_weights_scale = 1.0f;  // <arch>.expert_weights_scale (0 or absent = 1)
  int n_expert_group = 1;       // <arch>.expert_group_count (group-limited routing; 1 = none)
  int n_expert_group_used = 1;  // <arch>.expert_group_used_count (groups kept per token)

  bool is_moe() const { return n_expert > 0; }
  int kv_dim() const { return n_head_kv * head_dim; }

  static ModelConfig from_gguf(const GGUFFile& file);  // throws Error naming the file and key
  void validate() const;  // throws Error(Format) when sizes are inconsistent or out of range
};

}  // namespace specmoe::core
