// Sampler: see sampler.h.
#include "core/sampler.h"

#include "base/error.h"
#include "core/logits_processors.h"

namespace specmoe::core {

Sampler::Sampler(const SamplingParams& params) : params_(params) { params_.validate(); }

Rows Sampler::distributions(const Rows& logits, std::span<const int32_t> history, std::span<const int32_t> extra,
                            float* out) const {
  if (logits.backend == nullptr || logits.rows == 0)
    throw_error(ErrorKind::InvalidArgument, "sampling: no logits rows");
  // Checked here, for every backend alike: a history id outside the vocabulary is an error.
  check_history(history, static_cast<size_t>(logits.cols));
  check_history(extra, static_cast<size_t>(logits.cols));
  logits.backend->distributions(logits.data, logits.rows, logits.cols, params_, history, extra, out);
  return Rows{out, logits.rows, logits.cols, logits.backend};
}

Rows Sampler::distributions(const Rows& logits, std::span<const int32_t> history, std::span<const int32_t> extra,
                            RowBuffer& out) const {
  if (out.backend() != logits.backend) out = RowBuffer(*logits.backend);
  return distributions(logits, history, extra, out.reserve(logits.rows, logits.cols));
}

int32_t Sampler::sample(const Rows& p, int64_t r, Rng& rng) const {
  if (r < 0 || r >= p.rows) throw_error(ErrorKind::InvalidArgument, "sampling: row {} of {}", r, p.rows);
  const double u = params_.greedy() ? 0.0 : rng.uniform();
  return p.backend->sample(p.row(r), p.cols, params_, u);
}

Draw Sampler::draw(const Rows& probs, int64_t r, float* q_out, int64_t n_out, Rng& rng, float p_min,
                   const float* confidence_logits) const {
  if (r < 0 || r >= probs.rows) throw_error(ErrorKind::InvalidArgument, "sampling: row {} of {}", r, probs.rows);
  if (p_min > 0.0f && confidence_logits == nullptr)
    throw_error(ErrorKind::InvalidArgument, "sampling: adaptive drafting needs the draft logits for its confidence");
  // The uniform comes from a copy: a draw that is refused leaves the stream as it was.
  Rng probe = rng;
  const double u = params_.greedy() ? 0.0 : probe.uniform();
  Draw d = probs.backend->draw(probs.row(r), probs.cols, q_out, n_out, params_, u,
                               p_min > 0.0f ? confidence_logits : nullptr);
  if (d.token < 0 || (p_min > 0.0f && d.confidence < p_min)) {
    d.token = -1;
    return d;
  }
  rng = probe;
  return d;
}

}  // namespace specmoe::core
