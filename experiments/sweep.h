// Sweep expansion: every [[strategy]] times the cartesian product of the [sweep] lists that apply
// to it, as named runs. Sampling fields apply to every strategy; strategy fields only to
// speculative strategies (those named in sweep.only, when given). A run is named
// "<strategy>[-<abbrev><value>]..." over the swept fields with more than one value, in the order
// written, e.g. "model-g4-t0.7". Each run's baseline is the run of the first autoregressive
// strategy on the same target with the same sampling settings.
#pragma once
#include <vector>

#include "experiments/experiment_spec.h"

namespace specmoe::exp {

// Runs in order: strategies as written, then the sweep points (last axis fastest). Checks
// cross-field constraints (draft_min <= draft_max, ngram_min <= ngram_max) per run and unique run
// names; throws Error(Config) pointing at the strategy or sweep key. Fills config_hash.
std::vector<RunSpec> expand_runs(const ExperimentSpec& spec);

}  // namespace specmoe::exp
