#include "core/perplexity.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/kl_divergence.h"
#include "core/model.h"

namespace specmoe::core {

PerplexityResult compute_perplexity(Model& model, const std::string& text, int ctx,
                                    const std::function<void(int, double)>& on_chunk,
                                    LogProbWriter* save_log_probs) {
  if (ctx < 4) throw_error(ErrorKind::InvalidArgument, "--ctx {} is too small (need at least 4)", ctx);
  const Tokenizer& tok = model.tokenizer();
  const bool add_bos = tok.add_bos_by_default() && tok.bos() >= 0;
  const std::vector<int32_t> tokens = tok.encode(text, add_bos);
  const int n = static_cast<int>(tokens.size());
  if (n < 2 * ctx) {
    throw_error(ErrorKind::InvalidArgument,
                "the text has {} tokens, perplexity with --ctx {} needs at least {} (2 * ctx)", n, ctx,
                2 * ctx);
  }
  const int n_vocab = model.config().n_vocab;
  PerplexityResult result;
  result.n_tokens = n;
  result.n_chunks = n / ctx;

  if (save_log_probs) save_log_probs->begin(ctx, n_vocab, tokens, result.n_chunks);
  KVCache kv = model.new_cache(ctx);
  std::vector<float> logits;
  std::vector<int32_t> chunk(ctx), positions(ctx);
  for (int i = 0; i < ctx; ++i) positions[i] = i;
  const int first = ctx / 2;
  double nll_sum = 0.0;
  for (int c = 0; c < result.n_chunks; ++c) {
    std::copy(tokens.begin() + static_cast<ptrdiff_t>(c) * ctx,
              tokens.begin() + static_cast<ptrdiff_t>(c + 1) * ctx, chunk.begin());
    if (add_bos) chunk[0] = tok.bos();
    kv.clear();
    model.forward(Batch(chunk, positions), kv).logits.to_host(logits);
    if (save_log_probs) save_log_probs->add_chunk(c, logits);
    for (int i = first; i <= ctx - 2; ++i) {
      // log softmax of row i evaluated at the next token, in double for a stable sum.
      const float* row = &logits[static_cast<size_t>(i) * n_vocab];
      const float mx = *std::max_element(row, row + n_vocab);
      double sum = 0.0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const int target = tokens[static_cast<size_t>(c) * ctx + i + 1];
      nll_sum += -(static_cast<double>(row[target]) - mx - std::log(sum));
      ++result.n_scored;
    }
    const double running = std::exp(nll_sum / result.n_scored);
    result.chunk_ppl.push_back(running);
    if (on_chunk) on_chunk(c, running);
  }
  if (save_log_probs) save_log_probs->finish();
  result.mean_nll = nll_sum / result.n_scored;
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

std::string text_as_llama_reads_file(std::string file_bytes) {
  if (!file_bytes.empty() && file_bytes.back() == '\n') file_bytes.pop_back();
  return file_bytes;
}

}  // namespace specmoe::core
