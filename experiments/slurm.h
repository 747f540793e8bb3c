// `specmoe slurm`: an experiment as a Slurm job array (task K runs shard K+1 of N into
// DIR/shard-K) plus a merge job that runs once every task succeeded (afterok) and merges into
// DIR/all; and the recovery of a sweep whose tasks failed, were cancelled or were preempted
// (resubmit: rerun only the unfinished tasks, replace the merge job that can no longer run).
//
// The sweep folder holds array.sh, merge.sh, slurm.json (the sweep's record: config, hashes, build,
// resources, every run and which task owns it, the jobs submitted), logs/ and the shard folders.
// Slurm itself is behind the Scheduler interface, so the logic is tested without a cluster.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/experiment.h"

namespace specmoe::exp {

struct SlurmOptions {
  std::string config;              // the experiment TOML
  int tasks = 0;                   // --array N: tasks (= shards)
  std::string output;              // the sweep folder ("" = the config's [experiment] output)
  std::string partition, time;     // "" = the cluster's defaults
  int cpus_per_task = 0;           // 0 = [experiment] threads when set, else 1
  int gpus_per_task = 0;           // > 0: tasks run with --device cuda:0 (the first GPU Slurm gives)
  std::vector<std::string> extra;  // more #SBATCH lines for both jobs ("--account=x" or "#SBATCH --account=x")
  std::string specmoe;             // the specmoe binary the scripts run
};

struct SlurmSweep {
  std::string experiment;   // the experiment's name
  std::string config;       // absolute path of the TOML
  std::string output;       // absolute path of the sweep folder
  std::string specmoe;      // absolute path of the binary the scripts run
  std::string config_hash;  // experiment hash at threads = cpus_per_task
  std::string commit;       // the build that wrote the sweep; tasks and merge refuse another
  int tasks = 0;
  int cpus_per_task = 1;
  int gpus_per_task = 0;
  std::string partition, time;
  std::vector<std::string> extra;  // "--x=y" (without "#SBATCH ")
  std::vector<PlannedRun> runs;    // every run of the experiment; task = index % tasks
  nlohmann::json submissions = nlohmann::json::array();  // jobs submitted, in order

  std::string array_script_path() const;  // DIR/array.sh
  std::string merge_script_path() const;  // DIR/merge.sh
  std::string manifest_path() const;      // DIR/slurm.json
  std::string shard_dir(int task) const;  // DIR/shard-<task>
  std::string merged_dir() const;         // DIR/all
  std::string log_dir() const;            // DIR/logs
};

// Validates the options and the experiment (TOML, sweep, prompts, registry names, model files;
// no model is loaded) and resolves paths; `commit` is the build writing the sweep. Throws Error.
SlurmSweep plan_slurm_sweep(const SlurmOptions& options, const std::string& commit);

// The batch scripts' text.
std::string slurm_array_script(const SlurmSweep& sweep);
std::string slurm_merge_script(const SlurmSweep& sweep);
// The two commands that submit the sweep by hand (the second depends on the first's job id).
std::vector<std::string> slurm_submit_commands(const SlurmSweep& sweep);

// Writes array.sh and merge.sh (executable), slurm.json and logs/ into the sweep folder.
void write_slurm_sweep(const SlurmSweep& sweep);
void save_slurm_manifest(const SlurmSweep& sweep);
nlohmann::json slurm_sweep_to_json(const SlurmSweep& sweep);
SlurmSweep slurm_sweep_from_json(const nlohmann::json& j, const std::string& where);
// Reads DIR/slurm.json; Error naming it when it is absent or malformed.
SlurmSweep load_slurm_sweep(const std::string& dir);

// Completeness on disk: a task is finished when its shard folder holds every run it owns with the
// run's config hash (what `specmoe run --resume` skips).
struct TaskStatus {
  int task = 0;
  int runs = 0;                         // runs the task owns
  std::vector<std::string> unfinished;  // of those, the ones not finished
  bool finished() const { return unfinished.empty(); }
};
std::vector<TaskStatus> slurm_task_status(const SlurmSweep& sweep);
// Whether DIR/all holds every run of the sweep (a merge that completed).
bool slurm_merge_complete(const SlurmSweep& sweep);

// A job of the user's queue (pending, running, completing, suspended, ...).
struct QueuedJob {
  std::string job_id;        // this job's (or array task's) id
  std::string array_job_id;  // the array's job id ("" when not an array task)
  int array_task = -1;       // the array task id (-1 when not an array task)
  std::string state;         // PENDING, RUNNING, ...
  std::string reason;        // why it pends: Dependency, DependencyNeverSatisfied, Resources, None, ...
  std::string command;       // the batch script, absolute
};
// Parses `squeue --noheader --array --format=%A|%F|%K|%T|%r|%o` output; Error(Format) on a bad line.
std::vector<QueuedJob> parse_squeue(const std::string& text);

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Submits `script` (sbatch --parsable ARGS SCRIPT) and returns the job id.
  virtual std::string submit(const std::vector<std::string>& args, const std::string& script) = 0;
  // The current user's jobs still in the queue.
  virtual std::vector<QueuedJob> queue() = 0;
  virtual void cancel(const std::string& job_id) = 0;
};
// sbatch, squeue and scancel from PATH (they read SLURM_CONF like any Slurm client).
std::unique_ptr<Scheduler> make_slurm_scheduler();

struct SlurmSubmission {
  std::string array_job;                 // "" when no array was submitted
  std::vector<int> tasks;                // the array tasks submitted
  std::string merge_job;                 // "" when no merge job was submitted
  std::string dependency;                // the merge job's --dependency ("" = none)
  std::vector<std::string> waiting;      // queued array tasks ("12_3") the new merge also waits for
  std::vector<std::string> cancelled;    // merge jobs cancelled (could no longer run)
  std::string nothing_to_do;             // non-empty: why nothing was submitted
};

// Writes the sweep (write_slurm_sweep), submits the array and the merge job (afterok on the array)
// and records both in slurm.json. Refuses, writing nothing, while jobs of an earlier submission of
// the folder are still queued.
SlurmSubmission submit_slurm_sweep(SlurmSweep& sweep, Scheduler& scheduler);

// Recovers the sweep in `dir`: refuses when the config or the build changed since it was written
// (`commit` is the running build); reruns the tasks that are unfinished on disk and not queued
// (--array=K,...; --resume keeps their finished runs), cancels merge jobs that wait for tasks
// that can no longer succeed, and submits a merge job after the reruns and the tasks still queued.
SlurmSubmission resubmit_slurm_sweep(const std::string& dir, Scheduler& scheduler, const std::string& commit);

// "0-2" style ranges for a task list: {0,1,2,5} -> "0-2,5".
std::string task_ranges(const std::vector<int>& tasks);

}  // namespace specmoe::exp
