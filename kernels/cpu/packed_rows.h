// Internal to kernels/cpu: the loop over rows and tokens that every packed kernel set shares
// (matmul_packed_avx2.cpp, matmul_packed_avx512.cpp, matmul_packed_amx.cpp): which group block
// meets which tokens, in which order. Only the order of work is decided here; a token's value
// of a row never depends on it (kernels/cpu/packed.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/packed_layout.h"

namespace specmoe::kernels::cpu::packed {

// Tokens per tile: a tile's activations stay in L2 while a chunk of rows passes over them;
// T <= 64 (decode, verification) is one tile, so every weight group is read from memory once.
constexpr int64_t kTokenTile = 64;

// Rows [j0, j1) (j0 a multiple of 16) of a packed matrix whose groups j0 / 16 .. ceil(j1 / 16) - 1
// start at `groups`, group_bytes each, for T tokens: every token tile meets every group block in
// turn, the tile's tokens in near-equal runs of at most max_run (larger runs last), the groups
// max_groups at a time (fewer for the last ones of [j0, j1); a kernel that multiplies each
// broadcast activation with several groups' weights takes more than one).
// run(gb, n_groups, t, n, out) writes group q's (q < n_groups) row r for token t + i to
// out[q * out_stride + 16 i + r]; the rows of [j0, j1) are then copied to y[token * n_out + row].
template <class Run>
void for_each_run_groups(const uint8_t* groups, size_t group_bytes, int64_t T, int64_t max_run, int64_t max_groups,
                         float* y, int64_t n_out, int64_t j0, int64_t j1, float* out, int64_t out_stride, Run&& run) {
  const int64_t g0 = j0 / kRows, g1 = (j1 + kRows - 1) / kRows;
  for (int64_t t0 = 0; t0 < T; t0 += kTokenTile) {
    const int64_t tt = T - t0 < kTokenTile ? T - t0 : kTokenTile;
    const int64_t n_runs = (tt + max_run - 1) / max_run;
    for (int64_t g = g0; g < g1; g += max_groups) {
      const int64_t ng = g1 - g < max_groups ? g1 - g : max_groups;
      const uint8_t* gb = groups + (g - g0) * group_bytes;
      int64_t t = t0;
      for (int64_t k = 0; k < n_runs; ++k) {
        const int64_t n = (t0 + tt - t) / (n_runs - k);
        run(gb, ng, t, n, out);
        for (int64_t q = 0; q < ng; ++q) {
          const int64_t gq = g + q;
          const int64_t r0 = gq * kRows < j0 ? j0 : gq * kRows, r1 = j1 < (gq + 1) * kRows ? j1 : (gq + 1) * kRows;
          const float* o = out + q * out_stride;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t r = r0; r < r1; ++r) y[(t + i) * n_out + r] = o[kRows * i + (r - gq * kRows)];
        }
        t += n;
      }
    }
  }
}

// One group at a time: run(gb, t, n, out) writes token t + i's value of the group's row r to
// out[16 i + r].
template <class Run>
void for_each_run(const uint8_t* groups, size_t group_bytes, int64_t T, int64_t max_run, float* y, int64_t n_out,
                  int64_t j0, int64_t j1, float* out, Run&& run) {
  for_each_run_groups(groups, group_bytes, T, max_run, 1, y, n_out, j0, j1, out, 0,
                      [&](const uint8_t* gb, int64_t, int64_t t, int64_t n, float* o) { run(gb, t, n, o); });
}

// Float weights (packed_layout.h: chunks of 8 elements, then a tail): the same tiles and runs,
// with each group's chunks taken block_chunks at a time, so that a block (16 rows x 8 x
// block_chunks elements) stays in L1 while every run of the tile passes over it; the runs keep
// their partial sums in memory from block to block (the kernels' business).
//   block(gb, c0, nc) is called once per group, tile and block (chunks [c0, c0 + nc); once with
//     nc = 0 when n_in < 8) and returns where the block's chunks are (gb's, or a converted copy);
//   dots(main, c0, nc, k, t, n) adds the block's products to run k (tokens t .. t + n - 1);
//   finish(gb, k, t, n, out) completes run k (the tail elements) into out[16 i + r].
template <class Block, class Dots, class Finish>
void for_each_float_block(const uint8_t* groups, size_t group_bytes, int64_t n8, int64_t block_chunks, int64_t T,
                          int64_t max_run, float* y, int64_t n_out, int64_t j0, int64_t j1, float* out, Block&& block,
                          Dots&& dots, Finish&& finish) {
  const int64_t g0 = j0 / kRows, g1 = (j1 + kRows - 1) / kRows;
  int64_t run_t[kTokenTile], run_n[kTokenTile];
  for (int64_t t0 = 0; t0 < T; t0 += kTokenTile) {
    const int64_t tt = T - t0 < kTokenTile ? T - t0 : kTokenTile;
    const int64_t n_runs = (tt + max_run - 1) / max_run;
    for (int64_t k = 0, t = t0; k < n_runs; ++k) {
      run_t[k] = t;
      run_n[k] = (t0 + tt - t) / (n_runs - k);
      t += run_n[k];
    }
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* gb = groups + (g - g0) * group_bytes;
      for (int64_t c0 = 0; c0 == 0 || c0 < n8; c0 += block_chunks) {
        const int64_t nc = n8 - c0 < block_chunks ? n8 - c0 : block_chunks;
        const uint8_t* main = block(gb, c0, nc);
        for (int64_t k = 0; k < n_runs; ++k) dots(main, c0, nc, k, run_t[k], run_n[k]);
      }
      const int64_t r0 = g * kRows < j0 ? j0 : g * kRows, r1 = j1 < (g + 1) * kRows ? j1 : (g + 1) * kRows;
      for (int64_t k = 0; k < n_runs; ++k) {
        finish(gb, k, run_t[k], run_n[k], out);
        for (int64_t i = 0; i < run_n[k]; ++i)
          for (int64_t r = r0; r < r1; ++r) y[(run_t[k] + i) * n_out + r] = out[kRows * i + (r - g * kRows)];
      }
    }
  }
}

}  // namespace specmoe::kernels::cpu::packed
