// The CUDA backend (core/backend_cuda.cpp), in builds with kernels/cuda (SPECMOE_HAVE_CUDA,
// defined by the specmoe_kernels_cuda target). Per-device code elsewhere (files named *_cuda.cpp)
// reaches the stream its rows are ordered on through cuda_context().
#pragma once
#ifdef SPECMOE_HAVE_CUDA
#include <memory>

#include "core/backend.h"

namespace specmoe::kernels::cuda {
class Context;
}  // namespace specmoe::kernels::cuda

namespace specmoe::core {

// The backend of CUDA device `device`: its own stream, cuBLAS handle and scratch. Throws
// Error(Runtime) naming the device when it is absent.
std::shared_ptr<Backend> make_cuda_backend(int device);

// The CUDA context (device, stream) a CUDA backend queues its work on; Error(InvalidArgument)
// for a backend of another device kind.
kernels::cuda::Context& cuda_context(Backend& backend);

}  // namespace specmoe::core
#endif
