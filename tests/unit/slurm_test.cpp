// specmoe slurm without a cluster: the batch scripts (their #SBATCH lines, and what they run when
// bash executes them as Slurm would), the sweep record, task completeness on disk, squeue parsing,
// and submission and --resubmit against a fake scheduler. scripts/slurm-test.sh runs the same on
// a live one-node Slurm.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/result_json.h"
#include "experiments/slurm.h"
#include "fake_executor.h"
#include "test_data.h"

namespace specmoe::exp {
namespace {
namespace fs = std::filesystem;
using specmoe::testing::FakeExecutor;

constexpr const char* kCommit = "0123456789ab";

// A folder with the fake experiment and a stand-in specmoe binary that prints its arguments, one
// per line, so running a generated script shows exactly what it would run.
fs::path setup(const std::string& name, const std::string& sub = "") {
  fs::path dir = specmoe::testing::scratch_dir() / "slurm" / name;
  fs::remove_all(dir);
  fs::create_directories(dir / sub);
  std::ofstream(dir / sub / "e.toml") << specmoe::testing::kFakeExperimentToml;
  std::ofstream(dir / sub / "target.gguf") << "x";
  std::ofstream(dir / sub / "draft.gguf") << "x";
  std::ofstream(dir / "fake-specmoe") << "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n";
  fs::permissions(dir / "fake-specmoe", fs::perms::owner_all);
  return dir;
}

SlurmOptions options_for(const fs::path& dir, int tasks, const std::string& sub = "") {
  SlurmOptions o;
  o.config = (dir / sub / "e.toml").string();
  o.tasks = tasks;
  o.output = (dir / "sweep").string();
  o.specmoe = (dir / "fake-specmoe").string();
  return o;
}

struct Shell {
  int status;
  std::string output;
};
// Runs a command line with /bin/sh; stdout and stderr together.
Shell shell(const std::string& command) {
  Shell r{-1, ""};
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string plan_error(const SlurmOptions& o) {
  try {
    plan_slurm_sweep(o, kCommit);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(SlurmScripts, ArrayAndMergeScripts) {
  fs::path dir = setup("scripts");
  SlurmOptions o = options_for(dir, 3);
  o.partition = "gpu";
  o.time = "1:30:00";
  o.extra = {"--account=lab", "#SBATCH   --qos=short"};
  SlurmSweep s = plan_slurm_sweep(o, kCommit);
  EXPECT_EQ(s.tasks, 3);
  EXPECT_EQ(s.cpus_per_task, 1);  // the fake experiment says no thread count
  ASSERT_EQ(s.runs.size(), static_cast<size_t>(specmoe::testing::kFakeExperimentRuns));
  EXPECT_EQ(s.config_hash.size(), 16u);

  const std::string a = slurm_array_script(s);
  EXPECT_TRUE(a.starts_with("#!/bin/bash\n")) << a;
  for (const std::string& line :
       {std::string("#SBATCH --array=0-2\n"), std::string("#SBATCH --cpus-per-task=1\n"), std::string("#SBATCH --partition=gpu\n"),
        std::string("#SBATCH --time=1:30:00\n"), std::string("#SBATCH --account=lab\n"), std::string("#SBATCH --qos=short\n"),
        "#SBATCH --output=" + (dir / "sweep" / "logs" / "shard-%a.out").string() + "\n",
        "# config hash:    " + s.config_hash + "\n", std::string("# specmoe commit: ") + kCommit + "\n"})
    EXPECT_TRUE(contains(a, line)) << line << "\nnot in:\n" << a;
  EXPECT_FALSE(contains(a, "--gpus-per-task")) << a;
  EXPECT_FALSE(contains(a, "--device")) << a;

  const std::string m = slurm_merge_script(s);
  for (const std::string& line :
       {std::string("#SBATCH --partition=gpu\n"), std::string("#SBATCH --account=lab\n"),
        "# config hash:    " + s.config_hash + "\n", std::string("# specmoe commit: ") + kCommit + "\n",
        "#SBATCH --output=" + (dir / "sweep" / "logs" / "merge-%j.out").string() + "\n"})
    EXPECT_TRUE(contains(m, line)) << line << "\nnot in:\n" << m;
  EXPECT_FALSE(contains(m, "--array")) << m;

  const auto cmds = slurm_submit_commands(s);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0], "jid=$(sbatch --parsable " + s.array_script_path() + ")");
  EXPECT_EQ(cmds[1], "sbatch --dependency=afterok:${jid%%;*} " + s.merge_script_path());
}

TEST(SlurmScripts, WhatTheScriptsRun) {
  fs::path dir = setup("run", "configs with space");
  SlurmOptions o = options_for(dir, 3, "configs with space");
  o.cpus_per_task = 4;
  SlurmSweep s = plan_slurm_sweep(o, kCommit);
  write_slurm_sweep(s);
  EXPECT_TRUE(fs::is_directory(s.log_dir()));  // Slurm does not create --output's folder
  EXPECT_NE(fs::status(s.array_script_path()).permissions() & fs::perms::owner_exec, fs::perms::none);

  // Task 2 of 3 with the CPUs Slurm gave it.
  Shell r = shell("SLURM_ARRAY_TASK_ID=2 SLURM_CPUS_PER_TASK=4 SLURM_JOB_ID=77 bash '" + s.array_script_path() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> got = lines(r.output);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got[0].starts_with("specmoe: task 2 (shard 3/3) on ")) << got[0];
  got.erase(got.begin());
  const std::vector<std::string> want = {"run", (dir / "configs with space" / "e.toml").string(), "--shard", "3/3",
                                         "-o", (dir / "sweep" / "shard-2").string(), "--resume", "--threads", "4",
                                         "--quiet", "--expect-config-hash", s.config_hash, "--expect-commit", kCommit};
  EXPECT_EQ(got, want) << r.output;

  // Outside a job array the script refuses to guess a task.
  r = shell("env -u SLURM_ARRAY_TASK_ID bash '" + s.array_script_path() + "'");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "submit this script with sbatch")) << r.output;

