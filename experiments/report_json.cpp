// The JSON report writers: report.json (the whole report) and records.jsonl (one row per prompt
// per run, every metric of the record plus its run's name).
#include "experiments/report_writer.h"

namespace specmoe::exp {
namespace {

class JsonReportWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "report.json"; }
  std::string render(const Report& r) const override { return report_to_json(r).dump(1) + "\n"; }
};

class JsonlRecordsWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "records.jsonl"; }
  std::string render(const Report& r) const override {
    std::string out;
    for (const auto& run_records : r.records)
      for (const auto& rec : run_records) out += record_to_json(rec).dump() + "\n";
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> make_json_report_writer() { return std::make_unique<JsonReportWriter>(); }
std::unique_ptr<ReportWriter> make_jsonl_report_writer() { return std::make_unique<JsonlRecordsWriter>(); }

}  // namespace specmoe::exp
