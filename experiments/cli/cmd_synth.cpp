// specmoe synth: writes deterministic random-weight models (byte-level vocabulary) for tests,
// benchmarks and the quickstart.
#include <cstdio>

#include "cli_common.h"
#include "core/synth.h"

namespace specmoe::cli {

void add_synth_command(CLI::App& app) {
  struct Args {
    std::string preset, output;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  std::string presets_help = "preset; one of:";
  for (const std::string& p : core::synth_presets()) presets_help += "\n    " + p;
  presets_help +=
      "\n  PRESET-TYPE (e.g. tiny-q5_0, tiny-256-q2_k, target-iq4_xs) writes PRESET with its matrices in TYPE "
      "(F32, F16, BF16 or a quantized type; the K-quants and IQ4_XS need rows of 256: tiny-256, target)";
  CLI::App* cmd = app.add_subcommand("synth", "write a synthetic random-weight model");
  cmd->add_option("--preset", a->preset, presets_help)->required();
  cmd->add_option("-o,--output", a->output, "output GGUF file")->required();
  cmd->add_option("-s,--seed", a->seed, "weights seed (a draft needs its target's seed)")->capture_default_str();
  cmd->callback([a] {
    core::synth_write(a->preset, a->output, a->seed);
    std::fprintf(stderr, "wrote %s (preset %s, seed %llu)\n", a->output.c_str(), a->preset.c_str(),
                 static_cast<unsigned long long>(a->seed));
  });
}

}  // namespace specmoe::cli