  r = shell("bash '" + s.merge_script_path() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<std::string> want_merge = {
      "merge", (dir / "sweep" / "shard-0").string(), (dir / "sweep" / "shard-1").string(),
      (dir / "sweep" / "shard-2").string(), "-o", (dir / "sweep" / "all").string(), "--expect-config-hash",
      s.config_hash, "--expect-commit", kCommit};
  EXPECT_EQ(lines(r.output), want_merge) << r.output;
}

TEST(SlurmScripts, GpusMapToTheFirstVisibleDevice) {
  fs::path dir = setup("gpus");
  SlurmOptions o = options_for(dir, 2);
  o.gpus_per_task = 1;
  o.cpus_per_task = 8;
  SlurmSweep s = plan_slurm_sweep(o, kCommit);
  write_slurm_sweep(s);
  const std::string a = slurm_array_script(s);
  EXPECT_TRUE(contains(a, "#SBATCH --gpus-per-task=1\n")) << a;
  EXPECT_TRUE(contains(a, "#SBATCH --cpus-per-task=8\n")) << a;
  Shell r = shell("SLURM_ARRAY_TASK_ID=0 SLURM_CPUS_PER_TASK=8 bash '" + s.array_script_path() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "\n--threads\n8\n--device\ncuda:0\n")) << r.output;
}

TEST(SlurmScripts, ThreadsComeFromTheConfigWhenNotGiven) {
  fs::path dir = setup("threads");
  std::ofstream(dir / "e.toml") << specmoe::testing::kFakeExperimentToml.substr(0, 13) << "threads = 3\n"
                                << specmoe::testing::kFakeExperimentToml.substr(13);
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 2), kCommit);
  EXPECT_EQ(s.cpus_per_task, 3);
  // The hash is the one `specmoe run --threads 3` computes, which a task checks.
  RunOptions ro;
  ro.threads_override = 3;
  EXPECT_EQ(s.config_hash, plan_experiment((dir / "e.toml").string(), ro).config_hash);
  ro.threads_override = 2;
  EXPECT_NE(s.config_hash, plan_experiment((dir / "e.toml").string(), ro).config_hash);
}

