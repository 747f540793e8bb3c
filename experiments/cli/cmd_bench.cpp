// specmoe bench: what this machine can do with a model, in the spirit of llama-bench. Prints the
// host's streaming-read bandwidth at the model's thread count, decode tokens/s (tg: one token per
// forward from an empty cache) with the weight bandwidth it achieves, prompt processing tokens/s
// (pp: one forward over -p tokens), the verify cost curve r(T) = time(T-token forward) /
// time(1-token forward) at a fixed context, and with a draft model the cost ratio c = draft
// step / target step. Every figure is a median over repeats with its spread; within a repeat the
// forwards being compared run back to back, so machine load moves both sides of each ratio.
// From c and r(g+1) it prints the speedup Thm 3.8 predicts with measured costs at a few
// acceptance rates: whether speculation can pay here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli_common.h"
#include "core/backend_profile.h"
#include "experiments/json_text.h"
#include "experiments/result_json.h"
#include "experiments/statistics.h"
#include "kernels/cpu/ops.h"
#include "verify/metrics.h"

namespace specmoe::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  std::string draft_path;
  int n_gen = 64;        // tg: tokens decoded one at a time
  int n_prompt = 512;    // pp: tokens of one prompt forward (0: skip)
  int repeats = 5;
  int max_batch = 16;    // r(T) for T = 1..max_batch
  int context = 128;     // cached tokens the r(T) and c forwards attend over
  int bandwidth_mib = 512;
  bool json = false;
  std::vector<int> profile_tokens;  // --profile: batch sizes whose forwards are profiled by op
};

using Clock = std::chrono::steady_clock;

// Median, smallest and largest of a sample.
struct Spread {
  double median = 0, min = 0, max = 0;
  explicit Spread(std::vector<double> v = {}) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    median = exp::median(v);
    min = v.front();
    max = v.back();
  }
  nlohmann::json json() const { return {{"median", median}, {"min", min}, {"max", max}}; }
};

// Ids spread over the vocabulary (the speed of a forward does not depend on which they are).
std::vector<int32_t> bench_ids(const core::Model& m, int n, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const int64_t v = m.config().n_vocab;
  for (int i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((int64_t{i + salt} * 7919 + 13) % v);
  return ids;
}

// CPU seconds this process has used, all its threads together.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Wall and CPU seconds of one forward. On a machine shared with other work the wall time
// includes the moments the scheduler gave our threads' cores to others; the CPU time does not
// (it counts what the threads ran, memory stalls and the pool's brief spins included), so a ratio
// of CPU times is the steadier estimate of what a forward costs there.
struct ForwardTime {
  double wall = 0, cpu = 0;
};

ForwardTime time_forward_both(core::Model& m, std::span<const int32_t> ids, core::KVCache& kv, bool logits_all) {
  core::ForwardOptions o;
  o.logits_all = logits_all;
  // An EAGLE-3 head's step reads a feature row per token (zeros: its speed does not depend on them).
  core::RowBuffer g;
  if (m.is_eagle3()) {
    const int64_t T = static_cast<int64_t>(ids.size()), d = m.config().n_embd;
    g = core::RowBuffer(m.backend());
    const std::vector<float> zeros(static_cast<size_t>(T * d), 0.0f);
    m.backend().upload(g.reserve(T, d), zeros.data(), zeros.size() * sizeof(float));
    m.backend().synchronize();
  }
  const double c0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  if (m.is_eagle3())
    m.forward_eagle3(ids, g.view(static_cast<int64_t>(ids.size()), m.config().n_embd).data, kv, o);
  else if (m.is_dflash())
    m.forward_dflash(ids, kv, o);  // a block of these tokens (a proposal of g is one block of g + 1)
  else
    m.forward(ids, kv, o);
  m.backend().synchronize();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), process_cpu_seconds() - c0};
}

// Seconds of one forward over `ids`, the backend's queued work included.
double time_forward(core::Model& m, std::span<const int32_t> ids, core::KVCache& kv, bool logits_all) {
  return time_forward_both(m, ids, kv, logits_all).wall;
}

