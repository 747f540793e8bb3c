// Speculative decoding metrics, named as in DESIGN.md "Metrics". Counts are accumulated by the
// decoding loop; derived figures are computed on demand, so Metrics of several prompts can be
// merged by adding counts and times.
#pragma once
#include <cstdint>
#include <vector>

#include "verify/moe_metrics.h"

namespace specmoe::verify {

// Seconds spent in each part of a generation.
struct TimeBreakdown {
  double draft_s = 0.0;           // drafter: begin (its prefill), propose, accepted
  double verify_forward_s = 0.0;  // target forwards (prefill, verification, plain steps)
  double sampling_s = 0.0;        // target logits processors + verifier / sampling
  double other_s = 0.0;           // the rest of the wall time (bookkeeping)
};

struct Metrics {
  int64_t n_prompt = 0;      // prompt tokens
  int64_t n_generated = 0;   // tokens emitted (<= max_tokens)
  int64_t n_drafted = 0;     // draft tokens proposed and verified
  int64_t n_accepted = 0;    // draft tokens accepted
  int64_t n_steps = 0;       // target forwards during decoding (verifications and plain steps).
                             // Speculative: every emitted token comes from a step, so
                             // n_generated = n_accepted + n_steps (less any cut at EOG/max).
                             // Autoregressive: the first token comes from the prefill.
  int draft_max = 0;         // g configured (alpha_fit and predicted_speedup use it); a tree's depth
  // [i]: steps that drafted at least i+1 tokens (trees: a node at depth i+1) / that accepted draft
  // token i+1 (a node at depth i+1) (size draft_max).
  std::vector<int64_t> position_drafted, position_accepted;
  // [k]: steps that accepted exactly k draft tokens, k = 0..draft_max (accepted_length_histogram).
  std::vector<int64_t> accept_length_histogram;
  // [d]: steps whose accepted path reached depth d and whose tree had a node below it there (a
  // chain: accepted d tokens and drafted more); position_accepted[d] of them accepted one:
  // acceptance_by_depth (size draft_max).
  std::vector<int64_t> depth_tried;
  int64_t tree_size_max = 0;  // most draft nodes one step verified

  // Timing (seconds).
  double total_s = 0.0;          // wall time of the whole generation, prefill included
  double ttft_s = 0.0;           // prompt in -> first token out
  // Prompt processing before the decode loop (the target's prefill and the drafter's), and the
  // tokens the decode phase produced: autoregressive decoding takes its first token from the
  // prefill (n_decoded = n_generated - 1); speculative decoding prefills all but the last prompt
  // token and every emitted token comes from a decode step (n_decoded = n_generated), as in
  // llama.cpp's speculative example. Speculation changes only the decode phase, so
  // decode_speedup (baseline's decode_seconds_per_token / this one's) is the figure
  // predicted_speedup models; speedup (whole wall time) also carries the prompt's prefill.
  double prefill_s = 0.0;
  int64_t n_decoded = 0;
  double target_step_s = 0.0;    // one single-token target forward (measured, see cost_ratio)
  // Weight bytes that forward reads (core::Model::weight_bytes_per_token: every matrix once, one
  // embedding row, k experts per MoE layer); 0 when unknown. Over target_step_s it is the decode
  // step's achieved weight bandwidth (target_weight_gbs), against the machine's streaming read.
  double target_weight_bytes = 0.0;
  // Target forwards that verified a draft (position_drafted[0] of them, over tree_size + 1 tokens
  // on average): their seconds, summed (verify_cost_ratio's numerator).
  double verify_draft_s = 0.0;
  double draft_token_s = 0.0;    // drafter time per drafted token
  TimeBreakdown time;
  MoEMetrics moe;               // MoE targets: experts touched per target forward (empty for dense)

