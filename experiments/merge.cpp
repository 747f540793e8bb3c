// merge_reports: shard output folders of one experiment -> one output folder and report.
#include <algorithm>
#include <filesystem>
#include <map>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/output_lock.h"
#include "experiments/report_writer.h"
#include "experiments/result_json.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

MergeSummary merge_reports(const std::vector<std::string>& dirs, const std::string& out) {
  if (dirs.empty()) throw_error(ErrorKind::InvalidArgument, "merge: no input folders given");
  ExperimentFile first = load_experiment_file((fs::path(dirs[0]) / "experiment.json").string());
  std::map<std::string, std::string> expected;  // run name -> config hash
  for (const auto& r : first.config.at("runs")) expected[r.value("name", "")] = r.value("config_hash", "");

  std::map<std::string, RunFile> runs;
  for (const auto& dir : dirs) {
    ExperimentFile ef = load_experiment_file((fs::path(dir) / "experiment.json").string());
    if (ef.config_hash != first.config_hash)
      throw_error(ErrorKind::Config, "{}: experiment config hash {} differs from {} ({}); only shards of one experiment merge",
                  dir, ef.config_hash, first.config_hash, dirs[0]);
    fs::path run_dir = fs::path(dir) / "runs";
    std::error_code ec;
    if (!fs::is_directory(run_dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(run_dir))
      if (e.is_regular_file() && e.path().extension() == ".json" && e.path().filename().string()[0] != '.')
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      RunFile f = load_run_file(p.string());
      auto it = expected.find(f.name);
      if (it == expected.end() || it->second != f.config_hash) continue;  // stale: another config's run
      runs.emplace(f.name, std::move(f));  // the first folder that has a run wins
    }
  }

  // The merged folder gets one writer, like a run's output folder.
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw_error(ErrorKind::Io, "{}: cannot create the merged output folder: {}", out, ec.message());
  OutputLock lock = OutputLock::acquire(out, "specmoe merge");
  remove_stale_temp_files(out);
  remove_stale_temp_files((fs::path(out) / "runs").string());

  ExperimentFile merged = first;
  merged.config["experiment"]["output"] = out;
  save_experiment_file((fs::path(out) / "experiment.json").string(), merged);
  for (const auto& [name, f] : runs) save_run_file(run_file_path(out, name), f);
  Report r = rebuild_report(out);
  return {static_cast<int>(r.runs.size()), r.missing_runs};
}

}  // namespace specmoe::exp
