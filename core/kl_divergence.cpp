#include "core/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "core/model.h"

namespace specmoe::core {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

// llama.cpp's mean_and_uncertainty: the mean and the standard error of the mean.
std::pair<double, double> mean_and_unc(double sum, double sum2, size_t count) {
  if (count < 1) return {0.0, 0.0};
  const double f = sum / static_cast<double>(count);
  double df = sum2 / static_cast<double>(count) - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / static_cast<double>(count - 1)) : 0.0;
  return {f, df};
}

double covariance(double suma, double sumb, double sumab, size_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

// Linear interpolation between order statistics, as llama.cpp's percentile.
double percentile(const std::vector<float>& sorted, double fraction) {
  if (sorted.empty()) return 0.0;
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  double p = fraction * static_cast<double>(sorted.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<double>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

template <typename T>
void read_exact(std::ifstream& in, T* dst, size_t count, const std::string& path, const char* what) {
  in.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in || static_cast<size_t>(in.gcount()) != count * sizeof(T)) {
    throw_error(ErrorKind::Format, "{}: truncated log-probability file (reading {})", path, what);
  }
}

}  // namespace

float encode_log_probs(const float* logits, int n_vocab, int target, uint16_t* record) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(record, &scale, sizeof(float));
  std::memcpy(record + 2, &min_log_prob, sizeof(float));
  uint16_t* codes = record + 4;
  if (scale != 0.f) {
    const float inv_scale = 1 / scale;
    for (int i = 0; i < n_vocab; ++i) {
      // Round to nearest, ties to even (llama.cpp's nearest_int); the codes fit 0..65535.
      codes[i] = logits[i] > min_logit ? static_cast<uint16_t>(std::nearbyint(inv_scale * (logits[i] - min_logit))) : 0;
    }
  } else {
    std::fill(codes, codes + n_vocab, uint16_t{0});
  }
  if (n_vocab % 2 != 0) codes[n_vocab] = 0;  // the record's padding entry
  return max_logit + log_sum_exp - logits[target];
}

LogProbWriter::LogProbWriter(std::string path) : path_(std::move(path)) {}

void LogProbWriter::begin(int n_ctx, int n_vocab, const std::vector<int32_t>& tokens, int n_chunk) {
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw_error(ErrorKind::Io, "{}: cannot open for writing", path_);
  n_ctx_ = n_ctx;
  n_vocab_ = n_vocab;
  tokens_.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(n_chunk) * n_ctx);
  const uint32_t ctx32 = static_cast<uint32_t>(n_ctx);
  const int32_t vocab32 = n_vocab, chunks32 = n_chunk;
  out_.write(kMagic, sizeof(kMagic));
  out_.write(reinterpret_cast<const char*>(&ctx32), sizeof(ctx32));
  out_.write(reinterpret_cast<const char*>(&vocab32), sizeof(vocab32));
  out_.write(reinterpret_cast<const char*>(&chunks32), sizeof(chunks32));
  out_.write(reinterpret_cast<const char*>(tokens_.data()), static_cast<std::streamsize>(tokens_.size() * sizeof(int32_t)));
  records_.assign(static_cast<size_t>(n_ctx - 1 - n_ctx / 2) * log_prob_record_size(n_vocab), 0);
}

void LogProbWriter::add_chunk(int chunk, const std::vector<float>& logits) {
  const int first = n_ctx_ / 2;
  const size_t nv = static_cast<size_t>(log_prob_record_size(n_vocab_));
  for (int i = first; i <= n_ctx_ - 2; ++i) {
    const int32_t next = tokens_[static_cast<size_t>(chunk) * n_ctx_ + i + 1];
    encode_log_probs(&logits[static_cast<size_t>(i) * n_vocab_], n_vocab_, next, &records_[(i - first) * nv]);
  }
  out_.write(reinterpret_cast<const char*>(records_.data()), static_cast<std::streamsize>(records_.size() * sizeof(uint16_t)));
  if (!out_) throw_error(ErrorKind::Io, "{}: write failed (disk full?)", path_);
}

void LogProbWriter::finish() {
  out_.flush();
  if (!out_) throw_error(ErrorKind::Io, "{}: write failed (disk full?)", path_);
  out_.close();
}

