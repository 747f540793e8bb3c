// AVX2+FMA+F16C micro-kernels for float weights (compiled with -mavx2 -mfma -mf16c; called only
// after the runtime check in matmul.cpp). Register blocking: R weight rows x G tokens of
// accumulators (1 x 1-2 for decode; 2 x up to 6 or 3 x up to 4 for batches, see
// rows_all_tokens); each step converts R x 8 weights (F16: vcvtph2ps, BF16: a 16-bit shift),
// loads G x 8 activations and issues R x G FMAs, so a batched FMA needs 7/12 to 8/12 loads
// instead of 1.25 for one row at a time (single thread, weights in L3: 1024 -> 2816 at T = 8 went
// from 41 to 52 GFLOP/s going from 2 x 4 to 3 x 4 blocks). Rows stay in L1
// across the token groups, so memory reads each weight once per batch, and the rows two blocks
// ahead are prefetched during the first token group so memory and FMAs overlap.
//
// Summation order (fixed, for determinism): one 8-lane accumulator per output; lane l takes the
// products of elements 8k + l in increasing k; then a fixed-lane-order horizontal sum, then the
// < 8 tail elements in index order with explicit fma. It depends only on n_in, never on R, G, T,
// the token's place in the batch or the thread, so batch = 1 and batch = T agree bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"

namespace specmoe::kernels::cpu::avx2 {

namespace {

inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);                   // 4 lanes
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));          // 2 lanes
  s = _mm_add_ss(s, _mm_movehdup_ps(s));           // 1 lane
  return _mm_cvtss_f32(s);
}

struct LoadF32 {
  static constexpr int kBytes = 4;
  const float* p = nullptr;
  static LoadF32 at(const uint8_t* row) { return {reinterpret_cast<const float*>(row)}; }
  __m256 load(int64_t i) const { return _mm256_loadu_ps(p + i); }
  float scalar(int64_t i) const { return p[i]; }
};

struct LoadF16 {
  static constexpr int kBytes = 2;
  const uint16_t* p = nullptr;
  static LoadF16 at(const uint8_t* row) { return {reinterpret_cast<const uint16_t*>(row)}; }
  __m256 load(int64_t i) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
  }
  float scalar(int64_t i) const { return _cvtsh_ss(p[i]); }
};

struct LoadBF16 {
  static constexpr int kBytes = 2;
  const uint16_t* p = nullptr;
  static LoadBF16 at(const uint8_t* row) { return {reinterpret_cast<const uint16_t*>(row)}; }
  __m256 load(int64_t i) const {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  float scalar(int64_t i) const {
    const uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// out[g] = dot(row, x + g * x_stride) for g < G: two accumulators (elements [16k, 16k+8) and
// [16k+8, 16k+16)) for a latency-bound single dot; used by dot_f32 (attention).
template <int G, class Load>
inline void row_dot(const Load& w, const float* x, int64_t x_stride, int64_t n, float* out) {
  __m256 a0[G], a1[G];
  for (int g = 0; g < G; ++g) a0[g] = a1[g] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = w.load(i);
    const __m256 w1 = w.load(i + 8);
    for (int g = 0; g < G; ++g) {
      a0[g] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + g * x_stride + i), a0[g]);
      a1[g] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + g * x_stride + i + 8), a1[g]);
    }
  }
  if (i + 8 <= n) {
    const __m256 w0 = w.load(i);
    for (int g = 0; g < G; ++g) a0[g] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + g * x_stride + i), a0[g]);
    i += 8;
  }
  for (int g = 0; g < G; ++g) {
    float s = hsum(_mm256_add_ps(a0[g], a1[g]));
    for (int64_t k = i; k < n; ++k) s = std::fma(w.scalar(k), x[g * x_stride + k], s);
    out[g] = s;
  }
}

