// report.md: the summary, per-position acceptance, category, time and MoE tables, the seeds and
// the command that reproduces the experiment.

#include <fmt/format.h>

#include "experiments/report_tables.h"
#include "experiments/report_writer.h"

namespace specmoe::exp {
namespace {

std::string escape_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string render_table(const TextTable& t, const char* heading = "##") {
  std::string out = fmt::format("{} {}\n\n|", heading, t.title);
  for (const auto& h : t.headers) out += fmt::format(" {} |", escape_cell(h));
  out += "\n|";
  for (size_t i = 0; i < t.headers.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += fmt::format(" {} |", escape_cell(c));
    out += "\n";
  }
  return out + "\n";
}

// How the prompts reached the models: chat templates, and the multi-turn protocol when used.
std::string prompts_note(const Report& r) {
  std::string out;
  const nlohmann::json ps = r.experiment.config.value("prompt_source", nlohmann::json::object());
  if (const int turn = ps.value("turn", 0); turn > 0)
    out += fmt::format("Prompts are turn {} of multi-turn questions: the earlier turns were answered by each target "
                       "itself, greedily (at most {} tokens per answer), and fed back as the conversation, as MT-bench "
                       "does; only the last turn's generation is measured.",
                       turn + 1, ps.value("history_max_tokens", 0));
  // Listed when some target's prompts were templated (raw text everywhere is the plain case).
  if (r.environment.contains("chat_templates") && r.environment["chat_templates"].is_object()) {
    std::string list;
    bool templated = false;
    for (const auto& [model, c] : r.environment["chat_templates"].items()) {
      templated |= c.value("format", "none") != "none";
      list += fmt::format("{}{}: {} ({})", list.empty() ? "" : "; ", model, c.value("format", "?"), c.value("reason", ""));
    }
    if (templated) out += fmt::format("{}Chat templates: {}.", out.empty() ? "" : " ", list);
  }
  return out.empty() ? out : out + "\n\n";
}

class MarkdownReportWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "report.md"; }
  std::string render(const Report& r) const override {
    const auto& exp = r.experiment.config.at("experiment");
    std::string out = fmt::format("# {}\n\n", exp.value("name", "experiment"));
    if (!exp.value("description", "").empty()) out += exp.value("description", "") + "\n\n";
    out += fmt::format("Generated {} by specmoe {}; config hash `{}`. Speedup is the baseline's wall time per "
                       "generated token over the run's (mean ± 95% CI over prompts × repeats, Student t), prompt "
                       "prefill included; decode speedup is the same ratio over the decode phase only (decode "
                       "seconds per decoded token, prefill excluded), the figure predicted speedup models; "
                       "predicted speedup is Leviathan et al. 2023 Thm 3.8 with the fitted acceptance rate.\n\n",
                       r.created, r.environment.value("specmoe_commit", "?"), r.experiment.config_hash);
    out += prompts_note(r);
    out += render_table(summary_table(r));
    if (TextTable t = position_table(r); !t.empty()) out += render_table(t);
    if (TextTable t = tree_table(r); !t.empty()) {
      out += render_table(t);
      out += "r(N): one verification forward over tree size + 1 tokens over one single-token target step; draft "
             "cost: the drafter's time per step in the same unit; predicted (tree): the accepted length the "
             "acceptance by depth predicts over (draft cost + r(N)); bound: (D+1) / (draft cost + r(N)), what no "
             "tree of depth D with these costs exceeds.\n\n";
    }
    if (TextTable t = category_table(r); !t.empty()) out += render_table(t);
    out += render_table(time_table(r));
    if (TextTable t = moe_traffic_table(r); !t.empty()) {
      out += "## MoE expert traffic\n\n"
             "A target forward over T tokens reads, in each MoE layer, the U(T) distinct experts its tokens were "
             "routed to (k <= U(T) <= min(E, T·k)); U/k is that read amplification against one token, and "
             "uniform U/k what uniformly random routing would give over the same forwards, "
             "E(1-(1-k/E)^T)/k. Reads on rejected tokens: experts only rejected draft positions were routed to, "
             "as a share of all expert reads (pooled over the run's decode forwards). Expert MB: routed-expert "
             "weight bytes read per generated token (10^6 bytes).\n\n";
      t.title = "Per run";
      out += render_table(t, "###");
      out += render_table(moe_distinct_table(r), "###");
    }
    if (TextTable t = moe_table(r); !t.empty()) out += render_table(t);
    if (const nlohmann::json gaps = r.experiment.merge.is_object() ? r.experiment.merge.value("gaps", nlohmann::json::array())
                                                                    : nlohmann::json::array();
        !gaps.empty()) {
      out += "## Partial merge\n\nMerged with `--allow-partial`; these shards were missing or unfinished:\n\n";
      for (const auto& g : gaps) out += "- " + g.get<std::string>() + "\n";
      out += "\n";
    }
    if (!r.missing_runs.empty()) {
      out += "## Missing runs\n\nNot finished (or finished with another config): ";
      for (size_t i = 0; i < r.missing_runs.size(); ++i) out += (i ? ", " : "") + r.missing_runs[i];
      out += "\n\n";
    }
    out += render_table(seeds_table(r));
    out += render_table(environment_table(r));
    out += fmt::format("## Reproduce\n\n```sh\n{}\n```\n", reproduce_command(r));
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> make_markdown_report_writer() { return std::make_unique<MarkdownReportWriter>(); }

}  // namespace specmoe::exp
