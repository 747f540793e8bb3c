// The logits processors SamplerChain (core/sampling.h) runs, one function each, in chain order.
// They work in place on one row of logits (n_vocab), so tests can check each one on its own.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace specmoe::core {

// Throws Error(InvalidArgument) when a history token is outside [0, n_vocab).
void check_history(std::span<const int32_t> history, size_t n_vocab);

// CTRL repetition penalty (Keskar et al. 2019, eq. 2) as llama.cpp applies it: every distinct
// token among the last last_n tokens of history (-1 = all, 0 = none) has its logit divided by
// penalty when positive, multiplied by it otherwise. Each token is penalised once, however often
// it occurs. History must be checked first.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history,
                              float penalty, int last_n);

// The distinct tokens apply_repetition_penalty penalises (sorted), and the tokens
// apply_no_repeat_ngram bans (in history order, with repeats): the lists a device applies to its
// own copy of the logits (core/backend_cuda.cpp).
std::vector<int32_t> penalized_tokens(std::span<const int32_t> history, int last_n);
std::vector<int32_t> banned_tokens(std::span<const int32_t> history, int n);

// No-repeat-n-gram ban (Paulus et al. 2017; Hugging Face NoRepeatNGramLogitsProcessor): sets to
// -inf the logit of every token that, appended to history, would complete an n-gram already
// present in history. n = 1 bans every token seen; n <= 0 does nothing.
void apply_no_repeat_ngram(std::span<float> logits, std::span<const int32_t> history, int n);

// The largest value, NaN entries skipped; -inf when there is none.
float max_value(std::span<const float> values);

// The k most probable tokens of softmax(logits) (temperature 1, NaN and -inf entries never
// chosen): ids largest first (higher logit, then lower id), probs[i] = exp(logit - max) / Z in
// double, Z summed over the whole row with kernels::cpu::exp_weights. Tokens whose probability
// rounds to 0 as a float are left out, so fewer than k may come back. A tree drafter's one-hot
// candidates and their draft confidence (EAGLE-2's ranking score) at temperature 0: one pass to
// select and one vectorised pass for Z, where a softmax of the whole row would be two passes of
// libm's scalar exp (about 2 ms per node on a 150k vocabulary).
void top_k_softmax(std::span<const float> logits, int k, std::vector<int32_t>& ids, std::vector<double>& probs);

// values: on input the (penalised) logits, -inf for banned tokens; on output the distribution
// softmax(logits / temperature) restricted to the tokens kept by top-k, then top-p, then min-p,
// renormalised, zeros elsewhere. temperature > 0. top_k <= 0 disables it, top_p = 1 and min_p = 0
// likewise. Candidates are ordered by logit, ties by lower id. Throws Error(Runtime) when every
// logit is -inf.
void truncated_softmax(std::span<float> values, float temperature, int top_k, float top_p,
                       float min_p);

}  // namespace specmoe::core
