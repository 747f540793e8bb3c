// Expert statistics of the MoE architectures of llama.cpp's layout (qwen3moe, olmoe, deepseek2 with
// and without its q LoRA and groups) as the CLI and the reports give them: `specmoe generate
// --moe-stats --json` lists every MoE layer (deepseek2's leading dense layer none), its load summed
// to the kept assignments, U(T) per forward size next to the uniform expectation E(1-(1-k/E)^T),
// drops under a capacity factor, the router as the metadata describes it and the routed-expert
// bytes per token computed from the model's own expert sizes; `specmoe info --json` gives MLA's KV
// bytes per token next to the uncompressed heads'; `specmoe run` reports the target's KV bytes
// per token in its MoE aggregate and the Markdown traffic table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/model.h"
#include "core/synth.h"
#include "moe/expert_stats.h"
#include "test_data.h"

namespace fs = std::filesystem;
using namespace specmoe;
using nlohmann::json;
using specmoe::testing::CliRun;
using specmoe::testing::run_cli;

namespace {

std::string scratch(const std::string& name) {
  const fs::path dir = specmoe::testing::scratch_dir() / fmt::format("moe_stats_cli_{}", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write_preset(const std::string& preset) {
  const std::string path = scratch(preset + ".gguf");
  core::synth_write(preset, path, 3);
  return path;
}

const char* kPrompt = "The quick brown fox jumps over the lazy dog, twice.";

struct Expect {
  const char* preset;
  const char* router;  // the "router" line
};

// What generate --moe-stats --json says about one model, checked against the model itself.
// Returns the total dropped assignments.
int64_t check_generate_stats(const Expect& e, double capacity) {
  const std::string path = write_preset(e.preset);
  auto model = core::Model::load(path);
  const core::ModelConfig& c = model->config();
  const int n_predict = 6;
  std::vector<std::string> args = {"generate", "-m",   path,   "-p", kPrompt, "-n", std::to_string(n_predict),
                                   "--temp",   "0",    "-t",   "1",  "--json", "--moe-stats"};
  if (capacity > 0) args.insert(args.end(), {"--moe-capacity", fmt::format("{}", capacity)});
  const CliRun r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  if (r.exit_code != 0) return 0;
  const json j = json::parse(r.out);
  const int n_prompt = static_cast<int>(j.at("prompt_tokens").size());
  const int n_generated = static_cast<int>(j.at("tokens").size());
  EXPECT_EQ(n_generated, n_predict) << e.preset;  // byte vocabularies without EOG in reach
  const json& m = j.at("moe");
  EXPECT_EQ(m.at("n_expert").get<int>(), c.n_expert);
  EXPECT_EQ(m.at("k").get<int>(), c.n_expert_used);
  EXPECT_EQ(m.at("router").get<std::string>(), e.router) << e.preset;
  const int E = c.n_expert, k = c.n_expert_used;
  // The prefill forward of n_prompt tokens, then one forward per later token.
  const int64_t tokens = n_prompt + n_generated - 1;
  int64_t dropped = 0;
  double bytes = 0;
  std::vector<int> layers;
  for (const json& l : m.at("layers")) {
    const int layer = l.at("layer").get<int>();
    layers.push_back(layer);
    const std::string what = fmt::format("{} layer {}", e.preset, layer);
    EXPECT_EQ(l.at("n_tokens").get<int64_t>(), tokens) << what;
    EXPECT_EQ(l.at("n_forwards").get<int64_t>(), n_generated) << what;
    int64_t load = 0;
    for (int64_t v : l.at("expert_tokens").get<std::vector<int64_t>>()) load += v;
    const int64_t drop = l.at("dropped_assignments").get<int64_t>();
    EXPECT_EQ(load + drop, tokens * k) << what;
    dropped += drop;
    const json& sizes = l.at("per_forward_size");
    EXPECT_EQ(sizes.size(), 2u) << what;  // T = 1 and T = n_prompt
    int64_t sum_distinct = 0;
    for (const json& s : sizes) {
      const int T = s.at("n_tokens").get<int>();
      EXPECT_TRUE(T == 1 || T == n_prompt) << what << " T " << T;
      EXPECT_EQ(s.at("n_forwards").get<int64_t>(), T == 1 ? n_generated - 1 : 1) << what;
      EXPECT_DOUBLE_EQ(s.at("uniform_expected_distinct").get<double>(), E * (1.0 - std::pow(1.0 - double(k) / E, T)))
          << what << " T " << T;
      const double u = s.at("mean_distinct_experts").get<double>();
      if (T == 1 && capacity <= 0) {
        EXPECT_DOUBLE_EQ(u, k) << what;  // one token: its k experts
      }
      EXPECT_GE(u, capacity > 0 ? 1.0 : double(k)) << what << " T " << T;
      EXPECT_LE(u, std::min<double>(E, double(T) * k)) << what << " T " << T;
      EXPECT_DOUBLE_EQ(s.at("amplification").get<double>(), u / k) << what;
      sum_distinct += s.at("sum_distinct_experts").get<int64_t>();
    }
    // Every touched expert's gate, up and down read once per forward: the model's own bytes.
    EXPECT_EQ(l.at("expert_bytes").get<uint64_t>(), static_cast<uint64_t>(sum_distinct) * model->moe_expert_bytes(layer))
        << what;
    bytes += l.at("expert_bytes").get<double>();
  }
  std::vector<int> want_layers;
  for (int l = 0; l < c.n_layer; ++l)
    if (c.is_moe_layer(l)) want_layers.push_back(l);
  EXPECT_EQ(layers, want_layers) << e.preset;
  EXPECT_NEAR(m.at("expert_bytes_per_token").get<double>(), bytes / tokens, 1e-9 * bytes) << e.preset;
  EXPECT_GT(bytes, 0.0);
  // The stderr table says the same: a router line and one row per MoE layer.
  EXPECT_NE(r.err.find(fmt::format("router: {};", e.router)), std::string::npos) << r.err;
  return dropped;
}

const Expect kArchs[] = {
    {"qwen3moe-tiny", "softmax_topk"},
    {"olmoe-tiny", "softmax_topk_raw"},
    {"deepseek2-tiny", "softmax_group, 4 groups keep 2, not renormalised, scale 1.5; 2 shared experts; layers 0-0 dense"},
    {"deepseek2-lite-tiny", "softmax_topk_raw; 2 shared experts; layers 0-0 dense"},
    {"glm4moe-tiny", "sigmoid_group, 4 groups keep 2, renormalised, scale 1.5; 1 shared experts; layers 0-0 dense"},
    {"ernie4_5-moe-tiny", "softmax_group, renormalised; a shared expert; layers 0-0 dense; experts every 2 layers"},
};

}  // namespace

TEST(MoEStatsCli, GenerateReportsEveryNewArchitecture) {
  for (const Expect& e : kArchs) {
    SCOPED_TRACE(e.preset);
    EXPECT_EQ(check_generate_stats(e, 0.0), 0);  // dropless
  }
}

TEST(MoEStatsCli, CapacityDropsAreCountedForTheNewRouters) {
  // Switch capacity ceil(cf T k / E) of 1.0 over a prefill of ~50 tokens: random routers overflow
  // some expert (a balanced split would need every expert at exactly its share).
  for (const Expect& e : kArchs) {
    SCOPED_TRACE(e.preset);
    EXPECT_GT(check_generate_stats(e, 1.0), 0);
  }
}

TEST(MoEStatsCli, InfoGivesTheLatentCacheBytesPerToken) {
  const std::string path = write_preset("deepseek2-tiny");
  auto model = core::Model::load(path);
  const core::ModelConfig& c = model->config();
  const CliRun r = run_cli({"info", "-m", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  // 3 layers x one F32 row of kv_lora_rank 32 + 16 RoPE dims.
  EXPECT_EQ(j.at("kv_bytes_per_token").get<int64_t>(), 3 * (32 + 16) * 4);
  const json& mla = j.at("mla");
  EXPECT_EQ(mla.at("kv_lora_rank").get<int>(), 32);
  EXPECT_EQ(mla.at("rope_dims").get<int>(), 16);
  EXPECT_EQ(mla.at("cache_row_width").get<int>(), 48);
  // What the same heads would cache uncompressed: keys of 48 and values of 32 per head.
  EXPECT_EQ(mla.at("uncompressed_kv_bytes_per_token").get<int64_t>(), int64_t{3} * c.n_head * (48 + 32) * 4);
  EXPECT_EQ(j.at("router").get<std::string>(), "softmax_group");
  EXPECT_EQ(j.at("leading_dense_layers").get<int>(), 1);
  const CliRun text = run_cli({"info", "-m", path});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("kv cache:      0.6 KiB per token"), std::string::npos) << text.out;
  // A dense GQA model: keys and values of n_head_kv * head_dim per layer.
  const std::string dense = write_preset("qwen3-tiny");
  auto d = core::Model::load(dense);
  const CliRun dj = run_cli({"info", "-m", dense, "--json"});
  ASSERT_EQ(dj.exit_code, 0) << dj.describe();
  const json dense_info = json::parse(dj.out);
  EXPECT_EQ(dense_info.at("kv_bytes_per_token").get<int64_t>(),
            int64_t{2} * d->config().n_layer * d->config().n_head_kv * d->config().head_dim * 4);
  EXPECT_FALSE(dense_info.contains("mla"));
}

TEST(MoEStatsCli, RunReportCarriesTheTargetsKvBytesPerToken) {
  const std::string out = scratch("run-out");
  const std::string toml = scratch("run.toml");
  std::ofstream(toml) << fmt::format(R"([experiment]
output = "{}"
warmup = 0
threads = 1
[models.ds]
synth = "deepseek2-tiny"
[models.qw]
synth = "qwen3moe-tiny"
[models.ol]
synth = "olmoe-tiny"
[prompts]
list = ["{}"]
[sampling]
max_tokens = 6
[[strategy]]
name = "ds-ar"
kind = "autoregressive"
target = "ds"
[[strategy]]
name = "ds-ngram"
kind = "speculative"
target = "ds"
drafter = "ngram"
[[strategy]]
name = "qw-ar"
kind = "autoregressive"
target = "qw"
[[strategy]]
name = "ol-ar"
kind = "autoregressive"
target = "ol"
[[strategy]]
name = "ol-layerskip"
kind = "speculative"
target = "ol"
drafter = "layerskip"
exit_layer = 1
)",
                                     out, kPrompt);
  const CliRun r = run_cli({"run", toml, "-q"}, {{"SPECMOE_CACHE_DIR", scratch("cache")}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::ifstream in(fs::path(out) / "report.json");
  const json report = json::parse(in);
  std::map<std::string, double> kv;
  for (const json& run : report.at("runs")) {
    ASSERT_TRUE(run.contains("moe") && run.at("moe").is_object()) << run.dump().substr(0, 400);
    kv[run.at("name").get<std::string>()] = run.at("moe").at("kv_bytes_per_token").get<double>();
  }
  ASSERT_EQ(kv.size(), 5u);
  // The caches of the run's default KV cache type, f16, except MLA's latent rows, which stay F32.
  EXPECT_DOUBLE_EQ(kv["ds-ar"], 3 * 48 * 4);  // the latent rows
  EXPECT_DOUBLE_EQ(kv["ds-ngram"], 3 * 48 * 4);
  EXPECT_DOUBLE_EQ(kv["qw-ar"], 2 * 3 * 2 * 32 * 2);  // f16 keys and values of 2 KV heads of 32, 3 layers
  auto ol = core::Model::load(write_preset("olmoe-tiny"));
  const core::ModelConfig& oc = ol->config();
  const double ol_kv = 2.0 * oc.n_layer * oc.n_head_kv * oc.head_dim * 2;
  EXPECT_DOUBLE_EQ(kv["ol-ar"], ol_kv);
  EXPECT_DOUBLE_EQ(kv["ol-layerskip"], ol_kv);
  // The MoE aggregate of a speculative run on olmoe: verify forwards of more than one token read
  // at least k experts per layer on average, at most E.
  for (const json& run : report.at("runs"))
    if (run.at("name") == "ol-layerskip") {
      const double u = run.at("moe").at("mean_distinct_experts").get<double>();
      EXPECT_GE(u, oc.n_expert_used);
      EXPECT_LE(u, oc.n_expert);
    }
  std::ifstream md(fs::path(out) / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("KV KiB / token"), std::string::npos);
}
