// specmoe slurm: the sweep's plan and record, its batch scripts, completeness on disk, and
// submission and recovery through a Scheduler.
#include "experiments/slurm.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/environment.h"
#include "experiments/json_text.h"
#include "experiments/result_json.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSlurmFileFormat = "specmoe-slurm/1";

// A word for a bash script: as is when it holds no special character, else single-quoted.
std::string sh_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("/._-+=:,@%").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string absolute_path(const std::string& p) { return fs::absolute(fs::path(p)).lexically_normal().string(); }

// The text with line breaks shown as \n, so that an error about it stays one line.
std::string one_line(const std::string& text) {
  std::string s;
  for (char c : text) s += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
  return s;
}

// Slurm reads #SBATCH lines word by word and expands % patterns in --output, so the sweep folder's
// path (which appears there) must be free of both.
void check_sbatch_path(const std::string& path, const char* what) {
  for (char c : path)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '%' || c == '"' || c == '\'' || c == '\\')
      throw_error(ErrorKind::InvalidArgument,
                  "{} {}: the path holds '{}', which an #SBATCH line cannot carry; choose another folder", what,
                  one_line(path), one_line(std::string(1, c)));
}

void check_sbatch_value(const std::string& value, const char* flag) {
  for (char c : value)
    if (std::isspace(static_cast<unsigned char>(c)))
      throw_error(ErrorKind::InvalidArgument, "{} '{}': expected one word without spaces", flag, one_line(value));
}

std::string normalize_extra(const std::string& line) {
  std::string s = line;
  if (s.find_first_of("\n\r") != std::string::npos)
    throw_error(ErrorKind::InvalidArgument, "--extra '{}': one #SBATCH line, without line breaks", one_line(line));
  auto trim = [](std::string& t) {
    const size_t a = t.find_first_not_of(" \t"), b = t.find_last_not_of(" \t");
    t = a == std::string::npos ? "" : t.substr(a, b - a + 1);
  };
  trim(s);
  if (s.rfind("#SBATCH", 0) == 0) {
    s = s.substr(7);
    trim(s);
  }
  if (s.empty() || s[0] != '-')
    throw_error(ErrorKind::InvalidArgument, "--extra '{}': expected an sbatch option such as \"--account=NAME\"", line);
  const std::string name = s.substr(0, s.find_first_of("= \t"));
  for (const char* own : {"--array", "-a", "--dependency", "-d", "--output", "-o", "--job-name", "-J"})
    if (name == own)
      throw_error(ErrorKind::InvalidArgument, "--extra '{}': {} is set by specmoe slurm itself", line, name);
  return s;
}

std::string job_name(const std::string& experiment) {
  std::string s = "specmoe-";
  for (char c : experiment)
    s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  return s;
}

std::string header(const SlurmSweep& s, const std::string& what) {
  std::string out = "#!/bin/bash\n";
  out += fmt::format("# specmoe sweep '{}': {}\n", s.experiment, what);
  out += "# Written by `specmoe slurm`; submit both jobs with\n";
  for (const auto& c : slurm_submit_commands(s)) out += "#   " + c + "\n";
  out += fmt::format("# config:         {}\n", s.config);
  out += fmt::format("# config hash:    {}\n", s.config_hash);
  out += fmt::format("# specmoe commit: {}\n", s.commit);
  out += fmt::format("# specmoe:        {}\n", s.specmoe);
  return out;
}

std::string common_sbatch(const SlurmSweep& s) {
  std::string out;
  if (!s.partition.empty()) out += "#SBATCH --partition=" + s.partition + "\n";
  if (!s.time.empty()) out += "#SBATCH --time=" + s.time + "\n";
  for (const auto& e : s.extra) out += "#SBATCH " + e + "\n";
  return out;
}

bool run_finished(const std::string& file, const std::string& config_hash) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return false;
  try {
    return load_run_file(file).config_hash == config_hash;
  } catch (const Error&) {
    return false;  // unreadable: `run --resume` runs it again
  }
}

bool active(const QueuedJob& j) { return j.state != "COMPLETED" && j.state != "CANCELLED" && j.state != "FAILED"; }

}  // namespace

std::string SlurmSweep::array_script_path() const { return (fs::path(output) / "array.sh").string(); }
std::string SlurmSweep::merge_script_path() const { return (fs::path(output) / "merge.sh").string(); }
std::string SlurmSweep::manifest_path() const { return (fs::path(output) / "slurm.json").string(); }
std::string SlurmSweep::shard_dir(int task) const { return (fs::path(output) / fmt::format("shard-{}", task)).string(); }
std::string SlurmSweep::merged_dir() const { return (fs::path(output) / "all").string(); }
std::string SlurmSweep::log_dir() const { return (fs::path(output) / "logs").string(); }