KLDivergenceResult compute_kl_divergence(Model& model, const std::string& base_path,
                                         const std::function<void(int, double)>& on_chunk) {
  std::ifstream in(base_path, std::ios::binary);
  if (!in) throw_error(ErrorKind::Io, "{}: cannot open the log-probability file", base_path);
  char magic[8] = {};
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    throw_error(ErrorKind::Format,
                "{}: not a log-probability file (no \"_logits_\" magic; write one with --kl-divergence-base "
                "and no --kl-divergence)",
                base_path);
  }
  uint32_t n_ctx32 = 0;
  int32_t n_vocab = 0, n_chunk = 0;
  read_exact(in, &n_ctx32, 1, base_path, "the context size");
  read_exact(in, &n_vocab, 1, base_path, "the vocabulary size");
  read_exact(in, &n_chunk, 1, base_path, "the chunk count");
  const int model_vocab = model.config().n_vocab;
  if (n_ctx32 < 4 || n_ctx32 > (1u << 20)) {
    throw_error(ErrorKind::Format, "{}: context size {} out of range (4 .. 1048576)", base_path, n_ctx32);
  }
  if (n_vocab != model_vocab) {
    throw_error(ErrorKind::InvalidArgument, "{}: made with a vocabulary of {} tokens, the model has {}", base_path,
                n_vocab, model_vocab);
  }
  const int n_ctx = static_cast<int>(n_ctx32);
  if (n_chunk < 1 || static_cast<int64_t>(n_chunk) * n_ctx > (int64_t{1} << 28)) {
    throw_error(ErrorKind::Format, "{}: chunk count {} out of range", base_path, n_chunk);
  }
  // The header fixes the file's size: check it before allocating what the header asks for, so a
  // short or damaged file is one error rather than a gigabyte allocation.
  const int n_scored_per_chunk = n_ctx - 1 - n_ctx / 2;
  const uint64_t need = kLogProbHeaderBytes + 4 * static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(n_ctx) +
                        2 * static_cast<uint64_t>(log_prob_record_size(n_vocab)) *
                            static_cast<uint64_t>(n_scored_per_chunk) * static_cast<uint64_t>(n_chunk);
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(static_cast<std::streamoff>(kLogProbHeaderBytes), std::ios::beg);
  if (!in || end < 0 || static_cast<uint64_t>(end) < need) {
    throw_error(ErrorKind::Format,
                "{}: truncated log-probability file ({} bytes; its header promises {} chunks of {} tokens with "
                "{}-token records, {} bytes)",
                base_path, static_cast<int64_t>(end), n_chunk, n_ctx, n_vocab, need);
  }
  std::vector<int32_t> tokens(static_cast<size_t>(n_chunk) * n_ctx);
  read_exact(in, tokens.data(), tokens.size(), base_path, "the tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= model_vocab) {
      throw_error(ErrorKind::Format, "{}: token {} at position {} is outside the vocabulary (0 .. {})", base_path,
                  tokens[i], i, model_vocab - 1);
    }
  }

  const Tokenizer& tok = model.tokenizer();
  const bool add_bos = tok.add_bos_by_default() && tok.bos() >= 0;
  const int first = n_ctx / 2;
  const size_t nv = static_cast<size_t>(log_prob_record_size(n_vocab));
  std::vector<uint16_t> base(static_cast<size_t>(n_scored_per_chunk) * nv);
  std::vector<float> kld_values;
  kld_values.reserve(static_cast<size_t>(n_chunk) * n_scored_per_chunk);

  double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0, sum_p_diff2 = 0;
  float max_p_diff = 0;
  size_t n_same_top = 0, count = 0;

  KLDivergenceResult r;
  r.n_ctx = n_ctx;
  r.n_chunks = n_chunk;
  KVCache kv = model.new_cache(n_ctx);
  std::vector<float> logits;
  std::vector<int32_t> chunk(n_ctx), positions(n_ctx);
  for (int i = 0; i < n_ctx; ++i) positions[i] = i;
  for (int c = 0; c < n_chunk; ++c) {
    read_exact(in, base.data(), base.size(), base_path, fmt::format("chunk {}'s log-probabilities", c + 1).c_str());
    std::copy(tokens.begin() + static_cast<ptrdiff_t>(c) * n_ctx,
              tokens.begin() + static_cast<ptrdiff_t>(c + 1) * n_ctx, chunk.begin());
    if (add_bos) chunk[0] = tok.bos();
    kv.clear();
    model.forward(Batch(chunk, positions), kv).logits.to_host(logits);
    for (int i = first; i <= n_ctx - 2; ++i) {
      const float* row = &logits[static_cast<size_t>(i) * n_vocab];
      const uint16_t* rec = &base[static_cast<size_t>(i - first) * nv];
      const int target = tokens[static_cast<size_t>(c) * n_ctx + i + 1];
      // The same arithmetic as llama.cpp's reader (float max, double sum of expf, float logs).
      float max_logit = row[0];
      int imax = 0;
      for (int v = 1; v < n_vocab; ++v) {
        if (row[v] > max_logit) {
          max_logit = row[v];
          imax = v;
        }
      }
      double sum_exp = 0.0;
      for (int v = 0; v < n_vocab; ++v) sum_exp += std::exp(row[v] - max_logit);
      const float log_sum_exp = static_cast<float>(std::log(sum_exp));
      float scale = 0, min_log_prob = 0;
      std::memcpy(&scale, rec, sizeof(float));
      std::memcpy(&min_log_prob, rec + 2, sizeof(float));
      const uint16_t* codes = rec + 4;
      const float nll = max_logit + log_sum_exp - row[target];
      const float nll_base = -(scale * codes[target] + min_log_prob);
      sum_nll += nll;
      sum_nll2 += static_cast<double>(nll) * nll;
      sum_nll_base += nll_base;
      sum_nll_base2 += static_cast<double>(nll_base) * nll_base;
      sum_nll_nll_base += static_cast<double>(nll) * nll_base;
      const float log_norm = max_logit + log_sum_exp;
      double kld = 0;
      int imax_base = 0;
      float p_log_base_max = 0;
      for (int v = 0; v < n_vocab; ++v) {
        const float p_log_base = scale * codes[v] + min_log_prob;
        if (v == 0 || p_log_base > p_log_base_max) {
          p_log_base_max = p_log_base;
          imax_base = v;
        }
        if (p_log_base > -16.f) kld += std::exp(p_log_base) * (p_log_base - row[v] + log_norm);
      }
      sum_kld += kld;
      sum_kld2 += kld * kld;
      if (imax == imax_base) ++n_same_top;
      const float p_diff = std::exp(-nll) - std::exp(-nll_base);
      sum_p_diff2 += static_cast<double>(p_diff) * p_diff;
      max_p_diff = std::max(max_p_diff, std::fabs(p_diff));
      kld_values.push_back(static_cast<float>(kld));
      ++count;
    }
    r.chunk_kld.push_back(sum_kld / static_cast<double>(count));
    if (on_chunk) on_chunk(c, r.chunk_kld.back());
  }
  r.n_scored = static_cast<int>(count);
  const auto lp = mean_and_unc(sum_nll, sum_nll2, count);
  const auto lpb = mean_and_unc(sum_nll_base, sum_nll_base2, count);
  r.ppl = std::exp(lp.first);
  r.ppl_base = std::exp(lpb.first);
  r.ln_ppl_ratio = lp.first - lpb.first;
  const double cov = covariance(sum_nll, sum_nll_base, sum_nll_nll_base, count);
  r.ln_ppl_ratio_unc = std::sqrt(std::max(0.0, lp.second * lp.second + lpb.second * lpb.second - 2 * cov));
  const auto k = mean_and_unc(sum_kld, sum_kld2, count);
  r.kld_mean = k.first;
  r.kld_unc = k.second;
  std::sort(kld_values.begin(), kld_values.end());
  r.kld_median = percentile(kld_values, 0.5);
  r.kld_p99 = percentile(kld_values, 0.99);
  r.kld_max = kld_values.back();
  r.p_diff_rms = std::sqrt(sum_p_diff2 / static_cast<double>(count));
  r.p_diff_max = max_p_diff;
  r.same_top = static_cast<double>(n_same_top) / static_cast<double>(count);
  r.same_top_unc = count > 1 ? std::sqrt(r.same_top * (1 - r.same_top) / static_cast<double>(count - 1)) : 0.0;
  return r;
}

}  // namespace specmoe::core
