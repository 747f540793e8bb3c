// The one checking macro for CUDA runtime, cuBLAS and kernel-launch errors. A failing call throws
// specmoe::Error(Runtime) naming the statement, file:line and the library's error name and text,
// e.g. "CUDA error: cudaMalloc(&ptr, bytes) at kernels/cuda/device.cpp:88: cudaErrorMemoryAllocation
// (out of memory)". Internal to kernels/cuda and tests: it includes the CUDA headers.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace specmoe::kernels::cuda {

// Throws specmoe::Error(Runtime) with the message above. Defined in check.cpp (plain C++).
[[noreturn]] void throw_cuda_error(const char* library, const char* statement, const char* file, int line,
                                   const char* error_name, const char* error_text);

inline void check_status(cudaError_t status, const char* statement, const char* file, int line) {
  if (status != cudaSuccess) {
    throw_cuda_error("CUDA", statement, file, line, cudaGetErrorName(status), cudaGetErrorString(status));
  }
}

inline void check_status(cublasStatus_t status, const char* statement, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw_cuda_error("cuBLAS", statement, file, line, cublasGetStatusName(status),
                     cublasGetStatusString(status));
  }
}

}  // namespace specmoe::kernels::cuda

// Checks a cudaError_t or a cublasStatus_t (overloaded), throwing specmoe::Error on failure.
#define SPECMOE_CUDA_CHECK(statement) \
  ::specmoe::kernels::cuda::check_status((statement), #statement, __FILE__, __LINE__)
// Same macro; the separate name reads better next to cuBLAS calls.
#define SPECMOE_CUBLAS_CHECK(statement) SPECMOE_CUDA_CHECK(statement)
// After a <<<...>>> launch: reports a bad launch configuration (and any earlier asynchronous error).
#define SPECMOE_CUDA_CHECK_LAUNCH() SPECMOE_CUDA_CHECK(cudaGetLastError())