TEST(SlurmScripts, RefusesBadOptions) {
  fs::path dir = setup("bad");
  SlurmOptions o = options_for(dir, 0);
  EXPECT_EQ(plan_error(o), "--array 0: expected at least 1 task");
  o.tasks = 11;
  EXPECT_EQ(plan_error(o), "--array 11: the experiment has 10 runs, so at most 10 tasks get one");
  o.tasks = 2;
  o.extra = {"--mem=1G\n#SBATCH --x"};
  EXPECT_TRUE(plan_error(o).starts_with("--extra '--mem=1G")) << plan_error(o);
  o.extra = {"--array=0-9"};
  EXPECT_EQ(plan_error(o), "--extra '--array=0-9': --array is set by specmoe slurm itself");
  o.extra = {"mem=1G"};
  EXPECT_TRUE(contains(plan_error(o), "expected an sbatch option")) << plan_error(o);
  o.extra.clear();
  o.time = "1 day";
  EXPECT_EQ(plan_error(o), "--time '1 day': expected one word without spaces");
  o.time.clear();
  o.output = (dir / "a folder").string();
  EXPECT_TRUE(plan_error(o).starts_with("-o " + o.output + ": the path holds ' '")) << plan_error(o);
  o.output = (dir / "out%j").string();
  EXPECT_TRUE(contains(plan_error(o), "holds '%'")) << plan_error(o);
  o = options_for(dir, 2);
  o.config = (dir / "nope.toml").string();
  EXPECT_TRUE(contains(plan_error(o), "nope.toml")) << plan_error(o);
}

TEST(SlurmRecord, RoundTripsAndNamesBadFiles) {
  fs::path dir = setup("record");
  SlurmOptions o = options_for(dir, 3);
  o.extra = {"--account=lab"};
  SlurmSweep s = plan_slurm_sweep(o, kCommit);
  s.submissions.push_back({{"kind", "array"}, {"job", "12"}});
  write_slurm_sweep(s);
  SlurmSweep back = load_slurm_sweep(s.output);
  EXPECT_EQ(slurm_sweep_to_json(back), slurm_sweep_to_json(s));
  try {
    load_slurm_sweep(dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": no slurm.json; not a sweep folder written by `specmoe slurm`");
  }
  write_file_atomic(s.manifest_path(), "{\"format\": \"specmoe-slurm/1\", \"tasks\": 2}");
  try {
    load_slurm_sweep(s.output);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_TRUE(std::string(e.what()).starts_with(s.manifest_path() + ": malformed sweep record")) << e.what();
  }
  // A number that overflows a double (nlohmann's out_of_range, not a parse_error) and a format
  // of another type are one Error naming the file too.
  for (const char* text : {"{\"format\": \"specmoe-slurm/1\", \"tasks\": 1e400}", "{\"format\": 7}"}) {
    write_file_atomic(s.manifest_path(), text);
    try {
      load_slurm_sweep(s.output);
      FAIL() << "expected an error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Format);
      EXPECT_TRUE(std::string(e.what()).starts_with(s.manifest_path() + ": ")) << e.what();
    }
  }
}

