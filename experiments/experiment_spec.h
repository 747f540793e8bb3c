// ExperimentSpec: an experiment TOML file parsed into plain structs (the schema is documented in
// experiments/configs/README.md). Every problem is reported as one line
// "FILE:LINE: key 'x.y': problem" through Error(Config); SourceMap remembers where each key was
// written so checks that run later (sweep expansion, model files, registries) can point at it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "draft/token_tree.h"

namespace specmoe::exp {

// Threads a run or a CLI command may ask for ([experiment] threads, --threads): 0 means all
// hardware threads; beyond this a thread count is a typo, not a machine.
inline constexpr int kMaxThreads = 4096;

// Where each key of the TOML file was written.
struct SourceMap {
  std::string file;
  std::map<std::string, int> lines;  // "models.target.path" -> 12, "strategy[1]" -> 30

  // The key's line, else its nearest recorded parent's ("a.b.c" -> "a.b" -> "a"), else 0.
  int line_of(const std::string& key) const;
  std::string message(const std::string& key, const std::string& problem) const;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
};

// One scalar value of a strategy or sampling field, as written in the TOML (strategy tables and
// sweep lists share the same setter, so a swept value is checked exactly like a written one).
struct FieldValue {
  enum class Type { Integer, Float, String, Bool };
  Type type = Type::Integer;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  bool b = false;

  static FieldValue integer(int64_t v) { FieldValue x; x.type = Type::Integer; x.i = v; return x; }
  static FieldValue floating(double v) { FieldValue x; x.type = Type::Float; x.f = v; return x; }
  static FieldValue string(std::string v) { FieldValue x; x.type = Type::String; x.s = std::move(v); return x; }
  std::string text() const;  // "4", "0.7", "ngram": used in run names and messages
  bool operator==(const FieldValue& o) const;
};

struct ModelSpec {
  std::string name;
  std::string path;   // absolute; for synth models, the cache file (built on first use)
  std::string synth;  // synth preset, "" for GGUF files given by path
  uint64_t synth_seed = 0;
  std::string synth_fingerprint;  // hash of the preset's definition (part of the cache file name)
  bool is_synth() const { return !synth.empty(); }
};

struct PromptSource {
  std::vector<std::string> list;          // inline prompts
  std::string file;                       // absolute; one prompt per line
  std::string jsonl;                      // absolute; MT-bench / Spec-Bench question format
  std::vector<std::string> categories;    // keep only these jsonl categories (empty = all)
  int limit = 0;                          // keep the first N prompts overall (0 = all)
  int turn = 0;                           // which entry of "turns" a jsonl question uses
  // How prompts reach each target: "auto" (the GGUF's tokenizer.chat_template; raw text when it
  // has none), "none" (raw text) or a chat format name (core/chat_template.h).
  std::string chat_template = "auto";
  std::string system;                     // a system message before every conversation ("" = none)
  // turn > 0: the earlier turns' answers are the target's own, generated greedily with at most
  // this many tokens each (stopping at end of generation) and fed back as the conversation.
  int history_max_tokens = 512;
};

struct Prompt {
  std::string id;        // question_id for jsonl, else "p<index>"
  std::string category;  // "" when the source has none
  std::string text;      // the user turn measured
  std::vector<std::string> history;  // the user turns before it (jsonl turns[0..turn)), oldest first
};

struct SamplingSpec {
  double temperature = 0.0;  // 0 = greedy
  int top_k = 0;             // 0 disables
  double top_p = 1.0;        // in (0, 1]; 1 disables
  double min_p = 0.0;        // in [0, 1]; 0 disables
  int max_tokens = 128;
  double repeat_penalty = 1.0;  // 1 disables
  bool operator==(const SamplingSpec&) const = default;
};

enum class StrategyKind { Autoregressive, Speculative };
const char* strategy_kind_name(StrategyKind kind);

struct StrategySpec {
  std::string name;
  StrategyKind kind = StrategyKind::Autoregressive;
  std::string target;                   // model name
  std::string drafter;                  // registered drafter name ("model", "ngram", "layerskip", ...)
  std::string draft;                    // model name used by the "model" drafter
  std::string verifier = "speculative"; // registered verifier name ("greedy", "speculative", ...)
  int draft_max = 4;                    // tokens drafted per step (g)
  int draft_min = 0;                    // drafts shorter than this are discarded
  double draft_p_min = 0.0;             // stop drafting when the draft's probability drops below
  int ngram_min = 1, ngram_max = 3;     // n-gram drafter: match lengths tried (longest first)
  int exit_layer = 0;                   // layer-skip drafter: layers run before the head (0 = half
                                        // the target's); TOML exit_layer (layerskip_layers: deprecated)
  int draft_vocab = 0;                  // model / layer-skip drafters: draft from the first
                                        // draft_vocab ids only (0 = all; draft/model_drafter.h)
  // Token trees (draft::TreeSpec): a static shape "4,2,2,1" (TOML: that string or [4, 2, 2, 1]),
  // or a dynamic one (tree_nodes > 0, tree_depth, tree_top_k); children as topk, stochastic or
  // stochastic-noreplace. Neither widths nor nodes: chains of draft_max.
  std::string tree_widths;
  int tree_nodes = 0, tree_depth = 0, tree_top_k = 0;
  std::string tree_sampling = "topk";
  int index = 0;                        // position among [[strategy]] tables
  bool has_tree() const { return !tree_widths.empty() || tree_nodes > 0; }
  bool operator==(const StrategySpec&) const = default;
};

struct SweepAxis {
  std::string key;  // a strategy or sampling field name
  std::vector<FieldValue> values;
  bool strategy_field = false;
};

struct SweepSpec {
  std::vector<SweepAxis> axes;     // in the order written
  std::vector<std::string> only;   // strategy-field sweeps apply to these strategies (empty = all speculative)
};

// One named run: a strategy with the sweep point applied.
struct RunSpec {
  std::string name;
  int index = 0;
  StrategySpec strategy;
  SamplingSpec sampling;
  std::vector<std::pair<std::string, FieldValue>> point;  // swept fields and their values here
  std::string baseline;       // run this one is compared with ("" for a baseline or when none)
  bool is_baseline = false;   // the first autoregressive strategy on its target, at its sampling
  std::string config_hash;    // of everything that determines this run's records
};

// The order generations run in: every prompt of a run before the next run (Runs), or every
// run of a prompt and repeat before the next (Interleaved: the runs a report compares are
// measured side by side, so a machine whose speed drifts moves them alike).
enum class Schedule { Runs, Interleaved };

struct ExperimentSpec {
  std::string path;         // the TOML file, absolute
  std::string dir;          // its folder: relative model and prompt paths start here
  std::string source_text;  // the TOML as written (stored in reports)

