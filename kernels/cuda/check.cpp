// Formats and throws the error of a failed CUDA / cuBLAS call (see check.h).
#include "kernels/cuda/check.h"

#include <string>

#include "base/error.h"

namespace specmoe::kernels::cuda {

void throw_cuda_error(const char* library, const char* statement, const char* file, int line,
                      const char* error_name, const char* error_text) {
  // Plain string concatenation: keeps this library free of fmt's compiled symbols.
  std::string message = std::string(library) + " error: " + statement + " at " + file + ":" +
                        std::to_string(line) + ": " + (error_name ? error_name : "?") + " (" +
                        (error_text ? error_text : "?") + ")";
  throw Error(ErrorKind::Runtime, message);
}

}  // namespace specmoe::kernels::cuda
