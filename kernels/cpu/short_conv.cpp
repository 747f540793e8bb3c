// lfm2's gated short convolution's causal filter (kernels/cpu/ops.h short_conv): each channel of a
// token's input row convolved with its taps over the token's predecessors on its path. The work
// is n_taps multiply-adds per channel and token (3 for LFM2), so the op is the reference's loop
// over channel ranges on the pool's threads: the compiler vectorises the inner loop over
// channels, and every backend sums the taps in the same order (oldest first, as ggml_ssm_conv).
#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {

void short_conv_channels(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                         const float* taps, float* out, int64_t c0, int64_t c1) {
  const int P = n_taps - 1;
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * width;
    for (int64_t c = c0; c < c1; ++c) o[c] = 0.0f;
    for (int k = 0; k < n_taps; ++k) {
      const int64_t r = k < P ? prev[t * P + k] : row0 + t;
      if (r < 0) continue;  // before the sequence's start: a zero row adds nothing
      const float* x = rows + r * width;
      for (int64_t c = c0; c < c1; ++c) o[c] += x[c] * taps[c * n_taps + k];
    }
  }
}

// Channels per task: a task's rows are read T * n_taps times, so keep them in L1.
constexpr int64_t kChannelGrain = 512;

}  // namespace

void short_conv_ref(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                    const float* taps, float* out) {
  short_conv_channels(rows, prev, T, row0, width, n_taps, taps, out, 0, width);
}

void short_conv(ThreadPool& pool, const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                int n_taps, const float* taps, float* out) {
  pool.parallel_for(width, kChannelGrain, [&](int64_t c0, int64_t c1) {
    short_conv_channels(rows, prev, T, row0, width, n_taps, taps, out, c0, c1);
  });
}

}  // namespace specmoe::kernels::cpu