// A cache of `capacity` rows holding `context` tokens.
core::KVCache cache_with_context(core::Model& m, int context, int capacity) {
  core::KVCache kv = m.new_cache(capacity);
  // Recurrent layers (qwen35, granitehybrid): the forwards after the context are rolled back to it.
  kv.reserve_rollback(capacity - context);
  const std::vector<int32_t> ids = bench_ids(m, context, 1);
  if (context > 0) time_forward(m, ids, kv, false);
  return kv;
}

struct CostPoint {
  int tokens = 0;
  Spread ms, r;
  Spread cpu_ms, r_cpu;  // the same from the process's CPU time (all threads)
};

// One op's profile at every profiled batch size (per forward).
struct ProfileRow {
  std::string name;
  std::vector<double> calls, ms, macs, weight_bytes;  // [profiled T]
};

struct Profile {
  std::vector<int> tokens;
  std::vector<double> forward_ms;  // wall time of the profiled forwards, per forward
  std::vector<ProfileRow> rows;    // the most time at the largest T first
};

struct BenchResult {
  Spread bandwidth_gbs;
  size_t weight_bytes = 0;
  Spread decode_tps, prefill_tps;
  std::vector<CostPoint> curve;
  size_t draft_weight_bytes = 0;
  Spread draft_ms, target_ms, cost_ratio;
  Profile profile;
};

void run_decode(core::Model& m, const BenchArgs& a, BenchResult& out) {
  core::KVCache kv = m.new_cache(a.n_gen + 1);
  const std::vector<int32_t> ids = bench_ids(m, a.n_gen, 3);
  std::vector<double> tps;
  for (int r = 0; r < a.repeats; ++r) {
    kv.clear();
    double s = 0.0;
    for (int i = 0; i < a.n_gen; ++i) s += time_forward(m, std::span<const int32_t>(&ids[i], 1), kv, false);
    tps.push_back(a.n_gen / s);
  }
  out.decode_tps = Spread(tps);
}

void run_prefill(core::Model& m, const BenchArgs& a, BenchResult& out) {
  if (a.n_prompt <= 0) return;
  core::KVCache kv = m.new_cache(a.n_prompt);
  const std::vector<int32_t> ids = bench_ids(m, a.n_prompt, 5);
  std::vector<double> tps;
  for (int r = 0; r < a.repeats; ++r) {
    kv.clear();
    tps.push_back(a.n_prompt / time_forward(m, ids, kv, false));
  }
  out.prefill_tps = Spread(tps);
}

// r(T): every repeat times, for each T = 1..max_batch, a one-token forward and the T-token forward
// (logits for every token, as a verify forward computes them) next to each other, the order
// alternating between repeats, and divides the two: each ratio's sides are a few hundred ms
// apart, whatever the machine does between them. (Dividing the whole curve by one T = 1 forward
// at the start of its repeat, as before, let a shared machine's slow or fast phases move the
// ratios of the larger T by 10-30%: on 2 Ice Lake vCPUs whose one-token step drifted between 54
// and 89 ms within minutes, r(9) of the 1.5B Q4_K_M target read 1.50-1.98.) The ms column of T = 1
// is the median of all its one-token forwards.
void run_cost_curve(core::Model& m, const BenchArgs& a, BenchResult& out) {
  core::KVCache kv = cache_with_context(m, a.context, a.context + a.max_batch);
  const std::vector<int32_t> ids = bench_ids(m, a.max_batch, 7);
  std::vector<std::vector<double>> ms(a.max_batch), ratio(a.max_batch), cpu_ms(a.max_batch), cpu_ratio(a.max_batch);
  auto forward = [&](int T) {
    const ForwardTime t = time_forward_both(m, std::span<const int32_t>(ids.data(), T), kv, true);
    kv.truncate(a.context);
    return t;
  };
  for (int r = 0; r < a.repeats; ++r) {
    for (int T = 1; T <= a.max_batch; ++T) {
      ForwardTime one, s;
      if (r % 2 == 0) {
        one = forward(1);
        s = forward(T);
      } else {
        s = forward(T);
        one = forward(1);
      }
      ms[0].push_back(one.wall * 1e3);  // T = 1's row: every one-token forward (both of a T = 1 pair)
      cpu_ms[0].push_back(one.cpu * 1e3);
      ms[T - 1].push_back(s.wall * 1e3);
      cpu_ms[T - 1].push_back(s.cpu * 1e3);
      ratio[T - 1].push_back(s.wall / one.wall);
      cpu_ratio[T - 1].push_back(one.cpu > 0 ? s.cpu / one.cpu : 0.0);
    }
  }
  for (int T = 1; T <= a.max_batch; ++T)
    out.curve.push_back({T, Spread(ms[T - 1]), Spread(ratio[T - 1]), Spread(cpu_ms[T - 1]), Spread(cpu_ratio[T - 1])});
}

