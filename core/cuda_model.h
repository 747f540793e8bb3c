// The CUDA backend of Model (core/cuda_model.cpp): only in builds with kernels/cuda
// (SPECMOE_HAVE_CUDA, defined by the specmoe_kernels_cuda target).
#pragma once
#ifdef SPECMOE_HAVE_CUDA
#include <memory>

#include "core/model_backend.h"

namespace specmoe::core {

// Uploads the weights of a dense llama / qwen2 / gpt2 model to CUDA device `device` (F32, F16,
// BF16 as they are; quantized types as their GGUF blocks). Throws Error(Runtime) naming the
// device when it is absent or the weights do not fit, Error(Unsupported) for a tensor type or an
// MoE routing option the backend does not run.
std::unique_ptr<ModelBackend> make_cuda_backend(int device, const GGUFFile& file, const ModelConfig& config,
                                                const ModelWeights& weights);

}  // namespace specmoe::core
#endif
