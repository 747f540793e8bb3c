// Multi-turn prompts: earlier turns answered greedily by the target, then the measured turn.
#include "experiments/prompt_conversation.h"

#include "base/error.h"
#include "core/model.h"
#include "core/sampling.h"
#include "verify/autoregressive.h"

namespace specmoe::exp {

ConversationPrompt build_conversation_prompt(core::Model& target, const core::ChatTemplateChoice& chat,
                                             const PromptSource& source, const Prompt& prompt) {
  const core::Tokenizer& tok = target.tokenizer();
  std::vector<core::ChatMessage> messages;
  if (!source.system.empty()) messages.push_back({"system", source.system});
  ConversationPrompt out;
  if (!prompt.history.empty() && !chat.templated())
    throw_error(ErrorKind::InvalidArgument,
                "question '{}' is answered after {} earlier turn(s), fed back as a conversation, which needs a chat "
                "template; the prompt is raw text ({})",
                prompt.id, prompt.history.size(), chat.reason);
  core::SamplingParams greedy;
  greedy.temperature = 0.0f;
  verify::DecodeOptions options;
  options.max_tokens = source.history_max_tokens;
  options.stop_at_eog = true;
  const int n_ctx = target.config().n_ctx_train;
  for (const std::string& turn : prompt.history) {
    messages.push_back({"user", turn});
    const std::vector<int32_t> ids = core::chat_prompt_tokens(tok, chat, messages);
    if (n_ctx > 0 && static_cast<int64_t>(ids.size()) + options.max_tokens > n_ctx)
      throw_error(ErrorKind::InvalidArgument,
                  "question '{}': the conversation has {} tokens before answer {}; with history_max_tokens {} it "
                  "outgrows the target's context ({})",
                  prompt.id, ids.size(), out.answers.size() + 1, options.max_tokens, n_ctx);
    const verify::GenerationResult answer = verify::generate_autoregressive(target, ids, greedy, options);
    // The answer as generated (pieces concatenated), without the end-of-generation token that
    // closed it: the template writes its own end of turn.
    std::string text;
    for (int32_t id : answer.tokens)
      if (!tok.is_eog(id)) text += tok.token_to_piece(id);
    out.answers.push_back(text);
    messages.push_back({"assistant", std::move(text)});
  }
  messages.push_back({"user", prompt.text});
  out.tokens = core::chat_prompt_tokens(tok, chat, messages);
  return out;
}

}  // namespace specmoe::exp
