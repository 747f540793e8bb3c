// Host launchers of the mixture-of-experts ops on the GPU (kernels/cuda/moe.cu): softmax top-k
// routing, grouping the (token, slot) assignments by expert, gathering the inputs in that order
// and the weighted combine. The expert FFNs themselves are plain matmul calls (ops.h) on slices of
// the stacked expert tensors, one per active expert, made by the caller (core/cuda_model.cpp).
// Conventions as in ops.h: device pointers, work queued on ctx.stream(), host-side argument checks
// throwing Error(InvalidArgument). Semantics mirror moe::MoELayer / moe::SoftmaxTopKRouter.
#pragma once
#include <cstdint>

#include "kernels/cuda/device.h"

namespace specmoe::kernels::cuda {

// Softmax top-k routing (moe/softmax_router.h), one thread per token. logits: [T, E];
// experts, weights: [T, k], 1 <= k <= E.
// experts[t, :] = the indices of the k largest logits[t, :] in descending order; equal logits:
// lowest index first; NaN ranks below every number (moe::top_k_indices).
// weights[t, j] = exp(l_e - l_max) / sum, evaluated in double and rounded once to float, the sum
// over the k selected logits (renormalize: Mixtral) or over all E (raw: Qwen-MoE), exactly as
// moe::softmax_selected_weights.
void moe_softmax_topk(Context& ctx, const float* logits, int64_t T, int E, int k, bool renormalize,
                      int32_t* experts, float* weights);

// Groups n assignments (a = t * k + j; experts[a] in [0, E)) by expert:
//   counts[E]      assignments per expert (histogram with integer atomics: exact)
//   offsets[E + 1] exclusive prefix sum of counts (CUB inclusive scan into offsets + 1)
//   sorted[n]      the assignment indices a ordered by expert, stable in a (CUB radix sort of the
//                  (expert, a) pairs over the bits of E), so an expert's tokens stay in token order
//                  as in moe::MoELayer::dispatch.
// Temporaries live in the context's CubTemp scratch.
void moe_group_by_expert(Context& ctx, const int32_t* experts, int64_t n, int E, int32_t* counts, int32_t* offsets,
                         int32_t* sorted);

// For p < n: xs[p, :] = x[sorted[p] / k, :] (d floats) and slot_pos[sorted[p]] = p.
// x: [T, d]; xs: [n, d]; slot_pos: [n] (n = T * k).
void moe_gather(Context& ctx, const float* x, int64_t d, const int32_t* sorted, int64_t n, int k, float* xs,
                int32_t* slot_pos);

// The combine, added into the residual stream, per token in a fixed order (no float atomics):
//   o = 0; for j = 0..k-1: o += weights[t, j] * y[slot_pos[t * k + j], :];
//   if shared: o += g_t * shared[t, :], g_t = 1 / (1 + exp(-shared_gate[t])) when shared_gate is
//   given (Qwen-MoE), else 1;
//   x[t, :] += o.
// x: [T, d]; y: [T * k, d] in sorted order; slot_pos, weights: [T, k]; shared: [T, d] or null;
// shared_gate: [T] or null.
void moe_combine(Context& ctx, float* x, int64_t T, int64_t d, int k, const float* y, const int32_t* slot_pos,
                 const float* weights, const float* shared, const float* shared_gate);

}  // namespace specmoe::kernels::cuda
