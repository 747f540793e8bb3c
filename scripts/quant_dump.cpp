// Command-line access to kernels/cpu's block formats, for checks against other implementations
// (scripts/check-quants-gguf-py.py). Not part of the build or of ctest.
//   quant_dump dequant TYPE N < blocks > floats     (N elements; raw little-endian bytes)
//   quant_dump quant TYPE N < floats > blocks
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

int main(int argc, char** argv) {
  using namespace specmoe;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s dequant|quant TYPE N\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const auto type = dtype_from_name(argv[2]);
  const long long n = std::stoll(argv[3]);
  if (!type || n < 0 || (mode != "dequant" && mode != "quant")) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const size_t bytes = dtype_row_bytes(*type, n);
  std::vector<uint8_t> q(bytes);
  std::vector<float> f(static_cast<size_t>(n));
  if (mode == "dequant") {
    if (std::fread(q.data(), 1, bytes, stdin) != bytes) return 1;
    kernels::cpu::dequantize_row(*type, q.data(), f.data(), n);
    return std::fwrite(f.data(), 4, f.size(), stdout) == f.size() ? 0 : 1;
  }
  if (std::fread(f.data(), 4, f.size(), stdin) != f.size()) return 1;
  kernels::cpu::quantize_row(*type, f.data(), q.data(), n);
  return std::fwrite(q.data(), 1, bytes, stdout) == bytes ? 0 : 1;
}
