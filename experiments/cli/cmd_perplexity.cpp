// specmoe perplexity: llama.cpp-compatible perplexity of a model on a text file.
#include <cstdio>

#include "base/error.h"
#include "cli_common.h"
#include "core/kl_divergence.h"
#include "core/perplexity.h"

namespace specmoe::cli {

void add_perplexity_command(CLI::App& app) {
  struct Args {
    ModelOptions model;
    std::string file;
    int ctx = 512;
    std::string kld_base;
    bool kld = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity on a text file (llama.cpp's method)");
  add_model_options(cmd, a->model);
  cmd->add_option("-f,--file", a->file,
                  "text file (one trailing newline is dropped, as llama.cpp's -f does); not with --kl-divergence");
  cmd->add_option("--kl-divergence-base", a->kld_base,
                  "llama.cpp's log-probability file: written here (every scored position), or with "
                  "--kl-divergence the base to compare against (llama-perplexity reads and writes the same)");
  cmd->add_flag("--kl-divergence", a->kld,
                "compare with the --kl-divergence-base file on its own tokens and chunks: KL divergence, "
                "same argmax, change of the correct token's probability");
  cmd->add_option("-c,--ctx", a->ctx, "tokens per chunk")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([a] {
    if (a->kld) {
      if (a->kld_base.empty()) throw_error(ErrorKind::InvalidArgument, "--kl-divergence needs --kl-divergence-base FILE");
      if (!a->file.empty()) {
        throw_error(ErrorKind::InvalidArgument,
                    "--kl-divergence scores the tokens stored in {}; leave out -f", a->kld_base);
      }
      auto model = load_model(a->model, a->model.model_path);
      const auto r = core::compute_kl_divergence(*model, a->kld_base, [](int chunk, double kld) {
        std::fprintf(stderr, "[%d]%.6f ", chunk + 1, kld);
      });
      std::fprintf(stderr, "\n%d chunks of %d tokens, %d positions compared, KV cache k %s, v %s\n", r.n_chunks,
                   r.n_ctx, r.n_scored, core::kv_cache_type_name(model->cache_types().k),
                   core::kv_cache_type_name(model->cache_types().v));
      std::printf("base: %s\n", a->kld_base.c_str());
      std::printf("ppl: %.6f\n", r.ppl);
      std::printf("ppl_base: %.6f\n", r.ppl_base);
      std::printf("ln_ppl_ratio: %.6f +- %.6f\n", r.ln_ppl_ratio, r.ln_ppl_ratio_unc);
      std::printf("kld_mean: %.6f +- %.6f\n", r.kld_mean, r.kld_unc);
      std::printf("kld_median: %.6f\n", r.kld_median);
      std::printf("kld_p99: %.6f\n", r.kld_p99);
      std::printf("kld_max: %.6f\n", r.kld_max);
      std::printf("p_diff_rms: %.4f%%\n", 100.0 * r.p_diff_rms);
      std::printf("p_diff_max: %.4f%%\n", 100.0 * r.p_diff_max);
      std::printf("same_top: %.4f%% +- %.4f%%\n", 100.0 * r.same_top, 100.0 * r.same_top_unc);
      return;
    }
    if (a->file.empty()) throw_error(ErrorKind::InvalidArgument, "perplexity needs -f FILE (or --kl-divergence)");
    const std::string text = core::text_as_llama_reads_file(read_file(a->file));
    auto model = load_model(a->model, a->model.model_path);
    std::unique_ptr<core::LogProbWriter> writer;
    if (!a->kld_base.empty()) writer = std::make_unique<core::LogProbWriter>(a->kld_base);
    const auto r = core::compute_perplexity(
        *model, text, a->ctx, [](int chunk, double ppl) { std::fprintf(stderr, "[%d]%.4f ", chunk + 1, ppl); },
        writer.get());
    std::fprintf(stderr, "\n%d chunks of %d tokens, %d predictions scored (the text: %d tokens), KV cache k %s, v %s\n",
                 r.n_chunks, a->ctx, r.n_scored, r.n_tokens, core::kv_cache_type_name(model->cache_types().k),
                 core::kv_cache_type_name(model->cache_types().v));
    if (writer) std::fprintf(stderr, "log-probabilities of every scored position written to %s\n", a->kld_base.c_str());
    std::printf("perplexity: %.4f\n", r.perplexity);
  });
}

}  // namespace specmoe::cli
