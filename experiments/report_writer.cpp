// The report writer registry. Built-ins are listed here rather than self-registered from static
// initializers, because the linker drops unreferenced objects of a static library (and their
// initializers with them).
#include "experiments/report_writer.h"

#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "experiments/atomic_file.h"

namespace specmoe::exp {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::string, ReportWriterFactory>> entries;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->entries = {
        {"json", make_json_report_writer},
        {"csv", make_csv_report_writer},
        {"jsonl", make_jsonl_report_writer},
        {"markdown", make_markdown_report_writer},
        {"html", make_html_report_writer},
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_report_writer(const std::string& name, ReportWriterFactory factory) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  for (auto& [n, f] : reg.entries)
    if (n == name) {
      f = std::move(factory);
      return;
    }
  reg.entries.emplace_back(name, std::move(factory));
}

std::vector<std::string> report_writer_names() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  std::vector<std::string> names;
  for (const auto& e : reg.entries) names.push_back(e.first);
  return names;
}

std::unique_ptr<ReportWriter> make_report_writer(const std::string& name) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  std::string known;
  for (const auto& [n, f] : reg.entries) {
    if (n == name) return f();
    known += (known.empty() ? "" : ", ") + n;
  }
  throw_error(ErrorKind::InvalidArgument, "unknown report writer '{}' (known: {})", name, known);
}

void write_report(const Report& report, const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> use = names.empty() ? report_writer_names() : names;
  for (const auto& name : use) {
    auto writer = make_report_writer(name);
    write_file_atomic((std::filesystem::path(dir) / writer->file_name()).string(), writer->render(report));
  }
}

Report rebuild_report(const std::string& dir, const std::vector<std::string>& names, RunFileCache* cache) {
  Report r = load_report_inputs(dir, cache);
  write_report(r, dir, names);
  return r;
}

}  // namespace specmoe::exp
