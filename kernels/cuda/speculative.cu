// Speculative decoding on the device: the lossless verification rule (Leviathan et al. 2023,
// Alg. 1; Chen et al. 2023, Alg. 2) over target and draft distributions that never leave the GPU,
// and the draft-side helpers (a draft distribution moved into the target's vocabulary, a row's
// maximum as the drafter's confidence).
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <climits>

#include "kernels/cuda/kernel_util.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/philox_device.h"

namespace specmoe::kernels::cuda {
namespace detail {

constexpr int kVerifyThreads = 512;

// Weight of token j in the final draw of verification: the residual max(0, p - q) after a
// rejection (q one-hot on the rejected token x when q is null), or p itself. Double, as the CPU
// verifier (verify/speculative_verifier.cpp).
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

// One block. Thread 0 runs the g sequential accept tests (g is small); then the whole block draws
// the emitted token by inverse CDF: each thread owns a contiguous chunk of the vocabulary, a block
// scan of the chunk sums (in double) finds the chunk holding u * total, and its thread walks it.
__global__ void __launch_bounds__(kVerifyThreads)
    speculative_verify_kernel(const float* p, const float* q, const int32_t* draft, int g, int64_t n, uint64_t seed,
                              uint64_t stream, uint64_t counter, int32_t* result) {
  using Scan = cub::BlockScan<double, kVerifyThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int s_accepted, s_token, s_last;

  if (threadIdx.x == 0) {
    int accepted = g;
    for (int i = 0; i < g; ++i) {
      const int32_t x = draft[i];
      const double px = p[static_cast<int64_t>(i) * n + x];
      const double qx = q != nullptr ? static_cast<double>(q[static_cast<int64_t>(i) * n + x]) : 1.0;
      // q(x) = 0 cannot happen for a token drawn from q: accept if the target allows it.
      const double ratio = qx > 0.0 ? px / qx : (px > 0.0 ? 1.0 : 0.0);
      // Certain outcomes draw nothing, so temperature 0 is exactly the greedy rule.
      const bool accept = ratio >= 1.0 || (ratio > 0.0 && uniform53(seed, stream, counter + i) < ratio);
      if (!accept) {
        accepted = i;
        break;
      }
    }
    s_accepted = accepted;
  }
  __syncthreads();
  const int r = s_accepted;
  DrawWeights w{p + static_cast<int64_t>(r) * n, (r < g && q != nullptr) ? q + static_cast<int64_t>(r) * n : nullptr,
                r < g ? draft[r] : -1, r < g};
  const double u = uniform53(seed, stream, counter + g);
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = min(n, static_cast<int64_t>(threadIdx.x) * chunk);
  const int64_t end = min(n, begin + chunk);

  for (int attempt = 0; attempt < 2; ++attempt) {
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
    Scan(scan_storage).ExclusiveSum(local, before, total);  // total reaches every thread
    if (!(total > 0.0)) {
      if (w.residual) {
        // An empty residual means p <= q everywhere, i.e. p == q up to rounding: draw from p.
        w.residual = false;
        __syncthreads();  // scan_storage is reused
        continue;
      }
      if (threadIdx.x == 0) {  // p has no mass: not a distribution
        result[0] = r;
        result[1] = -1;
      }
      return;
    }
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
    if (threadIdx.x == 0) {
      result[0] = r;
      result[1] = s_token != INT_MAX ? s_token : s_last;  // no chunk claimed u * total: the last positive token
    }
    return;
  }
}

// dst[j] = src[j] / sum(src[0, m)) for j < m, 0 for m <= j < n_dst; no mass: one-hot on id 0.
__global__ void restrict_distribution_kernel(const float* src, int64_t m, float* dst, int64_t n_dst) {
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) s += src[j];
  s = block_sum(s);
  const bool empty = !(s > 0.0f);
  const float inv = empty ? 0.0f : 1.0f / s;
  for (int64_t j = threadIdx.x; j < n_dst; j += blockDim.x)
    dst[j] = empty ? (j == 0 ? 1.0f : 0.0f) : (j < m ? src[j] * inv : 0.0f);
}

__global__ void row_max_kernel(const float* x, int64_t n, float* out) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m);
  if (threadIdx.x == 0) *out = m;
}

}  // namespace detail

void speculative_verify(Context& ctx, const float* p, const float* q, const int32_t* draft_tokens, int g,
                        int64_t n_vocab, uint64_t seed, uint64_t stream, uint64_t counter, int32_t* result) {
  using namespace detail;
  const char* op = "speculative_verify";
  require(g >= 0, op, "g = " + std::to_string(g) + " is negative");
  require(n_vocab > 0 && n_vocab <= INT_MAX, op, "n_vocab = " + std::to_string(n_vocab) + " is outside [1, INT_MAX]");
  require_ptr(p, op, "p");
  require_ptr(result, op, "result");
  if (g > 0) require_ptr(draft_tokens, op, "draft_tokens");
  DeviceGuard guard(ctx.device());
  speculative_verify_kernel<<<1, kVerifyThreads, 0, stream_of(ctx)>>>(p, q, draft_tokens, g, n_vocab, seed, stream,
                                                                     counter, result);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void restrict_distribution(Context& ctx, const float* src, int64_t n_src, float* dst, int64_t n_dst) {
  using namespace detail;
  const char* op = "restrict_distribution";
  require(n_src > 0 && n_dst > 0, op, "empty row");
  require_ptr(src, op, "src");
  require_ptr(dst, op, "dst");
  require(static_cast<const void*>(src) != static_cast<const void*>(dst), op, "dst aliases src");
  DeviceGuard guard(ctx.device());
  restrict_distribution_kernel<<<1, 1024, 0, stream_of(ctx)>>>(src, std::min(n_src, n_dst), dst, n_dst);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

void row_max(Context& ctx, const float* x, int64_t n, float* out) {
  using namespace detail;
  require(n > 0, "row_max", "empty row");
  require_ptr(x, "row_max", "x");
  require_ptr(out, "row_max", "out");
  DeviceGuard guard(ctx.device());
  row_max_kernel<<<1, 1024, 0, stream_of(ctx)>>>(x, n, out);
  SPECMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace specmoe::kernels::cuda
