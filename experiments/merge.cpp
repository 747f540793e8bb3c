// merge_reports: the output folders of the n shards of one experiment -> one output folder and
// report. Each shard contributes the runs --shard i/n gave it (index % n == i), so a folder that
// once held other runs adds nothing stale; a shard of another config or build, a shard given
// twice, and (unless partial merges are allowed) a missing or unfinished shard are refused.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/output_lock.h"
#include "experiments/report_writer.h"
#include "experiments/result_json.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

struct Shard {
  std::string dir;
  ExperimentFile ef;
};

struct ExpectedRun {
  std::string name;
  int64_t index = 0;
  std::string config_hash;
};

// "a, b, c" (at most `limit` names, then "and N more").
std::string name_list(const std::vector<std::string>& names, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > limit) s += fmt::format(" and {} more", names.size() - limit);
  return s;
}

bool same_folder(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

}  // namespace

MergeSummary merge_reports(const std::vector<std::string>& dirs, const std::string& out, const MergeOptions& options) {
  if (dirs.empty()) throw_error(ErrorKind::InvalidArgument, "merge: no input folders given");

  // Folders without experiment.json are shards whose task never started (or not output folders).
  std::vector<Shard> shards;
  std::vector<std::string> absent;
  for (const auto& dir : dirs) {
    if (same_folder(dir, out))
      throw_error(ErrorKind::InvalidArgument, "{}: the merge output folder is also an input; merge into another folder", dir);
    const std::string file = (fs::path(dir) / "experiment.json").string();
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      absent.push_back(dir);
      continue;
    }
    shards.push_back({dir, load_experiment_file(file)});
  }
  if (shards.empty())
    throw_error(ErrorKind::Config, "{}: no experiment.json in any of the {} input folders; nothing to merge", dirs[0],
                dirs.size());

  // One experiment, one split, one build.
  const Shard& first = shards[0];
  const std::string& want_hash = options.expect_config_hash.empty() ? first.ef.config_hash : options.expect_config_hash;
  const std::string hash_source = options.expect_config_hash.empty() ? "(" + first.dir + ")" : "(the sweep's)";
  for (const auto& s : shards)
    if (s.ef.config_hash != want_hash)
      throw_error(ErrorKind::Config, "{}: experiment config hash {} differs from {} {}; only shards of one experiment merge",
                  s.dir, s.ef.config_hash, want_hash, hash_source);
  const int n = first.ef.shard_n;
  std::map<int, const Shard*> by_index;
  for (const auto& s : shards) {
    if (s.ef.shard_n != n)
      throw_error(ErrorKind::Config, "{}: shard {}/{} belongs to a {}-way split, {} to a {}-way split", s.dir,
                  s.ef.shard_i + 1, s.ef.shard_n, s.ef.shard_n, first.dir, n);
    auto [it, inserted] = by_index.emplace(s.ef.shard_i, &s);
    if (!inserted)
      throw_error(ErrorKind::Config, "shard {}/{} given twice: {} and {}", s.ef.shard_i + 1, n, it->second->dir, s.dir);
  }

  std::vector<ExpectedRun> expected;
  for (const auto& r : first.ef.config.at("runs"))
    expected.push_back({r.value("name", ""), r.value("index", int64_t{0}), r.value("config_hash", "")});

  std::vector<std::string> gaps;
  for (const auto& dir : absent) gaps.push_back(fmt::format("{}: no output (no experiment.json; its task never started?)", dir));
  std::vector<RunFile> runs;
  std::string ref_commit = options.expect_commit, ref_file;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> own;  // the runs shard i has to hold
    for (const auto& r : expected)
      if (r.index % n == i) own.push_back(r.name);
    auto it = by_index.find(i);
    if (it == by_index.end()) {
      gaps.push_back(fmt::format("shard {}/{}: missing, no input folder holds it ({} runs: {})", i + 1, n, own.size(),
                                 name_list(own)));
      continue;
    }
    const Shard& s = *it->second;
    std::vector<std::string> unfinished;
    for (const auto& r : expected) {
      if (r.index % n != i) continue;
      const std::string file = run_file_path(s.dir, r.name);
      std::error_code ec;
      if (!fs::exists(file, ec)) {
        unfinished.push_back(r.name);
        continue;
      }
      RunFile f = load_run_file(file);
      if (f.config_hash != r.config_hash) {  // left from another config: the run is not done
        unfinished.push_back(r.name);
        continue;
      }
      const std::string commit = f.environment.is_object() ? f.environment.value("specmoe_commit", "unknown") : "unknown";
      if (ref_commit.empty()) {
        ref_commit = commit;
        ref_file = file;
      } else if (commit != ref_commit) {
        if (ref_file.empty())
          throw_error(ErrorKind::Config,
                      "{}: made by specmoe build {}, the sweep expects build {}; shards of different builds do not merge",
                      file, commit, ref_commit);
        throw_error(ErrorKind::Config, "{}: made by specmoe build {}, {} by build {}; shards of different builds do not merge",
                    file, commit, ref_file, ref_commit);
      }
      runs.push_back(std::move(f));
    }
    if (!unfinished.empty())
      gaps.push_back(fmt::format("{} (shard {}/{}): incomplete, {} of {} runs unfinished: {}", s.dir, i + 1, n,
                                 unfinished.size(), own.size(), name_list(unfinished)));
  }
  if (!gaps.empty() && !options.allow_partial) {
    std::string msg;
    for (const auto& g : gaps) msg += (msg.empty() ? "" : "; ") + g;
    throw_error(ErrorKind::Config, "{}; --allow-partial merges what is there", msg);
  }

  // The merged folder gets one writer, like a run's output folder.
  {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) throw_error(ErrorKind::Io, "{}: cannot create the merged output folder: {}", out, ec.message());
  }
  OutputLock lock = OutputLock::acquire(out, "specmoe merge");
  remove_stale_temp_files(out);
  remove_stale_temp_files((fs::path(out) / "runs").string());

  ExperimentFile merged = first.ef;
  merged.config["experiment"]["output"] = out;
  merged.shard_i = 0;
  merged.shard_n = 1;
  merged.merge = {{"shards", n}, {"inputs", dirs}, {"partial", !gaps.empty()}, {"gaps", gaps}};
  save_experiment_file((fs::path(out) / "experiment.json").string(), merged);
  // The merged folder holds exactly this merge's runs: an earlier merge's files of runs not merged
  // now are removed, so the report's gaps are this merge's.
  std::set<std::string> merged_names;
  for (const auto& f : runs) merged_names.insert(f.name);
  for (const auto& r : expected) {
    if (merged_names.count(r.name)) continue;
    std::error_code ec;
    fs::remove(run_file_path(out, r.name), ec);
  }
  for (const auto& f : runs) save_run_file(run_file_path(out, f.name), f);
  Report rep = rebuild_report(out);
  MergeSummary summary;
  summary.runs = static_cast<int>(rep.runs.size());
  summary.shards = n;
  summary.missing = rep.missing_runs;
  summary.gaps = std::move(gaps);
  return summary;
}

}  // namespace specmoe::exp
