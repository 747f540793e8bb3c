// CUDA devices without global state: a device query that reports "no device" instead of failing,
// an RAII device buffer (cudaMalloc, never managed memory), and Context, the per-instance state a
// model needs on the GPU (its device, stream, cuBLAS handle and scratch memory). A draft and a target
// model each own a Context, so they never overwrite each other's state.
// Plain C++: usable from .cpp files compiled without nvcc.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct CUstream_st;    // = cudaStream_t's pointee
struct cublasContext;  // = cublasHandle_t's pointee

namespace specmoe::kernels::cuda {

using Stream = CUstream_st*;
using BlasHandle = cublasContext*;

struct DeviceInfo {
  int index = 0;
  std::string name;           // "NVIDIA H100 80GB HBM3"
  size_t total_bytes = 0;     // global memory
  size_t free_bytes = 0;      // free global memory at query time
  int cc_major = 0, cc_minor = 0;  // compute capability (9.0 = Hopper)
  int multiprocessors = 0;
};

struct CudaInfo {
  int driver_version = 0;   // 13000 = CUDA 13.0; 0 when no driver is installed
  int runtime_version = 0;  // the runtime this binary was linked with
  std::vector<DeviceInfo> devices;
  std::string status;       // "ok", or why there is no usable device ("no device: ...")
  bool available() const { return !devices.empty(); }
};

// Number of usable CUDA devices; 0 (never an exception) when there is no driver or no device.
int cuda_device_count() noexcept;
// Full query; never throws for a missing driver/device (status says why), only for broken ones.
CudaInfo query_cuda();
// One line per device, e.g. "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB) driver 13.0 runtime 13.0".
std::string describe(const CudaInfo& info);

// Owns `bytes` bytes of global memory on one device (cudaMalloc). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, int device);  // throws Error(Runtime) when allocation fails
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  void reset();  // frees the memory (synchronizes the device, as cudaFree does)

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

class Context {
 public:
  // Creates a stream and a cuBLAS handle on `device`. Throws Error(Runtime) when the device is
  // missing or the creation fails.
  explicit Context(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  Stream stream() const { return stream_; }
  BlasHandle blas() const { return blas_; }

  // Waits until all work queued on this context's stream has finished.
  void synchronize() const;

  // Copies between host and device memory, ordered after the work already queued on the stream,
  // and waits for the copy (so the host data may be reused / read at once).
  void upload(void* device_dst, const void* host_src, size_t bytes) const;
  void download(void* host_dst, const void* device_src, size_t bytes) const;
  // Fills device memory with zero bytes, asynchronously on the stream.
  void zero(void* device_dst, size_t bytes) const;

  // Scratch memory owned by this context for the ops' temporaries; one region per slot, grown on
  // demand and reused by later calls (safe because every op of a context runs on its one stream).
  // Growing a slot frees its old region, which synchronizes the device.
  enum class Scratch { Matmul = 0, Attention = 1, Sampling = 2, CubTemp = 3 };
  void* scratch(Scratch slot, size_t bytes);

 private:
  int device_ = 0;
  Stream stream_ = nullptr;
  BlasHandle blas_ = nullptr;
  DeviceBuffer scratch_[4];
};

// Makes `device` current for this host thread while in scope and restores the previous one
// (the runtime's current device is per-thread state; ops set it from their Context).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace specmoe::kernels::cuda