// y[g * y_stride + r] = dot(row r, token g) for R rows (row r at w0 + r * row_stride elements of
// the loader's type) and G tokens (token g at x + g * n).
template <int R, int G, class Load>
inline void block_dot(const Load (&w)[R], const float* x, int64_t n, float* y, int64_t y_stride,
                      const uint8_t* prefetch = nullptr, int64_t row_bytes = 0) {
  __m256 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_ps();
  auto step = [&](int64_t i) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = w[r].load(i);
    for (int g = 0; g < G; ++g) {
      __m256 xv = _mm256_loadu_ps(x + g * n + i);
      // Keeps xv in a register: otherwise GCC folds the load into each of the R FMAs, which
      // makes the kernel load-port bound.
      if constexpr (R == 2) asm("" : "+x"(xv));
      for (int r = 0; r < R; ++r) acc[r][g] = _mm256_fmadd_ps(wv[r], xv, acc[r][g]);
    }
  };
  int64_t i = 0;
  if (prefetch) {
    // One prefetch per 64-byte line of each of the R rows at `prefetch` (rows read later),
    // spread over the loop so memory works while the FMAs run.
    constexpr int64_t kLine = 64 / Load::kBytes;  // elements per cache line
    for (; i + kLine <= n; i += kLine) {
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(prefetch + r * row_bytes + i * Load::kBytes), _MM_HINT_T0);
      for (int64_t k = 0; k < kLine; k += 8) step(i + k);
    }
  }
  for (; i + 8 <= n; i += 8) step(i);
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) {
      float s = hsum(acc[r][g]);
      for (int64_t k = i; k < n; ++k) s = std::fma(w[r].scalar(k), x[g * n + k], s);
      y[g * y_stride + r] = s;
    }
}

// How many row blocks ahead rows_block prefetches. Measured on the synth target (8-token forward,
// 1 thread, CPU ms, min of 8): none 92, 1 block 77, 2 blocks 66-69, 4 blocks 72, 8 blocks 72.
constexpr int64_t kPrefetchBlocks = 2;

// block_dot over the R rows at j for the G tokens at x (G in 1..6, a runtime value; 5 and 6
// only with R <= 2, which keeps R x G accumulators within the 16 vector registers).
template <int R, class Load>
inline void group_dot(const Load (&ld)[R], int64_t G, const float* x, int64_t n, float* y, int64_t y_stride,
                      const uint8_t* pf = nullptr, int64_t rb = 0) {
  switch (G) {
    case 6: if constexpr (R <= 2) block_dot<R, 6>(ld, x, n, y, y_stride, pf, rb); break;
    case 5: if constexpr (R <= 2) block_dot<R, 5>(ld, x, n, y, y_stride, pf, rb); break;
    case 4: block_dot<R, 4>(ld, x, n, y, y_stride, pf, rb); break;
    case 3: block_dot<R, 3>(ld, x, n, y, y_stride, pf, rb); break;
    case 2: block_dot<R, 2>(ld, x, n, y, y_stride, pf, rb); break;
    case 1: block_dot<R, 1>(ld, x, n, y, y_stride, pf, rb); break;
    default: break;
  }
}

// Rows [j, j + R) x tokens [0, T) in ceil(T / Gmax) groups of near-equal size (with Gmax = 4,
// T = 5 runs as 2 + 3 and T = 9 as 3 + 3 + 3: a group of 1 would convert the rows' weights again
// for only R FMAs per step).
template <int R, int Gmax, class Load>
inline void rows_block(const MatrixView& w, int64_t j, const float* x, int64_t T, float* y) {
  static_assert(R * Gmax <= 12, "accumulators must fit in registers");
  Load ld[R];
  for (int r = 0; r < R; ++r) ld[r] = Load::at(w.row(j + r));
  const int64_t n = w.n_in;
  // While the first token group runs, prefetch the rows kPrefetchBlocks blocks ahead (the
  // hardware prefetcher alone left the batched kernel waiting on memory).
  const uint8_t* pf = j + (kPrefetchBlocks + 1) * R <= w.n_out ? w.row(j + kPrefetchBlocks * R) : nullptr;
  const int64_t rb = static_cast<int64_t>(w.row_bytes);
  const int64_t groups = (T + Gmax - 1) / Gmax;
  int64_t t = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t size = (T - t) / (groups - g);  // the larger groups come last
    group_dot<R>(ld, size, x + t * n, n, y + t * w.n_out + j, w.n_out, g == 0 ? pf : nullptr, rb);
    t += size;
  }
}

