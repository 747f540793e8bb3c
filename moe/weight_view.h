// WeightView: a non-owning view of a weight tensor as GGUF stores it (pointer + dtype + shape,
// ne[0] the contiguous row length), which the model binds from GGUF tensor infos and the MoE
// layer reads row by row through kernels::cpu::dequantize_row.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/dtype.h"

namespace specmoe::moe {

struct WeightView {
  const void* data = nullptr;
  DType type = DType::F32;
  std::array<int64_t, 3> ne = {0, 1, 1};  // GGUF order: ne[0] contiguous; unused dims are 1
  std::string name;                       // tensor name for error messages (may be empty)

  bool empty() const { return data == nullptr; }
  int64_t rows() const { return ne[1] * ne[2]; }
  size_t row_bytes() const { return dtype_row_bytes(type, ne[0]); }  // throws on a bad row length
  size_t nbytes() const { return row_bytes() * static_cast<size_t>(rows()); }
  // Row r of the flattened [ne[2] * ne[1], ne[0]] matrix.
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes();
  }
};

}  // namespace specmoe::moe
