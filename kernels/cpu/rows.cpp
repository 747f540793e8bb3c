// Row lookups, scatters and reductions: the references of the backends' embedding lookup
// (get_rows) and per-row argmax (argmax_rows), and the column scatter (scatter_cols) with its
// threaded op.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specmoe::kernels::cpu {

void get_rows_ref(const MatrixView& table, const int32_t* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.n_out)
      throw_error(ErrorKind::InvalidArgument, "get_rows: id {} (entry {}) outside the table's {} rows", ids[i], i,
                  table.n_out);
    dequantize_row(table.type, table.row(ids[i]), out + i * table.n_in, table.n_in);
  }
}

void argmax_rows_ref(const float* x, int64_t rows, int64_t n, int32_t* ids) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(row[i])) continue;
      if (best < 0 || row[i] > row[best]) best = i;  // strictly greater: the lowest index wins a tie
    }
    ids[r] = static_cast<int32_t>(best < 0 ? 0 : best);
  }
}

namespace {

// The checks of scatter_cols (both forms): sizes, pointers where there is work, and every id in
// [0, n_dst) (an id outside would write past the row). False: nothing to do.
bool check_scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, const float* dst,
                        int64_t n_dst) {
  if (rows < 0 || n_src < 0 || n_dst < 0)
    throw_error(ErrorKind::InvalidArgument, "scatter_cols: negative size (rows {}, n_src {}, n_dst {})", rows, n_src,
                n_dst);
  if (n_src > n_dst)
    throw_error(ErrorKind::InvalidArgument, "scatter_cols: {} source columns cannot have distinct ids among {}",
                n_src, n_dst);
  if (rows == 0 || n_dst == 0) return false;
  if (dst == nullptr) throw_error(ErrorKind::InvalidArgument, "scatter_cols: dst is null");
  if (n_src == 0) return true;
  if (src == nullptr) throw_error(ErrorKind::InvalidArgument, "scatter_cols: src is null");
  if (cols == nullptr) throw_error(ErrorKind::InvalidArgument, "scatter_cols: cols is null");
  for (int64_t j = 0; j < n_src; ++j)
    if (cols[j] < 0 || cols[j] >= n_dst)
      throw_error(ErrorKind::InvalidArgument, "scatter_cols: id {} (entry {}) outside the {} destination columns",
                  cols[j], j, n_dst);
  return true;
}

void scatter_cols_rows(const float* src, int64_t r0, int64_t r1, int64_t n_src, const int32_t* cols, float* dst,
                       int64_t n_dst, float fill) {
  for (int64_t r = r0; r < r1; ++r) {
    float* out = dst + r * n_dst;
    const float* in = src + r * n_src;
    std::fill_n(out, n_dst, fill);
    for (int64_t j = 0; j < n_src; ++j) out[cols[j]] = in[j];
  }
}

}  // namespace

void scatter_cols_ref(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst, int64_t n_dst,
                      float fill) {
  if (!check_scatter_cols(src, rows, n_src, cols, dst, n_dst)) return;
  scatter_cols_rows(src, 0, rows, n_src, cols, dst, n_dst, fill);
}

void scatter_cols(ThreadPool& pool, const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                  int64_t n_dst, float fill) {
  if (!check_scatter_cols(src, rows, n_src, cols, dst, n_dst)) return;
  // Memory-bound: below ~64K floats a hand-off to the workers costs more than the copy.
  constexpr int64_t kSerialFloats = 1 << 16;
  if (rows == 1 || rows * n_dst < kSerialFloats) {
    scatter_cols_rows(src, 0, rows, n_src, cols, dst, n_dst, fill);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (kSerialFloats / 2) / n_dst);
  pool.parallel_for(rows, grain,
                    [&](int64_t r0, int64_t r1) { scatter_cols_rows(src, r0, r1, n_src, cols, dst, n_dst, fill); });
}

}  // namespace specmoe::kernels::cpu