// Tokens are taken in tiles of kTokenTile so a tile's activations stay in L2 while the rows of
// the chunk (also in L2 after the first tile) pass over them; with T <= kTokenTile (decode and
// verification) there is a single tile and each row is read from memory once.
constexpr int64_t kTokenTile = 16;

template <class Load>
void rows_all_tokens(const MatrixView& w, const float* x, int64_t T, float* y, int64_t j0, int64_t j1) {
  for (int64_t t0 = 0; t0 < T; t0 += kTokenTile) {
    const int64_t tt = std::min(kTokenTile, T - t0);
    const float* xt = x + t0 * w.n_in;
    float* yt = y + t0 * w.n_out;
    int64_t j = j0;
    // T <= 2 (decode): one row at a time, so the weights stream from memory in address order
    // as the previous kernel did (rows of the 1024-wide synth target are 2 KB; 2 or 4 rows at a
    // time make interleaved streams within a 4 KB page, and measured slower at T = 1). One FMA
    // chain per token reads 16 B of F16 per 4-cycle FMA latency, above one core's memory share.
    //
    // T > 2: the first pass over a row block streams it from memory (with the prefetch) and
    // hides its FMAs behind the reads; every further token group re-reads the rows from L1 and
    // costs pure compute. So the block shape minimises the passes: 2 rows x up to 6 tokens
    // for T <= 6 and T >= 9 (where it needs fewer passes), 3 rows x 4 tokens (7 loads per 12
    // FMAs) for T = 7, 8 where both need two. Synth target, 2 threads, min of 25 interleaved
    // forwards, ms, 3 x 4 vs 2 x 6: T = 4 23.2 / 22.7, 5 29.3 / 24.5, 6 27.3 / 24.1,
    // 8 35.5 / 38.5, 9 41.7 / 41.7 (T = 1: 20.2).
    const bool wide = tt <= 6 || (tt + 5) / 6 < (tt + 3) / 4;
    if (tt > 2 && wide)
      for (; j + 2 <= j1; j += 2) rows_block<2, 6, Load>(w, j, xt, tt, yt);
    if (tt > 2)
      for (; j + 3 <= j1; j += 3) rows_block<3, 4, Load>(w, j, xt, tt, yt);
    for (; j < j1; ++j) rows_block<1, 4, Load>(w, j, xt, tt, yt);
  }
}

}  // namespace

void matmul_rows(const MatrixView& w, const float* x, int64_t T, float* y, int64_t j0, int64_t j1,
                 float* scratch) {
  switch (w.type) {
    case DType::F32: rows_all_tokens<LoadF32>(w, x, T, y, j0, j1); return;
    case DType::F16: rows_all_tokens<LoadF16>(w, x, T, y, j0, j1); return;
    case DType::BF16: rows_all_tokens<LoadBF16>(w, x, T, y, j0, j1); return;
    default: break;
  }
  // Other types (normally handled by the integer kernels): dequantize each row, then as F32.
  const int64_t n = w.n_in;
  for (int64_t j = j0; j < j1; ++j) {
    dequantize_row(w.type, w.row(j), scratch, n);
    LoadF32 ld[1] = {LoadF32{scratch}};
    for (int64_t t = 0; t < T; ++t) block_dot<1, 1>(ld, x + t * n, n, y + t * w.n_out + j, w.n_out);
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float r;
  row_dot<1>(LoadF32{a}, b, 0, n, &r);
  return r;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace specmoe::kernels::cpu::avx2
