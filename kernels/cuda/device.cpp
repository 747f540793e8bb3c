// Device query, DeviceBuffer, DeviceGuard and Context (see device.h).
#include "kernels/cuda/device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <utility>

#include "base/error.h"
#include "kernels/cuda/check.h"

namespace specmoe::kernels::cuda {

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

CudaInfo query_cuda() {
  CudaInfo info;
  cudaDriverGetVersion(&info.driver_version);  // 0 when no driver: not an error here
  cudaRuntimeGetVersion(&info.runtime_version);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    info.status = std::string("no device: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    return info;
  }
  if (count == 0) {
    info.status = "no device: cudaGetDeviceCount returned 0";
    return info;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    SPECMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    DeviceInfo dev;
    dev.index = d;
    dev.name = prop.name;
    dev.total_bytes = prop.totalGlobalMem;
    dev.cc_major = prop.major;
    dev.cc_minor = prop.minor;
    dev.multiprocessors = prop.multiProcessorCount;
    {
      DeviceGuard guard(d);
      size_t free_bytes = 0, total_bytes = 0;
      SPECMOE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      dev.free_bytes = free_bytes;
    }
    info.devices.push_back(std::move(dev));
  }
  info.status = "ok";
  return info;
}

std::string describe(const CudaInfo& info) {
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  std::string versions = "driver " + version(info.driver_version) + " runtime " + version(info.runtime_version);
  if (!info.available()) return info.status + " (" + versions + ")";
  std::string out;
  for (const DeviceInfo& d : info.devices) {
    char line[256];
    std::snprintf(line, sizeof line, "cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB) %s\n", d.index, d.name.c_str(),
                  d.cc_major, d.cc_minor, d.multiprocessors,
                  static_cast<double>(d.total_bytes) / (1024.0 * 1024.0 * 1024.0), versions.c_str());
    out += line;
  }
  return out;
}

// --- DeviceGuard ---------------------------------------------------------------------------------

DeviceGuard::DeviceGuard(int device) {
  SPECMOE_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    SPECMOE_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);  // destructor: nothing sensible to do on failure
}

// --- DeviceBuffer --------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  SPECMOE_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (data_ != nullptr) {
    // cudaFree frees on the device that owns the pointer whatever the current device is.
    cudaFree(data_);
    data_ = nullptr;
  }
  bytes_ = 0;
}

// --- Context -------------------------------------------------------------------------------------

Context::Context(int device) : device_(device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    throw Error(ErrorKind::Runtime, "CUDA device " + std::to_string(device) + " requested but " +
                                        std::to_string(count) + " device(s) are present");
  }
  DeviceGuard guard(device);
  // A blocking stream (not cudaStreamNonBlocking): it also orders against legacy default-stream
  // calls such as plain cudaMemcpy made by code that does not know about this context.
  // The destructor does not run when the constructor throws: free what was made before throwing.
  cudaStream_t stream = nullptr;
  SPECMOE_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = cublasCreate(&handle);
  if (created != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    SPECMOE_CUBLAS_CHECK(created);
  }
  const cublasStatus_t bound = cublasSetStream(handle, stream);
  if (bound != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle);
    cudaStreamDestroy(stream);
    SPECMOE_CUBLAS_CHECK(bound);
  }
  stream_ = stream;
  blas_ = handle;
}

Context::~Context() {
  // Destructor: errors cannot be reported; free what exists, then restore the current device.
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (DeviceBuffer& b : scratch_) b.reset();
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (previous >= 0) cudaSetDevice(previous);
}

void Context::synchronize() const {
  DeviceGuard guard(device_);
  SPECMOE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Context::upload(void* device_dst, const void* host_src, size_t bytes) const {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  SPECMOE_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  SPECMOE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Context::download(void* host_dst, const void* device_src, size_t bytes) const {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  SPECMOE_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
  SPECMOE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Context::zero(void* device_dst, size_t bytes) const {
  if (bytes == 0) return;
  DeviceGuard guard(device_);
  SPECMOE_CUDA_CHECK(cudaMemsetAsync(device_dst, 0, bytes, stream_));
}

void* Context::scratch(Scratch slot, size_t bytes) {
  DeviceBuffer& buf = scratch_[static_cast<int>(slot)];
  if (buf.bytes() < bytes) {
    // Kernels queued earlier may still use the old region: wait for them before freeing it.
    synchronize();
    buf.reset();
    // Grow by 1.5x so a slowly rising size (a growing KV cache) does not reallocate every call.
    buf = DeviceBuffer(bytes + bytes / 2, device_);
  }
  return buf.data();
}

}  // namespace specmoe::kernels::cuda
