// Vocabulary compatibility between a draft and a target model: see vocab_check.h.
#include "draft/vocab_check.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "core/gguf.h"
#include "core/tokenizer.h"

namespace specmoe::draft {
namespace {

const char* kind_name(core::TokenizerKind kind) {
  return kind == core::TokenizerKind::SentencePiece ? "sentencepiece" : "bpe";
}

std::string model_path(const core::Model& m) {
  try {
    return m.file().path();
  } catch (const std::exception&) {
    return m.config().name.empty() ? std::string("<model>") : m.config().name;
  }
}

bool is_padding(const core::Tokenizer& tok, int32_t id) {
  if (id >= tok.n_vocab()) return true;  // a logit row without a vocabulary entry
  if (tok.token_type(id) == core::TokenType::Unused) return true;
  const std::string& text = tok.token_text(id);
  if (text.empty()) return true;
  std::string lower(text.size(), ' ');
  std::transform(text.begin(), text.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return lower.find("pad") != std::string::npos;
}

}  // namespace

void check_vocab_compatible(const core::Model& target, const core::Model& draft) {
  const std::string tp = model_path(target), dp = model_path(draft);
  const core::Tokenizer& tt = target.tokenizer();
  const core::Tokenizer& dt = draft.tokenizer();
  if (tt.kind() != dt.kind())
    throw_error(ErrorKind::InvalidArgument,
                "draft model {} is incompatible with target {}: tokenizer kinds differ ({} vs {})", dp, tp,
                kind_name(dt.kind()), kind_name(tt.kind()));
  if (tt.bos() != dt.bos() || tt.eos() != dt.eos())
    throw_error(ErrorKind::InvalidArgument,
                "draft model {} is incompatible with target {}: BOS/EOS ids differ (draft {}/{}, target {}/{})",
                dp, tp, dt.bos(), dt.eos(), tt.bos(), tt.eos());
  const int tv = tt.n_vocab(), dv = dt.n_vocab();
  const int shared = std::min(tv, dv);
  for (int32_t id = 0; id < shared; ++id) {
    if (tt.token_text(id) != dt.token_text(id))
      throw_error(ErrorKind::InvalidArgument,
                  "draft model {} is incompatible with target {}: token {} is '{}' in the draft but '{}' in the target",
                  dp, tp, id, dt.token_text(id), tt.token_text(id));
  }
  // Ids (vocabulary entries or logit rows) that only one model has must be padding.
  const int t_rows = std::max(tv, target.config().n_vocab), d_rows = std::max(dv, draft.config().n_vocab);
  for (int32_t id = shared; id < t_rows; ++id)
    if (!is_padding(tt, id))
      throw_error(ErrorKind::InvalidArgument,
                  "draft model {} is incompatible with target {}: vocabulary sizes differ ({} vs {}) and target "
                  "token {} ('{}') is not padding",
                  dp, tp, dv, tv, id, tt.token_text(id));
  for (int32_t id = shared; id < d_rows; ++id)
    if (!is_padding(dt, id))
      throw_error(ErrorKind::InvalidArgument,
                  "draft model {} is incompatible with target {}: vocabulary sizes differ ({} vs {}) and draft "
                  "token {} ('{}') is not padding",
                  dp, tp, dv, tv, id, dt.token_text(id));
}

}  // namespace specmoe::draft
