// Device names and the choice of backend (see model_backend.h).
#include "core/model_backend.h"

#include "base/error.h"
#include "core/gguf.h"
#include "core/sampling.h"
#ifdef SPECMOE_HAVE_CUDA
#include "core/cuda_model.h"
#endif

namespace specmoe::core {

void ModelBackend::forward_argmax(const ForwardBatch& batch, KVCache& kv, std::vector<int32_t>& ids) {
  std::vector<float> logits;
  forward(batch, kv, logits);
  const size_t rows = batch.logits_all ? batch.tokens.size() : 1;
  const size_t n_vocab = rows ? logits.size() / rows : 0;
  ids.resize(rows);
  for (size_t r = 0; r < rows; ++r) ids[r] = argmax(std::span<const float>(logits.data() + r * n_vocab, n_vocab));
}

std::unique_ptr<ModelBackend> make_model_backend(const Device& device, const GGUFFile& file, const ModelConfig& config,
                                                 const ModelWeights& weights) {
  if (device.kind == Device::Kind::Cpu)
    throw_error(ErrorKind::InvalidArgument, "{}: the CPU forward is Model's own, not a backend", file.path());
#ifdef SPECMOE_HAVE_CUDA
  return make_cuda_backend(device.index, file, config, weights);
#else
  (void)config;
  (void)weights;
  throw_error(ErrorKind::Unsupported,
              "{}: device {}: this build has no CUDA backend (rebuild with -DSPECMOE_CUDA=ON)", file.path(),
              device.name());
#endif
}

}  // namespace specmoe::core
