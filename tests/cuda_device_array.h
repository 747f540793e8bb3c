// Test helper: a device copy of a host vector, and back (kernels/cuda/device.h buffers).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cuda/device.h"

namespace specmoe::testing {

// A device copy of a host vector, and back.
template <typename T>
struct DeviceArray {
  using Context = kernels::cuda::Context;
  using DeviceBuffer = kernels::cuda::DeviceBuffer;

  DeviceBuffer buf;
  size_t n = 0;
  DeviceArray(Context& ctx, const std::vector<T>& host)
      : buf(std::max<size_t>(host.size(), 1) * sizeof(T), ctx.device()), n(host.size()) {
    ctx.upload(buf.data(), host.data(), n * sizeof(T));
  }
  DeviceArray(Context& ctx, size_t count) : buf(std::max<size_t>(count, 1) * sizeof(T), ctx.device()), n(count) {
    ctx.zero(buf.data(), n * sizeof(T));
  }
  T* ptr() const { return buf.as<T>(); }
  std::vector<T> get(Context& ctx) const {
    std::vector<T> out(n);
    ctx.download(out.data(), buf.data(), n * sizeof(T));
    return out;
  }
};

}  // namespace specmoe::testing
