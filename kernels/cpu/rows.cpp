// Row lookups and row reductions: the references of the backends' embedding lookup (get_rows)
// and per-row argmax (argmax_rows).
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

}  // namespace specmoe::kernels::cpu
