// The experiment runner: validation before anything runs, then every selected run over every
// prompt and repeat (after unrecorded warmups; run after run, or interleaved prompt by prompt
// across the runs: ExperimentSpec::schedule), each record appended to its run's journal as it
// finishes, each finished run saved atomically and the report rebuilt. One process writes an
// output folder at a time (output_lock.h). SIGINT stops after the current generation; SIGKILL
// stops anywhere; either way --resume continues from the journals and the finished runs.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <unistd.h>

#include "base/error.h"
#include "core/rng.h"
#include "experiments/atomic_file.h"
#include "experiments/config_hash.h"
#include "experiments/environment.h"
#include "experiments/experiment.h"
#include "experiments/git_commit.h"
#include "experiments/output_lock.h"
#include "experiments/progress.h"
#include "experiments/report_writer.h"
#include "experiments/result_json.h"
#include "experiments/run_journal.h"
#include "experiments/sweep.h"
#include "experiments/test_hooks.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

uint64_t prompt_stream_id(int prompt_index, int repeat) {
  // Warmups (negative repeats) map to their own streams, far from any recorded repeat.
  return core::Rng::stream_id({static_cast<uint64_t>(prompt_index), static_cast<uint64_t>(static_cast<int64_t>(repeat))});
}

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) {
  if (g_interrupted) {  // second Ctrl-C: give up at once
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_interrupted = 1;
  static const char msg[] =
      "\nspecmoe: interrupted; saving finished runs after the current generation (Ctrl-C again to abort)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}

// Installs the SIGINT handler for the duration of a run and restores the previous one.
class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR rather than hanging
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintGuard() { sigaction(SIGINT, &old_, nullptr); }
  bool interrupted() const { return g_interrupted != 0; }

 private:
  struct sigaction old_ {};
};

struct Plan {
  ExperimentSpec spec;
  std::vector<RunSpec> runs;
  std::string output;
  int threads = 1;
  std::string experiment_hash;
};

void check_registry_names(const ExperimentSpec& spec, const std::vector<RunSpec>& runs, const RunExecutor& executor) {
  auto drafters = executor.drafter_names();
  auto verifiers = executor.verifier_names();
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  auto key_of = [&](const RunSpec& run, const std::string& field) {
    for (const auto& [k, v] : run.point)
      if (k == field) return "sweep." + field;
    return spec.strategy_key(run.strategy.index, field);
  };
  for (const auto& run : runs) {
    const StrategySpec& s = run.strategy;
    if (s.kind != StrategyKind::Speculative) continue;
    if (std::find(drafters.begin(), drafters.end(), s.drafter) == drafters.end())
      spec.src.fail(key_of(run, "drafter"), fmt::format("unknown drafter '{}' (known: {})", s.drafter, join(drafters)));
    if (std::find(verifiers.begin(), verifiers.end(), s.verifier) == verifiers.end())
      spec.src.fail(key_of(run, "verifier"), fmt::format("unknown verifier '{}' (known: {})", s.verifier, join(verifiers)));
  }
}

void check_model_files(const ExperimentSpec& spec, const std::vector<RunSpec>& runs) {
  std::set<std::string> used;
  for (const auto& run : runs) {
    used.insert(run.strategy.target);
    if (!run.strategy.draft.empty()) used.insert(run.strategy.draft);
  }
  for (const auto& m : spec.models) {
    if (!used.count(m.name) || m.is_synth()) continue;
    std::error_code ec;
    if (!fs::is_regular_file(m.path, ec))
      spec.src.fail("models." + m.name + ".path", fmt::format("file not found: {}", m.path));
  }
}

Plan make_plan(const std::string& path, const RunOptions& options) {
  Plan plan;
  plan.spec = parse_experiment_file(path);
  if (options.threads_override >= 0) plan.spec.threads = options.threads_override;
  if (!options.output_override.empty()) plan.spec.output = options.output_override;
  if (options.shard_n < 1 || options.shard_i < 0 || options.shard_i >= options.shard_n)
    throw_error(ErrorKind::InvalidArgument, "--shard {}/{}: expected i/n with 0 <= i < n", options.shard_i, options.shard_n);
  plan.runs = expand_runs(plan.spec);
  plan.output = plan.spec.output;
  plan.threads = plan.spec.threads > 0 ? plan.spec.threads : std::max(1u, std::thread::hardware_concurrency());
  plan.experiment_hash = experiment_config_hash(plan.spec, plan.runs);
  // A sweep's batch scripts name the config hash and the build they were written for, so a task
  // that would make shards the merge refuses fails here, before it runs anything.
  if (!options.expect_config_hash.empty() && options.expect_config_hash != plan.experiment_hash)
    throw_error(ErrorKind::Config,
                "{}: config hash {} differs from {}, the hash the sweep was written for (the TOML, its prompts, "
                "models or thread count changed since)",
                path, plan.experiment_hash, options.expect_config_hash);
  if (!options.expect_commit.empty() && options.expect_commit != kGitCommit)
    throw_error(ErrorKind::Config,
                "this specmoe is build {}, the sweep was written for build {}; shards of different builds do not "
                "merge (rebuild that commit or write a new sweep)",
                kGitCommit, options.expect_commit);
  return plan;
}

}  // namespace