TEST(SlurmQueue, ParsesSqueueAndTaskRanges) {
  auto jobs = parse_squeue("12|12|N/A|PENDING|DependencyNeverSatisfied|/x/merge.sh\n"
                           "15|11|2|RUNNING|None|/x/array.sh\n"
                           "11|11|3|PENDING|Resources|/x/a|b.sh\n\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].array_task, -1);
  EXPECT_EQ(jobs[0].array_job_id, "");
  EXPECT_EQ(jobs[0].reason, "DependencyNeverSatisfied");
  EXPECT_EQ(jobs[1].job_id, "15");
  EXPECT_EQ(jobs[1].array_job_id, "11");
  EXPECT_EQ(jobs[1].array_task, 2);
  EXPECT_EQ(jobs[2].command, "/x/a|b.sh");
  EXPECT_THROW(parse_squeue("12|12|N/A\n"), Error);
  EXPECT_THROW(parse_squeue("12|12|x1|PENDING|None|/a.sh\n"), Error);
  EXPECT_EQ(task_ranges({0, 1, 2}), "0-2");
  EXPECT_EQ(task_ranges({5, 1, 0, 2, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(task_ranges({4}), "4");
}

// Runs task k of the sweep with the fake engine, as its array task would.
void run_task(const SlurmSweep& s, int k) {
  RunOptions o;
  o.shard_i = k;
  o.shard_n = s.tasks;
  o.output_override = s.shard_dir(k);
  o.threads_override = s.cpus_per_task;
  o.resume = true;
  o.progress = false;
  o.expect_config_hash = s.config_hash;
  FakeExecutor fake;
  ASSERT_EQ(run_experiment(s.config, o, fake), kRunOk);
}

void merge_sweep(const SlurmSweep& s) {
  std::vector<std::string> dirs;
  for (int k = 0; k < s.tasks; ++k) dirs.push_back(s.shard_dir(k));
  MergeOptions mo;
  mo.expect_config_hash = s.config_hash;
  merge_reports(dirs, s.merged_dir(), mo);
}

TEST(SlurmStatus, TaskCompletenessOnDisk) {
  fs::path dir = setup("status");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 3), kCommit);
  write_slurm_sweep(s);
  for (const auto& t : slurm_task_status(s)) {  // nothing ran yet
    EXPECT_FALSE(t.finished());
    EXPECT_EQ(static_cast<int>(t.unfinished.size()), t.runs);
  }
  EXPECT_EQ(slurm_task_status(s)[0].runs, 4);
  for (int k = 0; k < 3; ++k) run_task(s, k);
  for (const auto& t : slurm_task_status(s)) EXPECT_TRUE(t.finished()) << t.task;
  EXPECT_FALSE(slurm_merge_complete(s));
  merge_sweep(s);
  EXPECT_TRUE(slurm_merge_complete(s));

  // A task cut short (its last run not saved), a run file of another config, an unreadable one.
  fs::remove(run_file_path(s.shard_dir(1), "ngram-g2-t0.7"));
  RunFile f = load_run_file(run_file_path(s.shard_dir(2), "model-g2-t0"));
  f.config_hash = "ffffffffffffffff";
  save_run_file(run_file_path(s.shard_dir(2), "model-g2-t0"), f);
  write_file_atomic(run_file_path(s.shard_dir(0), "ar-t0"), "{");
  auto st = slurm_task_status(s);
  EXPECT_EQ(st[0].unfinished, std::vector<std::string>{"ar-t0"});
  EXPECT_EQ(st[1].unfinished, std::vector<std::string>{"ngram-g2-t0.7"});
  EXPECT_EQ(st[2].unfinished, std::vector<std::string>{"model-g2-t0"});
  EXPECT_EQ(st[1].runs, 3);
}

class FakeScheduler : public Scheduler {
 public:
  std::vector<QueuedJob> jobs;
  std::vector<std::pair<std::vector<std::string>, std::string>> submitted;  // (args, script)
  std::vector<std::string> cancelled;
  int next_id = 100;

  std::string submit(const std::vector<std::string>& args, const std::string& script) override {
    submitted.push_back({args, script});
    return std::to_string(next_id++);
  }
  std::vector<QueuedJob> queue() override { return jobs; }
  void cancel(const std::string& id) override { cancelled.push_back(id); }
};

QueuedJob array_task(const SlurmSweep& s, const std::string& array_job, int task, const std::string& state) {
  return {array_job + std::to_string(task), array_job, task, state, "None", s.array_script_path()};
}
QueuedJob merge_job(const SlurmSweep& s, const std::string& id, const std::string& reason) {
  return {id, "", -1, "PENDING", reason, s.merge_script_path()};
}

TEST(SlurmSubmit, ArrayThenMergeAfterIt) {
  fs::path dir = setup("submit");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 3), kCommit);
  write_slurm_sweep(s);
  FakeScheduler sch;
  SlurmSubmission r = submit_slurm_sweep(s, sch);
  ASSERT_EQ(sch.submitted.size(), 2u);
  EXPECT_TRUE(sch.submitted[0].first.empty());  // the script's own --array=0-2
  EXPECT_EQ(sch.submitted[0].second, s.array_script_path());
  EXPECT_EQ(sch.submitted[1].first, std::vector<std::string>{"--dependency=afterok:100"});
  EXPECT_EQ(sch.submitted[1].second, s.merge_script_path());
  EXPECT_EQ(r.array_job, "100");
  EXPECT_EQ(r.merge_job, "101");
  EXPECT_EQ(load_slurm_sweep(s.output).submissions.size(), 2u);

  // Submitting the folder again while its jobs are queued is refused, before anything is written.
  sch.jobs = {array_task(s, "100", 1, "RUNNING"), merge_job(s, "101", "Dependency")};
  SlurmSweep again = s;
  again.partition = "elsewhere";
  again.submissions = nlohmann::json::array();
  try {
    submit_slurm_sweep(again, sch);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "jobs 100_1, 101 of an earlier submission")) << e.what();
  }
  EXPECT_EQ(sch.submitted.size(), 2u);
  EXPECT_FALSE(contains(read_file(s.array_script_path()), "elsewhere"));
  EXPECT_EQ(load_slurm_sweep(s.output).submissions.size(), 2u);
  // The same script reached by another path (a symbolic link to the folder) is recognised too.
  fs::create_directory_symlink(s.output, dir / "link");
  sch.jobs = {{"7", "", -1, "PENDING", "Dependency", (dir / "link" / "merge.sh").string()}};
  EXPECT_THROW(submit_slurm_sweep(again, sch), Error);
}

