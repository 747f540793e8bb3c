// report.html: one offline page (inline CSS and SVG, no scripts or external assets) with the
// Markdown report's tables plus charts: speedup per run with 95% CI bars, acceptance per draft
// position, measured vs predicted speedup, and per-layer expert-load heat maps when MoE
// statistics are present.
#include <cmath>

#include <fmt/format.h>


#include "experiments/report_tables.h"
#include "experiments/report_writer.h"
#include "experiments/svg_chart.h"

namespace specmoe::exp {
namespace {

std::string render_table(const TextTable& t) {
  std::string out = fmt::format("<h2>{}</h2>\n<table>\n<tr>", xml_escape(t.title));
  for (const auto& h : t.headers) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      bool flag = row[i] == "NO";
      out += fmt::format("<td{}>{}</td>", flag ? " class=\"flag\"" : "", xml_escape(row[i]));
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string charts(const Report& r) {
  std::string out;
  std::vector<BarDatum> bars;
  for (const auto& a : r.runs)
    if (std::isfinite(a.speedup.mean)) bars.push_back({a.name, a.speedup.mean, a.speedup.ci95});
  if (!bars.empty())
    out += "<figure>" + svg_bar_chart("Speedup vs baseline (95% CI)", bars, "speedup", 1.0) + "</figure>\n";

  std::vector<LineSeries> lines;
  for (const auto& a : r.runs)
    if (a.kind == "speculative" && !a.per_position_acceptance.empty()) lines.push_back({a.name, a.per_position_acceptance});
  if (!lines.empty())
    out += "<figure>" + svg_line_chart("Acceptance by draft position", lines, "draft position", "acceptance", 1.0) +
           "</figure>\n";

  // Thm 3.8 models the decode phase, so its points use the decode speedup; reports from records
  // without prefill timings fall back to the whole-generation speedup.
  std::vector<ScatterPoint> points, decode_points;
  for (const auto& a : r.runs) {
    if (!std::isfinite(a.predicted_speedup)) continue;
    if (std::isfinite(a.speedup.mean)) points.push_back({a.name, a.predicted_speedup, a.speedup.mean});
    if (std::isfinite(a.decode_speedup.mean)) decode_points.push_back({a.name, a.predicted_speedup, a.decode_speedup.mean});
  }
  if (!decode_points.empty())
    out += "<figure>" +
           svg_scatter("Measured decode speedup vs predicted", decode_points, "predicted (Thm 3.8)", "decode speedup") +
           "</figure>\n";
  else if (!points.empty())
    out += "<figure>" + svg_scatter("Measured vs predicted speedup", points, "predicted (Thm 3.8)", "measured") +
           "</figure>\n";
  return out;
}

std::string moe_section(const Report& r) {
  std::string out;
  for (const auto& a : r.runs) {
    if (!a.moe || a.moe->layers.empty()) continue;
    // Share of each layer's routed tokens per expert, relative to uniform (1.0 = balanced).
    std::vector<std::vector<double>> rel;
    for (const auto& layer : a.moe->layers) {
      double sum = 0;
      for (int64_t v : layer.expert_tokens) sum += v;
      std::vector<double> row;
      for (int64_t v : layer.expert_tokens)
        row.push_back(sum > 0 ? v * static_cast<double>(layer.expert_tokens.size()) / sum : 0.0);
      rel.push_back(std::move(row));
    }
    out += "<figure>" + svg_heatmap("Expert load, " + a.name + " (tokens / uniform share)", rel, "layer", "expert") +
           "</figure>\n";
  }
  std::string traffic;
  if (TextTable t = moe_traffic_table(r); !t.empty()) {
    traffic = "<h2>MoE expert traffic</h2>\n<p>U(T): distinct experts one MoE layer reads in a target forward of T "
              "tokens; U/k against uniform routing E(1-(1-k/E)^T)/k over the same forwards; share of expert reads "
              "spent on rejected draft tokens; routed-expert MB (10^6 bytes) read per generated token.</p>\n" +
              render_table(t) + render_table(moe_distinct_table(r));
  }
  if (out.empty()) return traffic;
  return traffic + "<h2>Expert load</h2>\n" + out + render_table(moe_table(r));
}

class HtmlReportWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "report.html"; }
  std::string render(const Report& r) const override {
    const auto& exp = r.experiment.config.at("experiment");
    std::string name = exp.value("name", "experiment");
    std::string out =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(name) +
        " - specmoe report</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}td.flag{background:#fdd;font-weight:bold}"
        "figure{display:inline-block;margin:1em}pre{background:#f4f4f4;padding:.6em}</style></head><body>\n";
    out += "<h1>" + xml_escape(name) + "</h1>\n";
    if (!exp.value("description", "").empty()) out += "<p>" + xml_escape(exp.value("description", "")) + "</p>\n";
    out += fmt::format("<p>Generated {} by specmoe {}; config hash <code>{}</code>. Speedup: baseline wall time per "
                       "generated token over the run's, mean &#177; 95% CI over prompts &#215; repeats (Student t), prefill "
                       "included. Decode speedup: the same over the decode phase only (prefill excluded), the figure "
                       "the prediction models. Predicted speedup: Leviathan et al. 2023, Thm 3.8, with the fitted acceptance rate.</p>\n",
                       xml_escape(r.created), xml_escape(r.environment.value("specmoe_commit", "?")),
                       xml_escape(r.experiment.config_hash));
    out += render_table(summary_table(r));
    out += charts(r);
    if (TextTable t = position_table(r); !t.empty()) out += render_table(t);
    if (TextTable t = tree_table(r); !t.empty()) out += render_table(t);
    if (TextTable t = category_table(r); !t.empty()) out += render_table(t);
    out += render_table(time_table(r));
    out += moe_section(r);
    if (const nlohmann::json gaps = r.experiment.merge.is_object() ? r.experiment.merge.value("gaps", nlohmann::json::array())
                                                                    : nlohmann::json::array();
        !gaps.empty()) {
      out += "<h2>Partial merge</h2>\n<p>Merged with <code>--allow-partial</code>; these shards were missing or "
             "unfinished:</p>\n<ul>\n";
      for (const auto& g : gaps) out += "<li>" + xml_escape(g.get<std::string>()) + "</li>\n";
      out += "</ul>\n";
    }
    if (!r.missing_runs.empty()) {
      out += "<h2>Missing runs</h2>\n<p>";
      for (size_t i = 0; i < r.missing_runs.size(); ++i) out += (i ? ", " : "") + xml_escape(r.missing_runs[i]);
      out += "</p>\n";
    }
    out += render_table(seeds_table(r));
    out += render_table(environment_table(r));
    out += "<h2>Reproduce</h2>\n<pre>" + xml_escape(reproduce_command(r)) + "</pre>\n";
    out += "<h2>Configuration</h2>\n<pre>" + xml_escape(r.experiment.toml) + "</pre>\n</body></html>\n";
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> make_html_report_writer() { return std::make_unique<HtmlReportWriter>(); }

}  // namespace specmoe::exp
