// The accelerator part of a report's environment block: whether this build has the CUDA
// backend, the driver and runtime versions, and every visible GPU (name, compute capability,
// memory). Never throws for a missing driver or device (cuda_status says why); experiment
// reports record it next to the CPU facts so a figure can be traced to the GPU that made it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace specmoe::core {

struct GpuDeviceInfo {
  int index = 0;                    // cuda:N
  std::string name;                 // "NVIDIA H200"
  std::string compute_capability;   // "9.0"
  int multiprocessors = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_free_bytes = 0;   // at query time
};

struct ComputeEnvironment {
  bool cuda_built = false;          // this binary has the CUDA backend (-DSPECMOE_CUDA=ON/AUTO found it)
  std::string cuda_status;          // "ok", "not built", or "no device: <why>"
  std::string cuda_driver;          // "13.0" (the CUDA version the driver supports); "" when none
  std::string cuda_runtime;         // "13.0": the runtime this binary was linked with; "" when not built
  std::vector<GpuDeviceInfo> gpus;

  // {"cuda_built": true, "cuda_status": "ok", "cuda_driver": "13.0", "cuda_runtime": "13.0",
  //  "gpus": [{"index": 0, "name": ..., "compute_capability": "9.0", "multiprocessors": 132,
  //  "memory_total_bytes": ..., "memory_free_bytes": ...}]}
  nlohmann::json to_json() const;
  // Flat strings: cuda_built, cuda_status, cuda_driver, cuda_runtime, gpu_count, gpu0_name,
  // gpu0_compute_capability, gpu0_multiprocessors, gpu0_memory_total_bytes, gpu0_memory_free_bytes, ...
  std::map<std::string, std::string> to_map() const;
};

ComputeEnvironment query_compute_environment();

// Usable CUDA devices; 0 without the CUDA backend, a driver or a device (never throws). GPU tests
// skip when it is 0.
int cuda_device_count();

}  // namespace specmoe::core