std::string task_ranges(const std::vector<int>& tasks) {
  std::vector<int> t = tasks;
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  std::string out;
  for (size_t i = 0; i < t.size();) {
    size_t j = i;
    while (j + 1 < t.size() && t[j + 1] == t[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(t[i]) : fmt::format("{}-{}", t[i], t[j]);
    i = j + 1;
  }
  return out;
}

SlurmSweep plan_slurm_sweep(const SlurmOptions& o, const std::string& commit) {
  if (o.tasks < 1) throw_error(ErrorKind::InvalidArgument, "--array {}: expected at least 1 task", o.tasks);
  if (o.cpus_per_task < 0)
    throw_error(ErrorKind::InvalidArgument, "--cpus-per-task {}: expected at least 1", o.cpus_per_task);
  if (o.gpus_per_task < 0)
    throw_error(ErrorKind::InvalidArgument, "--gpus-per-task {}: expected 0 or more", o.gpus_per_task);
  if (o.specmoe.empty()) throw_error(ErrorKind::InvalidArgument, "slurm: the specmoe binary's path is not known");
  check_sbatch_value(o.partition, "--partition");
  check_sbatch_value(o.time, "--time");

  SlurmSweep s;
  s.config = absolute_path(o.config);
  s.specmoe = absolute_path(o.specmoe);
  s.commit = commit;
  s.tasks = o.tasks;
  s.gpus_per_task = o.gpus_per_task;
  s.partition = o.partition;
  s.time = o.time;
  for (const auto& e : o.extra) s.extra.push_back(normalize_extra(e));

  // Threads per task are the task's CPUs, which the config hash covers; with no --cpus-per-task
  // the config's own thread count is asked for (1 when it says "all").
  RunOptions ro;
  const ExperimentPlan first = plan_experiment(s.config, ro);
  s.cpus_per_task = o.cpus_per_task > 0 ? o.cpus_per_task : std::max(first.threads_configured, 1);
  ro.threads_override = s.cpus_per_task;
  const ExperimentPlan plan = plan_experiment(s.config, ro);
  s.experiment = plan.name;
  s.config_hash = plan.config_hash;
  s.runs = plan.runs;
  s.output = absolute_path(o.output.empty() ? plan.output : o.output);
  check_sbatch_path(s.output, "-o");
  check_sbatch_path(s.specmoe, "specmoe binary");
  if (static_cast<size_t>(s.tasks) > s.runs.size())
    throw_error(ErrorKind::InvalidArgument, "--array {}: the experiment has {} runs, so at most {} tasks get one",
                s.tasks, s.runs.size(), s.runs.size());
  return s;
}

std::vector<std::string> slurm_submit_commands(const SlurmSweep& s) {
  return {"jid=$(sbatch --parsable " + sh_quote(s.array_script_path()) + ")",
          "sbatch --dependency=afterok:${jid%%;*} " + sh_quote(s.merge_script_path())};
}

std::string slurm_array_script(const SlurmSweep& s) {
  std::string out = header(s, fmt::format("array job, task K runs shard K+1 of {} ({} runs) into {}", s.tasks,
                                          s.runs.size(), (fs::path(s.output) / "shard-K").string()));
  out += "#SBATCH --job-name=" + job_name(s.experiment) + "\n";
  out += fmt::format("#SBATCH --array=0-{}\n", s.tasks - 1);
  out += "#SBATCH --ntasks=1\n";
  out += fmt::format("#SBATCH --cpus-per-task={}\n", s.cpus_per_task);
  if (s.gpus_per_task > 0) out += fmt::format("#SBATCH --gpus-per-task={}\n", s.gpus_per_task);
  out += "#SBATCH --output=" + (fs::path(s.log_dir()) / "shard-%a.out").string() + "\n";
  out += "#SBATCH --open-mode=append\n";  // a rerun task's log continues the first attempt's
  out += common_sbatch(s);
  out += "set -euo pipefail\n";
  out += ": \"${SLURM_ARRAY_TASK_ID:?submit this script with sbatch: it is a Slurm job array}\"\n";
  out += "task=$SLURM_ARRAY_TASK_ID\n";
  out += fmt::format("threads=${{SLURM_CPUS_PER_TASK:-{}}}\n", s.cpus_per_task);
  out += "echo \"specmoe: task $task (shard $((task + 1))/" + std::to_string(s.tasks) +
         ") on $(hostname) with $threads threads, job ${SLURM_JOB_ID:-?}\"\n";
  out += "exec " + sh_quote(s.specmoe) + " run " + sh_quote(s.config) + " --shard \"$((task + 1))/" +
         std::to_string(s.tasks) + "\" -o " + sh_quote((fs::path(s.output) / "shard-").string()) +
         "\"$task\" --resume --threads \"$threads\"";
  // Slurm restricts CUDA_VISIBLE_DEVICES to the task's GPUs, so the first of them is cuda:0.
  if (s.gpus_per_task > 0) out += " --device cuda:0";
  out += " --quiet \\\n  --expect-config-hash " + s.config_hash + " --expect-commit " + sh_quote(s.commit) + "\n";
  return out;
}

std::string slurm_merge_script(const SlurmSweep& s) {
  std::string out = header(s, fmt::format("merge job, after every array task succeeded, into {}", s.merged_dir()));
  out += "#SBATCH --job-name=" + job_name(s.experiment) + "-merge\n";
  out += "#SBATCH --ntasks=1\n";
  out += "#SBATCH --cpus-per-task=1\n";
  out += "#SBATCH --output=" + (fs::path(s.log_dir()) / "merge-%j.out").string() + "\n";
  out += common_sbatch(s);
  out += "set -euo pipefail\n";
  out += "exec " + sh_quote(s.specmoe) + " merge";
  for (int k = 0; k < s.tasks; ++k) out += " \\\n  " + sh_quote(s.shard_dir(k));
  out += " \\\n  -o " + sh_quote(s.merged_dir()) + " --expect-config-hash " + s.config_hash + " --expect-commit " +
         sh_quote(s.commit) + "\n";
  return out;
}

nlohmann::json slurm_sweep_to_json(const SlurmSweep& s) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : s.runs)
    runs.push_back({{"name", r.name}, {"index", r.index}, {"config_hash", r.config_hash}, {"task", r.index % s.tasks}});
  return {{"format", kSlurmFileFormat},
          {"experiment", s.experiment},
          {"config", s.config},
          {"output", s.output},
          {"specmoe", s.specmoe},
          {"config_hash", s.config_hash},
          {"commit", s.commit},
          {"tasks", s.tasks},
          {"cpus_per_task", s.cpus_per_task},
          {"gpus_per_task", s.gpus_per_task},
          {"partition", s.partition},
          {"time", s.time},
          {"extra", s.extra},
          {"runs", runs},
          {"submissions", s.submissions}};
}