// The profile: for each T of --profile, `repeats` forwards of T tokens (logits for every token)
// at the cost curve's context with the model's ProfilingBackend enabled; every op's time, calls,
// MACs and weight bytes per forward. Ops synchronize one by one while profiled, so the sum can
// exceed an unprofiled forward on a device; on the CPU the ops are synchronous anyway.
void run_profile(core::Model& m, const BenchArgs& a, BenchResult& out) {
  core::ProfilingBackend* prof = core::profiling_backend(m.backend());
  if (prof == nullptr || a.profile_tokens.empty()) return;
  const int max_t = *std::max_element(a.profile_tokens.begin(), a.profile_tokens.end());
  core::KVCache kv = cache_with_context(m, a.context, a.context + max_t);
  const std::vector<int32_t> ids = bench_ids(m, max_t, 7);
  Profile& P = out.profile;
  P.tokens = a.profile_tokens;
  std::vector<std::vector<core::OpProfile>> per_t;
  for (int T : a.profile_tokens) {
    prof->reset();
    prof->enable(true);
    double wall = 0.0;
    for (int r = 0; r < a.repeats; ++r) {
      wall += time_forward(m, std::span<const int32_t>(ids.data(), T), kv, true);
      kv.truncate(a.context);
    }
    prof->enable(false);
    P.forward_ms.push_back(wall / a.repeats * 1e3);
    per_t.push_back(prof->ops());
  }
  // Rows in the order of the largest T's time; an op missing at some T counts 0 there.
  const size_t last = static_cast<size_t>(std::max_element(P.tokens.begin(), P.tokens.end()) - P.tokens.begin());
  std::vector<std::string> names;
  for (const core::OpProfile& o : per_t[last]) names.push_back(o.name);
  for (const auto& ops : per_t)
    for (const core::OpProfile& o : ops)
      if (std::find(names.begin(), names.end(), o.name) == names.end()) names.push_back(o.name);
  const double n = a.repeats;
  for (const std::string& name : names) {
    ProfileRow row{name, {}, {}, {}, {}};
    for (const auto& ops : per_t) {
      const auto it = std::find_if(ops.begin(), ops.end(), [&](const core::OpProfile& o) { return o.name == name; });
      const bool has = it != ops.end();
      row.calls.push_back(has ? static_cast<double>(it->calls) / n : 0.0);
      row.ms.push_back(has ? it->seconds / n * 1e3 : 0.0);
      row.macs.push_back(has ? it->macs / n : 0.0);
      row.weight_bytes.push_back(has ? it->weight_bytes / n : 0.0);
    }
    P.rows.push_back(std::move(row));
  }
}

// c: a draft single-token forward over a target single-token forward, alternated, same context.
void run_draft(core::Model& target, core::Model& draft, const BenchArgs& a, BenchResult& out) {
  core::KVCache tkv = cache_with_context(target, a.context, a.context + 1);
  core::KVCache dkv = cache_with_context(draft, a.context, a.context + 1);
  const std::vector<int32_t> ids = bench_ids(draft, 1, 11);
  std::vector<double> d, t, c;
  for (int r = 0; r < a.repeats; ++r) {
    double ds = 0.0, ts = 0.0;
    constexpr int kSteps = 4;  // a draft step is short: a few per repeat
    for (int i = 0; i < kSteps; ++i) {
      ds += time_forward(draft, ids, dkv, false);
      dkv.truncate(a.context);
      ts += time_forward(target, ids, tkv, false);
      tkv.truncate(a.context);
    }
    d.push_back(ds / kSteps * 1e3);
    t.push_back(ts / kSteps * 1e3);
    c.push_back(ds / ts);
  }
  out.draft_ms = Spread(d);
  out.target_ms = Spread(t);
  out.cost_ratio = Spread(c);
  out.draft_weight_bytes = draft.weight_bytes_per_token();
}

