// Host memory, the views over a backend's rows, and the choice of backend (see backend.h).
#include "core/backend.h"

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#ifdef SPECMOE_HAVE_CUDA
#include "core/backend_cuda.h"
#endif

namespace specmoe::core {

std::shared_ptr<Backend> make_cpu_backend(int n_threads, HugePages huge_pages);  // core/backend_cpu.cpp

namespace {

class HostMemory final : public Memory {
 public:
  Device device() const override { return Device{}; }
  std::shared_ptr<void> allocate(size_t bytes) override { return allocate_host(bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                 int64_t rows) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(dst) + r * dst_pitch, static_cast<const uint8_t*>(src) + r * src_pitch,
                  row_bytes);
  }
  void download(void* host_dst, const void* src, size_t bytes) override { std::memcpy(host_dst, src, bytes); }
  void upload(void* dst, const void* host_src, size_t bytes) override { std::memcpy(dst, host_src, bytes); }
  void synchronize() override {}

  // 64-byte aligned (a cache line, and what AVX-512 loads like), zero-filled.
  static std::shared_ptr<void> allocate_host(size_t bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr)
      throw_error(ErrorKind::Runtime, "host memory: allocating {:.1f} MiB failed", static_cast<double>(bytes) / (1 << 20));
    std::memset(p, 0, rounded);
    return std::shared_ptr<void>(p, std::free);
  }
};

}  // namespace

std::shared_ptr<void> allocate_host_memory(size_t bytes) { return HostMemory::allocate_host(bytes); }

std::shared_ptr<Memory> host_memory() {
  static HostMemory memory;  // stateless
  return std::shared_ptr<Memory>(std::shared_ptr<Memory>{}, &memory);
}

Device Rows::where() const { return backend ? backend->device() : Device{}; }

void Rows::to_host(std::vector<float>& out) const {
  out.resize(static_cast<size_t>(rows * cols));
  if (!out.empty()) backend->download(out.data(), data, out.size() * sizeof(float));
}

std::vector<float> Rows::to_host() const {
  std::vector<float> out;
  to_host(out);
  return out;
}

std::vector<int32_t> Rows::argmax() const {
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  if (rows > 0) backend->argmax_rows(data, rows, cols, ids.data());
  return ids;
}

float* RowBuffer::reserve(int64_t rows, int64_t cols) {
  if (backend_ == nullptr) throw_error(ErrorKind::InvalidArgument, "row buffer: no backend");
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * sizeof(float);
  if (bytes > bytes_) {
    backend_->synchronize();  // queued work may still read the old rows
    mem_ = backend_->allocate(bytes);
    bytes_ = bytes;
  }
  return static_cast<float*>(mem_.get());
}

std::shared_ptr<Backend> make_backend(const Device& device, int n_threads, HugePages huge_pages) {
  if (device.is_cpu()) return make_cpu_backend(n_threads, huge_pages);
#ifdef SPECMOE_HAVE_CUDA
  return make_cuda_backend(device.index);
#else
  throw_error(ErrorKind::Unsupported, "device {}: this build has no CUDA backend (rebuild with -DSPECMOE_CUDA=ON)",
              device.name());
#endif
}

}  // namespace specmoe::core
