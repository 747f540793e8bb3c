// The token ids an experiment prompt becomes for one target: the user turn wrapped in the chat
// template [prompts] chat_template selects for that target (core/chat_template.h), after the
// system message, and, for a later turn of a multi-turn question (MT-bench's second turn), after
// the earlier turns with the target's own answers, generated greedily and fed back as the
// conversation, as MT-bench does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat_template.h"
#include "experiments/experiment_spec.h"

namespace specmoe::core {
class Model;
}

namespace specmoe::exp {

struct ConversationPrompt {
  std::vector<int32_t> tokens;       // the prompt the measured generation starts from
  std::vector<std::string> answers;  // the target's answers to prompt.history, in order
};

// Generates the history answers (temperature 0, at most source.history_max_tokens each, stopping
// at end of generation) on `target`, then tokenizes the whole conversation. Throws
// Error(InvalidArgument) when the prompt has history but `chat` is raw text, or when the
// conversation outgrows the target's context.
ConversationPrompt build_conversation_prompt(core::Model& target, const core::ChatTemplateChoice& chat,
                                             const PromptSource& source, const Prompt& prompt);

}  // namespace specmoe::exp