void describe_experiment(const std::string& path, const RunOptions& options, std::ostream& out) {
  Plan plan = make_plan(path, options);
  out << fmt::format("experiment {} ({} runs x {} prompts x {} repeats{}), config hash {}, output {}\n", plan.spec.name,
                     plan.runs.size(), plan.spec.prompts.size(), plan.spec.repeats,
                     plan.spec.schedule == Schedule::Interleaved ? ", interleaved" : "", plan.experiment_hash,
                     plan.output);
  for (const auto& r : plan.runs) {
    bool mine = r.index % options.shard_n == options.shard_i;
    out << fmt::format("{:3} {:<32} {:<24} {}{}\n", r.index, r.name,
                       r.is_baseline ? "(baseline)" : (r.baseline.empty() ? "(no baseline)" : "vs " + r.baseline),
                       r.config_hash, mine ? "" : "  [other shard]");
  }
}

ExperimentPlan plan_experiment(const std::string& path, const RunOptions& options, const RunExecutor& executor) {
  Plan plan = make_plan(path, options);
  check_registry_names(plan.spec, plan.runs, executor);
  check_model_files(plan.spec, plan.runs);
  ExperimentPlan out;
  out.name = plan.spec.name;
  out.output = plan.output;
  out.threads = plan.threads;
  out.threads_configured = plan.spec.threads;
  out.config_hash = plan.experiment_hash;
  for (const auto& r : plan.runs) out.runs.push_back({r.name, r.index, r.config_hash});
  return out;
}