  void resize_positions(int g);                // sets draft_max and sizes the per-position arrays
  void record_step(int n_drafted, int n_accepted);  // one target forward over n_drafted draft tokens
  // One target forward over a tree of n_nodes nodes, depth deep, that accepted a path of
  // n_accepted nodes and stopped at a node with children (tried_deeper) or without. A chain of g
  // tokens is record_tree_step(g, g, n, n < g).
  void record_tree_step(int n_nodes, int depth, int n_accepted, bool tried_deeper);
  // At the end of a generation of total_s seconds that emitted n_generated tokens: sets total_s,
  // n_generated, n_decoded (all of them, or all but the first when it came from the prefill, as
  // in autoregressive decoding) and time.other_s (the wall time no part accounts for).
  void finish(double total_s, int64_t n_generated, bool first_from_prefill);
  // Adds counts and times (for several prompts): total_s, ttft_s and time are then sums (divide
  // ttft_s by the number of runs for a mean); target_step_s and draft_token_s become weighted means.
  void merge(const Metrics& other);

  double acceptance_rate() const;         // n_accepted / n_drafted (0 when nothing was drafted)
  double mean_accepted_length() const;    // tau = (n_accepted + n_steps) / n_steps (1 when no steps)
  std::vector<double> per_position_acceptance() const;
  double cost_ratio() const;              // c = draft_token_s / target_step_s (0 when unmeasured)
  double target_weight_gbs() const;       // target_weight_bytes / target_step_s / 1e9 (0 when unknown)
  double alpha_fit() const;               // fit_alpha(tau, draft_max)
  double predicted_speedup() const;       // speedup_model(alpha_fit, draft_max, c)
  double tokens_per_second() const;       // n_generated / total_s
  double decode_s() const;                // total_s - prefill_s (>= 0)
  double decode_tokens_per_second() const;  // n_decoded / decode_s (0 when either is 0)
  double ttft_ms() const { return ttft_s * 1000.0; }

  // Trees (DESIGN.md names; chains are one-child trees, so these hold for them too).
  int64_t n_verify_forwards() const { return position_drafted.empty() ? 0 : position_drafted[0]; }
  double tree_size() const;               // nodes verified per step: n_drafted / n_steps
  std::vector<double> acceptance_by_depth() const;  // position_accepted[d] / depth_tried[d]
  double verify_tokens() const;           // tokens per verification forward: tree_size + 1 over those
  // r(N) = one verification forward's time / one single-token step's (0 when unmeasured).
  double verify_cost_ratio() const;
  // The drafter's time per step over one single-token target step's: g c for a chain.
  double draft_cost_per_step() const;
  // 1 + sum_d prod_{i<=d} acceptance_by_depth[i]: the accepted length per step the measured
  // per-depth acceptance predicts for trees reaching draft_max.
  double expected_accepted_length() const;
  // expected_accepted_length / (draft_cost_per_step + r(N)): the speedup trees of this shape
  // predict from their measured acceptance and costs (0 when a cost is unmeasured).
  double predicted_speedup_tree() const;
  // (D + 1) / (draft_cost_per_step + r(N)), D = draft_max: what no tree of this depth and these
  // costs can exceed (everything accepted).
  double speedup_bound() const;
  // Leviathan et al. Thm 3.8 with the verify forward's measured cost: (1 - a^(g+1)) / ((1 - a)
  // (g c + r(g+1))), a = alpha_fit (DESIGN.md predicted_speedup_measured_cost).
  double predicted_speedup_measured_cost() const;
};

// The i.i.d. acceptance probability a with (1 - a^(g+1)) / (1 - a) = tau, i.e. sum_{k=0..g} a^k =
// tau (Leviathan et al. 2023, eq. 1), by bisection on [0, 1] where the sum is increasing from 1
// to g+1. tau <= 1 gives 0, tau >= g+1 gives 1; g <= 0 gives 0.
double fit_alpha(double tau, int g);
// Leviathan et al. 2023, Thm 3.8: expected walltime improvement (1 - a^(g+1)) / ((1 - a)(g c + 1)),
// with its limit (g+1) / (g c + 1) at a = 1.
double speedup_model(double alpha, int g, double c);
// The same without assuming a verify forward of g + 1 tokens costs one single-token step:
// (1 - a^(g+1)) / ((1 - a)(g c + r)), r = that forward's cost in single-token steps
// (predicted_speedup_measured_cost; specmoe bench evaluates it on its measured r(T)).
double cost_aware_speedup_model(double alpha, int g, double c, double r);

}  // namespace specmoe::verify
