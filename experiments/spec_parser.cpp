// TOML -> ExperimentSpec with toml++. Every key is visited once: known keys are type- and
// range-checked where they are read, anything else is an "unknown key" error at its line.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <toml++/toml.h>

#include "base/device.h"
#include "base/error.h"
#include "core/chat_template.h"
#include "core/kv_cache.h"
#include "core/synth.h"
#include "experiments/config_hash.h"
#include "experiments/deprecation.h"
#include "experiments/experiment_spec.h"
#include "experiments/prompt_loader.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

// A fingerprint of a synth preset's definition, so that a changed preset gets a new cache file
// (and a new run config hash) instead of silently reusing the old one.
std::string synth_fingerprint(const core::SynthSpec& s) {
  std::string desc = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", s.arch, static_cast<int>(s.type),
                                 s.n_vocab, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_ff, s.n_ctx, s.tied_output,
                                 s.rope_freq_base, s.n_full_layers, s.deep_residual_scale, s.repeat_penalty,
                                 s.keep_layers, s.n_expert, s.n_expert_used, s.n_ff_shared);
  return fnv1a64_hex(desc).substr(0, 8);
}

const char* node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

bool is_safe_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  }) && s != "." && s != "..";
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

class Parser {
 public:
  explicit Parser(ExperimentSpec& spec) : spec_(spec), src_(spec.src) {}

  void parse_root(const toml::table& root) {
    const toml::table* experiment = nullptr;
    for (auto&& [k, v] : root) {
      std::string key(k.str());
      record(key, k);
      if (key == "experiment") experiment = &want_table(v, key);
      else if (key == "models") parse_models(want_table(v, key));
      else if (key == "prompts") parse_prompts(want_table(v, key));
      else if (key == "sampling") parse_sampling(want_table(v, key));
      else if (key == "strategy") parse_strategies(v);
      else if (key == "sweep") parse_sweep(want_table(v, key));
      else unknown(key, {"experiment", "models", "prompts", "sampling", "strategy", "sweep"});
    }
    if (experiment) parse_experiment(*experiment);
    if (spec_.name.empty()) spec_.name = fs::path(spec_.path).stem().string();
    if (spec_.output.empty()) spec_.output = (fs::path("specmoe-results") / spec_.name).string();
  }

 private:
  void record(const std::string& key, const toml::key& k) {
    if (k.source().begin.line > 0) src_.lines[key] = static_cast<int>(k.source().begin.line);
  }
  void record_node(const std::string& key, const toml::node& n) {
    if (n.source().begin.line > 0 && !src_.lines.count(key))
      src_.lines[key] = static_cast<int>(n.source().begin.line);
  }

  // A strategy or sweep field as written -> its current name. A deprecated spelling prints a note
  // (once) and its line is recorded under the current name too, so later checks that name the
  // current key point at the line; writing both spellings in one table is an error.
  std::string canonical(const std::string& prefix, const toml::key& k, std::set<std::string>& seen) {
    const std::string written(k.str());
    const std::string name(canonical_field_name(written));
    const std::string key = prefix + written;
    if (name != written) {
      note_deprecated(written, name, fmt::format("{}:{}: ", src_.file, k.source().begin.line));
      record(prefix + name, k);
    }
    if (!seen.insert(name).second)
      src_.fail(key, fmt::format("'{}' is given twice (directly and through a deprecated spelling)", name));
    return name;
  }

  [[noreturn]] void unknown(const std::string& key, const std::vector<std::string>& known) {
    src_.fail(key, fmt::format("unknown key (expected one of: {})", join(known)));
  }
  [[noreturn]] void wrong_type(const std::string& key, const char* expected, const toml::node& v) {
    src_.fail(key, fmt::format("expected {}, got {}", expected, node_type_name(v)));
  }

