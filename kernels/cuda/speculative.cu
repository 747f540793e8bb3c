// Draws on the device with host-drawn uniforms: a token from a distribution row, a drafter's
// draw (the row moved into the target's vocabulary, its confidence, the token), and the lossless
// speculative verification rule (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2) and its
// tree form (Miao et al. 2024; Jeon et al. 2024) over target and draft distributions that stay on
// the GPU. The uniforms come from the host's
// core::Rng and are consumed in the order the CPU code consumes them (core/sampling.cpp,
// core/backend_cpu.cpp, verify/speculative_verifier.cpp), so the same seed gives the same draws
// on both; the inverse CDF sums in double as the CPU does, in a block-scan order instead of id
// order, so a token can differ only where a uniform falls within rounding of a boundary.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <climits>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kDrawThreads = 512;
using DrawScan = cub::BlockScan<double, kDrawThreads>;

// Inverse CDF over weights w(j) >= 0 (j < n) in id order: the first j whose cumulative weight
// exceeds u * total, or the last positive j when rounding leaves the target past the sum; -1 when
// the total is not positive. Each thread owns a contiguous chunk; a block scan of the chunk sums
// (in double) finds the chunk holding u * total and its thread walks it. Every thread of the
// block calls it and gets the result.
template <class W>
__device__ int32_t block_draw(typename DrawScan::TempStorage& storage, const W& w, int64_t n, double u) {
  __shared__ int s_token, s_last;
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = min(n, static_cast<int64_t>(threadIdx.x) * chunk);
  const int64_t end = min(n, begin + chunk);
  double local = 0.0;
  int64_t last = -1;
  for (int64_t j = begin; j < end; ++j) {
    const double v = w(j);
    if (v > 0.0) {
      local += v;
      last = j;
    }
  }
  double before = 0.0, total = 0.0;
  __syncthreads();  // storage may still be in use by a previous call
  DrawScan(storage).ExclusiveSum(local, before, total);  // total reaches every thread
  if (!(total > 0.0)) return -1;
  if (threadIdx.x == 0) {
    s_token = INT_MAX;
    s_last = -1;
  }
  __syncthreads();
  if (last >= 0) atomicMax(&s_last, static_cast<int>(last));
  const double target = u * total;
  if (local > 0.0 && before <= target && target < before + local) {
    double cum = before;
    int64_t found = last;  // rounding left the crossing past this chunk: its last positive token
    for (int64_t j = begin; j < end; ++j) {
      const double v = w(j);
      if (v <= 0.0) continue;
      cum += v;
      if (cum > target) {
        found = j;
        break;
      }
    }
    atomicMin(&s_token, static_cast<int>(found));
  }
  __syncthreads();
  const int token = s_token != INT_MAX ? s_token : s_last;  // no chunk claimed u * total: the last positive token
  __syncthreads();  // s_token is reused by a later call
  return token;
}

// Weight of token j: p, or the residual max(0, p - q) after a rejection (q one-hot on the
// rejected token x when q is null). Double, as the CPU verifier.
struct DrawWeights {
  const float* p;
  const float* q;
  int32_t x;
  bool residual;
  __device__ double operator()(int64_t j) const {
    if (!residual) return static_cast<double>(p[j]);
    const double qj = q != nullptr ? static_cast<double>(q[j]) : (j == x ? 1.0 : 0.0);
    return fmax(0.0, static_cast<double>(p[j]) - qj);
  }
};

__global__ void __launch_bounds__(kDrawThreads) sample_kernel(const float* probs, int64_t n, double u, int32_t* token) {
  __shared__ typename DrawScan::TempStorage storage;
  const int32_t t = block_draw(storage, DrawWeights{probs, nullptr, -1, false}, n, u);
  if (threadIdx.x == 0) *token = t;
}