double r_at(const BenchResult& b, int tokens) {
  return tokens >= 1 && tokens <= static_cast<int>(b.curve.size()) ? b.curve[tokens - 1].r.median : 0.0;
}

// The draft length with the best cost-aware Thm 3.8 prediction at acceptance rate `alpha`.
std::pair<int, double> best_draft_length(const BenchResult& b, double alpha) {
  std::pair<int, double> best{0, 1.0};
  for (int g = 1; g + 1 <= static_cast<int>(b.curve.size()); ++g) {
    const double s = verify::cost_aware_speedup_model(alpha, g, b.cost_ratio.median, r_at(b, g + 1));
    if (s > best.second) best = {g, s};
  }
  return best;
}

// Per op: ms per forward at each profiled T, its ratio to the smallest T's, and for the matmuls
// the achieved GMAC/s at each T and weight GB/s at the smallest.
void print_profile(const BenchArgs& a, const Profile& P) {
  if (P.tokens.empty()) return;
  const size_t nt = P.tokens.size();
  std::printf("profile at context %d, per forward (mean of %d; ops timed one by one):\n", a.context, a.repeats);
  std::printf("  %-58s %6s", "op", "calls");
  for (int T : P.tokens) std::printf(" %8s", fmt::format("T={} ms", T).c_str());
  for (size_t i = 1; i < nt; ++i) std::printf(" %6s", fmt::format("x{}", P.tokens[i]).c_str());
  for (int T : P.tokens) std::printf(" %8s", fmt::format("GMAC/s{}", T).c_str());
  std::printf(" %7s\n", "GB/s");
  std::vector<double> sum(nt, 0.0);
  for (const ProfileRow& r : P.rows) {
    std::printf("  %-58s %6.0f", r.name.substr(0, 58).c_str(), r.calls.back());
    for (size_t i = 0; i < nt; ++i) {
      std::printf(" %8.2f", r.ms[i]);
      sum[i] += r.ms[i];
    }
    for (size_t i = 1; i < nt; ++i) std::printf(" %6.2f", r.ms[0] > 0 ? r.ms[i] / r.ms[0] : 0.0);
    if (r.macs.back() > 0) {
      for (size_t i = 0; i < nt; ++i) std::printf(" %8.1f", r.ms[i] > 0 ? r.macs[i] / (r.ms[i] * 1e6) : 0.0);
      std::printf(" %7.1f", r.ms[0] > 0 ? r.weight_bytes[0] / (r.ms[0] * 1e6) : 0.0);
    }
    std::printf("\n");
  }
  std::printf("  %-58s %6s", "all ops", "");
  for (size_t i = 0; i < nt; ++i) std::printf(" %8.2f", sum[i]);
  for (size_t i = 1; i < nt; ++i) std::printf(" %6.2f", sum[0] > 0 ? sum[i] / sum[0] : 0.0);
  std::printf("\n  %-58s %6s", "forward (wall; the rest is outside the backend's ops)", "");
  for (size_t i = 0; i < nt; ++i) std::printf(" %8.2f", P.forward_ms[i]);
  for (size_t i = 1; i < nt; ++i) std::printf(" %6.2f", P.forward_ms[0] > 0 ? P.forward_ms[i] / P.forward_ms[0] : 0.0);
  std::printf("\n");
}

