// runs.csv: one row per finished run with its aggregate metrics (RFC 4180 quoting; empty cells
// for values that do not apply, e.g. acceptance of an autoregressive run).
#include <cmath>

#include <fmt/format.h>

#include "experiments/report_writer.h"

namespace specmoe::exp {
namespace {

std::string cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : ""; }

class CsvRunsWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "runs.csv"; }
  std::string render(const Report& r) const override {
    std::string out =
        "name,strategy,kind,target,drafter,draft,verifier,draft_max,temperature,baseline,n_records,"
        "n_generated,n_drafted,n_accepted,n_steps,acceptance_rate,mean_accepted_length,"
        "tokens_per_second,tokens_per_second_ci95,ttft_ms,ttft_ms_ci95,cost_ratio,cost_ratio_ci95,"
        "speedup,speedup_ci95,speedup_pooled,alpha_fit,predicted_speedup,identical_to_baseline,"
        "draft_s,verify_forward_s,sampling_s,other_s,config_hash,"
        // Appended later, so earlier columns keep their positions.
        "decode_tokens_per_second,decode_tokens_per_second_ci95,decode_speedup,decode_speedup_ci95,"
        "moe_amplification,moe_uniform_amplification,moe_rejected_read_share,moe_expert_mb_per_token,"
        "target_step_ms,target_weight_gbs\n";
    for (const auto& a : r.runs) {
      bool spec = a.kind == "speculative";
      std::string identical = a.identical_to_baseline ? (*a.identical_to_baseline ? "true" : "false") : "";
      const MoeAggregate* m = a.moe ? &*a.moe : nullptr;  // dense targets: empty MoE cells
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
          "{},{},{},{},{},{},{},{},{},{}\n",
          cell(a.name), cell(a.strategy), a.kind, cell(a.target), cell(a.drafter), cell(a.draft), cell(a.verifier),
          spec ? std::to_string(a.draft_max) : "", num(a.temperature), cell(a.baseline), a.n_records,
          a.n_generated, a.n_drafted, a.n_accepted, a.n_steps, num(a.acceptance_rate), num(a.mean_accepted_length),
          num(a.tokens_per_second.mean), num(a.tokens_per_second.ci95), num(a.ttft_ms.mean), num(a.ttft_ms.ci95),
          num(a.cost_ratio.mean), num(a.cost_ratio.ci95), num(a.speedup.mean), num(a.speedup.ci95),
          num(a.speedup_pooled), num(a.alpha_fit), num(a.predicted_speedup), identical,
          num(a.time_breakdown.draft_s), num(a.time_breakdown.verify_forward_s), num(a.time_breakdown.sampling_s),
          num(a.time_breakdown.other_s), a.config_hash, num(a.decode_tokens_per_second.mean),
          num(a.decode_tokens_per_second.ci95), num(a.decode_speedup.mean), num(a.decode_speedup.ci95),
          num(m ? m->amplification_mean : kNaN), num(m ? m->uniform_amplification : kNaN),
          num(m ? m->rejected_read_share : kNaN), num(m ? m->expert_bytes_per_token / 1e6 : kNaN),
          num(a.pooled.target_step_s > 0 ? a.pooled.target_step_s * 1000.0 : kNaN),
          num(a.pooled.target_weight_gbs() > 0 ? a.pooled.target_weight_gbs() : kNaN));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> make_csv_report_writer() { return std::make_unique<CsvRunsWriter>(); }

}  // namespace specmoe::exp
