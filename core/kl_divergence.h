// KL divergence of a model's next-token distributions against a base run, in llama.cpp's
// log-probability file format, so that specmoe and llama-perplexity can each be the base of the
// other (`llama-perplexity --kl-divergence-base F` writes such a file, `--kl-divergence` reads it;
// `specmoe perplexity` takes the same two flags).
//
// Why a distribution comparison: perplexity over a few hundred scored tokens is a noisy summary
// of two programs that round differently (quantized activations), while the KL divergence per
// position, the fraction of positions with the same argmax and the RMS change of the correct
// token's probability compare the logits themselves, on identical tokens.
//
// The file (llama.cpp tools/perplexity, little-endian as written on x86/ARM):
//   "_logits_" (8 bytes), uint32 n_ctx, int32 n_vocab, int32 n_chunk,
//   int32 tokens[n_chunk * n_ctx] (the text's tokens, BOS not substituted),
//   then for each chunk and each scored position i = n_ctx/2 .. n_ctx-2 a record of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 uint16: float scale, float min_log_prob (4 uint16), then
//   n_vocab codes with log p(v) = scale * code + min_log_prob; log-probabilities more than 16
//   below the maximum are stored as the floor (code 0), and the reader ignores p(v) < e^-16.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/perplexity.h"

namespace specmoe::core {

// Bytes before the tokens: the magic, n_ctx, n_vocab and n_chunk.
inline constexpr size_t kLogProbHeaderBytes = 20;

// Number of uint16 in one position's record.
inline int log_prob_record_size(int n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

// Encodes one row of logits as llama.cpp does (float max/min, double sum of expf) into `record`
// (log_prob_record_size(n_vocab) entries). Returns the negative log-likelihood of `target`.
float encode_log_probs(const float* logits, int n_vocab, int target, uint16_t* record);

// Writes a log-probability file: begin() the header, add_chunk() each chunk's records in order,
// finish() flushes and checks the write.
class LogProbWriter {
 public:
  explicit LogProbWriter(std::string path);
  void begin(int n_ctx, int n_vocab, const std::vector<int32_t>& tokens, int n_chunk);
  // logits: n_ctx rows; rows n_ctx/2 .. n_ctx-2 are encoded against the chunk's next tokens.
  void add_chunk(int chunk, const std::vector<float>& logits);
  void finish();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  int n_ctx_ = 0, n_vocab_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<uint16_t> records_;
};

struct KLDivergenceResult {
  int n_ctx = 0;
  int n_chunks = 0;
  int n_scored = 0;
  double ppl = 0, ppl_base = 0;              // the model's and the base's perplexity, same tokens
  double ln_ppl_ratio = 0, ln_ppl_ratio_unc = 0;  // mean ln(PPL/PPL_base) and its uncertainty
  double kld_mean = 0, kld_unc = 0;          // mean KL(base || model) per position, nats
  double kld_median = 0, kld_p99 = 0, kld_max = 0;
  double p_diff_rms = 0;                     // RMS of p(correct) - p_base(correct)
  double p_diff_max = 0;                     // largest |p(correct) - p_base(correct)|
  double same_top = 0, same_top_unc = 0;     // fraction of positions with the same argmax
  std::vector<double> chunk_kld;             // running mean KLD after each chunk
};

// Reads the base file at `base_path`, runs the model over its tokens with its chunking (each
// chunk's first token replaced by BOS when the vocabulary adds BOS, as llama.cpp does) and
// compares every scored position. Errors (one line, naming the file): not a log-probability file,
// a vocabulary of another size, token ids outside the model's vocabulary, a truncated record.
KLDivergenceResult compute_kl_divergence(Model& model, const std::string& base_path,
                                         const std::function<void(int, double)>& on_chunk = {});

}  // namespace specmoe::core
