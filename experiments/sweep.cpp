// Cartesian sweep expansion into named runs, baseline assignment, per-run checks.
#include "experiments/sweep.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "experiments/config_hash.h"

namespace specmoe::exp {
namespace {

// A sweep is a cartesian product, so a short file can name astronomically many runs; the count is
// checked before any run is built (and baselines are matched in O(runs^2)).
constexpr size_t kMaxRuns = 10000;

bool applies(const SweepAxis& axis, const StrategySpec& s, const SweepSpec& sweep) {
  if (!axis.strategy_field) return true;
  if (s.kind != StrategyKind::Speculative) return false;
  return sweep.only.empty() || std::find(sweep.only.begin(), sweep.only.end(), s.name) != sweep.only.end();
}

// The key to blame for a run's field: the sweep list when the field was swept, else the strategy.
std::string key_for(const ExperimentSpec& spec, const RunSpec& run, const std::string& field) {
  for (const auto& [k, v] : run.point)
    if (k == field) return "sweep." + field;
  return spec.strategy_key(run.strategy.index, field);
}

void check_run(const ExperimentSpec& spec, const RunSpec& run) {
  const StrategySpec& s = run.strategy;
  if (s.kind != StrategyKind::Speculative) return;
  if (s.draft_min > s.draft_max)
    spec.src.fail(key_for(spec, run, "draft_min"),
                  fmt::format("run '{}': draft_min {} exceeds draft_max {}", run.name, s.draft_min, s.draft_max));
  if (s.ngram_min > s.ngram_max)
    spec.src.fail(key_for(spec, run, "ngram_min"),
                  fmt::format("run '{}': ngram_min {} exceeds ngram_max {}", run.name, s.ngram_min, s.ngram_max));
  if (!s.draft.empty() && !spec.find_model(s.draft))
    spec.src.fail(key_for(spec, run, "draft"), fmt::format("run '{}': undefined model '{}'", run.name, s.draft));
  if ((s.drafter == "model" || s.drafter == "eagle3" || s.drafter == "dflash") && s.draft.empty())
    spec.src.fail(key_for(spec, run, "drafter"), fmt::format("run '{}': drafter '{}' needs 'draft'", run.name, s.drafter));
  try {
    tree_spec_of(s).validate();
  } catch (const Error& e) {
    spec.src.fail(key_for(spec, run, s.tree_widths.empty() ? "tree_nodes" : "tree_widths"),
                  fmt::format("run '{}': {}", run.name, e.what()));
  }
}

}  // namespace

std::vector<RunSpec> expand_runs(const ExperimentSpec& spec) {
  std::vector<RunSpec> runs;
  std::map<std::string, std::string> name_owner;  // run name -> key that produced it
  for (const auto& strategy : spec.strategies) {
    std::vector<const SweepAxis*> axes;
    for (const auto& a : spec.sweep.axes)
      if (applies(a, strategy, spec.sweep)) axes.push_back(&a);
    size_t n_points = 1;
    for (const SweepAxis* a : axes) {
      if (a->values.size() > kMaxRuns / n_points) { n_points = kMaxRuns + 1; break; }
      n_points *= a->values.size();
    }
    if (n_points > kMaxRuns - runs.size())
      spec.src.fail("sweep", fmt::format("the sweep expands to more than {} runs (strategy '{}' alone: {}{})", kMaxRuns,
                                         strategy.name, n_points > kMaxRuns ? "over " : "",
                                         std::min(n_points, kMaxRuns)));
    std::vector<size_t> at(axes.size(), 0);
    while (true) {
      RunSpec run;
      run.strategy = strategy;
      run.sampling = spec.sampling;
      run.name = strategy.name;
      for (size_t i = 0; i < axes.size(); ++i) {
        const FieldValue& v = axes[i]->values[at[i]];
        // Values were checked when the sweep was parsed, so this cannot fail.
        apply_field(axes[i]->key, v, run.strategy, run.sampling);
        run.point.emplace_back(axes[i]->key, v);
        if (axes[i]->values.size() > 1) {
          std::string text = v.text();  // run names name files: tree widths 4,2,2,1 read 4x2x2x1
          std::replace(text.begin(), text.end(), ',', 'x');
          run.name += fmt::format("-{}{}", field_abbreviation(axes[i]->key), text);
        }
      }
      run.index = static_cast<int>(runs.size());
      std::string owner = spec.strategy_key(strategy.index, "name");
      if (auto it = name_owner.find(run.name); it != name_owner.end())
        spec.src.fail(owner, fmt::format("run name '{}' is produced twice (also by {}); rename a strategy",
                                         run.name, it->second));
      name_owner[run.name] = owner;
      check_run(spec, run);
      runs.push_back(std::move(run));
      // Odometer over the axes, last axis fastest.
      size_t i = axes.size();
      while (i > 0 && ++at[i - 1] == axes[i - 1]->values.size()) at[--i] = 0;
      if (i == 0) break;
    }
  }

  // Baselines: the first autoregressive strategy on a target, matched on sampling settings.
  for (auto& run : runs) {
    for (const auto& cand : runs) {
      if (cand.strategy.kind != StrategyKind::Autoregressive || cand.strategy.target != run.strategy.target ||
          !(cand.sampling == run.sampling))
        continue;
      // The first autoregressive strategy on this target wins.
      bool earlier_ar = false;
      for (const auto& s : spec.strategies)
        if (s.kind == StrategyKind::Autoregressive && s.target == run.strategy.target) {
          earlier_ar = s.index != cand.strategy.index;
          break;
        }
      if (earlier_ar) continue;
      if (&cand == &run) run.is_baseline = true;
      else run.baseline = cand.name;
      break;
    }
  }
  for (auto& run : runs) run.config_hash = run_config_hash(spec, run);
  return runs;
}

}  // namespace specmoe::exp