SlurmSweep slurm_sweep_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("format") || j["format"] != kSlurmFileFormat)
    throw_error(ErrorKind::Format, "{}: not a specmoe slurm sweep record (format '{}' expected)", where, kSlurmFileFormat);
  SlurmSweep s;
  try {
    s.experiment = j.at("experiment").get<std::string>();
    s.config = j.at("config").get<std::string>();
    s.output = j.at("output").get<std::string>();
    s.specmoe = j.at("specmoe").get<std::string>();
    s.config_hash = j.at("config_hash").get<std::string>();
    s.commit = j.at("commit").get<std::string>();
    s.tasks = j.at("tasks").get<int>();
    s.cpus_per_task = j.at("cpus_per_task").get<int>();
    s.gpus_per_task = j.at("gpus_per_task").get<int>();
    s.partition = j.at("partition").get<std::string>();
    s.time = j.at("time").get<std::string>();
    s.extra = j.at("extra").get<std::vector<std::string>>();
    for (const auto& r : j.at("runs"))
      s.runs.push_back({r.at("name").get<std::string>(), r.at("index").get<int>(), r.at("config_hash").get<std::string>()});
    s.submissions = j.value("submissions", nlohmann::json::array());
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Format, "{}: malformed sweep record: {}", where, e.what());
  }
  if (s.tasks < 1 || s.runs.empty()) throw_error(ErrorKind::Format, "{}: malformed sweep record: no tasks or runs", where);
  return s;
}

void save_slurm_manifest(const SlurmSweep& s) { write_file_atomic(s.manifest_path(), dump_json(slurm_sweep_to_json(s), 1) + "\n"); }

