// Prompt lookup decoding: see ngram_drafter.h.
#include "draft/ngram_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace specmoe::draft {

NgramDrafter::NgramDrafter(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_max < ngram_min)
    throw_error(ErrorKind::InvalidArgument,
                "ngram drafter: need 1 <= ngram_min <= ngram_max, got ngram_min {} and ngram_max {}",
                ngram_min, ngram_max);
}

void NgramDrafter::begin(std::span<const int32_t>) {}  // stateless: the context is the state

void NgramDrafter::accepted(int, int32_t) {}

void NgramDrafter::lookup(std::span<const int32_t> context, int ngram_min, int ngram_max, int max_tokens,
                          std::vector<int32_t>& out) {
  out.clear();
  const int c = static_cast<int>(context.size());
  if (max_tokens <= 0) return;
  for (int n = std::min(ngram_max, c - 1); n >= ngram_min; --n) {
    const auto pattern = context.subspan(c - n);  // the last n tokens
    // A match ends at j (tokens [j-n, j)), j < c so at least one token follows it; scan from the
    // most recent match backwards.
    for (int j = c - 1; j >= n; --j) {
      if (!std::equal(pattern.begin(), pattern.end(), context.begin() + (j - n))) continue;
      const int end = std::min(c, j + max_tokens);
      out.assign(context.begin() + j, context.begin() + end);
      return;
    }
  }
}

void NgramDrafter::propose(std::span<const int32_t> context, const DraftParams& params, Draft& out) {
  out.clear();
  out.one_hot = true;
  lookup(context, ngram_min_, ngram_max_, params.draft_max, out.tokens);
}

}  // namespace specmoe::draft
