// Device names and the choice of backend (see model_backend.h).
#include "core/model_backend.h"

#include <charconv>

#include "core/error.h"
#include "core/gguf.h"
#ifdef SPECMOE_HAVE_CUDA
#include "core/cuda_model.h"
#endif

namespace specmoe::core {

std::string Device::name() const { return kind == Kind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& text) {
  Device d;
  if (text == "cpu") return d;
  if (text == "cuda") {
    d.kind = Device::Kind::Cuda;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    int index = -1;
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && index >= 0) {
      d.kind = Device::Kind::Cuda;
      d.index = index;
      return d;
    }
  }
  throw_error(ErrorKind::InvalidArgument, "device '{}': expected cpu, cuda or cuda:N (N = 0, 1, ...)", text);
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
