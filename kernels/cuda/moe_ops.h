// Host launchers of the mixture-of-experts ops on the GPU (kernels/cuda/moe.cu): softmax top-k
// routing and sigmoid or softmax + bias + group-limited routing (DeepSeek-V3, V2), the Switch capacity limit,
// grouping the (token, slot) assignments by expert, gathering the inputs in that order and the
// weighted combine. The expert FFNs themselves are plain matmul calls (ops.h) on slices of
// the stacked expert tensors, one per active expert, made by the caller (core/backend_cuda.cpp).
// Conventions as in ops.h: device pointers, work queued on ctx.stream(), host-side argument checks
// throwing Error(InvalidArgument). Semantics mirror moe::MoELayer, moe::SoftmaxTopKRouter,
// moe::GroupRouter and moe::apply_capacity. A dropped assignment has expert id -1
// (moe::Routing::kDropped) and weight 0.
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

// The options of moe::GroupRouterOptions, with the bias on the device.
struct GroupRouterParams {
  int n_group = 1;              // experts form n_group contiguous groups of E / n_group
  int topk_group = 1;           // groups kept per token
  bool normalize = true;        // divide the k weights by their sum
  float scale = 1.0f;           // routed_scaling_factor
  const float* bias = nullptr;  // device [E] selection-only bias (exp_probs_b); null = zeros
  bool softmax = false;         // scores: softmax over the E logits (DeepSeek-V2) instead of sigmoid (V3)
};

// Score + bias + group-limited top-k routing (moe/group_router.h; DeepSeek-V3 with sigmoid
// scores, DeepSeek-V2 with softmax), one block per token: s = moe::gate_scores (sigmoid: s_e =
// float(1 / (1 + exp(-double(l_e)))); softmax: float(exp(double(l_e) - m) / sum) with the double
// sum in index order), b_e = s_e + bias_e (float); when n_group > 1, a group's score is the float
// sum of its two best b (one when groups have one expert), the best topk_group groups stay
// eligible; experts[t, :] = the k eligible experts with the largest b in descending order; every
// ranking as moe::top_k_indices (equal values: lowest index first; NaN below every number).
// weights[t, j] = s_e / (sum_j s_e + 1e-20) in double when normalize (else s_e), times scale,
// rounded once to float, as the CPU router. logits: [T, E]; experts, weights: [T, k]. Requires
// E % n_group == 0, 1 <= topk_group <= n_group, 1 <= k <= topk_group * E / n_group and E <= 2048
// (shared memory: 14 E bytes at most).
void moe_group_topk(Context& ctx, const float* logits, int64_t T, int E, int k, const GroupRouterParams& params,
                    int32_t* experts, float* weights);

// Switch capacity with token dropping (moe::apply_capacity, Fedus et al. 2021): assignments are
// taken in token order and within a token in slot order; an expert keeps its first `capacity`
// assignments, later ones become experts[a] = -1 with weights[a] = 0 (kept weights are not
// renormalised). In place on experts, weights: [T, k]; entries already -1 stay -1 and use no
// capacity. capacity >= 0 (moe::expert_capacity). One thread per expert scans the assignments in
// order, reading a copy of the ids in the context's CubTemp scratch: exact, and cheap for the
// small T of decoding.
void moe_apply_capacity(Context& ctx, int32_t* experts, float* weights, int64_t T, int k, int E,
                        int64_t capacity);

// Groups n assignments (a = t * k + j; experts[a] in [0, E), or -1 = dropped) by expert:
//   counts[E]      kept assignments per expert (histogram with integer atomics: exact; -1 is
//                  not counted)
//   offsets[E + 1] exclusive prefix sum of counts (CUB inclusive scan into offsets + 1)
//   sorted[n]      the assignment indices a ordered by expert, stable in a (CUB radix sort of the
//                  (expert, a) pairs over ceil(log2(E + 1)) bits), so an expert's tokens stay in
//                  token order as in moe::MoELayer::dispatch; dropped assignments (-1: every
//                  sorted bit set, above every expert) come last, at positions >= offsets[E].
// Temporaries live in the context's CubTemp scratch.
void moe_group_by_expert(Context& ctx, const int32_t* experts, int64_t n, int E, int32_t* counts, int32_t* offsets,
                         int32_t* sorted);

// For p < n: xs[p, :] = x[sorted[p] / k, :] (d floats) and slot_pos[sorted[p]] = p.
// x: [T, d]; xs: [n, d]; slot_pos: [n] (n = T * k).
// experts ([n], optional): an assignment a with experts[a] < 0 (dropped by the capacity limit) is
// not copied and gets slot_pos[a] = -1.
// scale ([n], optional; llama4's weight_inputs): xs[p, :] is multiplied by scale[sorted[p]], the
// assignment's routing weight.
void moe_gather(Context& ctx, const float* x, int64_t d, const int32_t* sorted, int64_t n, int k, float* xs,
                int32_t* slot_pos, const int32_t* experts = nullptr, const float* scale = nullptr);

// The combine, added into the residual stream, per token in a fixed order (no float atomics):
//   o = 0; for j = 0..k-1 with slot_pos[t * k + j] >= 0 (a dropped slot, -1, adds nothing):
//     o += weights[t, j] * y[slot_pos[t * k + j], :];
//   if shared: o += g_t * shared[t, :], g_t = 1 / (1 + exp(-shared_gate[t])) when shared_gate is
//   given (Qwen-MoE), else 1;
//   x[t, :] += o.
// x: [T, d]; y: [T * k, d] in sorted order; slot_pos, weights: [T, k] (weights null: every weight
// 1, llama4's experts having read weighted inputs); shared: [T, d] or null; shared_gate: [T] or null.
void moe_combine(Context& ctx, float* x, int64_t T, int64_t d, int k, const float* y, const int32_t* slot_pos,
                 const float* weights, const float* shared, const float* shared_gate);

}  // namespace specmoe::kernels::cuda
