// Plain results of an experiment: one PromptRecord per (run, prompt, repeat) as the executor
// measured it, and the per-run aggregates the report shows. Field names are DESIGN.md's metric
// names ("Metrics"); records are written through exp::metrics_to_json (metrics_json.h), the
// writer `speculate --json` uses, so report.json, runs.csv and records.jsonl use them verbatim.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "verify/metrics.h"

namespace specmoe::exp {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();


// Expert routing counters of the target's MoE layers for one generation (absent for dense models).
struct MoeRecord {
  std::vector<std::vector<int64_t>> expert_tokens;  // [layer][expert]: tokens routed there
  std::vector<int64_t> dropped_tokens;              // [layer]: tokens dropped by capacity limits
  int n_expert_used = 0;                            // k
  // distinct_experts_sum[T] / distinct_experts_count[T]: mean number of distinct experts one
  // layer touched in a target forward of T tokens (U(T)); index 0 unused.
  std::vector<double> distinct_experts_sum;
  std::vector<int64_t> distinct_experts_count;
  double expert_bytes_read = 0.0;  // bytes of expert weights read over the whole generation
  // verify::MoEMetrics of the decode forwards (records written before these existed load with
  // n_expert 0 and NaN sums: unknown, never zero). Sums run over forwards and MoE layers:
  // U(T), the uniform-routing expectation E(1-(1-k/E)^T), and the reads of experts that only
  // rejected draft positions were routed to (MoEMetrics::rejected_read_share = rejected / distinct).
  int n_expert = 0;                 // E
  int n_moe_layers = 0;
  int64_t n_forwards = 0;           // decode forwards recorded
  double sum_distinct = kNaN;
  double sum_uniform = kNaN;
  double sum_rejected_reads = kNaN;
  // The target's KV cache per token over all layers, F32 elements (deepseek2's MLA: the latent and
  // RoPE key rows); NaN in records written before it existed.
  double kv_bytes_per_token = kNaN;
};

// One generation: a run's strategy on one prompt, one repeat.
struct PromptRecord {
  std::string run;            // run name
  int prompt_index = 0;       // index into the experiment's prompt list
  std::string prompt_id;      // question_id, or "p<index>" for inline/file prompts
  std::string category;       // MT-bench category, "" when the source has none
  int repeat = 0;
  int n_prompt_tokens = 0;
  std::vector<int32_t> tokens;  // generated token ids (prompt excluded)
  std::string text;             // their detokenized text
  bool stopped_at_eog = false;  // ended on an end-of-generation token rather than max_tokens

  int64_t n_generated = 0;  // tokens generated (== tokens.size())
  int64_t n_drafted = 0;    // draft tokens proposed
  int64_t n_accepted = 0;   // draft tokens accepted
  int64_t n_steps = 0;      // target verification forwards during decoding
  // position_drafted[i]: steps that drafted at least i+1 tokens; position_accepted[i]: of those,
  // steps that accepted draft token i+1 (per_position_acceptance = accepted / drafted). Their
  // length is the draft length g (draft_max); empty for autoregressive runs.
  std::vector<int64_t> position_drafted, position_accepted;
  // [k]: steps that accepted exactly k draft tokens (empty in records written before it existed).
  std::vector<int64_t> accept_length_histogram;
  // Trees (verify::Metrics): [d] steps whose accepted path reached depth d with a node below it;
  // the most nodes one step verified; the mean time of a forward that verified a draft (NaN:
  // unknown). Empty / 0 / NaN in records written before trees existed.
  std::vector<int64_t> depth_tried;
  int64_t tree_size_max = 0;
  double verify_step_ms = kNaN;

  double wall_s = 0.0;              // whole generation (prefill + decode), seconds
  // Prompt processing before the decode loop, and the tokens the decode loop produced
  // (verify::Metrics: autoregressive n_generated - 1, speculative n_generated). Speculation only
  // changes the decode phase, so decode_speedup is what predicted_speedup models. NaN / -1:
  // unknown (records written before these fields existed).
  double prefill_s = kNaN;
  int64_t n_decoded = -1;
  double ttft_ms = kNaN;            // time to first generated token, milliseconds
  double draft_step_ms = kNaN;      // mean drafter time per drafted token, milliseconds
  double target_step_ms = kNaN;     // mean time of one single-token target step, milliseconds
  double target_weight_bytes = kNaN;  // weight bytes that step reads (NaN: a record from before the field)
  verify::TimeBreakdown time_breakdown;  // the decoding loop's own struct (one set of names)
  std::optional<MoeRecord> moe;

  double tokens_per_second() const {  // n_generated / wall_s
    return wall_s > 0 ? static_cast<double>(n_generated) / wall_s : kNaN;
  }
  double cost_ratio() const {  // c = draft_step_ms / target_step_ms, NaN unless both were measured
    return draft_step_ms > 0 && target_step_ms > 0 ? draft_step_ms / target_step_ms : kNaN;
  }

