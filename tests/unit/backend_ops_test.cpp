// The differential op harness (tests/backend_ops.h, table in tests/backend_ops_table.h): every
// op of core::Backend at every dtype and awkward shape, on the CPU backend and (when a device is
// present) the CUDA backend, against the plain references of kernels/cpu (SamplerChain for
// sampling, moe::MoELayer for the MoE block). One test per (op, column): BackendOps.Matches/
// matmul_cpu, .../matmul_cuda, ...; the CUDA ones skip without a device.
//
// Performance mode: SPECMOE_OPS_PERF=1 ./build/tests/test_backend_ops (or --perf) also prints
// the median time of every entry on every backend with GB/s (weights + activations) and GFLOP/s;
// SPECMOE_OPS_PERF=<text> times only the entries whose name contains <text> ("matmul Q4_K").
// Add --gtest_filter=BackendOpsPerf.* to skip the correctness tests. SPECMOE_OPS_VERBOSE=1
// prints every entry's nMSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend_ops_table.h"
#include "core/environment.h"

namespace specmoe::testing::ops {
namespace {

std::vector<std::unique_ptr<OpCase>>& table() {
  static std::vector<std::unique_ptr<OpCase>> t = make_backend_op_table();
  return t;
}

bool has_cuda() { return core::cuda_device_count() > 0; }

// The backend of a column, or null (with the reason) when this machine or build has none.
std::shared_ptr<Backend> column_backend(Column c, std::string& why_not) {
  if (c == Column::Cpu) return core::make_backend(Device{});
  if (!has_cuda()) {
    why_not = "no CUDA device (" + core::query_compute_environment().cuda_status + "): the CUDA column is skipped";
    return nullptr;
  }
  return core::make_backend(Device{Device::Kind::Cuda, 0});
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

struct Param {
  std::string op;
  Column column;
};

std::vector<Param> params() {
  std::vector<Param> out;
  for (const std::string& op : backend_op_names())
    for (Column c : {Column::Cpu, Column::Cuda}) out.push_back({op, c});
  return out;
}

class BackendOps : public ::testing::TestWithParam<Param> {};

TEST_P(BackendOps, Matches) {
  const Param& param = GetParam();
  std::string why_not;
  std::shared_ptr<Backend> backend = column_backend(param.column, why_not);
  if (!backend) GTEST_SKIP() << why_not;
  const bool verbose = env_set("SPECMOE_OPS_VERBOSE");
  const double bound_floor = 1e-300;
  std::vector<OpCase*> cases;
  double worst_ratio = 0.0, worst_nmse = 0.0;
  std::string worst;
  for (const auto& c : table()) {
    if (c->op() != param.op) continue;
    cases.push_back(c.get());
    SCOPED_TRACE(c->name());
    const double bound = c->bound().of(param.column);
    const auto t0 = std::chrono::steady_clock::now();
    const Outputs& ref = c->reference();
    const double ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Arena arena(*backend);
    Outputs got;
    try {
      c->prepare(*backend, arena);
      c->run(*backend);
      got = c->result(*backend, arena);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c->name() << " [" << column_name(param.column) << "] threw: " << e.what();
      continue;
    }
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      const Verdict v = check(ref[k], got[k], bound);
      EXPECT_TRUE(v.ok) << c->name() << " [" << column_name(param.column) << "]: " << v.message
                        << "\n  bound " << bound << ": " << c->bound().why;
      if (ref[k].ids.empty()) {
        const double ratio = v.nmse / std::max(bound, bound_floor);
        if (v.nmse > 0 && ratio >= worst_ratio) worst_ratio = ratio, worst_nmse = v.nmse, worst = c->name();
        if (verbose)
          std::printf("  %-72s %-16s nMSE %.3g (bound %.3g; reference %.1f ms)\n", c->name().c_str(),
                      ref[k].name.c_str(), v.nmse, bound, ref_ms);
      }
    }
    for (const std::string& d : arena.damage()) ADD_FAILURE() << c->name() << " [" << column_name(param.column) << "]: " << d;
  }
  EXPECT_FALSE(cases.empty()) << "no table entry for op " << param.op;
  std::printf("[ops] %s/%s: %zu entries on %s; worst nMSE %s\n", param.op.c_str(), column_name(param.column),
              cases.size(), backend->describe().c_str(),
              worst.empty() ? "0 (bit-identical)" : fmt::format("{:.3g} ({:.2g} of its bound) at {}", worst_nmse, worst_ratio, worst).c_str());
  // A device keeps resident weights by host address: let it go before the host data.
  backend.reset();
  for (OpCase* c : cases) c->release();
}

INSTANTIATE_TEST_SUITE_P(Table, BackendOps, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return info.param.op + "_" + column_name(info.param.column);
                         });

// The table names every Backend op, multiplies and looks up every dtype, has unique entries (the
// seeds come from the names) and a reason for every bound.
TEST(BackendOpsTable, CoversEveryOpAndDtype) {
  std::set<std::string> ops, names;
  std::set<DType> matmul_types, rows_types;
  std::map<std::string, int> per_op;
  for (const auto& c : table()) {
    ops.insert(c->op());
    ++per_op[c->op()];
    EXPECT_TRUE(names.insert(c->name()).second) << "duplicate entry " << c->name();
    EXPECT_FALSE(c->bound().why.empty()) << c->name() << ": a bound without a reason";
    EXPECT_GT(c->bytes(), 0.0) << c->name();
  }
  for (const std::string& op : backend_op_names()) EXPECT_TRUE(ops.count(op)) << "the table has no " << op;
  for (const std::string& op : ops)
    EXPECT_NE(std::find(backend_op_names().begin(), backend_op_names().end(), op), backend_op_names().end()) << op;
  for (DType type : all_dtypes()) {
    bool matmul = false, rows = false;
    for (const auto& c : table()) {
      const std::string prefix = std::string(dtype_name(type)) + " ";
      if (c->shape().rfind(prefix, 0) != 0) continue;
      matmul |= c->op() == "matmul";
      rows |= c->op() == "get_rows";
    }
    EXPECT_TRUE(matmul) << "no matmul entry for " << dtype_name(type);
    EXPECT_TRUE(rows) << "no get_rows entry for " << dtype_name(type);
  }
  std::string summary;
  for (const auto& [op, n] : per_op) summary += fmt::format(" {} {},", op, n);
  std::printf("[ops] %zu entries:%s\n", table().size(), summary.c_str());
}

// The check itself can fail: a wrong value, a NaN, an all-zero result, a changed guard.
TEST(BackendOpsCheck, CatchesWhatItShould) {
  const Output ref{"y", {1.0f, -2.0f, 3.0f}};
  EXPECT_TRUE(check(ref, {"y", {1.0f, -2.0f, 3.0f}}, 0.0).ok);
  EXPECT_FALSE(check(ref, {"y", {1.0f, -2.0f, 3.1f}}, 1e-4).ok);  // nMSE 7e-4
  EXPECT_TRUE(check(ref, {"y", {1.0f, -2.0f, 3.1f}}, 1e-3).ok);
  EXPECT_FALSE(check(ref, {"y", {1.0f, NAN, 3.0f}}, 1.0).ok);
  EXPECT_FALSE(check(ref, {"y", {0.0f, 0.0f, 0.0f}}, 10.0).ok);
  EXPECT_FALSE(check({"y", {0.0f, 0.0f}}, {"y", {0.0f, 0.0f}}, 1.0).ok);  // vacuous reference
  EXPECT_FALSE(check(ref, {"y", {1.0f, -2.0f}}, 1.0).ok);
  Output ids{"ids"}, other{"ids"};
  ids.ids = {3, 1};
  other.ids = {3, 2};
  EXPECT_FALSE(check(ids, other, 1.0).ok);
  EXPECT_TRUE(check(ids, ids, 0.0).ok);

  std::shared_ptr<Backend> cpu = core::make_backend(Device{}, 1);
  Arena arena(*cpu);
  const std::vector<float> in = {1.0f, 2.0f, 3.0f};
  float* x = arena.input(in, 3);
  float* y = arena.output(3, 3);
  EXPECT_TRUE(arena.damage().empty());
  EXPECT_TRUE(std::isnan(arena.get(y)[0])) << "outputs start as the sentinel";
  y[3] = 0.0f;  // one past the end
  x[0] = 5.0f;  // an input written
  EXPECT_EQ(arena.damage().size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Performance mode.

bool perf_requested() {
  if (env_set("SPECMOE_OPS_PERF")) return true;
  for (const std::string& a : ::testing::internal::GetArgvs())
    if (a == "--perf") return true;
  return false;
}

TEST(BackendOpsPerf, Table) {
  if (!perf_requested()) GTEST_SKIP() << "set SPECMOE_OPS_PERF=1 (or =<name part>) or pass --perf to time the table";
  const char* env = std::getenv("SPECMOE_OPS_PERF");
  const std::string filter = env && std::string(env) != "1" ? env : "";
  std::vector<std::pair<Column, std::shared_ptr<Backend>>> backends;
  for (Column c : {Column::Cpu, Column::Cuda}) {
    std::string why_not;
    if (auto b = column_backend(c, why_not)) backends.emplace_back(c, b);
    else std::printf("[ops perf] %s\n", why_not.c_str());
  }
  for (const auto& [c, b] : backends) std::printf("[ops perf] %s: %s\n", column_name(c), b->describe().c_str());
  std::printf("[ops perf] median of up to 50 runs after a warm-up, each synchronized; GB/s counts the weights and "
              "activations read and written once (a matrix that fits the last-level cache stays warm between runs)\n");
  std::printf("%-4s %10s %9s %9s %4s  %s\n", "col", "ms", "GB/s", "GFLOP/s", "runs", "entry");
  std::vector<OpCase*> timed;
  for (const auto& c : table()) {
    if (!filter.empty() && c->name().find(filter) == std::string::npos) continue;
    timed.push_back(c.get());
    for (const auto& [col, b] : backends) {
      const Timing tm = time_case(*c, *b);
      const double s = tm.ms * 1e-3;
      std::printf("%-4s %10.4f %9.2f %9.2f %4d  %s\n", column_name(col), tm.ms, c->bytes() / s * 1e-9,
                  c->flops() / s * 1e-9, tm.runs, c->name().c_str());
    }
  }
  std::fflush(stdout);
  backends.clear();  // resident copies go before the host data
  for (OpCase* c : timed) c->release();
}

}  // namespace
}  // namespace specmoe::testing::ops
