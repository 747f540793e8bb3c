// Synthetic models: deterministic random-weight GGUF files with a byte-level vocabulary, for
// tests and benchmarks that need a model of a given size without downloading one.
//
// Draft/target pairs: every weight is a pure function of (seed, tensor name, element index),
// so a draft that keeps the target's first layers, embedding and head has bit-identical copies
// of them. The target's deeper layers are scaled down (attn_output and ffn_down times
// deep_residual_scale), so the draft's greedy choice agrees with the target's most of the time,
// as a trained draft model would.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace specmoe::core {

class Model;

struct SynthSpec {
  std::string arch = "llama";      // llama | qwen2 | gpt2
  DType type = DType::F32;         // type of the 2-D weights (norms and biases stay F32)
  int n_vocab = 320;               // >= 259: <unk> <s> </s> + 256 byte tokens, padded
  int n_embd = 64;
  int n_layer = 4;                 // layers of the full (target) model
  int n_head = 4;
  int n_head_kv = 2;               // gpt2: forced to n_head
  int n_ff = 192;
  int n_ctx = 512;
  bool tied_output = false;        // no output.weight: the head reuses token_embd
  float rope_freq_base = 10000.0f;
  int n_full_layers = -1;          // layers >= this have their residual branches scaled (-1: none)
  float deep_residual_scale = 1.0f;
  float repeat_penalty = 2.0f;     // output row of token j -= repeat_penalty * embedding of j / sqrt(n_embd)
  int keep_layers = -1;            // write only the first keep_layers layers (a draft); -1 = all
  std::string name = "synth";
};

// A preset's spec ("tiny", "tiny-draft", "target", "draft"); throws Error(InvalidArgument)
// naming the preset and listing the known ones.
SynthSpec synth_spec(const std::string& preset);
// "name: one-line description" for each preset (for `specmoe synth --help`).
std::vector<std::string> synth_presets();

// Writes the model of `spec` with weights drawn from `seed`. Same spec + seed = same bytes.
void synth_write(const SynthSpec& spec, const std::string& path, uint64_t seed);
void synth_write(const std::string& preset, const std::string& path, uint64_t seed);

// Greedy agreement of a draft with its target (acceptance rate at temperature 0): for each
// prompt (encoded with BOS), the target greedily generates n_tokens; at each step the draft,
// fed the same tokens, predicts the next one; returns matches / predictions.
double synth_greedy_agreement(Model& target, Model& draft, const std::vector<std::string>& prompts, int n_tokens);

}  // namespace specmoe::core