  double acceptance_rate() const {
    return n_drafted > 0 ? static_cast<double>(n_accepted) / static_cast<double>(n_drafted) : kNaN;
  }
  double mean_accepted_length() const {  // tau = (n_accepted + n_steps) / n_steps
    return n_steps > 0 ? static_cast<double>(n_accepted + n_steps) / static_cast<double>(n_steps)
                       : kNaN;
  }
  double seconds_per_token() const {
    return n_generated > 0 ? wall_s / static_cast<double>(n_generated) : kNaN;
  }
  double decode_s() const { return std::isfinite(prefill_s) ? wall_s - prefill_s : kNaN; }
  // Decode seconds per decoded token; NaN when unknown or when nothing was decoded.
  double decode_seconds_per_token() const {
    const double d = decode_s();
    return n_decoded > 0 && d > 0.0 ? d / static_cast<double>(n_decoded) : kNaN;
  }
  double decode_tokens_per_second() const { return 1.0 / decode_seconds_per_token(); }
};

// A sample mean with its 95% confidence half-width (Student t, n-1 degrees of freedom).
struct Estimate {
  double mean = kNaN;
  double ci95 = kNaN;  // half-width: the interval is mean +- ci95 (NaN when n < 2)
  double sd = kNaN;    // sample standard deviation
  int n = 0;           // finite samples used
};

struct CategoryAggregate {
  std::string category;
  int n_records = 0;
  Estimate tokens_per_second, acceptance_rate, mean_accepted_length, speedup, decode_speedup;
};

// MoE load statistics of one layer over all of a run's records.
struct MoeLayerAggregate {
  std::vector<int64_t> expert_tokens;
  double load_cv = kNaN;          // std / mean of expert_tokens
  double max_over_mean = kNaN;    // max / mean of expert_tokens
  double jain_index = kNaN;       // (sum x)^2 / (E * sum x^2), 1 = perfectly balanced
  double routing_entropy_bits = kNaN;  // entropy of the expert share distribution, bits (moe::load_entropy_bits)
  int64_t dropped_tokens = 0;
};

struct MoeAggregate {
  std::vector<MoeLayerAggregate> layers;
  int n_expert = 0, n_expert_used = 0;
  // By target forward size T (index = T, 0 unused): mean distinct experts U(T), U(T)/k, and the
  // uniform-routing expectation E * (1 - (1 - k/E)^T).
  std::vector<double> distinct_experts, amplification, uniform_expectation;
  double expert_bytes_per_token = kNaN;
  // Over every recorded decode forward of every record (pooled): mean U(T) per layer, U/k, the
  // uniform-routing U/k over the same forwards, and the share of expert reads spent on rejected
  // tokens (sum rejected reads / sum U). NaN when a record predates the field.
  double mean_distinct = kNaN;
  double amplification_mean = kNaN;
  double uniform_amplification = kNaN;
  double rejected_read_share = kNaN;
  double kv_bytes_per_token = kNaN;  // the target's KV cache per token (MoeRecord)
};

// What the report says about one run (computed from its records and its baseline's records).
struct RunAggregate {
  std::string name, strategy, kind, target, drafter, draft, verifier, baseline;
  bool is_baseline = false;
  int draft_max = 0;
  std::string tree;  // draft::TreeSpec::describe() of a tree strategy, "" for chains
  double temperature = 0.0;
  std::string config_hash;
  int n_records = 0;

  int64_t n_generated = 0, n_drafted = 0, n_accepted = 0, n_steps = 0;  // totals
  double acceptance_rate = kNaN;       // pooled: sum n_accepted / sum n_drafted
  double mean_accepted_length = kNaN;  // pooled tau
  std::vector<double> per_position_acceptance;
  std::vector<int64_t> position_drafted, position_accepted;

  Estimate tokens_per_second, ttft_ms, acceptance_rate_by_record, mean_accepted_length_by_record,
      cost_ratio;
  Estimate decode_tokens_per_second;  // per record: n_decoded / (wall_s - prefill_s)
  Estimate speedup;  // paired per (prompt, repeat): baseline seconds/token over this run's
  // Paired like speedup, over the decode phase only: the baseline's decode seconds per decoded
  // token over this run's (the figure predicted_speedup models; prefill excluded).
  Estimate decode_speedup;
  double speedup_pooled = kNaN;  // baseline total seconds/token over this run's
  double alpha_fit = kNaN;
  double predicted_speedup = kNaN;
  verify::TimeBreakdown time_breakdown;  // summed over records, seconds
  // The records' metrics merged (verify::Metrics::merge: counts and times summed; ttft_s the
  // mean over records), written as report.json's "metrics" by metrics_to_json.
  verify::Metrics pooled;
  std::optional<bool> identical_to_baseline;  // only at temperature 0 with a baseline present
  std::string output_digest;  // hash of every record's tokens, for compare_reports
  std::vector<CategoryAggregate> categories;
  std::optional<MoeAggregate> moe;
};

}  // namespace specmoe::exp