void print_text(const BenchArgs& a, core::Model& m, const BenchResult& b) {
  const double gb = static_cast<double>(b.weight_bytes) / 1e9;
  std::printf("backend: %s\n", m.backend().describe().c_str());
  std::printf("host streaming read: %.1f GB/s (%d threads, %d MiB, median of %d, %.1f-%.1f)\n",
              b.bandwidth_gbs.median, m.backend().threads(), a.bandwidth_mib, a.repeats, b.bandwidth_gbs.min,
              b.bandwidth_gbs.max);
  std::printf("model: %s, %.3f GB of weights read per token, KV cache k %s, v %s\n", a.model.model_path.c_str(), gb,
              core::kv_cache_type_name(m.cache_types().k), core::kv_cache_type_name(m.cache_types().v));
  const double bw = b.decode_tps.median * gb;
  std::printf("decode tg%d: %.2f tokens/s (%.2f-%.2f) | %.1f GB/s of weights, %.0f%% of the read bandwidth\n",
              a.n_gen, b.decode_tps.median, b.decode_tps.min, b.decode_tps.max, bw,
              b.bandwidth_gbs.median > 0 ? 100.0 * bw / b.bandwidth_gbs.median : 0.0);
  if (a.n_prompt > 0)
    std::printf("prefill pp%d: %.1f tokens/s (%.1f-%.1f)\n", a.n_prompt, b.prefill_tps.median, b.prefill_tps.min,
                b.prefill_tps.max);
  std::printf("cost curve at context %d (logits for every token), median of %d [min-max of the per-repeat ratios]:\n",
              a.context, a.repeats);
  std::printf("  (cpu: the process's CPU time, all threads; its ratio moves less with other work on the machine)\n");
  std::printf("  %3s %10s %7s  %-15s %10s %7s  %s\n", "T", "ms", "r(T)", "spread", "cpu ms", "r_cpu", "spread");
  for (const CostPoint& p : b.curve)
    std::printf("  %3d %10.2f %7.3f  [%.3f-%.3f]   %10.2f %7.3f  [%.3f-%.3f]\n", p.tokens, p.ms.median, p.r.median,
                p.r.min, p.r.max, p.cpu_ms.median, p.r_cpu.median, p.r_cpu.min, p.r_cpu.max);
  if (a.draft_path.empty()) {
    print_profile(a, b.profile);
    return;
  }
  std::printf("draft: %s, %.3f GB per token | step %.2f ms vs target %.2f ms | c = %.3f [%.3f-%.3f]\n",
              a.draft_path.c_str(), static_cast<double>(b.draft_weight_bytes) / 1e9, b.draft_ms.median,
              b.target_ms.median, b.cost_ratio.median, b.cost_ratio.min, b.cost_ratio.max);
  print_profile(a, b.profile);
  std::printf("predicted speedup (1-a^(g+1)) / ((1-a)(g c + r(g+1))) with these c and r, best g:");
  for (double alpha : {0.6, 0.7, 0.8, 0.9}) {
    const auto [g, s] = best_draft_length(b, alpha);
    std::printf(" a=%.1f: %.2fx (g=%d)", alpha, s, g);
  }
  std::printf("\n");
}

nlohmann::json to_json(const BenchArgs& a, core::Model& m, const BenchResult& b) {
  const double gb = static_cast<double>(b.weight_bytes) / 1e9;
  nlohmann::json curve = nlohmann::json::array();
  for (const CostPoint& p : b.curve) curve.push_back({{"tokens", p.tokens},
                     {"ms", p.ms.json()},
                     {"r", p.r.json()},
                     {"cpu_ms", p.cpu_ms.json()},
                     {"r_cpu", p.r_cpu.json()}});
  nlohmann::json j;
  exp::set_text(j, "model", a.model.model_path);
  j["backend"] = m.backend().describe();
  j["threads"] = m.backend().threads();
  j["cache_type_k"] = core::kv_cache_type_name(m.cache_types().k);
  j["cache_type_v"] = core::kv_cache_type_name(m.cache_types().v);
  j["repeats"] = a.repeats;
  j["read_bandwidth_gbs"] = b.bandwidth_gbs.json();
  j["weight_bytes_per_token"] = b.weight_bytes;
  j["decode"] = {{"n_gen", a.n_gen},
                 {"tokens_per_second", b.decode_tps.json()},
                 {"weight_gbs", b.decode_tps.median * gb},
                 {"share_of_read_bandwidth", b.bandwidth_gbs.median > 0 ? b.decode_tps.median * gb / b.bandwidth_gbs.median : 0.0}};
  j["prefill"] = a.n_prompt > 0 ? nlohmann::json{{"n_prompt", a.n_prompt}, {"tokens_per_second", b.prefill_tps.json()}}
                                : nlohmann::json();
  j["cost_curve"] = {{"context", a.context}, {"points", curve}};
  if (!a.draft_path.empty()) {
    nlohmann::json pred = nlohmann::json::array();
    for (double alpha : {0.6, 0.7, 0.8, 0.9}) {
      const auto [g, s] = best_draft_length(b, alpha);
      pred.push_back({{"alpha", alpha}, {"draft_max", g}, {"predicted_speedup_measured_cost", s}});
    }
    j["draft"] = {{"weight_bytes_per_token", b.draft_weight_bytes},
                  {"step_ms", b.draft_ms.json()},
                  {"target_step_ms", b.target_ms.json()},
                  {"cost_ratio", b.cost_ratio.json()},
                  {"best_draft_length", pred}};
  } else {
    j["draft"] = nullptr;
  }
  if (!b.profile.tokens.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const ProfileRow& r : b.profile.rows) {
      nlohmann::json o;
      exp::set_text(o, "name", r.name);
      o["calls"] = r.calls;
      o["ms"] = r.ms;
      o["macs"] = r.macs;
      o["weight_bytes"] = r.weight_bytes;
      ops.push_back(std::move(o));
    }
    j["profile"] = {{"context", a.context}, {"tokens", b.profile.tokens}, {"forward_ms", b.profile.forward_ms},
                    {"ops", ops}};
  } else {
    j["profile"] = nullptr;
  }
  return j;
}

