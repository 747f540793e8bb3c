// Perplexity as llama.cpp's `perplexity` tool computes it, so figures are comparable:
// tokenize the whole text with BOS; split into floor(n / ctx) non-overlapping chunks of ctx
// tokens; replace each chunk's first token by BOS when the vocabulary adds BOS; score positions
// ctx/2 .. ctx-2 (the logits at position i predict token i+1); ppl = exp(mean negative log-lik.).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace specmoe::core {

class Model;
class LogProbWriter;  // core/kl_divergence.h

struct PerplexityResult {
  double perplexity = 0.0;
  double mean_nll = 0.0;
  int n_chunks = 0;
  int n_tokens = 0;            // tokens in the text (with BOS)
  int n_scored = 0;            // predictions scored
  std::vector<double> chunk_ppl;  // running perplexity after each chunk (llama.cpp prints these)
};

// Throws Error(InvalidArgument) when the text has fewer than 2 * ctx tokens, naming both numbers.
// on_chunk (optional) is called after each chunk with (chunk index, running perplexity).
// save_log_probs (optional) receives every chunk's scored positions in llama.cpp's
// log-probability format (the base of a later KL-divergence run, specmoe's or llama.cpp's).
PerplexityResult compute_perplexity(Model& model, const std::string& text, int ctx,
                                    const std::function<void(int, double)>& on_chunk = {},
                                    LogProbWriter* save_log_probs = nullptr);

// The text llama.cpp's tools read from `-f FILE` (common/arg.cpp): the file's bytes less one
// trailing '\n' ("a\n\n" -> "a\n", "a\r\n" -> "a\r", "a" unchanged). `specmoe perplexity -f`
// reads its file this way, so its token and chunk counts are llama-perplexity's on the same file
// (a text of exactly k * ctx tokens with its newline has k - 1 chunks without it).
std::string text_as_llama_reads_file(std::string file_bytes);

}  // namespace specmoe::core