void write_slurm_sweep(const SlurmSweep& s) {
  std::error_code ec;
  fs::create_directories(s.log_dir(), ec);  // Slurm does not create the --output folder
  if (ec) throw_error(ErrorKind::Io, "{}: cannot create the folder: {}", s.log_dir(), ec.message());
  for (const auto& [path, text] : {std::pair{s.array_script_path(), slurm_array_script(s)},
                                   std::pair{s.merge_script_path(), slurm_merge_script(s)}}) {
    write_file_atomic(path, text);
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
  }
  save_slurm_manifest(s);
}

SlurmSweep load_slurm_sweep(const std::string& dir) {
  const std::string path = (fs::path(dir) / "slurm.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw_error(ErrorKind::Io, "{}: no slurm.json; not a sweep folder written by `specmoe slurm`", dir);
  return slurm_sweep_from_json(parse_json_file(path), path);
}

std::vector<TaskStatus> slurm_task_status(const SlurmSweep& s) {
  std::vector<TaskStatus> out(s.tasks);
  for (int k = 0; k < s.tasks; ++k) out[k].task = k;
  for (const auto& r : s.runs) {
    TaskStatus& t = out[r.index % s.tasks];
    ++t.runs;
    if (!run_finished(run_file_path(s.shard_dir(t.task), r.name), r.config_hash)) t.unfinished.push_back(r.name);
  }
  return out;
}

bool slurm_merge_complete(const SlurmSweep& s) {
  const std::string ef = (fs::path(s.merged_dir()) / "experiment.json").string();
  std::error_code ec;
  if (!fs::exists(ef, ec)) return false;
  try {
    if (load_experiment_file(ef).config_hash != s.config_hash) return false;
  } catch (const Error&) {
    return false;
  }
  for (const auto& r : s.runs)
    if (!run_finished(run_file_path(s.merged_dir(), r.name), r.config_hash)) return false;
  return true;
}

std::vector<QueuedJob> parse_squeue(const std::string& text) {
  std::vector<QueuedJob> jobs;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> f;
    size_t start = 0;
    for (int i = 0; i < 5; ++i) {  // the command, last, may itself hold '|'
      const size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    f.push_back(line.substr(start));
    if (f.size() != 6)
      throw_error(ErrorKind::Format, "squeue output line {}: expected 6 '|'-separated fields, got '{}'", line_no, line);
    QueuedJob j;
    j.job_id = f[0];
    j.state = f[3];
    j.reason = f[4];
    j.command = f[5];
    if (f[2] != "N/A" && !f[2].empty()) {
      try {
        size_t used = 0;
        j.array_task = std::stoi(f[2], &used);
        if (used != f[2].size() || j.array_task < 0) throw std::invalid_argument(f[2]);
      } catch (const std::exception&) {
        throw_error(ErrorKind::Format, "squeue output line {}: array task id '{}' is not a number", line_no, f[2]);
      }
      j.array_job_id = f[1];
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

namespace {

struct SweepQueue {
  std::map<int, std::string> tasks;  // queued array task -> "ARRAYJOB_TASK"
  std::vector<QueuedJob> merges;     // queued merge jobs
  std::vector<std::string> all_ids;
};

// Whether squeue's command is this script: the same path, or another spelling of it (a job
// submitted by hand from another folder or through a symbolic link).
bool is_script(const std::string& command, const std::string& script) {
  if (command == script) return true;
  std::error_code ec;
  return !command.empty() && command[0] == '/' && fs::equivalent(command, script, ec) && !ec;
}

SweepQueue sweep_queue(const SlurmSweep& s, Scheduler& scheduler) {
  SweepQueue q;
  const std::string array = s.array_script_path(), merge = s.merge_script_path();
  for (const auto& j : scheduler.queue()) {
    if (!active(j)) continue;
    const bool is_merge = is_script(j.command, merge);
    if (!is_merge && !is_script(j.command, array)) continue;
    q.all_ids.push_back(j.array_task >= 0 ? fmt::format("{}_{}", j.array_job_id, j.array_task) : j.job_id);
    if (is_merge) q.merges.push_back(j);
    else if (j.array_task >= 0 && j.array_task < s.tasks) q.tasks[j.array_task] = q.all_ids.back();
  }
  return q;
}

void record(SlurmSweep& s, const std::string& kind, const std::string& job, const std::string& detail_key,
            const std::string& detail) {
  s.submissions.push_back({{"kind", kind}, {"job", job}, {detail_key, detail}, {"date", utc_now_iso8601()}});
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

}  // namespace

SlurmSubmission submit_slurm_sweep(SlurmSweep& s, Scheduler& scheduler) {
  const SweepQueue q = sweep_queue(s, scheduler);
  if (!q.all_ids.empty())
    throw_error(ErrorKind::Runtime,
                "{}: jobs {} of an earlier submission of this sweep are still queued; wait for them, scancel them, or "
                "run `specmoe slurm --resubmit {}`",
                s.output, join(q.all_ids), s.output);
  write_slurm_sweep(s);
  SlurmSubmission out;
  out.array_job = scheduler.submit({}, s.array_script_path());
  for (int k = 0; k < s.tasks; ++k) out.tasks.push_back(k);
  record(s, "array", out.array_job, "tasks", task_ranges(out.tasks));
  save_slurm_manifest(s);
  out.dependency = "afterok:" + out.array_job;
  try {
    out.merge_job = scheduler.submit({"--dependency=" + out.dependency}, s.merge_script_path());
  } catch (const Error& e) {
    throw_error(ErrorKind::Runtime, "array job {} submitted, but not the merge job ({}); `specmoe slurm --resubmit {}` submits it",
                out.array_job, e.what(), s.output);
  }
  record(s, "merge", out.merge_job, "dependency", out.dependency);
  save_slurm_manifest(s);
  return out;
}

SlurmSubmission resubmit_slurm_sweep(const std::string& dir, Scheduler& scheduler, const std::string& commit) {
  SlurmSweep s = load_slurm_sweep(dir);
  if (commit != s.commit)
    throw_error(ErrorKind::Config,
                "{}: the sweep was written by specmoe build {}, this is build {}; its shards would mix builds (run the "
                "resubmit with that build, or write a new sweep into another folder)",
                s.manifest_path(), s.commit, commit);
  RunOptions ro;
  ro.threads_override = s.cpus_per_task;
  const ExperimentPlan plan = plan_experiment(s.config, ro);
  if (plan.config_hash != s.config_hash)
    throw_error(ErrorKind::Config,
                "{}: config hash {} differs from {}, the hash the sweep was written for (the TOML, its prompts or "
                "models changed); write a new sweep into another folder",
                s.config, plan.config_hash, s.config_hash);

  SweepQueue q = sweep_queue(s, scheduler);
  for (const auto& m : q.merges)
    if (m.state != "PENDING")
      throw_error(ErrorKind::Runtime, "{}: merge job {} is {}; wait for it to end before resubmitting", s.output, m.job_id,
                  m.state);

  SlurmSubmission out;
  for (const auto& t : slurm_task_status(s))
    if (!t.finished() && !q.tasks.count(t.task)) out.tasks.push_back(t.task);
  for (const auto& [task, id] : q.tasks) out.waiting.push_back(id);

  // A merge job still pending on tasks that are queued is fine as it is; one that waits on a task
  // that ended unfinished (or can never run, DependencyNeverSatisfied) is stranded.
  const bool healthy_merge = out.tasks.empty() && !q.merges.empty() &&
                             std::all_of(q.merges.begin(), q.merges.end(),
                                         [](const QueuedJob& m) { return m.reason != "DependencyNeverSatisfied"; });
  if (out.tasks.empty() && (healthy_merge || (q.merges.empty() && out.waiting.empty() && slurm_merge_complete(s)))) {
    out.nothing_to_do = healthy_merge
                            ? fmt::format("every unfinished task is still queued ({}); merge job {} waits for them",
                                          out.waiting.empty() ? std::string("none") : join(out.waiting), q.merges[0].job_id)
                            : fmt::format("every task finished and {} holds the merged report", s.merged_dir());
    return out;
  }

  for (const auto& m : q.merges) {
    scheduler.cancel(m.job_id);
    out.cancelled.push_back(m.job_id);
    record(s, "cancel", m.job_id, "reason", "stranded merge job");
  }
  std::vector<std::string> deps;
  if (!out.tasks.empty()) {
    out.array_job = scheduler.submit({"--array=" + task_ranges(out.tasks)}, s.array_script_path());
    record(s, "array", out.array_job, "tasks", task_ranges(out.tasks));
    save_slurm_manifest(s);
    deps.push_back(out.array_job);
  }
  for (const auto& w : out.waiting) deps.push_back(w);
  std::vector<std::string> args;
  if (!deps.empty()) {
    out.dependency = "afterok:" + join(deps, ":");
    args.push_back("--dependency=" + out.dependency);
  }
  out.merge_job = scheduler.submit(args, s.merge_script_path());
  record(s, "merge", out.merge_job, "dependency", out.dependency);
  save_slurm_manifest(s);
  return out;
}

}  // namespace specmoe::exp