TEST(SlurmResubmit, RerunsOnlyUnfinishedTasksAndReplacesTheStrandedMerge) {
  fs::path dir = setup("resubmit");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 3), kCommit);
  write_slurm_sweep(s);
  run_task(s, 0);
  run_task(s, 2);
  run_task(s, 1);
  fs::remove(run_file_path(s.shard_dir(1), "ngram-g2-t0.7"));  // task 1 was cancelled mid-run

  FakeScheduler sch;
  sch.jobs = {merge_job(s, "13", "DependencyNeverSatisfied"),
              {"99", "", -1, "PENDING", "Resources", "/elsewhere/merge.sh"}};  // another sweep's job
  SlurmSubmission r = resubmit_slurm_sweep(s.output, sch, kCommit);
  EXPECT_TRUE(r.nothing_to_do.empty());
  EXPECT_EQ(r.tasks, std::vector<int>{1});
  EXPECT_EQ(sch.cancelled, std::vector<std::string>{"13"});
  ASSERT_EQ(sch.submitted.size(), 2u);
  EXPECT_EQ(sch.submitted[0].first, std::vector<std::string>{"--array=1"});
  EXPECT_EQ(sch.submitted[0].second, s.array_script_path());
  EXPECT_EQ(sch.submitted[1].first, std::vector<std::string>{"--dependency=afterok:100"});
  EXPECT_EQ(sch.submitted[1].second, s.merge_script_path());
  const SlurmSweep back = load_slurm_sweep(s.output);
  ASSERT_EQ(back.submissions.size(), 3u);  // cancel, array, merge
  EXPECT_EQ(back.submissions[1]["tasks"], "1");
}

