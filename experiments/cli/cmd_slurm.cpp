// specmoe slurm: write (and optionally submit) a Slurm job array plus merge job for an experiment;
// --resubmit recovers a sweep whose tasks failed, were cancelled or preempted.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "base/error.h"
#include "experiments/git_commit.h"
#include "experiments/slurm.h"

namespace specmoe::cli {
namespace {
namespace fs = std::filesystem;

// The scripts run this very binary, by absolute path.
std::string own_binary(const char* argv0) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && !self.empty()) return self.string();
  return fs::absolute(argv0 ? argv0 : "specmoe").string();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void add_slurm_command(CLI::App& app, int argc, char** argv) {
  struct Args {
    exp::SlurmOptions o;
    std::string resubmit;
    bool submit = false;
    std::string argv0;
  };
  auto a = std::make_shared<Args>();
  a->argv0 = argc > 0 ? argv[0] : "specmoe";

  CLI::App* cmd = app.add_subcommand(
      "slurm", "run an experiment on a Slurm cluster: a job array of --shard tasks plus a merge job after them");
  cmd->add_option("config", a->o.config, "experiment TOML file");
  cmd->add_option("--array", a->o.tasks, "number of array tasks (shards); task K runs --shard K+1/N");
  cmd->add_option("-o,--output", a->o.output,
                  "sweep folder: scripts, slurm.json, logs/, shard-K/, all/ (default: the config's [experiment] output)");
  cmd->add_option("--partition", a->o.partition, "#SBATCH --partition (default: the cluster's)");
  cmd->add_option("--time", a->o.time, "#SBATCH --time for each job, e.g. 2:00:00 (default: the partition's)");
  cmd->add_option("--cpus-per-task", a->o.cpus_per_task,
                  "CPUs per task, which are the task's --threads (default: [experiment] threads, else 1)");
  cmd->add_option("--gpus-per-task", a->o.gpus_per_task, "GPUs per task; > 0 runs each task with --device cuda:0");
  cmd->add_option("--extra", a->o.extra, "another #SBATCH line for both jobs, e.g. --extra \"--account=NAME\" (repeatable)");
  cmd->add_flag("--submit", a->submit, "submit both jobs with sbatch and print their ids (default: print the commands)");
  cmd->add_option("--resubmit", a->resubmit,
                  "recover the sweep in this folder: rerun its unfinished tasks and replace the stranded merge job");
  cmd->callback([a] {
    if (!a->resubmit.empty()) {
      if (!a->o.config.empty() || a->o.tasks != 0 || a->submit)
        throw_error(ErrorKind::InvalidArgument, "--resubmit DIR takes no config, --array or --submit: the sweep's "
                                                "slurm.json has them");
      auto scheduler = exp::make_slurm_scheduler();
      const exp::SlurmSubmission r = exp::resubmit_slurm_sweep(a->resubmit, *scheduler, exp::kGitCommit);
      if (!r.nothing_to_do.empty()) {
        std::printf("nothing to resubmit: %s\n", r.nothing_to_do.c_str());
        return;
      }
      for (const auto& id : r.cancelled) std::printf("cancelled merge job %s (it could no longer run)\n", id.c_str());
      if (!r.waiting.empty()) std::printf("still queued, the merge waits for them: %s\n", join(r.waiting).c_str());
      if (!r.array_job.empty())
        std::printf("submitted array job %s (tasks %s)\n", r.array_job.c_str(), exp::task_ranges(r.tasks).c_str());
      std::printf("submitted merge job %s (%s)\n", r.merge_job.c_str(),
                  r.dependency.empty() ? "no dependency" : ("--dependency=" + r.dependency).c_str());
      return;
    }
    if (a->o.config.empty()) throw_error(ErrorKind::InvalidArgument, "slurm: give CONFIG.toml --array N, or --resubmit DIR");
    if (a->o.tasks == 0) throw_error(ErrorKind::InvalidArgument, "slurm: --array N is required (the number of tasks)");
    a->o.specmoe = own_binary(a->argv0.c_str());
    exp::SlurmSweep sweep = exp::plan_slurm_sweep(a->o, exp::kGitCommit);
    const std::string commit = exp::kGitCommit;
    if (commit == "unknown" || commit.ends_with("-dirty"))
      std::fprintf(stderr, "note: this specmoe is build '%s': the commit does not identify the code that runs the sweep\n",
                   commit.c_str());
    if (sweep.gpus_per_task > 1)
      std::fprintf(stderr, "note: a task runs on one GPU (cuda:0); --gpus-per-task %d reserves GPUs it does not use\n",
                   sweep.gpus_per_task);
    exp::SlurmSubmission r;
    if (a->submit) r = exp::submit_slurm_sweep(sweep, *exp::make_slurm_scheduler());  // writes them unless refused
    else exp::write_slurm_sweep(sweep);
    std::fprintf(stderr, "wrote %s (%zu runs in %d tasks of %d CPU%s%s) and %s\n", sweep.array_script_path().c_str(),
                 sweep.runs.size(), sweep.tasks, sweep.cpus_per_task, sweep.cpus_per_task == 1 ? "" : "s",
                 sweep.gpus_per_task > 0 ? fmt::format(" and {} GPU{}", sweep.gpus_per_task, sweep.gpus_per_task == 1 ? "" : "s").c_str() : "",
                 sweep.merge_script_path().c_str());
    if (!a->submit) {
      std::fprintf(stderr, "submit them with:\n");
      for (const auto& c : exp::slurm_submit_commands(sweep)) std::printf("%s\n", c.c_str());
      return;
    }
    std::printf("submitted array job %s (tasks %s) and merge job %s (--dependency=%s)\n", r.array_job.c_str(),
                exp::task_ranges(r.tasks).c_str(), r.merge_job.c_str(), r.dependency.c_str());
  });
}

}  // namespace specmoe::cli
