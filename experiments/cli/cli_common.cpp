#include "cli_common.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "experiments/experiment_spec.h"

namespace specmoe::cli {

void add_model_options(CLI::App* cmd, ModelOptions& opt, bool required) {
  auto* m = cmd->add_option("-m,--model", opt.model_path, "GGUF model file");
  if (required) m->required();
  // Range-checked in load_model, so the message is one specmoe error line like every other.
  cmd->add_option("-t,--threads", opt.threads, fmt::format("CPU threads, 0..{} (0 = all cores)", exp::kMaxThreads));
  cmd->add_option("--device", opt.device, "where the model runs: cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--moe-k", opt.moe_k, "MoE models: experts per token (0 = the model's expert_used_count)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--moe-capacity", opt.moe_capacity,
                  "MoE models: expert capacity factor with token dropping (0 = dropless)")
      ->check(CLI::NonNegativeNumber);
  // llama.cpp's names and meaning (its default f16); checked in load_model for one error line.
  cmd->add_option("--cache-type-k", opt.cache_type_k, "KV cache type of keys: f32, f16 or q8_0 (alias -ctk)")
      ->capture_default_str();
  cmd->add_option("--cache-type-v", opt.cache_type_v, "KV cache type of values: f32, f16 or q8_0 (alias -ctv)")
      ->capture_default_str();
  cmd->add_option("--huge-pages", opt.huge_pages,
                  "CPU: the packed weights on 2 MiB pages: on (about 7% faster decode), off, or auto (on while they "
                  "fault in cheaply; in virtual machines that hand free memory back to the host, fresh huge pages "
                  "can take seconds per GB to load)")
      ->capture_default_str();
}

void add_input_options(CLI::App* cmd, InputOptions& opt) {
  cmd->add_option("-p,--prompt", opt.prompt, "prompt text");
  cmd->add_option("-f,--file", opt.file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", opt.n_predict, "tokens to generate")
      ->check(CLI::PositiveNumber)
      ->each([&opt](const std::string&) { opt.n_predict_given = true; });
  cmd->add_option("-c,--ctx-size", opt.ctx_size, "context size (0 = the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", opt.json, "print one JSON object instead of text");
  cmd->add_option("--chat-template", opt.chat_template,
                  "wrap the prompt as a user message in a chat template: auto (the GGUF's "
                  "tokenizer.chat_template, raw text when it has none), none (raw text) or a format name "
                  "(chatml, llama3, gemma, phi3, mistral-v7, ...)")
      ->capture_default_str();
  cmd->add_option("--system", opt.system, "a system message before the prompt (needs a chat template)");
}

void add_sampling_options(CLI::App* cmd, core::SamplingParams& p) {
  cmd->add_option("--temp", p.temperature, "temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", p.top_k, "top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "top-p in (0, 1] (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", p.min_p, "min-p in [0, 1] (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", p.repeat_last_n, "tokens the penalty looks back")->capture_default_str();
  cmd->add_option("--no-repeat-ngram", p.no_repeat_ngram, "ban repeating n-grams of this size (0 = off)")
      ->capture_default_str();
  cmd->add_option("-s,--seed", p.seed, "random seed")->capture_default_str();
}

void check_threads(int threads, const char* flag) {
  if (threads < 0 || threads > exp::kMaxThreads)
    throw_error(ErrorKind::InvalidArgument, "{} {}: must be between 0 (all cores) and {}", flag, threads, exp::kMaxThreads);
}

core::KVCacheTypes cache_types(const ModelOptions& opt) {
  return {core::parse_kv_cache_type(opt.cache_type_k, "--cache-type-k"),
          core::parse_kv_cache_type(opt.cache_type_v, "--cache-type-v")};
}

std::unique_ptr<core::Model> load_model(const ModelOptions& opt, const std::string& path) {
  check_threads(opt.threads, "--threads");
  core::LoadOptions lo;
  lo.cache_types = cache_types(opt);
  lo.n_threads = opt.threads;
  lo.moe_k_override = opt.moe_k;
  lo.moe_capacity_factor = opt.moe_capacity;
  lo.profile_ops = opt.profile_ops;
  if (!kernels::cpu::parse_huge_pages(opt.huge_pages, lo.huge_pages))
    throw_error(ErrorKind::InvalidArgument, "--huge-pages {}: must be auto, on or off", opt.huge_pages);
  lo.device = opt.device;  // Model::load names the device in its error when it cannot be used
  return core::Model::load(path, lo);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorKind::Io, "{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_error(ErrorKind::Io, "{}: read error", path);
  return ss.str();
}

std::string read_prompt(const InputOptions& opt) {
  if (!opt.prompt.empty() && !opt.file.empty())
    throw_error(ErrorKind::InvalidArgument, "give either -p/--prompt or -f/--file, not both");
  if (opt.prompt.empty() && opt.file.empty())
    throw_error(ErrorKind::InvalidArgument, "no prompt: give -p TEXT or -f FILE");
  if (!opt.file.empty()) {
    std::string text = read_file(opt.file);
    if (text.empty()) throw_error(ErrorKind::InvalidArgument, "{}: the prompt file is empty", opt.file);
    return text;
  }
  return opt.prompt;
}

void check_chat_options(const InputOptions& opt) {
  core::validate_chat_template_choice(opt.chat_template);
  if (opt.chat_template == "none" && !opt.system.empty())
    throw_error(ErrorKind::InvalidArgument, "--system needs a chat template; --chat-template is none");
}

PromptTokens prompt_tokens(const core::Model& model, const InputOptions& opt, const std::string& text,
                           const std::string& model_path) {
  const core::Tokenizer& tok = model.tokenizer();
  PromptTokens p;
  p.chat = core::resolve_chat_template(opt.chat_template, tok.chat_template(), model_path);
  std::vector<core::ChatMessage> messages;
  if (!opt.system.empty()) {
    if (!p.chat.templated())
      throw_error(ErrorKind::InvalidArgument, "--system needs a chat template, and the prompt is raw text ({}); "
                  "name one with --chat-template", p.chat.reason);
    messages.push_back({"system", opt.system});
  }
  messages.push_back({"user", text});
  p.ids = core::chat_prompt_tokens(tok, p.chat, messages);
  return p;
}

void print_chat_template(const core::ChatTemplateChoice& chat) {
  if (chat.templated()) std::fprintf(stderr, "chat template: %s (%s)\n", chat.format.c_str(), chat.reason.c_str());
}

int context_for(const core::Model& model, int n_prompt, const InputOptions& opt) {
  const int limit = opt.ctx_size > 0 ? opt.ctx_size : model.config().n_ctx_train;
  if (n_prompt >= limit) {
    throw_error(ErrorKind::Limit, "prompt has {} tokens, longer than the context ({}); use a shorter prompt or -c",
                n_prompt, limit);
  }
  if (opt.n_predict_given && static_cast<int64_t>(n_prompt) + opt.n_predict > limit) {
    throw_error(ErrorKind::Limit,
                "-n {}: the prompt's {} tokens + {} new tokens exceed the context ({}); use -n {} or less, or a larger -c",
                opt.n_predict, n_prompt, opt.n_predict, limit, limit - n_prompt);
  }
  return std::min<int64_t>(limit, static_cast<int64_t>(n_prompt) + opt.n_predict);
}

void Utf8Stream::write(const std::string& bytes) {
  pending_ += bytes;
  // Emit everything up to the last complete UTF-8 character.
  size_t end = pending_.size();
  size_t i = end;
  int back = 0;
  while (i > 0 && back < 4) {
    --i;
    ++back;
    const unsigned char c = static_cast<unsigned char>(pending_[i]);
    if ((c & 0xC0) != 0x80) {  // a lead byte (or ASCII)
      const int need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      if (back < need) end = i;  // incomplete character at the end: keep it
      break;
    }
  }
  std::fwrite(pending_.data(), 1, end, stdout);
  std::fflush(stdout);
  pending_.erase(0, end);
}

void Utf8Stream::flush() {
  std::fwrite(pending_.data(), 1, pending_.size(), stdout);
  std::fflush(stdout);
  pending_.clear();
}

}  // namespace specmoe::cli