// One block. Thread 0 runs the g sequential accept tests (g is small), each uncertain one taking
// the next uniform; then the whole block draws the emitted token with the next uniform(s).
// result: n_accepted, emitted token (-1: p has no mass), uniforms consumed.
__global__ void __launch_bounds__(kDrawThreads)
    speculative_verify_kernel(const float* p, const float* q, const int32_t* draft, int g, int64_t n,
                              const double* uniforms, int32_t* result) {
  __shared__ typename DrawScan::TempStorage storage;
  __shared__ int s_accepted, s_used;
  if (threadIdx.x == 0) {
    int accepted = g, used = 0;
    for (int i = 0; i < g; ++i) {
      const int32_t x = draft[i];
      const double px = p[static_cast<int64_t>(i) * n + x];
      const double qx = q != nullptr ? static_cast<double>(q[static_cast<int64_t>(i) * n + x]) : 1.0;
      // q(x) = 0 cannot happen for a token drawn from q: accept if the target allows it.
      const double ratio = qx > 0.0 ? px / qx : (px > 0.0 ? 1.0 : 0.0);
      // Certain outcomes draw nothing, so temperature 0 is exactly the greedy rule.
      bool accept;
      if (ratio >= 1.0) accept = true;
      else if (ratio <= 0.0) accept = false;
      else accept = uniforms[used++] < ratio;
      if (!accept) {
        accepted = i;
        break;
      }
    }
    s_accepted = accepted;
    s_used = used;
  }
  __syncthreads();
  const int r = s_accepted;
  int used = s_used;
  DrawWeights w{p + static_cast<int64_t>(r) * n, (r < g && q != nullptr) ? q + static_cast<int64_t>(r) * n : nullptr,
                r < g ? draft[r] : -1, r < g};
  int32_t token = block_draw(storage, w, n, uniforms[used++]);
  if (token < 0 && w.residual) {
    // An empty residual means p <= q everywhere, i.e. p == q up to rounding: draw from p itself.
    w.residual = false;
    token = block_draw(storage, w, n, uniforms[used++]);
  }
  if (threadIdx.x == 0) {
    result[0] = r;
    result[1] = token;
    result[2] = used;
  }
}

// Weight of token j in a residual row kept in double (the tree rule's current distribution).
struct ResidualWeights {
  const double* r;
  __device__ double operator()(int64_t j) const { return r[j]; }
};

constexpr int kMaxTried = 64;  // children of one node drawn without replacement (TreeSpec's width limit)

// The tree rule of verify::SpeculativeVerifier (multi-draft speculative sampling: SpecInfer, Miao
// et al. 2024; recursive rejection sampling, Jeon et al. 2024) in one block. Thread 0 runs the
// sequential accept tests, each uncertain one taking the next uniform; the block computes each
// rejection's residual max(0, p - q_j) into `residual` (double, the current node's distribution
// once a child was rejected) and the final draw. result: path length, emitted token, uniforms
// consumed, then the path's nodes.
__global__ void __launch_bounds__(kDrawThreads)
    speculative_tree_verify_kernel(const float* p, const float* q, const int32_t* q_rows, const int32_t* tokens,
                                   const int32_t* child_start, const int32_t* child_list, int n_nodes,
                                   bool without_replacement, int64_t n, const double* uniforms, double* residual,
                                   int32_t* result) {
  __shared__ typename DrawScan::TempStorage storage;
  using Reduce = cub::BlockReduce<double, kDrawThreads>;
  __shared__ typename Reduce::TempStorage rstorage;
  __shared__ int s_node, s_used, s_len, s_accept, s_have, s_n_tried;
  __shared__ double s_z, s_q_left;
  __shared__ int32_t s_tried[kMaxTried];
  if (threadIdx.x == 0) {
    s_node = -1;
    s_used = 0;
    s_len = 0;
  }
  __syncthreads();
  for (;;) {
    const int node = s_node;
    const float* p_row = p + static_cast<int64_t>(node + 1) * n;
    if (threadIdx.x == 0) {
      s_have = 0;
      s_z = 1.0;
      s_q_left = -1.0;
      s_n_tried = 0;
    }
    __syncthreads();
    const int b = child_start[node + 1], e = child_start[node + 2];
    int accepted = -1;
    for (int ci = b; ci < e; ++ci) {
      const int c = child_list[ci];
      const int32_t x = tokens[c];
      const float* q_row = q != nullptr ? q + static_cast<int64_t>(q_rows[c]) * n : nullptr;
      if (q_row != nullptr && without_replacement && s_q_left < 0.0) {
        double part = 0.0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) part += static_cast<double>(q_row[j]);
        part = Reduce(rstorage).Sum(part);
        if (threadIdx.x == 0) s_q_left = part;
        __syncthreads();
      }
      const double q_scale = (q_row != nullptr && without_replacement) ? (s_q_left > 0.0 ? 1.0 / s_q_left : 0.0) : 1.0;
      const bool have = s_have != 0;
      const double z = s_z;
      const int n_tried = s_n_tried;
      auto q_j = [&](int64_t j) -> double {
        if (q_row == nullptr) return j == x ? 1.0 : 0.0;
        for (int t = 0; t < n_tried; ++t)
          if (s_tried[t] == j) return 0.0;
        return static_cast<double>(q_row[j]) * q_scale;
      };
      auto p_cur = [&](int64_t j) -> double { return have ? residual[j] / z : static_cast<double>(p_row[j]); };
      if (threadIdx.x == 0) {
        const double px = p_cur(x), qx = q_j(x);
        // q(x) = 0 cannot happen for a token drawn from q: accept if the target allows it.
        const double ratio = qx > 0.0 ? px / qx : (px > 0.0 ? 1.0 : 0.0);
        bool accept;
        if (ratio >= 1.0) accept = true;
        else if (ratio <= 0.0) accept = false;
        else accept = uniforms[s_used++] < ratio;
        s_accept = accept ? 1 : 0;
      }
      __syncthreads();
      if (s_accept) {
        accepted = c;
        break;
      }
      // Rejected: p <- max(0, p - q_j) (normalised by its sum when read).
      double part = 0.0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const double v = fmax(0.0, p_cur(j) - q_j(j));
        residual[j] = v;
        part += v;
      }
      part = Reduce(rstorage).Sum(part);
      if (threadIdx.x == 0) {
        // An empty residual means p <= q everywhere, i.e. p == q up to rounding: fall back to p.
        s_have = part > 0.0 ? 1 : 0;
        s_z = part > 0.0 ? part : 1.0;
        if (q_row != nullptr && without_replacement && s_n_tried < kMaxTried) {
          s_q_left -= static_cast<double>(q_row[x]);
          s_tried[s_n_tried++] = x;
        }
      }
      __syncthreads();
    }
    if (accepted >= 0) {
      if (threadIdx.x == 0) {
        result[3 + s_len++] = accepted;
        s_node = accepted;
      }
      __syncthreads();
      continue;
    }
    int used = s_used;
    int32_t token = -1;
    if (s_have) token = block_draw(storage, ResidualWeights{residual}, n, uniforms[used++]);
    if (token < 0) token = block_draw(storage, DrawWeights{p_row, nullptr, -1, false}, n, uniforms[used++]);
    if (threadIdx.x == 0) {
      result[0] = s_len;
      result[1] = token;
      result[2] = used;
    }
    return;
  }
}