  std::string name, description;
  uint64_t seed = 0;
  int repeats = 1;
  int warmup = 1;    // unrecorded generations before each run's first record
  Schedule schedule = Schedule::Runs;  // [experiment] schedule = "runs" | "interleaved"
  int threads = 0;   // 0 = all hardware threads
  std::string device = "cpu";  // where the models run: cpu, cuda or cuda:N (--device overrides)
  // KV cache element types of every model (llama.cpp's --cache-type-k/-v): f32, f16 or q8_0.
  std::string cache_type_k = "f16", cache_type_v = "f16";
  std::string output;  // report folder (relative to the current directory)

  std::vector<ModelSpec> models;  // in the order written
  PromptSource prompt_source;
  std::vector<Prompt> prompts;    // loaded from prompt_source
  SamplingSpec sampling;
  std::vector<StrategySpec> strategies;
  SweepSpec sweep;
  SourceMap src;

  const ModelSpec* find_model(std::string_view name) const;
  // Key path of a strategy field as written in the file: "strategy[2].draft_max".
  std::string strategy_key(int strategy_index, const std::string& field) const;
  // Cross-references and ranges that need no files or registries; throws Error(Config).
  void validate() const;
};

// The strategy's tree shape (empty for chains); the fields are checked when parsed, the shape as a
// whole by TreeSpec::validate().
draft::TreeSpec tree_spec_of(const StrategySpec& s);

// Parses, loads the prompts and validates. Throws Error(Config) "FILE:LINE: key 'x.y': problem".
ExperimentSpec parse_experiment_file(const std::string& path);
// The same from text; `path` names the file in messages and anchors relative paths.
ExperimentSpec parse_experiment_string(std::string_view toml_text, const std::string& path);

// The folder synth models are cached in: $SPECMOE_CACHE_DIR, else $XDG_CACHE_HOME/specmoe, else
// ~/.cache/specmoe (else a temp folder when HOME is unset).
std::string synth_cache_dir();

// Field table shared by [[strategy]], [sampling] and [sweep]. Deprecated spellings are accepted
// for one release: canonical_field_name maps them to the current name ("layerskip_layers" ->
// "exit_layer") and returns every other key unchanged; the functions below accept both.
std::string_view canonical_field_name(std::string_view key);
bool is_strategy_field(std::string_view key);
bool is_sampling_field(std::string_view key);
std::vector<std::string> sweepable_field_names();
std::string field_abbreviation(std::string_view key);  // "draft_max" -> "g", "temperature" -> "t"
// Sets `key` in the strategy or sampling struct; returns "" or the problem ("expected an integer,
// got string", "must be >= 1, got -2").
std::string apply_field(std::string_view key, const FieldValue& value, StrategySpec& strategy,
                        SamplingSpec& sampling);

}  // namespace specmoe::exp
