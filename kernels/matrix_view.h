// MatrixView: the one weight-matrix view of every backend. A matrix in GGUF layout: ne = {n_in,
// n_out}; row j (n_in elements of `type`, the GGUF block layout for quantized types) starts at
// data + j * row_bytes. `data` is host memory (usually the file's memory map) for the CPU ops and
// device memory for the CUDA ops; the view itself does not say which: the backend that holds it
// does. Stacked expert tensors (GGUF ne {n_in, n_out, n_expert}) are one view of n_out * n_expert
// rows, and rows(r0, n) selects an expert's slice. Plain C++17 (the .cu files include it).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace specmoe::kernels {

struct MatrixView {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  // CPU only: the same rows interleaved in groups of 16 for the integer matmul kernels
  // (kernels/cpu/packed.h), group g (rows 16g .. 16g + 15) at packed + g * 16 * (the bytes of one
  // unpadded row); null when the view carries no packed copy. Device backends ignore it.
  const void* packed = nullptr;

  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t j) const { return static_cast<const uint8_t*>(data) + j * row_bytes; }
  size_t bytes() const { return row_bytes * static_cast<size_t>(n_out); }
  // Rows [r0, r0 + n) as a matrix of n outputs (an expert's slice of a stacked tensor).
  // A slice that starts inside a group of 16 carries no packed copy.
  MatrixView rows(int64_t r0, int64_t n) const {
    MatrixView s = *this;
    s.data = row(r0);
    s.n_out = n;
    s.packed = packed != nullptr && r0 % 16 == 0
                   ? static_cast<const uint8_t*>(packed) + r0 * dtype_row_bytes(type, n_in)
                   : nullptr;
    return s;
  }
  // Builds a view, checking n_in against the type's block size (throws Error(Format)).
  static MatrixView make(DType type, const void* data, int64_t n_in, int64_t n_out) {
    MatrixView v;
    v.type = type;
    v.data = data;
    v.n_in = n_in;
    v.n_out = n_out;
    v.row_bytes = dtype_row_bytes(type, n_in);  // throws when n_in is not a multiple of the block
    return v;
  }
};

}  // namespace specmoe::kernels