TEST(SlurmResubmit, TasksStillQueuedAreLeftAloneAndWaitedFor) {
  fs::path dir = setup("queued");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 4), kCommit);
  write_slurm_sweep(s);
  run_task(s, 0);  // tasks 1 and 3 failed; task 2 still runs
  FakeScheduler sch;
  sch.jobs = {array_task(s, "40", 2, "RUNNING"), merge_job(s, "41", "Dependency")};
  SlurmSubmission r = resubmit_slurm_sweep(s.output, sch, kCommit);
  EXPECT_EQ(r.tasks, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.waiting, std::vector<std::string>{"40_2"});
  EXPECT_EQ(sch.cancelled, std::vector<std::string>{"41"});
  ASSERT_EQ(sch.submitted.size(), 2u);
  EXPECT_EQ(sch.submitted[0].first, std::vector<std::string>{"--array=1,3"});
  EXPECT_EQ(sch.submitted[1].first, std::vector<std::string>{"--dependency=afterok:100:40_2"});

  // Only queued tasks remain unfinished and the merge waits for them: nothing to do.
  run_task(s, 1);
  run_task(s, 3);
  FakeScheduler sch2;
  sch2.jobs = {array_task(s, "40", 2, "RUNNING"), merge_job(s, "101", "Dependency")};
  r = resubmit_slurm_sweep(s.output, sch2, kCommit);
  EXPECT_TRUE(contains(r.nothing_to_do, "merge job 101 waits for them")) << r.nothing_to_do;
  EXPECT_TRUE(sch2.submitted.empty());
  EXPECT_TRUE(sch2.cancelled.empty());
}

TEST(SlurmResubmit, FinishedTasksWithoutAMergeGetOne) {
  fs::path dir = setup("merge-only");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 3), kCommit);
  write_slurm_sweep(s);
  for (int k = 0; k < 3; ++k) run_task(s, k);
  // Every run is saved, but a task was killed before it exited cleanly: the merge is stranded.
  FakeScheduler sch;
  sch.jobs = {merge_job(s, "7", "DependencyNeverSatisfied")};
  SlurmSubmission r = resubmit_slurm_sweep(s.output, sch, kCommit);
  EXPECT_TRUE(r.tasks.empty());
  EXPECT_EQ(sch.cancelled, std::vector<std::string>{"7"});
  ASSERT_EQ(sch.submitted.size(), 1u);
  EXPECT_TRUE(sch.submitted[0].first.empty());  // nothing left to wait for
  EXPECT_EQ(sch.submitted[0].second, s.merge_script_path());

  // Once merged, there is nothing to do.
  merge_sweep(s);
  FakeScheduler sch2;
  r = resubmit_slurm_sweep(s.output, sch2, kCommit);
  EXPECT_TRUE(contains(r.nothing_to_do, "every task finished")) << r.nothing_to_do;
  EXPECT_TRUE(sch2.submitted.empty());
}

TEST(SlurmResubmit, RefusesAChangedConfigBuildOrARunningMerge) {
  fs::path dir = setup("changed");
  SlurmSweep s = plan_slurm_sweep(options_for(dir, 2), kCommit);
  write_slurm_sweep(s);
  FakeScheduler sch;
  try {
    resubmit_slurm_sweep(s.output, sch, "fedcba987654");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(s.manifest_path() + ": the sweep was written by specmoe build " + kCommit +
                                                  ", this is build fedcba987654"))
        << e.what();
  }
  sch.jobs = {{"5", "", -1, "RUNNING", "None", s.merge_script_path()}};
  try {
    resubmit_slurm_sweep(s.output, sch, kCommit);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "merge job 5 is RUNNING")) << e.what();
  }
  std::ofstream(dir / "e.toml", std::ios::app) << "\n# an edit that changes nothing keeps the hash\n";
  sch.jobs.clear();
  EXPECT_NO_THROW(resubmit_slurm_sweep(s.output, sch, kCommit));
  std::string text = read_file((dir / "e.toml").string());
  std::ofstream(dir / "e.toml") << text.replace(text.find("seed = 11"), 9, "seed = 12");
  try {
    resubmit_slurm_sweep(s.output, sch, kCommit);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(s.config + ": config hash ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the hash the sweep was written for")) << e.what();
  }
}


