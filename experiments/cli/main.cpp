// specmoe: the command-line tool. Each subcommand lives in its own cmd_*.cpp file.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli_common.h"
#include "base/error.h"
#include "experiments/git_commit.h"

namespace {

// llama.cpp spells some options with one dash and several letters (-md, -ctk); CLI11 reads one dash as
// one letter, so those are rewritten to their long names before parsing.
std::vector<std::string> rewrite_aliases(int argc, char** argv) {
  static const std::pair<const char*, const char*> aliases[] = {
      {"-md", "--model-draft"},
      {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},
  };
  std::vector<std::string> in(argv, argv + argc), args;
  for (size_t i = 0; i < in.size(); ++i) {
    std::string a = in[i];
    for (const auto& [from, to] : aliases)
      if (a == from) a = to;
    // `slurm --extra "--mem=4G"`: the value is an sbatch option, which CLI11 would read as one of
    // ours; joined as --extra=VALUE it stays a value.
    if (a == "--extra" && i + 1 < in.size()) a = "--extra=" + in[++i];
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specmoe: speculative decoding and mixture-of-experts inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("specmoe 0.1.0 (commit ") + specmoe::exp::kGitCommit + ")");
  specmoe::cli::add_generate_command(app);
  specmoe::cli::add_tokenize_command(app);
  specmoe::cli::add_info_command(app);
  specmoe::cli::add_perplexity_command(app);
  specmoe::cli::add_synth_command(app);
  specmoe::cli::add_quantize_command(app);
  specmoe::cli::add_speculate_command(app);
  specmoe::cli::add_bench_command(app);
  specmoe::cli::add_run_commands(app, argc, argv);
  specmoe::cli::add_slurm_command(app, argc, argv);

  std::vector<std::string> args = rewrite_aliases(argc, argv);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "specmoe: %s\n", e.what());
    return 2;
  } catch (const specmoe::Error& e) {
    std::fprintf(stderr, "specmoe: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specmoe: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