// (value, index) for a block argmax: larger value first, lower index among equal values, NaN never
// wins (index -1 = nothing yet).
struct ArgMax {
  float v;
  int i;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
  }
};

// The drafter's draw (core::Backend::draw): q = probs moved into n_out ids; confidence; token.
// result: token (int32 bits) | confidence (float bits).
__global__ void __launch_bounds__(kDrawThreads)
    draft_draw_kernel(const float* probs, int64_t n, float* q, int64_t n_out, bool greedy, double u,
                      const float* confidence_logits, int32_t* result) {
  __shared__ typename DrawScan::TempStorage storage;
  using Reduce = cub::BlockReduce<double, kDrawThreads>;
  using ReduceArg = cub::BlockReduce<ArgMax, kDrawThreads>;
  __shared__ typename Reduce::TempStorage rstorage;
  __shared__ typename ReduceArg::TempStorage astorage;
  __shared__ double s_sum;
  __shared__ float s_conf;
  __shared__ int s_arg;
  const int64_t m = min(n, n_out);
  float inv = 1.0f;
  if (n > n_out) {
    // Ids the target does not have are padding: renormalise over the target's ids.
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < n_out; j += blockDim.x) s += probs[j];
    s = Reduce(rstorage).Sum(s);
    if (threadIdx.x == 0) s_sum = s;
    __syncthreads();
    if (!(s_sum > 0.0)) {
      if (threadIdx.x == 0) result[0] = -1;
      return;
    }
    inv = static_cast<float>(1.0 / s_sum);
  }
  for (int64_t j = threadIdx.x; j < n_out; j += blockDim.x) q[j] = j < m ? (n > n_out ? probs[j] * inv : probs[j]) : 0.0f;
  __syncthreads();
  float confidence = 1.0f;
  if (confidence_logits != nullptr) {
    if (greedy) {  // q is one-hot: the plain softmax's top probability of the logits
      float mx = -INFINITY;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, confidence_logits[j]);
      mx = block_max(mx);
      double z = 0.0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) z += exp(static_cast<double>(confidence_logits[j] - mx));
      z = Reduce(rstorage).Sum(z);
      if (threadIdx.x == 0) s_conf = static_cast<float>(1.0 / z);
    } else {
      float mx = -INFINITY;
      for (int64_t j = threadIdx.x; j < n_out; j += blockDim.x) mx = fmaxf(mx, q[j]);
      mx = block_max(mx);
      if (threadIdx.x == 0) s_conf = mx;
    }
    __syncthreads();
    confidence = s_conf;
  }
  int32_t token;
  if (greedy) {
    ArgMax best{0.0f, -1};
    for (int64_t j = threadIdx.x; j < n_out; j += blockDim.x) {
      const float v = q[j];
      if (!isnan(v)) best = ArgMaxOp()(best, ArgMax{v, static_cast<int>(j)});
    }
    best = ReduceArg(astorage).Reduce(best, ArgMaxOp());
    if (threadIdx.x == 0) s_arg = best.i;
    __syncthreads();
    token = s_arg;
  } else {
    token = block_draw(storage, DrawWeights{q, nullptr, -1, false}, n_out, u);
  }
  if (threadIdx.x == 0) {
    result[0] = token;
    result[1] = __float_as_int(confidence);
  }
}

}  // namespace detail

