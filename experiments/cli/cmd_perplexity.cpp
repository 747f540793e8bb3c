// specmoe perplexity: llama.cpp-compatible perplexity of a model on a text file.
#include <cstdio>

#include "cli_common.h"
#include "core/perplexity.h"

namespace specmoe::cli {

void add_perplexity_command(CLI::App& app) {
  struct Args {
    ModelOptions model;
    std::string file;
    int ctx = 512;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity on a text file (llama.cpp's method)");
  add_model_options(cmd, a->model);
  cmd->add_option("-f,--file", a->file, "text file")->required();
  cmd->add_option("-c,--ctx", a->ctx, "tokens per chunk")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([a] {
    const std::string text = read_file(a->file);
    auto model = load_model(a->model, a->model.model_path);
    const auto r = core::compute_perplexity(*model, text, a->ctx, [](int chunk, double ppl) {
      std::fprintf(stderr, "[%d]%.4f ", chunk + 1, ppl);
    });
    std::fprintf(stderr, "\n%d chunks of %d tokens, %d predictions scored, KV cache k %s, v %s\n", r.n_chunks, a->ctx,
                 r.n_scored, core::kv_cache_type_name(model->cache_types().k),
                 core::kv_cache_type_name(model->cache_types().v));
    std::printf("perplexity: %.4f\n", r.perplexity);
  });
}

}  // namespace specmoe::cli
