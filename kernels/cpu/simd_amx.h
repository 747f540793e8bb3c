// Internal: AMX-INT8 kernels over packed weights (kernels/cpu/matmul_packed_amx.cpp). Call only
// when usable_isa(Isa::Amx) == Isa::Amx (which also means the process holds the AMX tile state);
// the rest of the library dispatches through ops.h.
//
// They give the AVX2 and AVX-512 kernels' results bit for bit (quant_dot_ref's definition,
// kernels/cpu/packed.h): the tile unit computes the same exact int32 block sums, the float steps
// are the same. They serve batches of tokens (wide verification, prefill) from min_tokens(type) on;
// smaller batches and the one-token step keep the AVX-512 kernels.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu::amx {

// The batch size from which the AMX kernel of `type` is faster than the AVX-512 one, or 0 where
// `type` has none (every integer packed type has one: packs_integer).
int64_t min_tokens(DType type);
// As avx2::matmul_packed_rows, for a type with an AMX kernel, with the same results bit for bit.
void matmul_packed_rows(DType type, const uint8_t* groups, int64_t n_in, const uint8_t* acts, size_t act_stride,
                        int64_t T, float* y, int64_t n_out, int64_t j0, int64_t j1);

}  // namespace specmoe::kernels::cpu::amx
