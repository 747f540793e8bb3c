// Report writers, registered by name: json (report.json), csv (runs.csv), jsonl (records.jsonl),
// markdown (report.md), html (report.html). A writer renders a Report into the content of one file;
// write_report writes each atomically into the output folder.
//
// Adding a writer: a file experiments/report_<name>.cpp defining a ReportWriter subclass and its
// factory function, plus one line in builtin_report_writers() (report_writer.cpp) -- or a call
// to register_report_writer() from code that links specmoe_experiments.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "experiments/report_builder.h"

namespace specmoe::exp {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string file_name() const = 0;           // e.g. "report.md"
  virtual std::string render(const Report& r) const = 0;  // the whole file
};

using ReportWriterFactory = std::function<std::unique_ptr<ReportWriter>()>;

void register_report_writer(const std::string& name, ReportWriterFactory factory);
std::vector<std::string> report_writer_names();  // registration order
// Throws Error(InvalidArgument) naming the unknown writer and listing the known ones.
std::unique_ptr<ReportWriter> make_report_writer(const std::string& name);

// Renders with each named writer (empty = all registered) and writes atomically into dir.
void write_report(const Report& report, const std::string& dir, const std::vector<std::string>& names = {});
// load_report_inputs(dir) + write_report(dir).
Report rebuild_report(const std::string& dir, const std::vector<std::string>& names = {});

// The built-in writers (one file each).
std::unique_ptr<ReportWriter> make_json_report_writer();
std::unique_ptr<ReportWriter> make_csv_report_writer();
std::unique_ptr<ReportWriter> make_jsonl_report_writer();
std::unique_ptr<ReportWriter> make_markdown_report_writer();
std::unique_ptr<ReportWriter> make_html_report_writer();

}  // namespace specmoe::exp
