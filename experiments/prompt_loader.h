// Prompt sets for experiments, from three sources concatenated in this order:
//  - [prompts] list = ["...", ...]          inline strings
//  - [prompts] file = "prompts.txt"         one prompt per line; blank lines and lines starting
//                                           with '#' are skipped; "\n" inside a line is a newline
//                                           and "\\" a backslash (for multi-line prompts)
//  - [prompts] jsonl = "question.jsonl"     MT-bench / Spec-Bench questions, one JSON object per
//                                           line: question_id, category, turns[] (turns[turn] is
//                                           the prompt, turns[0..turn) its history); objects
//                                           with "prompt" (and "task_id") instead of turns, as
//                                           HumanEval, are accepted too
// A file or jsonl path ending in ".gz" is read as gzip data (HumanEval.jsonl.gz loads as shipped).
// `categories` keeps only jsonl questions of those categories; `limit` keeps the first N prompts of
// the combined list.
#pragma once
#include <string>
#include <vector>

#include "experiments/experiment_spec.h"

namespace specmoe::exp {

// Throws Error(Config) "TOML:LINE: key 'prompts.jsonl': question.jsonl line 7: problem".
std::vector<Prompt> load_prompts(const PromptSource& source, const SourceMap& src);

}  // namespace specmoe::exp
