// Where data lives and where work runs: the host CPU or CUDA device N. Every folder may name a
// Device (a logits view, a draft's q rows, a KV cache say where they are); only the per-device
// implementations (core/backend_cuda.cpp, files named *_cuda.cpp) name CUDA's own types.
#pragma once
#include <string>

namespace specmoe {

struct Device {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int index = 0;             // cuda:N
  std::string name() const;  // "cpu", "cuda:0"
  bool is_cpu() const { return kind == Kind::Cpu; }
  bool operator==(const Device&) const = default;
};

// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws Error(InvalidArgument) naming the string.
Device parse_device(const std::string& text);

}  // namespace specmoe
