// Checks that a draft model can speculate for a target: the draft's token ids must mean the same
// text as the target's, or verification would compare unrelated tokens (llama.cpp's
// common_speculative_are_compatible applies the same idea).
#pragma once
#include "core/model.h"

namespace specmoe::draft {

// Throws Error(InvalidArgument) naming both model files and the first difference unless: same
// tokenizer kind, same BOS and EOS ids, the same token text for every id both vocabularies have,
// and the ids only one of them has are padding (empty text, token type UNUSED, or a name
// containing "pad"); likewise logit rows beyond a tokenizer's vocabulary count as padding.
void check_vocab_compatible(const core::Model& target, const core::Model& draft);

}  // namespace specmoe::draft
