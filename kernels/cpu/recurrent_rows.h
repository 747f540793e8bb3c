// Row kernels of the recurrent layers' state updates, shared by the DeltaNet and Mamba-2 ops
// (kernels/cpu/delta_net.cpp, mamba2.cpp): the AVX2 forms (recurrent_avx2.cpp), used where
// best_isa() is Avx2 or above; the scalar reference loops stay in the ops' files.
#pragma once
#include <cstdint>

namespace specmoe::kernels::cpu::avx2 {

// One DeltaNet value head's step over its [S, S] state (kernels/op_params.h DeltaNetParams): m_out
// = m_in * decay (m_in null: zeros), then per row j d = (v_j - row . k) * beta, row += d k,
// o_j = (row . q) * scale. m_in and m_out do not overlap.
void delta_net_head_step(const float* m_in, float* m_out, const float* q, const float* k, const float* v, int S,
                         float decay, float beta, float scale, float* o);
// One Mamba-2 state row of N: dst = src * dA + B * x_dt (src null: zeros); returns dst . C.
float mamba2_row_step(const float* src, float* dst, const float* B, const float* C, int64_t N, float dA, float x_dt);

}  // namespace specmoe::kernels::cpu::avx2
