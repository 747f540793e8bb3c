// DecodeOptions checks and the draft stream convention: see generation.h.
#include "verify/generation.h"

#include "base/error.h"
#include "core/rng.h"

namespace specmoe::verify {

void DecodeOptions::validate() const {
  if (max_tokens < 0)
    throw_error(ErrorKind::InvalidArgument, "max_tokens must be >= 0, got {}", max_tokens);
  if (draft_max < 0 || draft_max > 256)
    throw_error(ErrorKind::InvalidArgument, "draft_max must be in 0..256, got {}", draft_max);
  if (draft_min < 0 || draft_min > draft_max)
    throw_error(ErrorKind::InvalidArgument, "draft_min must be in 0..draft_max ({}), got {}", draft_max, draft_min);
  if (!(draft_p_min >= 0.0f && draft_p_min <= 1.0f))
    throw_error(ErrorKind::InvalidArgument, "draft_p_min must be in [0, 1], got {}", draft_p_min);
  if (cost_probe_forwards < 0)
    throw_error(ErrorKind::InvalidArgument, "cost_probe_forwards must be >= 0, got {}", cost_probe_forwards);
  tree.validate();
  if (!tree.empty() && tree.max_depth(draft_max) < 1)
    throw_error(ErrorKind::InvalidArgument, "a dynamic tree needs a depth (tree depth or draft_max >= 1)");
}

uint64_t draft_stream_id(uint64_t stream) {
  return core::Rng::stream_id({stream, 0x6472616674ULL /* "draft" */});
}

}  // namespace specmoe::verify
