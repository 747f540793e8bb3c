// Shared pieces of the `specmoe` subcommands: option groups that several commands take
// (model, input, sampling), and small helpers for reading input and printing.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/chat_template.h"
#include "core/model.h"
#include "core/sampling.h"
#include "moe/expert_stats.h"

namespace specmoe::cli {

struct ModelOptions {
  std::string model_path;
  int threads = 0;          // 0 = all cores
  std::string device = "cpu";
  int moe_k = 0;            // --moe-k: experts per token (0 = the model's)
  double moe_capacity = 0;  // --moe-capacity: Switch capacity factor (0 = dropless)
  std::string cache_type_k = "f16";  // --cache-type-k / -ctk: KV cache key type, f32 | f16 | q8_0
  std::string cache_type_v = "f16";  // --cache-type-v / -ctv: value type
  bool profile_ops = false;          // core::LoadOptions::profile_ops (specmoe bench --profile)
  std::string huge_pages = "auto";   // --huge-pages: auto | on | off (core::LoadOptions::huge_pages)
};

struct InputOptions {
  std::string prompt;       // -p
  std::string file;         // -f
  int n_predict = 128;      // -n
  bool n_predict_given = false;  // -n was on the command line (the default is capped silently)
  int ctx_size = 0;         // -c (0 = the model's training context)
  bool json = false;
  std::string chat_template = "auto";  // --chat-template: auto | none | a format name
  std::string system;                  // --system: a system message (needs a chat template)
};

// Error(InvalidArgument) "<flag> N: ..." unless 0 <= threads <= exp::kMaxThreads.
void check_threads(int threads, const char* flag);

void add_model_options(CLI::App* cmd, ModelOptions& opt, bool required = true);
void add_input_options(CLI::App* cmd, InputOptions& opt);
void add_sampling_options(CLI::App* cmd, core::SamplingParams& params);

// --cache-type-k / --cache-type-v as KV cache types; Error(InvalidArgument) naming the flag and
// the bad value.
core::KVCacheTypes cache_types(const ModelOptions& opt);

// Loads the model named by -m on the selected device with the selected thread count and KV
// cache types.
std::unique_ptr<core::Model> load_model(const ModelOptions& opt, const std::string& path);

// The prompt text from -p or -f; Error(InvalidArgument) when neither or both are given, when the
// file cannot be read, or when the prompt is empty.
std::string read_prompt(const InputOptions& opt);

// The prompt's token ids for `model`: the text as the user's message, with --system before it,
// rendered with the chat template --chat-template selects (core/chat_template.h), or the raw text.
struct PromptTokens {
  std::vector<int32_t> ids;
  core::ChatTemplateChoice chat;
};
PromptTokens prompt_tokens(const core::Model& model, const InputOptions& opt, const std::string& text,
                           const std::string& model_path);
// Checks --chat-template and --system before anything is loaded; Error(InvalidArgument).
void check_chat_options(const InputOptions& opt);
// One stderr line naming the chat template used ("" when the prompt is raw text).
void print_chat_template(const core::ChatTemplateChoice& chat);

// Reads a whole file; Error(Io) naming it when it cannot be read.
std::string read_file(const std::string& path);

// Checks the prompt fits: Error(Limit) "prompt has N tokens, longer than the context (C)", and,
// when -n was given, that prompt + -n fit too: Error(Limit) "-n N: the prompt's P tokens + N
// ... exceed the context (C)". The default -n is capped to the room the context leaves.
// Returns the context size to allocate (prompt + n_predict, capped by the context).
int context_for(const core::Model& model, int n_prompt, const InputOptions& opt);

// Writes pieces of UTF-8 to stdout as they become complete characters (a token may end in the
// middle of a multi-byte character).
class Utf8Stream {
 public:
  void write(const std::string& bytes);
  void flush();

 private:
  std::string pending_;
};

// MoE expert statistics accumulated over a generation's target forwards (moe_stats.cpp; layers
// as verify::MoEMetrics::layers holds them): a per-layer table
// (tokens per expert, CV, max/mean, Jain, entropy, dropped, U(T)) and the same as JSON (null for
// a dense model).
void print_moe_stats(const core::Model& model, const std::vector<moe::ExpertStats>& layers, std::FILE* out);
nlohmann::json moe_stats_json(const core::Model& model, const std::vector<moe::ExpertStats>& layers);

// Registration of the subcommands (one file each).
void add_generate_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_speculate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_run_commands(CLI::App& app, int argc, char** argv);  // run, merge, compare
void add_slurm_command(CLI::App& app, int argc, char** argv);

}  // namespace specmoe::cli