void sample_from_probs(Context& ctx, const float* probs, int64_t n_vocab, double u, int32_t* token) {
  using namespace detail;
  const char* op = "sample_from_probs";
  require(n_vocab > 0 && n_vocab <= INT_MAX, op, "n_vocab = " + std::to_string(n_vocab) + " is outside [1, INT_MAX]");
  require(u >= 0.0 && u < 1.0, op, "u = " + std::to_string(u) + " is outside [0, 1)");
  require_ptr(probs, op, "probs");
  require_ptr(token, op, "token");
  DeviceGuard guard(ctx.device());
  sample_kernel<<<1, kDrawThreads, 0, stream_of(ctx)>>>(probs, n_vocab, u, token);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void speculative_verify(Context& ctx, const float* p, const float* q, const int32_t* draft_tokens, int g,
                        int64_t n_vocab, const double* uniforms, int32_t* result) {
  using namespace detail;
  const char* op = "speculative_verify";
  require(g >= 0, op, "g = " + std::to_string(g) + " is negative");
  require(n_vocab > 0 && n_vocab <= INT_MAX, op, "n_vocab = " + std::to_string(n_vocab) + " is outside [1, INT_MAX]");
  require_ptr(p, op, "p");
  require_ptr(uniforms, op, "uniforms");
  require_ptr(result, op, "result");
  if (g > 0) require_ptr(draft_tokens, op, "draft_tokens");
  DeviceGuard guard(ctx.device());
  speculative_verify_kernel<<<1, kDrawThreads, 0, stream_of(ctx)>>>(p, q, draft_tokens, g, n_vocab, uniforms, result);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void speculative_tree_verify(Context& ctx, const float* p, const float* q, const int32_t* q_rows,
                             const int32_t* tokens, const int32_t* child_start, const int32_t* child_list, int n_nodes,
                             bool without_replacement, int64_t n_vocab, const double* uniforms, double* residual,
                             int32_t* result) {
  using namespace detail;
  const char* op = "speculative_tree_verify";
  require(n_nodes >= 0, op, "n_nodes = " + std::to_string(n_nodes) + " is negative");
  require(n_vocab > 0 && n_vocab <= INT_MAX, op, "n_vocab = " + std::to_string(n_vocab) + " is outside [1, INT_MAX]");
  require_ptr(p, op, "p");
  require_ptr(child_start, op, "child_start");
  require_ptr(uniforms, op, "uniforms");
  require_ptr(residual, op, "residual");
  require_ptr(result, op, "result");
  if (n_nodes > 0) {
    require_ptr(tokens, op, "tokens");
    require_ptr(child_list, op, "child_list");
    if (q != nullptr) require_ptr(q_rows, op, "q_rows");
  }
  DeviceGuard guard(ctx.device());
  speculative_tree_verify_kernel<<<1, kDrawThreads, 0, stream_of(ctx)>>>(
      p, q, q_rows, tokens, child_start, child_list, n_nodes, without_replacement, n_vocab, uniforms, residual, result);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void draft_draw(Context& ctx, const float* probs, int64_t n, float* q_out, int64_t n_out, bool greedy, double u,
                const float* confidence_logits, int32_t* result) {
  using namespace detail;
  const char* op = "draft_draw";
  require(n > 0 && n <= INT_MAX && n_out > 0 && n_out <= INT_MAX, op, "row sizes outside [1, INT_MAX]");
  require(u >= 0.0 && u < 1.0, op, "u = " + std::to_string(u) + " is outside [0, 1)");
  require_ptr(probs, op, "probs");
  require_ptr(q_out, op, "q_out");
  require_ptr(result, op, "result");
  require(static_cast<const void*>(probs) != static_cast<const void*>(q_out) || n == n_out, op,
          "q_out aliases probs with a different row size");
  DeviceGuard guard(ctx.device());
  draft_draw_kernel<<<1, kDrawThreads, 0, stream_of(ctx)>>>(probs, n, q_out, n_out, greedy, u, confidence_logits,
                                                            result);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