int run_experiment(const std::string& path, const RunOptions& options, RunExecutor& executor) {
  Plan plan = make_plan(path, options);
  const ExperimentSpec& spec = plan.spec;

  // Everything is checked before the first generation.
  check_registry_names(spec, plan.runs, executor);
  check_model_files(spec, plan.runs);
  try {
    check_folder_writable(plan.output);
  } catch (const Error& e) {
    if (!options.output_override.empty()) throw_error(ErrorKind::Config, "--output: {}", e.what());
    spec.src.fail("experiment.output", e.what());
  }
  const std::string command = options.command_line.empty() ? "specmoe run " + path : options.command_line;
  // One writer per output folder, taken before the (slow) model checks so that a second run on
  // a busy folder fails at once. Held until this function returns; the kernel drops it if the
  // process dies, so a killed run's lock file does not block --resume.
  OutputLock lock = OutputLock::acquire(plan.output, command);
  test_hook("lock");
  // A process killed mid-write leaves its temporary files; no one else can be writing here now.
  remove_stale_temp_files(plan.output);
  remove_stale_temp_files((fs::path(plan.output) / "runs").string());
  executor.prepare(spec, plan.runs);

  ExperimentFile ef;
  ef.config = spec_to_json(spec, plan.runs);
  ef.config_hash = plan.experiment_hash;
  ef.toml = spec.source_text;
  ef.command = command;
  ef.shard_i = options.shard_i;
  ef.shard_n = options.shard_n;
  save_experiment_file((fs::path(plan.output) / "experiment.json").string(), ef);

  nlohmann::json environment = capture_environment(plan.threads);
  executor.describe_environment(environment);

  // This shard's runs, minus finished ones when resuming.
  std::vector<const RunSpec*> todo;
  std::vector<std::string> skipped;
  for (const auto& run : plan.runs) {
    if (run.index % options.shard_n != options.shard_i) continue;
    if (options.resume) {
      std::string file = run_file_path(plan.output, run.name);
      std::error_code ec;
      if (fs::exists(file, ec)) {
        try {
          if (load_run_file(file).config_hash == run.config_hash) {
            skipped.push_back(run.name);
            // Killed after saving the run file and before removing its journal: finish that.
            fs::remove(run_journal_path(plan.output, run.name), ec);
            continue;
          }
        } catch (const Error&) {
          // An unreadable run file is re-run (and overwritten).
        }
      }
    }
    todo.push_back(&run);
  }

  const int n_prompts = static_cast<int>(spec.prompts.size());
  Progress progress(options.progress, static_cast<long>(todo.size()) * n_prompts * spec.repeats);
  for (const auto& name : skipped) progress.message("resume: run " + name + " is finished, skipping");

  RunFileCache cache;
  SigintGuard sigint;
  const std::vector<std::string>& formats = options.report_formats;

  // One run's state while its records are being made: its file, its journal and the records a
  // killed or interrupted process already finished (resume), by (prompt, repeat).
  struct RunState {
    const RunSpec* run = nullptr;
    int k = 0;  // position in todo (progress)
    RunFile file;
    RunJournal journal;
    std::vector<PromptRecord> restored;
    std::map<std::pair<int, int>, PromptRecord*> done;
  };
  auto open_run = [&](size_t k) {
    auto st = std::make_unique<RunState>();
    const RunSpec& run = *todo[k];
    st->run = &run;
    st->k = static_cast<int>(k);
    st->file.name = run.name;
    st->file.run = run_to_json(run);
    st->file.config_hash = run.config_hash;
    st->file.experiment_hash = plan.experiment_hash;
    st->file.environment = environment;
    st->file.environment["date"] = utc_now_iso8601();
    st->file.started = utc_now_iso8601();
    st->journal = RunJournal::start(run_journal_path(plan.output, run.name), run.name, run.config_hash, options.resume,
                                    &st->restored);
    for (auto& rec : st->restored)
      if (rec.prompt_index >= 0 && rec.prompt_index < n_prompts && rec.repeat >= 0 && rec.repeat < spec.repeats)
        st->done[{rec.prompt_index, rec.repeat}] = &rec;
    if (!st->done.empty())
      progress.message(fmt::format("resume: run {} continues after {} finished records", run.name, st->done.size()));
    return st;
  };
  auto request = [&](const RunSpec& run, int prompt_index, int repeat) {
    ExecutionRequest req;
    req.spec = &spec;
    req.run = &run;
    req.prompt = &spec.prompts[prompt_index];
    req.prompt_index = prompt_index;
    req.repeat = repeat;
    req.seed = spec.seed;
    req.stream = prompt_stream_id(prompt_index, repeat);
    req.threads = plan.threads;
    return req;
  };
  const size_t per_run = static_cast<size_t>(n_prompts) * static_cast<size_t>(spec.repeats);
  auto warm_up = [&](RunState& st) {
    const bool pending = st.done.size() < per_run;
    for (int w = 0; pending && w < spec.warmup && !sigint.interrupted(); ++w)
      executor.execute(request(*st.run, w % n_prompts, -1 - w));
  };
  // Record (p, r) of a run: restored, or generated and appended to its journal.
  auto record = [&](RunState& st, int p, int r) {
    if (auto it = st.done.find({p, r}); it != st.done.end()) {
      st.file.records.push_back(std::move(*it->second));
    } else {
      PromptRecord rec = executor.execute(request(*st.run, p, r));
      rec.run = st.run->name;
      rec.prompt_index = p;
      rec.repeat = r;
      rec.prompt_id = spec.prompts[p].id;
      rec.category = spec.prompts[p].category;
      if (rec.n_generated == 0) rec.n_generated = static_cast<int64_t>(rec.tokens.size());
      st.journal.append(rec);
      test_hook("record");
      st.file.records.push_back(std::move(rec));
    }
    progress.step(st.k + 1, static_cast<int>(todo.size()), st.run->name, p + 1, n_prompts);
  };
  // A finished run is saved, its journal removed and the report rebuilt; a run cut short is not
  // saved (its journal keeps the finished records for --resume). Returns whether it was saved.
  auto close_run = [&](RunState& st) {
    if (st.file.records.size() < per_run) return false;
    st.file.finished = utc_now_iso8601();
    save_run_file(run_file_path(plan.output, st.run->name), st.file);
    test_hook("run-file");
    st.journal.remove();
    executor.finish_run(*st.run);
    rebuild_report(plan.output, formats, &cache);
    return true;
  };

  if (spec.schedule == Schedule::Interleaved) {
    // Every prompt and repeat goes through all runs before the next: the runs compared in a
    // report are measured side by side, so a machine whose speed drifts moves them alike.
    std::vector<std::unique_ptr<RunState>> states;
    for (size_t k = 0; k < todo.size(); ++k) states.push_back(open_run(k));
    for (auto& st : states) warm_up(*st);
    for (int p = 0; p < n_prompts && !sigint.interrupted(); ++p)
      for (int r = 0; r < spec.repeats && !sigint.interrupted(); ++r)
        for (size_t k = 0; k < states.size() && !sigint.interrupted(); ++k) record(*states[k], p, r);
    for (auto& st : states) close_run(*st);
  } else {
    for (size_t k = 0; k < todo.size() && !sigint.interrupted(); ++k) {
      const std::unique_ptr<RunState> st = open_run(k);
      warm_up(*st);
      for (int p = 0; p < n_prompts && !sigint.interrupted(); ++p)
        for (int r = 0; r < spec.repeats && !sigint.interrupted(); ++r) record(*st, p, r);
      if (!close_run(*st)) break;
    }
  }
  progress.finish();
  rebuild_report(plan.output, formats, &cache);
  if (sigint.interrupted()) return kRunInterrupted;
  return kRunOk;
}

}  // namespace specmoe::exp
