// ComputeEnvironment from kernels/cuda's device query (see environment.h).
#include "core/environment.h"

#ifdef SPECMOE_HAVE_CUDA
#include "kernels/cuda/device.h"
#endif

namespace specmoe::core {

namespace {
[[maybe_unused]] std::string cuda_version(int v) {  // 13000 -> "13.0"
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

ComputeEnvironment query_compute_environment() {
  ComputeEnvironment env;
#ifdef SPECMOE_HAVE_CUDA
  env.cuda_built = true;
  const kernels::cuda::CudaInfo info = kernels::cuda::query_cuda();
  env.cuda_status = info.status;
  env.cuda_driver = cuda_version(info.driver_version);
  env.cuda_runtime = cuda_version(info.runtime_version);
  for (const kernels::cuda::DeviceInfo& d : info.devices) {
    GpuDeviceInfo g;
    g.index = d.index;
    g.name = d.name;
    g.compute_capability = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    g.multiprocessors = d.multiprocessors;
    g.memory_total_bytes = d.total_bytes;
    g.memory_free_bytes = d.free_bytes;
    env.gpus.push_back(std::move(g));
  }
#else
  env.cuda_status = "not built";
#endif
  return env;
}

int cuda_device_count() {
#ifdef SPECMOE_HAVE_CUDA
  return kernels::cuda::cuda_device_count();
#else
  return 0;
#endif
}

nlohmann::json ComputeEnvironment::to_json() const {
  nlohmann::json j;
  j["cuda_built"] = cuda_built;
  j["cuda_status"] = cuda_status;
  j["cuda_driver"] = cuda_driver;
  j["cuda_runtime"] = cuda_runtime;
  j["gpus"] = nlohmann::json::array();
  for (const GpuDeviceInfo& g : gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"compute_capability", g.compute_capability},
                         {"multiprocessors", g.multiprocessors},
                         {"memory_total_bytes", g.memory_total_bytes},
                         {"memory_free_bytes", g.memory_free_bytes}});
  }
  return j;
}

std::map<std::string, std::string> ComputeEnvironment::to_map() const {
  std::map<std::string, std::string> m;
  m["cuda_built"] = cuda_built ? "true" : "false";
  m["cuda_status"] = cuda_status;
  m["cuda_driver"] = cuda_driver;
  m["cuda_runtime"] = cuda_runtime;
  m["gpu_count"] = std::to_string(gpus.size());
  for (const GpuDeviceInfo& g : gpus) {
    const std::string p = "gpu" + std::to_string(g.index) + "_";
    m[p + "name"] = g.name;
    m[p + "compute_capability"] = g.compute_capability;
    m[p + "multiprocessors"] = std::to_string(g.multiprocessors);
    m[p + "memory_total_bytes"] = std::to_string(g.memory_total_bytes);
    m[p + "memory_free_bytes"] = std::to_string(g.memory_free_bytes);
  }
  return m;
}

}  // namespace specmoe::core
