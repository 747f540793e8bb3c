// The tables both human-readable reports (Markdown, HTML) show, as plain text cells, so the two
// formats cannot disagree: summary, per-position acceptance, per-category, time breakdown, MoE
// load, environment.
#pragma once
#include <string>
#include <vector>

#include "experiments/report_builder.h"

namespace specmoe::exp {

struct TextTable {
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  bool empty() const { return rows.empty(); }
};

std::string format_number(double v, int precision = 3);  // "-" for NaN
std::string format_estimate(const Estimate& e, int precision = 3);  // "12.3 ± 0.4"

TextTable summary_table(const Report& r);
TextTable position_table(const Report& r);   // speculative runs only
// Speculative runs: tree size (nodes verified per step), mean accepted length, acceptance by
// depth, the verify forward's cost ratio r(N), the drafter's cost per step, the tree prediction
// and the bound (D+1)/(draft cost + r(N)), the measured decode speedup.
TextTable tree_table(const Report& r);
TextTable category_table(const Report& r);   // empty when no run has categories
TextTable time_table(const Report& r);
TextTable moe_table(const Report& r);        // empty without MoE statistics
// MoE expert traffic per MoE run: k, E, mean U(T), U/k against uniform routing, expert MB per
// generated token, share of expert reads on rejected tokens. Empty when no run has an MoE target.
TextTable moe_traffic_table(const Report& r);
// Mean U(T) by forward size T (rows) per MoE run (columns), with the uniform-routing expectation
// E(1-(1-k/E)^T) per distinct (E, k). Empty when no run has an MoE target.
TextTable moe_distinct_table(const Report& r);
TextTable environment_table(const Report& r);
TextTable seeds_table(const Report& r);

// The shell command that reproduces the experiment (from experiment.json).
std::string reproduce_command(const Report& r);

}  // namespace specmoe::exp