  const toml::table& want_table(const toml::node& v, const std::string& key) {
    if (!v.is_table()) wrong_type(key, "a table", v);
    return *v.as_table();
  }
  std::string want_string(const toml::node& v, const std::string& key, bool allow_empty = false) {
    if (!v.is_string()) wrong_type(key, "a string", v);
    std::string s = v.as_string()->get();
    if (s.empty() && !allow_empty) src_.fail(key, "must not be empty");
    return s;
  }
  int64_t want_int(const toml::node& v, const std::string& key, int64_t lo, int64_t hi) {
    if (!v.is_integer()) wrong_type(key, "an integer", v);
    int64_t x = v.as_integer()->get();
    if (x < lo) src_.fail(key, fmt::format("must be >= {}, got {}", lo, x));
    if (x > hi) src_.fail(key, fmt::format("must be <= {}, got {}", hi, x));
    return x;
  }
  std::vector<std::string> want_string_array(const toml::node& v, const std::string& key) {
    if (!v.is_array()) wrong_type(key, "an array of strings", v);
    std::vector<std::string> out;
    size_t i = 0;
    for (const auto& e : *v.as_array()) {
      if (!e.is_string()) src_.fail(key, fmt::format("element {}: expected a string, got {}", i, node_type_name(e)));
      out.push_back(e.as_string()->get());
      ++i;
    }
    return out;
  }
  FieldValue want_scalar(const toml::node& v, const std::string& key) {
    if (v.is_integer()) return FieldValue::integer(v.as_integer()->get());
    if (v.is_floating_point()) return FieldValue::floating(v.as_floating_point()->get());
    if (v.is_string()) return FieldValue::string(v.as_string()->get());
    if (v.is_boolean()) {
      FieldValue f;
      f.type = FieldValue::Type::Bool;
      f.b = v.as_boolean()->get();
      return f;
    }
    wrong_type(key, "a number or a string", v);
  }
  // A strategy or sweep field's value: a scalar, or for tree_widths also an array of integers
  // ([4, 2, 2, 1] is written "4,2,2,1").
  FieldValue want_field(const toml::node& v, const std::string& key, std::string_view field) {
    if (field == "tree_widths" && v.is_array()) {
      std::string text;
      size_t i = 0;
      for (const auto& e : *v.as_array()) {
        if (!e.is_integer())
          src_.fail(key, fmt::format("element {}: expected an integer width, got {}", i, node_type_name(e)));
        if (!text.empty()) text += ',';
        text += std::to_string(e.as_integer()->get());
        ++i;
      }
      return FieldValue::string(text);
    }
    return want_scalar(v, key);
  }
  // Relative paths start at the file's folder; "~/..." at $HOME (where scripts/fetch-models.sh
  // puts real models by default, ~/.cache/specmoe/models).
  std::string resolve_path(const std::string& p) const {
    fs::path path(p);
    if (const char* home = std::getenv("HOME"); home && *home && p.starts_with("~/")) path = fs::path(home) / p.substr(2);
    if (path.is_relative()) path = fs::path(spec_.dir) / path;
    return path.lexically_normal().string();
  }

  void parse_experiment(const toml::table& t) {
    for (auto&& [k, v] : t) {
      std::string key = "experiment." + std::string(k.str());
      record(key, k);
      std::string_view name = k.str();
      if (name == "name") {
        spec_.name = want_string(v, key);
        if (!is_safe_name(spec_.name)) src_.fail(key, "use only letters, digits, '-', '_' and '.'");
      } else if (name == "description") spec_.description = want_string(v, key, true);
      else if (name == "seed") spec_.seed = static_cast<uint64_t>(want_int(v, key, 0, INT64_MAX));
      else if (name == "repeats") spec_.repeats = static_cast<int>(want_int(v, key, 1, 10000));
      else if (name == "warmup") spec_.warmup = static_cast<int>(want_int(v, key, 0, 10000));
      else if (name == "threads") spec_.threads = static_cast<int>(want_int(v, key, 0, kMaxThreads));
      else if (name == "schedule") {
        const std::string sched = want_string(v, key);
        if (sched == "runs") spec_.schedule = Schedule::Runs;
        else if (sched == "interleaved") spec_.schedule = Schedule::Interleaved;
        else src_.fail(key, fmt::format("'{}' is not a schedule: use \"runs\" or \"interleaved\"", sched));
      }
      else if (name == "output") spec_.output = want_string(v, key);
      else if (name == "device") {
        spec_.device = want_string(v, key);
        try {
          (void)parse_device(spec_.device);
        } catch (const Error& e) {
          src_.fail(key, e.what());
        }
      } else if (name == "cache_type_k" || name == "cache_type_v") {
        // llama.cpp's KV cache types, stored in its lowercase spelling.
        std::string& field = name == "cache_type_k" ? spec_.cache_type_k : spec_.cache_type_v;
        try {
          field = core::kv_cache_type_name(core::parse_kv_cache_type(want_string(v, key), "KV cache type"));
        } catch (const Error& e) {
          src_.fail(key, e.what());
        }
      } else unknown(key, {"name", "description", "seed", "repeats", "warmup", "threads", "device", "output",
                           "cache_type_k", "cache_type_v", "schedule"});
    }
  }

