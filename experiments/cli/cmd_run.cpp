// specmoe run / merge / compare: the experiment harness from the command line.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "base/error.h"
#include "experiments/experiment.h"

namespace specmoe::cli {
namespace {

// "--shard 2/4" -> (1, 4): shards are numbered from 1 on the command line, from 0 inside.
void parse_shard(const std::string& text, exp::RunOptions& o) {
  int i = 0, n = 0;
  char slash = 0;
  std::istringstream in(text);
  if (!(in >> i >> slash >> n) || slash != '/' || n < 1 || i < 1 || i > n || !in.eof())
    throw_error(ErrorKind::InvalidArgument, "--shard {}: expected i/n with 1 <= i <= n", text);
  o.shard_i = i - 1;
  o.shard_n = n;
}

}  // namespace

void add_run_commands(CLI::App& app, int argc, char** argv) {
  struct Args {
    std::string config, shard, output, device, expect_hash, expect_commit;
    bool resume = false, dry_run = false, quiet = false;
    int threads = -1;
    std::vector<std::string> formats;
    std::string command_line;
  };
  auto a = std::make_shared<Args>();
  for (int i = 0; i < argc; ++i) a->command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App* run = app.add_subcommand("run", "run an experiment TOML against the autoregressive baseline");
  run->add_option("config", a->config, "experiment TOML file")->required();
  run->add_flag("--resume", a->resume, "skip runs whose results exist and match the config");
  run->add_option("--shard", a->shard, "run every n-th run: i/n (1-based), for cluster job arrays");
  run->add_option("-o,--output", a->output, "output folder (overrides [experiment] output)");
  auto* threads = run->add_option("-t,--threads", a->threads, "threads (overrides [experiment] threads; 0 = all)");
  run->add_option("--format", a->formats, "report writers to use (default: all)");
  run->add_flag("--dry-run", a->dry_run, "list the resolved runs and exit");
  run->add_flag("-q,--quiet", a->quiet, "no progress line");
  run->add_option("--device", a->device,
                  "where the models run: cpu, cuda or cuda:N (default: [experiment] device, else cpu)");
  run->add_option("--expect-config-hash", a->expect_hash,
                  "refuse to run unless the experiment's config hash is this (batch scripts of specmoe slurm)");
  run->add_option("--expect-commit", a->expect_commit,
                  "refuse to run unless this specmoe was built from this commit (batch scripts of specmoe slurm)");
  run->callback([a, threads] {    exp::RunOptions o;
    o.resume = a->resume;
    if (!a->shard.empty()) parse_shard(a->shard, o);
    o.output_override = a->output;
    if (threads->count() > 0) check_threads(a->threads, "--threads");
    o.threads_override = a->threads;
    o.progress = !a->quiet;
    o.report_formats = a->formats;
    o.command_line = a->command_line;
    o.device = a->device;
    o.expect_config_hash = a->expect_hash;
    o.expect_commit = a->expect_commit;
    if (a->dry_run) {
      exp::describe_experiment(a->config, o, std::cout);
      return;
    }
    const int rc = exp::run_experiment(a->config, o);
    if (rc != 0) std::exit(rc);  // 130: interrupted, finished runs kept on disk
  });

  struct MergeArgs {
    std::vector<std::string> dirs;
    std::string output;
    exp::MergeOptions options;
  };
  auto m = std::make_shared<MergeArgs>();
  CLI::App* merge = app.add_subcommand("merge", "combine the output folders of the n shards of a run into one report");
  merge->add_option("dirs", m->dirs, "shard output folders (one per shard of --shard i/n)")->required();
  merge->add_option("-o,--output", m->output, "merged output folder")->required();
  merge->add_flag("--allow-partial", m->options.allow_partial,
                  "merge what is there when shards are missing or unfinished; the report lists the gaps");
  merge->add_option("--expect-config-hash", m->options.expect_config_hash,
                    "refuse shards whose experiment config hash is not this");
  merge->add_option("--expect-commit", m->options.expect_commit, "refuse runs made by another specmoe build");
  merge->callback([m] {
    const exp::MergeSummary s = exp::merge_reports(m->dirs, m->output, m->options);
    std::fprintf(stderr, "merged %d runs of %d shard(s) into %s\n", s.runs, s.shards, m->output.c_str());
    for (const auto& g : s.gaps) std::fprintf(stderr, "gap: %s\n", g.c_str());
    for (const auto& name : s.missing) std::fprintf(stderr, "missing run: %s\n", name.c_str());
  });

  struct CompareArgs {
    std::string a, b;
  };
  auto c = std::make_shared<CompareArgs>();
  CLI::App* compare = app.add_subcommand("compare", "compare two reports; flags changed outputs or counts");
  compare->add_option("a", c->a, "report.json or output folder")->required();
  compare->add_option("b", c->b, "report.json or output folder")->required();
  compare->callback([c] {
    const int rc = exp::compare_reports(c->a, c->b, std::cout);
    std::cout.flush();
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace specmoe::cli
