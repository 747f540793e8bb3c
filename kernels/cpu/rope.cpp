// Rotary position embedding (Su et al. 2021). Pairing follows llama.cpp: NORM (adjacent pairs,
// llama) and NEOX (split halves, qwen2 / gpt-neox). theta_i = pos * freq_scale *
// freq_base^(-2i/rope_dims) / freq_factors[i], with YaRN's mix of interpolated and extrapolated
// angles and the cos/sin scale when asked (kernels/op_params.h RopeParams). The reference
// computes the angles in double; the fast path computes each position's cos/sin table once (the
// same floats, kept for the calls that follow: AngleTables) and applies it to every head.
#include <algorithm>
#include <cmath>
#include <memory>
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

// The cos/sin tables of the positions seen so far, per set of angle parameters. A forward rotates
// q and k of every layer at the same positions (2 n_layer calls) and the next forward again at
// most of them, so each position's table is computed once by angles() (the same floats) and
// reused. One cache per calling thread (the forward's; the pool's workers only read the rows it
// hands them), keyed by every field angles() reads, the frequency factors by value (a factor
// array freed and another allocated at its address must not match).
class AngleTables {
 public:
  // rows[t] = the table (cos then sin, rope_dims / 2 each) of positions[t], for t < T.
  void rows(const RopeParams& p, std::span<const int32_t> positions, int64_t T, const float** rows) {
    Set& set = find(p);
    const size_t width = static_cast<size_t>(p.rope_dims);
    set.scratch.resize(static_cast<size_t>(T) * width);  // sized before any row points into it
    for (int64_t t = 0; t < T; ++t) {
      const int32_t pos = positions[t];
      if (pos < 0 || pos >= kMaxPosition) {  // outside the cached range: a scratch row per token
        float* r = set.scratch.data() + static_cast<size_t>(t) * width;
        angles(pos, p, r, r + width / 2);
        rows[t] = r;
        continue;
      }
      const size_t chunk = static_cast<size_t>(pos) / kChunk, slot = static_cast<size_t>(pos) % kChunk;
      if (set.chunks.size() <= chunk) {
        set.chunks.resize(chunk + 1);
        set.done.resize((chunk + 1) * kChunk, 0);
      }
      if (!set.chunks[chunk]) set.chunks[chunk] = std::make_unique<float[]>(kChunk * width);
      float* r = set.chunks[chunk].get() + slot * width;
      if (!set.done[static_cast<size_t>(pos)]) {
        angles(pos, p, r, r + width / 2);
        set.done[static_cast<size_t>(pos)] = 1;
      }
      rows[t] = r;
    }
  }

 private:
  static constexpr int32_t kMaxPosition = 1 << 17;  // cached positions (64 MiB per set at 128 dims)
  static constexpr size_t kChunk = 256;             // positions per allocation (rows never move)
  static constexpr size_t kMaxSets = 4;             // e.g. local and global layers of one model

  struct Set {
    float freq_base, freq_scale, ext_factor, corr_low, corr_high, attn_factor;
    int rope_dims;
    std::vector<float> factors;
    std::vector<std::unique_ptr<float[]>> chunks;
    std::vector<uint8_t> done;  // by position
    std::vector<float> scratch;
  };

  Set& find(const RopeParams& p) {
    const size_t nf = p.freq_factors ? static_cast<size_t>(p.rope_dims / 2) : 0;
    for (Set& s : sets_)
      if (s.freq_base == p.freq_base && s.freq_scale == p.freq_scale && s.ext_factor == p.ext_factor &&
          s.corr_low == p.corr_low && s.corr_high == p.corr_high && s.attn_factor == p.attn_factor &&
          s.rope_dims == p.rope_dims && s.factors.size() == nf &&
          (nf == 0 || std::equal(s.factors.begin(), s.factors.end(), p.freq_factors)))
        return s;
    if (sets_.size() == kMaxSets) sets_.erase(sets_.begin());  // the oldest goes
    Set s{p.freq_base, p.freq_scale, p.ext_factor, p.corr_low, p.corr_high, p.attn_factor, p.rope_dims,
          std::vector<float>(p.freq_factors, p.freq_factors + nf), {}, {}, {}};
    sets_.push_back(std::move(s));
    return sets_.back();
  }

  std::vector<Set> sets_;
};

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
  thread_local AngleTables tables;
  thread_local std::vector<const float*> table_rows;
  table_rows.resize(static_cast<size_t>(T));
  tables.rows(p, positions, T, table_rows.data());
  // The workers read this thread's rows through a plain pointer (a thread_local named inside the
  // lambda would be each worker's own).
  const float* const* rows = table_rows.data();
  const int half = p.rope_dims / 2;
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int h = 0; h < p.n_head; ++h) rotate_head(x + (t * p.n_head + h) * p.head_dim, rows[t], rows[t] + half, p);
  });
}

}  // namespace specmoe::kernels::cpu
