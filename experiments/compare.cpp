// compare_reports: two report.json files side by side, flagging changed outputs and counts.
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/experiment.h"
#include "experiments/json_text.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

nlohmann::json load_report_json(const std::string& path) {
  std::string file = fs::is_directory(path) ? (fs::path(path) / "report.json").string() : path;
  const nlohmann::json j = parse_json_file(file);
  if (!j.is_object() || !j.contains("format") || j["format"] != "specmoe-report/1" || !j.contains("runs") ||
      !j["runs"].is_array())
    throw_error(ErrorKind::Format, "{}: not a specmoe report.json", file);
  return j;
}

// A metric's value: a plain number or the "mean" of an estimate; NaN when absent or null.
double metric(const nlohmann::json& run, const char* key) {
  auto it = run.find(key);
  if (it == run.end()) return NAN;
  if (it->is_number()) return it->get<double>();
  if (it->is_object() && it->contains("mean") && (*it)["mean"].is_number()) return (*it)["mean"].get<double>();
  return NAN;
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.4g}", v) : "-"; }

int compare_loaded(const std::string& a_path, const std::string& b_path, const nlohmann::json& a,
                   const nlohmann::json& b, std::ostream& out) {
  auto describe = [](const nlohmann::json& r) {
    const auto& env = r.at("environment");
    return fmt::format("experiment {}, config {}, specmoe {}, {}, {}", r.value("experiment", ""), r.value("config_hash", ""),
                       env.value("specmoe_commit", "?"), env.value("cpu_model", "?"), r.value("created", ""));
  };
  out << "A: " << a_path << " (" << describe(a) << ")\n";
  out << "B: " << b_path << " (" << describe(b) << ")\n";
  int flagged = 0;
  if (a.value("config_hash", "") != b.value("config_hash", "")) out << "note: the configurations differ\n";

  std::map<std::string, const nlohmann::json*> runs_b;
  for (const auto& r : b.at("runs")) runs_b[r.value("name", "")] = &r;
  std::vector<std::string> order;
  std::map<std::string, const nlohmann::json*> runs_a;
  for (const auto& r : a.at("runs")) {
    order.push_back(r.value("name", ""));
    runs_a[order.back()] = &r;
  }
  for (const auto& r : b.at("runs"))
    if (!runs_a.count(r.value("name", ""))) order.push_back(r.value("name", ""));

  static const char* kMetrics[] = {"tokens_per_second", "decode_tokens_per_second", "speedup", "decode_speedup",
                                   "predicted_speedup", "acceptance_rate", "mean_accepted_length", "cost_ratio",
                                   "alpha_fit", "ttft_ms"};
  static const char* kCounts[] = {"n_records", "n_generated", "n_drafted", "n_accepted", "n_steps"};
  for (const auto& name : order) {
    auto ia = runs_a.find(name);
    auto ib = runs_b.find(name);
    if (ia == runs_a.end() || ib == runs_b.end()) {
      out << fmt::format("\nrun {}: only in {}  [FLAG]\n", name, ia == runs_a.end() ? "B" : "A");
      ++flagged;
      continue;
    }
    const nlohmann::json &ra = *ia->second, &rb = *ib->second;
    out << fmt::format("\nrun {}\n  {:<24} {:>12} {:>12} {:>9}\n", name, "metric", "A", "B", "change");
    for (const char* m : kMetrics) {
      double va = metric(ra, m), vb = metric(rb, m);
      if (!std::isfinite(va) && !std::isfinite(vb)) continue;
      std::string change = std::isfinite(va) && std::isfinite(vb) && va != 0
                               ? fmt::format("{:+.1f}%", 100.0 * (vb - va) / std::fabs(va))
                               : "";
      out << fmt::format("  {:<24} {:>12} {:>12} {:>9}\n", m, num(va), num(vb), change);
    }
    for (const char* c : kCounts) {
      int64_t va = ra.value(c, int64_t{-1}), vb = rb.value(c, int64_t{-1});
      bool differ = va != vb;
      out << fmt::format("  {:<24} {:>12} {:>12} {:>9}\n", c, va, vb, differ ? "[FLAG]" : "");
      flagged += differ;
    }
    bool same_out = ra.value("output_digest", "") == rb.value("output_digest", "");
    out << fmt::format("  {:<24} {:>12} {:>12} {:>9}\n", "outputs", ra.value("output_digest", ""),
                       rb.value("output_digest", ""), same_out ? "same" : "[FLAG]");
    flagged += !same_out;
    if (ra.value("identical_to_baseline", nlohmann::json()) != rb.value("identical_to_baseline", nlohmann::json())) {
      out << fmt::format("  {:<24} {:>12} {:>12} {:>9}\n", "identical_to_baseline",
                         ra.value("identical_to_baseline", nlohmann::json()).dump(),
                         rb.value("identical_to_baseline", nlohmann::json()).dump(), "[FLAG]");
      ++flagged;
    }
  }
  out << fmt::format("\n{} flagged difference(s) in outputs or counts\n", flagged);
  return flagged == 0 ? 0 : 1;
}

}  // namespace

int compare_reports(const std::string& a_path, const std::string& b_path, std::ostream& out) {
  const nlohmann::json a = load_report_json(a_path), b = load_report_json(b_path);
  // A field of another type than a report writes (json::value, at) throws nlohmann's type_error,
  // which must reach the user as one Error naming the files.
  try {
    return compare_loaded(a_path, b_path, a, b, out);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Format, "{} vs {}: a report field has an unexpected type: {}", a_path, b_path, e.what());
  }
}

}  // namespace specmoe::exp