  void parse_models(const toml::table& t) {
    for (auto&& [k, v] : t) {
      std::string name(k.str());
      std::string key = "models." + name;
      record(key, k);
      const toml::table& mt = want_table(v, key);
      ModelSpec m;
      m.name = name;
      bool has_seed = false;
      for (auto&& [mk, mv] : mt) {
        std::string field = key + "." + std::string(mk.str());
        record(field, mk);
        if (mk.str() == "path") m.path = resolve_path(want_string(mv, field));
        else if (mk.str() == "synth") {
          m.synth = want_string(mv, field);
          if (!is_safe_name(m.synth)) src_.fail(field, "use only letters, digits, '-', '_' and '.'");
        } else if (mk.str() == "seed") {
          m.synth_seed = static_cast<uint64_t>(want_int(mv, field, 0, INT64_MAX));
          has_seed = true;
        } else unknown(field, {"path", "synth", "seed"});
      }
      if (m.path.empty() == m.synth.empty())
        src_.fail(key, "give exactly one of 'path' (a GGUF file) or 'synth' (a synthetic preset)");
      if (has_seed && !m.is_synth()) src_.fail(key + ".seed", "'seed' only applies to synth models");
      if (m.is_synth()) {
        core::SynthSpec synth;
        try {
          synth = core::synth_spec(m.synth);
        } catch (const Error& e) {
          src_.fail(key + ".synth", e.what());
        }
        m.synth_fingerprint = synth_fingerprint(synth);
        m.path = (fs::path(synth_cache_dir()) /
                  fmt::format("synth-{}-seed{}-{}.gguf", m.synth, m.synth_seed, m.synth_fingerprint))
                     .string();
      }
      spec_.models.push_back(std::move(m));
    }
  }

  void parse_prompts(const toml::table& t) {
    PromptSource& p = spec_.prompt_source;
    for (auto&& [k, v] : t) {
      std::string key = "prompts." + std::string(k.str());
      record(key, k);
      std::string_view name = k.str();
      if (name == "list") p.list = want_string_array(v, key);
      else if (name == "file") p.file = resolve_path(want_string(v, key));
      else if (name == "jsonl") p.jsonl = resolve_path(want_string(v, key));
      else if (name == "categories") p.categories = want_string_array(v, key);
      else if (name == "limit") p.limit = static_cast<int>(want_int(v, key, 0, 1 << 30));
      else if (name == "turn") p.turn = static_cast<int>(want_int(v, key, 0, 1000));
      else if (name == "chat_template") {
        p.chat_template = want_string(v, key);
        try {
          core::validate_chat_template_choice(p.chat_template);
        } catch (const Error& e) {
          src_.fail(key, e.what());
        }
      } else if (name == "system") p.system = want_string(v, key);
      else if (name == "history_max_tokens") p.history_max_tokens = static_cast<int>(want_int(v, key, 1, 1 << 20));
      else unknown(key, {"list", "file", "jsonl", "categories", "limit", "turn", "chat_template", "system",
                         "history_max_tokens"});
    }
    if (p.chat_template == "none" && !p.system.empty())
      src_.fail("prompts.system", "a system message needs a chat template; prompts.chat_template is 'none'");
    if (p.chat_template == "none" && p.turn > 0)
      src_.fail("prompts.turn", fmt::format("turn {} is answered after the earlier turns, fed back as a conversation, "
                                            "which needs a chat template; prompts.chat_template is 'none'",
                                            p.turn));
    if (!p.categories.empty() && p.jsonl.empty())
      src_.fail("prompts.categories", "categories filter jsonl questions; no 'jsonl' file is given");
  }

  void parse_sampling(const toml::table& t) {
    StrategySpec unused;
    for (auto&& [k, v] : t) {
      std::string key = "sampling." + std::string(k.str());
      record(key, k);
      if (!is_sampling_field(k.str())) unknown(key, sampling_names());
      std::string problem = apply_field(k.str(), want_scalar(v, key), unused, spec_.sampling);
      if (!problem.empty()) src_.fail(key, problem);
    }
  }

