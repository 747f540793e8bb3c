// The op profile of a forward (core/backend_profile.h, `specmoe bench --profile`): profiling
// changes no result, counts every matmul's multiply-adds exactly (T x n_in x n_out per call, the
// head among them), records nothing while disabled, and `bench --profile` reports it per batch
// size in --json.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/backend_profile.h"
#include "core/model.h"
#include "core/synth.h"
#include "test_data.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace specmoe {
namespace {

std::string tiny_model(const std::string& name) {
  const fs::path dir = testing::scratch_dir() / fmt::format("{}_{}", name, ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "tiny.gguf").string();
  core::synth_write("tiny", path, 7);
  return path;
}

// Multiply-adds of one token through a dense llama-style model's matmuls (q, k, v, o, gate, up,
// down per layer, then the head).
double macs_per_token(const core::ModelConfig& c) {
  const double q = static_cast<double>(c.n_head) * c.head_dim;
  const double per_layer = c.n_embd * q + 2.0 * c.n_embd * c.kv_dim() + q * c.n_embd + 3.0 * c.n_embd * c.n_ff;
  return c.n_layer * per_layer + static_cast<double>(c.n_vocab) * c.n_embd;
}

double total_macs(const std::vector<core::OpProfile>& ops) {
  return std::accumulate(ops.begin(), ops.end(), 0.0, [](double s, const core::OpProfile& o) { return s + o.macs; });
}

TEST(OpProfile, CountsEveryMatmulAndChangesNoResult) {
  const std::string path = tiny_model("op_profile");
  core::LoadOptions plain;
  plain.n_threads = 1;
  core::LoadOptions profiled = plain;
  profiled.profile_ops = true;
  auto a = core::Model::load(path, plain);
  auto b = core::Model::load(path, profiled);
  ASSERT_EQ(core::profiling_backend(a->backend()), nullptr);
  core::ProfilingBackend* prof = core::profiling_backend(b->backend());
  ASSERT_NE(prof, nullptr);
  const core::ModelConfig& c = b->config();
  ASSERT_FALSE(c.is_moe());

  const std::vector<int32_t> ids = {3, 17, 5, 42, 9};
  core::KVCache ka = a->new_cache(16), kb = b->new_cache(16);
  std::vector<float> la, lb;
  a->forward(ids, ka).logits.to_host(la);

  // Disabled: forwards only.
  b->forward(ids, kb).logits.to_host(lb);
  EXPECT_TRUE(prof->ops().empty());
  EXPECT_EQ(la, lb);  // the same ops in the same order: bit for bit

  // Enabled: the same logits, every matmul counted.
  kb.clear();
  prof->enable(true);
  b->forward(ids, kb).logits.to_host(lb);
  prof->enable(false);
  EXPECT_EQ(la, lb);
  const std::vector<core::OpProfile> ops = prof->ops();
  ASSERT_FALSE(ops.empty());
  EXPECT_DOUBLE_EQ(total_macs(ops), ids.size() * macs_per_token(c));
  bool head = false, attention = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_GT(ops[i].calls, 0) << ops[i].name;
    EXPECT_GE(ops[i].seconds, 0.0) << ops[i].name;
    if (i > 0) {
      EXPECT_GE(ops[i - 1].seconds, ops[i].seconds) << "most time first";
    }
    if (ops[i].name.find(fmt::format("{}x{}", c.n_vocab, c.n_embd)) != std::string::npos) {
      head = true;
      EXPECT_EQ(ops[i].calls, 1);
      EXPECT_DOUBLE_EQ(ops[i].macs, static_cast<double>(ids.size()) * c.n_vocab * c.n_embd);
      EXPECT_GT(ops[i].weight_bytes, 0.0);
    }
    if (ops[i].name == "attention") {
      attention = true;
      EXPECT_EQ(ops[i].calls, c.n_layer);
      EXPECT_EQ(ops[i].macs, 0.0);
    }
  }
  EXPECT_TRUE(head) << "the head's matmul is named by its shape";
  EXPECT_TRUE(attention);

  // The profile accumulates until reset.
  kb.clear();
  prof->enable(true);
  b->forward(std::vector<int32_t>{7}, kb);
  prof->enable(false);
  EXPECT_DOUBLE_EQ(total_macs(prof->ops()), (ids.size() + 1) * macs_per_token(c));
  prof->reset();
  EXPECT_TRUE(prof->ops().empty());
}

TEST(OpProfile, BenchReportsTheProfilePerBatchSize) {
  SPECMOE_REQUIRE_CLI();
  const std::string path = tiny_model("bench_profile");
  const testing::CliRun r = testing::run_cli({"bench", "-m", path, "-t", "1", "-n", "2", "-p", "4", "-r", "1",
                                              "--max-batch", "2", "--context", "8", "--profile", "1,3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  const json& p = j.at("profile");
  EXPECT_EQ(p.at("tokens"), json::array({1, 3}));
  ASSERT_EQ(p.at("forward_ms").size(), 2u);
  double macs1 = 0, macs3 = 0;
  for (const json& op : p.at("ops")) {
    ASSERT_EQ(op.at("ms").size(), 2u);
    macs1 += op.at("macs")[0].get<double>();
    macs3 += op.at("macs")[1].get<double>();
  }
  EXPECT_GT(macs1, 0.0);
  EXPECT_DOUBLE_EQ(macs3, 3 * macs1);  // per forward: three tokens' multiply-adds
  // Without --profile the key is null.
  const testing::CliRun plain = testing::run_cli(
      {"bench", "-m", path, "-t", "1", "-n", "2", "-p", "0", "-r", "1", "--max-batch", "1", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_TRUE(json::parse(plain.out).at("profile").is_null());
  // A batch size of 0 is refused with one line.
  const testing::CliRun bad = testing::run_cli({"bench", "-m", path, "--profile", "0"});
  EXPECT_NE(bad.exit_code, 0);
}

// The cost curve: a point per batch size, each ratio from a T-token forward and a one-token
// forward timed next to it (so T = 1's ratio is that of two one-token forwards, about 1).
TEST(OpProfile, BenchCostCurveHasAPointPerBatchSize) {
  SPECMOE_REQUIRE_CLI();
  const std::string path = tiny_model("bench_curve");
  const testing::CliRun r = testing::run_cli({"bench", "-m", path, "-t", "1", "-n", "2", "-p", "0", "-r", "3",
                                              "--max-batch", "4", "--context", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json pts = json::parse(r.out).at("cost_curve").at("points");
  ASSERT_EQ(pts.size(), 4u);
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(pts[i].at("tokens"), static_cast<int>(i + 1));
    for (const char* k : {"ms", "r"}) {
      const json& v = pts[i].at(k);
      EXPECT_GT(v.at("min").get<double>(), 0.0) << k << " at T = " << i + 1;
      EXPECT_LE(v.at("min").get<double>(), v.at("median").get<double>());
      EXPECT_LE(v.at("median").get<double>(), v.at("max").get<double>());
    }
  }
  // Two one-token forwards of a tiny model: far from 10x apart either way, however busy the machine.
  EXPECT_GT(pts[0].at("r").at("median").get<double>(), 0.1);
  EXPECT_LT(pts[0].at("r").at("median").get<double>(), 10.0);
}

}  // namespace
}  // namespace specmoe
