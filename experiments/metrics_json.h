// The metrics of DESIGN.md "Metrics" as JSON, written by one function so that every output uses
// the same names: `speculate --json` and `generate --json` ("metrics"), each record of
// records.jsonl and runs/*.json (flat, beside the record's identity), and each run of
// report.json ("metrics": the run's records pooled). Unknown or undefined figures (nothing
// drafted, no decode step timed, a record written before a field existed) are JSON null, never 0.
#pragma once
#include <nlohmann/json.hpp>

#include "verify/metrics.h"

namespace specmoe::exp {

// {"draft_s", "verify_forward_s", "sampling_s", "other_s"}: seconds.
nlohmann::json time_breakdown_to_json(const verify::TimeBreakdown& t);
// Reads the object above; also the names records used before the schema was unified
// ("verify_s", "sample_s"). Absent or null fields read as 0.
verify::TimeBreakdown time_breakdown_from_json(const nlohmann::json& j);

// Counts, rates, timings and (for MoE targets) the MoE object of `m`. Fields: n_prompt,
// n_generated, n_decoded, n_drafted, n_accepted, n_steps, draft_max, acceptance_rate,
// mean_accepted_length, per_position_acceptance, position_drafted, position_accepted,
// accepted_length_histogram (read back under its old name accept_length_histogram too), cost_ratio,
// alpha_fit, predicted_speedup, tokens_per_second, decode_tokens_per_second, ttft_ms, total_s,
// prefill_s, draft_step_ms, target_step_ms, target_weight_bytes, target_weight_gbs (the single-token
// target step's weight bytes over its time), time_breakdown; for trees (chains included: one-child
// trees) tree_size (nodes verified per step), tree_size_max, depth_tried, acceptance_by_depth,
// verify_tokens (N + 1 per verification forward), verify_step_ms, verify_cost_ratio r(N),
// predicted_speedup_measured_cost, predicted_speedup_tree (expected accepted length from the
// per-depth acceptance over draft cost + r(N)), speedup_bound ((D + 1) / (draft cost + r(N)));
// and moe when m.moe has experts. NaN inputs (unknown) are written as null; n_decoded < 0 is
// unknown.
nlohmann::json metrics_to_json(const verify::Metrics& m);

}  // namespace specmoe::exp