  void parse_strategies(const toml::node& v) {
    if (!v.is_array_of_tables()) wrong_type("strategy", "an array of tables ([[strategy]])", v);
    int index = 0;
    for (const auto& elem : *v.as_array()) {
      std::string base = spec_.strategy_key(index, "");
      record_node(base, elem);
      StrategySpec s;
      s.index = index;
      bool has_kind = false;
      SamplingSpec unused;
      std::set<std::string> seen;
      for (auto&& [k, fv] : *elem.as_table()) {
        std::string key = base + "." + std::string(k.str());
        record(key, k);
        const std::string field = canonical(base + ".", k, seen);
        std::string_view name = field;
        if (name == "name") {
          s.name = want_string(fv, key);
          if (!is_safe_name(s.name)) src_.fail(key, "use only letters, digits, '-', '_' and '.' (it names files)");
        } else if (name == "kind") {
          std::string kind = want_string(fv, key);
          if (kind == "autoregressive") s.kind = StrategyKind::Autoregressive;
          else if (kind == "speculative") s.kind = StrategyKind::Speculative;
          else src_.fail(key, fmt::format("unknown kind '{}' (expected autoregressive or speculative)", kind));
          has_kind = true;
        } else if (name == "target") {
          s.target = want_string(fv, key);
        } else if (is_strategy_field(name)) {
          std::string problem = apply_field(name, want_field(fv, key, name), s, unused);
          if (!problem.empty()) src_.fail(key, problem);
        } else {
          std::vector<std::string> known = {"name", "kind", "target"};
          for (const auto& f : sweepable_field_names())
            if (is_strategy_field(f)) known.push_back(f);
          unknown(key, known);
        }
      }
      if (s.name.empty()) src_.fail(base + ".name", "missing required key");
      if (!has_kind) src_.fail(base + ".kind", "missing required key (autoregressive or speculative)");
      if (s.target.empty()) src_.fail(base + ".target", "missing required key");
      spec_.strategies.push_back(std::move(s));
      ++index;
    }
  }

  void parse_sweep(const toml::table& t) {
    std::set<std::string> seen;
    for (auto&& [k, v] : t) {
      std::string key = "sweep." + std::string(k.str());
      record(key, k);
      std::string name = canonical("sweep.", k, seen);
      if (name == "only") {
        spec_.sweep.only = want_string_array(v, key);
        continue;
      }
      if (!is_strategy_field(name) && !is_sampling_field(name)) {
        auto known = sweepable_field_names();
        known.insert(known.begin(), "only");
        unknown(key, known);
      }
      if (!v.is_array()) wrong_type(key, "an array of values", v);
      SweepAxis axis;
      axis.key = name;
      axis.strategy_field = is_strategy_field(name);
      size_t i = 0;
      for (const auto& e : *v.as_array()) {
        FieldValue fv = want_field(e, key, name);
        StrategySpec s;
        SamplingSpec p;
        std::string problem = apply_field(name, fv, s, p);
        if (!problem.empty()) src_.fail(key, fmt::format("element {}: {}", i, problem));
        for (const auto& prev : axis.values)
          if (prev == fv) src_.fail(key, fmt::format("element {}: duplicate value {}", i, fv.text()));
        axis.values.push_back(std::move(fv));
        ++i;
      }
      if (axis.values.empty()) src_.fail(key, "must list at least one value");
      spec_.sweep.axes.push_back(std::move(axis));
    }
    // toml++ tables iterate in key order; sweep in the order the user wrote them.
    std::stable_sort(spec_.sweep.axes.begin(), spec_.sweep.axes.end(), [&](const SweepAxis& a, const SweepAxis& b) {
      return src_.line_of("sweep." + a.key) < src_.line_of("sweep." + b.key);
    });
  }

  static std::vector<std::string> sampling_names() {
    std::vector<std::string> out;
    for (const auto& f : sweepable_field_names())
      if (is_sampling_field(f)) out.push_back(f);
    return out;
  }

  ExperimentSpec& spec_;
  SourceMap& src_;
};

}  // namespace

ExperimentSpec parse_experiment_string(std::string_view toml_text, const std::string& path) {
  ExperimentSpec spec;
  spec.path = fs::absolute(path).lexically_normal().string();
  spec.dir = fs::path(spec.path).parent_path().string();
  spec.source_text = std::string(toml_text);
  spec.src.file = path;
  toml::table root;
  try {
    root = toml::parse(toml_text, path);
  } catch (const toml::parse_error& e) {
    throw_error(ErrorKind::Config, "{}:{}: TOML syntax error: {}", path, e.source().begin.line, e.description());
  }
  Parser(spec).parse_root(root);
  if (!spec.src.lines.count("prompts.list") && !spec.src.lines.count("prompts.file") && !spec.src.lines.count("prompts.jsonl"))
    spec.src.fail("prompts", "no prompts (give [prompts] list, file or jsonl)");
  spec.prompts = load_prompts(spec.prompt_source, spec.src);
  spec.validate();
  return spec;
}

ExperimentSpec parse_experiment_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw_error(ErrorKind::Config, "{}: experiment file not found", path);
  // Experiment files are hand-written and small; a huge file is a wrong path, not a config.
  constexpr std::uintmax_t kMaxExperimentFileBytes = 16u << 20;
  if (const auto size = fs::file_size(path, ec); !ec && size > kMaxExperimentFileBytes)
    throw_error(ErrorKind::Limit, "{}: experiment file has {} bytes (limit {} MiB)", path, size,
                kMaxExperimentFileBytes >> 20);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorKind::Config, "{}: cannot open experiment file", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_experiment_string(text, path);
}

}  // namespace specmoe::exp
