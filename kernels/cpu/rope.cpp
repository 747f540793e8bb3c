// Rotary position embedding (Su et al. 2021). Pairing follows llama.cpp: NORM (adjacent pairs,
// llama) and NEOX (split halves, qwen2 / gpt-neox). theta_i = pos * freq_scale *
// freq_base^(-2i/rope_dims) / freq_factors[i], with YaRN's mix of interpolated and extrapolated
// angles and the cos/sin scale when asked (kernels/op_params.h RopeParams). The reference
// computes the angles in double; the fast path computes each token's cos/sin table once and
// applies it to every head.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {

void check(const RopeParams& p, int64_t T, size_t n_positions) {
  if (p.rope_dims <= 0 || p.rope_dims > p.head_dim || p.rope_dims % 2 != 0)
    throw_error(ErrorKind::InvalidArgument, "rope: rope_dims {} must be even and in (0, head_dim={}]",
                p.rope_dims, p.head_dim);
  if (static_cast<int64_t>(n_positions) < T)
    throw_error(ErrorKind::InvalidArgument, "rope: {} positions for {} tokens", n_positions, T);
  if (!std::isfinite(p.attn_factor) || !std::isfinite(p.ext_factor))
    throw_error(ErrorKind::InvalidArgument, "rope: attn_factor {} and ext_factor {} must be finite", p.attn_factor,
                p.ext_factor);
}

// Rotates one head by the angles whose cos/sin are given for each pair.
inline void rotate_head(float* h, const float* cs, const float* sn, const RopeParams& p) {
  const int half = p.rope_dims / 2;
  for (int i = 0; i < half; ++i) {
    const int a = p.pairing == RopePairing::Adjacent ? 2 * i : i;
    const int b = p.pairing == RopePairing::Adjacent ? 2 * i + 1 : i + half;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * cs[i] - x1 * sn[i];
    h[b] = x0 * sn[i] + x1 * cs[i];
  }
}

// cos/sin of each pair's angle for one position. Without factors, YaRN and attn_factor the
// arithmetic is exactly the plain rotation's (a division by 1 and a product with 1 are exact).
void angles(int32_t pos, const RopeParams& p, float* cs, float* sn) {
  const int half = p.rope_dims / 2;
  for (int i = 0; i < half; ++i) {
    double inv_freq = std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.rope_dims);
    if (p.freq_factors) inv_freq /= p.freq_factors[i];
    double theta = static_cast<double>(pos) * p.freq_scale * inv_freq;  // interpolated
    if (p.ext_factor != 0.0f) {
      const double extrap = static_cast<double>(pos) * inv_freq;
      const double y = (i - static_cast<double>(p.corr_low)) / std::max(0.001, static_cast<double>(p.corr_high) - p.corr_low);
      const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
      theta = theta * (1.0 - mix) + extrap * mix;
    }
    cs[i] = static_cast<float>(std::cos(theta) * p.attn_factor);
    sn[i] = static_cast<float>(std::sin(theta) * p.attn_factor);
  }
}

}  // namespace

void rope_ref(float* x, int64_t T, std::span<const int32_t> positions, const RopeParams& p) {
  check(p, T, positions.size());
  std::vector<float> cs(p.rope_dims / 2), sn(p.rope_dims / 2);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < p.n_head; ++h) {
      angles(positions[t], p, cs.data(), sn.data());
      rotate_head(x + (t * p.n_head + h) * p.head_dim, cs.data(), sn.data(), p);
    }
}

void rope(ThreadPool& pool, float* x, int64_t T, std::span<const int32_t> positions, const RopeParams& p) {
  check(p, T, positions.size());
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(p.rope_dims / 2), sn(p.rope_dims / 2);
    for (int64_t t = t0; t < t1; ++t) {
      angles(positions[t], p, cs.data(), sn.data());
      for (int h = 0; h < p.n_head; ++h) rotate_head(x + (t * p.n_head + h) * p.head_dim, cs.data(), sn.data(), p);
    }
  });
}

}  // namespace specmoe::kernels::cpu