void run_bench(const BenchArgs& args) {
  ModelOptions mo = args.model;
  mo.profile_ops = !args.profile_tokens.empty();
  auto model = load_model(mo, args.model.model_path);
  BenchArgs a = args;
  // Positions stay within the training context (a learned position table ends there).
  if (const int n_ctx = model->config().n_ctx_train; n_ctx > 0) {
    a.n_gen = std::min(a.n_gen, n_ctx);
    a.n_prompt = std::min(a.n_prompt, n_ctx);
    a.max_batch = std::min(a.max_batch, n_ctx);
    int widest = a.max_batch;
    for (int& T : a.profile_tokens) widest = std::max(widest, T = std::min(T, n_ctx));
    a.context = std::min(a.context, n_ctx - widest);
  }
  std::unique_ptr<core::Model> draft;
  if (!a.draft_path.empty()) {
    ModelOptions d = a.model;
    d.moe_k = 0;
    d.moe_capacity = 0;
    draft = load_model(d, a.draft_path);
    // An EAGLE-3 head's step: one token of its layer; a DFlash draft's: a block of that many tokens.
    if (draft->config().reads_target_features()) draft->bind_target(*model);
  }
  BenchResult b;
  b.weight_bytes = model->weight_bytes_per_token();
  {
    // Measured with a pool of the model's thread count (the model's own pool idles meanwhile).
    kernels::cpu::ThreadPool pool(model->backend().threads());
    b.bandwidth_gbs = Spread(kernels::cpu::read_bandwidth_gbs(pool, static_cast<size_t>(a.bandwidth_mib) << 20, a.repeats));
  }
  // Untimed forwards page the memory-mapped weights in.
  {
    core::KVCache warm = model->new_cache(8);
    time_forward(*model, bench_ids(*model, 4, 0), warm, false);
    if (draft) {
      core::KVCache dwarm = draft->new_cache(8);
      time_forward(*draft, bench_ids(*draft, 4, 0), dwarm, false);
    }
  }
  run_decode(*model, a, b);
  run_prefill(*model, a, b);
  run_cost_curve(*model, a, b);
  if (draft) run_draft(*model, *draft, a, b);
  run_profile(*model, a, b);
  if (a.json)
    std::printf("%s\n", exp::dump_json(to_json(a, *model, b)).c_str());
  else
    print_text(a, *model, b);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "measure decode, prefill, the verify cost curve r(T) and c on this machine");
  a->model.huge_pages = "on";  // what a long run gets: its decode speed, not the first touch's cost
  add_model_options(cmd, a->model);
  cmd->add_option("--model-draft", a->draft_path, "draft model GGUF (alias -md): also measure the cost ratio c (an "
                  "EAGLE-3 head: one token of its layer and head)");
  cmd->add_option("-n,--n-gen", a->n_gen, "decode: tokens generated one per forward")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prefill: tokens of one prompt forward (0 = skip)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", a->repeats, "repeats of every measurement (medians are reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--max-batch", a->max_batch, "cost curve: T = 1..this many new tokens")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--context", a->context, "cost curve and c: cached tokens the forwards attend over")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  cmd->add_option("--bandwidth-mib", a->bandwidth_mib, "read-bandwidth buffer, MiB (many times the last-level cache)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print one JSON object instead of text");
  cmd->add_option("--profile", a->profile_tokens,
                  "profile the forwards of these batch sizes by op (e.g. 1,5,9): ms, GMAC/s and GB/s per op")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace specmoe::cli