// The CLI (build/specmoe): the scripts written without --submit, and one-line errors.
std::string cli_binary() {
  const char* dir = std::getenv("SPECMOE_BINARY_DIR");
  return (fs::path(dir ? dir : SPECMOE_BINARY_DIR) / "specmoe").string();
}

#define SPECMOE_REQUIRE_CLI()                                                                               \
  do {                                                                                                      \
    if (!fs::exists(cli_binary()))                                                                          \
      GTEST_SKIP() << "CLI binary " << cli_binary() << " not built (cmake --build build --target specmoe)"; \
  } while (0)

void expect_cli_error(const std::string& args, const std::string& phrase) {
  Shell r = shell(cli_binary() + " " + args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
  EXPECT_TRUE(r.output.starts_with("specmoe: error: ")) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "not one line: " << r.output;
  EXPECT_TRUE(contains(r.output, phrase)) << args << ": '" << phrase << "' not in: " << r.output;
}

TEST(SlurmCli, WritesTheScriptsAndPrintsTheSbatchCommands) {
  SPECMOE_REQUIRE_CLI();
  fs::path dir = setup("cli");
  const std::string out = (dir / "sweep").string();
  Shell r = shell("(" + cli_binary() + " slurm " + (dir / "e.toml").string() + " --array 2 -o " + out +
                  " --cpus-per-task 2 --extra --mem=2G --extra '#SBATCH --qos=low' 2>/dev/null)");  // stdout only
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(lines(r.output), (std::vector<std::string>{"jid=$(sbatch --parsable " + out + "/array.sh)",
                                                       "sbatch --dependency=afterok:${jid%%;*} " + out + "/merge.sh"}));
  const std::string a = read_file(out + "/array.sh");
  EXPECT_TRUE(contains(a, "#SBATCH --mem=2G\n#SBATCH --qos=low\n")) << a;
  EXPECT_TRUE(contains(a, "#SBATCH --cpus-per-task=2\n")) << a;
  // The scripts run this binary, by absolute path.
  EXPECT_TRUE(contains(a, "exec " + fs::canonical(cli_binary()).string() + " run ")) << a;
  EXPECT_TRUE(fs::exists(out + "/slurm.json"));
}

TEST(SlurmCli, OneLineErrors) {
  SPECMOE_REQUIRE_CLI();
  fs::path dir = setup("cli-errors");
  const std::string toml = (dir / "e.toml").string();
  expect_cli_error("slurm " + toml, "--array N is required");
  expect_cli_error("slurm " + toml + " --array 20 -o " + (dir / "o").string(), "at most 10 tasks");
  expect_cli_error("slurm --resubmit " + dir.string(), dir.string() + ": no slurm.json");
  expect_cli_error("slurm --resubmit " + dir.string() + " " + toml, "takes no config");
  // merge: an unfinished shard is named, and nothing is written.
  for (int k = 0; k < 2; ++k) {
    Shell r = shell(cli_binary() + " run " + toml + " --shard " + std::to_string(k + 1) + "/2 -o " +
                    (dir / ("s" + std::to_string(k))).string() + " --dry-run");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  expect_cli_error("merge " + (dir / "s0").string() + " " + (dir / "s1").string() + " -o " + (dir / "m").string(),
                   "no experiment.json in any of the 2 input folders");
}

}  // namespace
}  // namespace specmoe::exp
