// ExperimentSpec helpers: source positions, the strategy/sampling field table, validation.
#include "experiments/experiment_spec.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "draft/token_tree.h"

namespace specmoe::exp {

int SourceMap::line_of(const std::string& key) const {
  std::string k = key;
  while (!k.empty()) {
    auto it = lines.find(k);
    if (it != lines.end()) return it->second;
    size_t cut = k.find_last_of(".[");
    if (cut == std::string::npos) break;
    k.resize(cut);
  }
  return 0;
}

std::string SourceMap::message(const std::string& key, const std::string& problem) const {
  int line = line_of(key);
  if (line <= 0) return fmt::format("{}: key '{}': {}", file, key, problem);  // the key is not in the file
  return fmt::format("{}:{}: key '{}': {}", file, line, key, problem);
}

void SourceMap::fail(const std::string& key, const std::string& problem) const {
  throw Error(ErrorKind::Config, message(key, problem));
}

std::string FieldValue::text() const {
  switch (type) {
    case Type::Integer: return fmt::format("{}", i);
    case Type::Float: return fmt::format("{}", f);
    case Type::String: return s;
    case Type::Bool: return b ? "true" : "false";
  }
  return "";
}

bool FieldValue::operator==(const FieldValue& o) const {
  if (type != o.type) return false;
  switch (type) {
    case Type::Integer: return i == o.i;
    case Type::Float: return f == o.f;
    case Type::String: return s == o.s;
    case Type::Bool: return b == o.b;
  }
  return false;
}

const char* strategy_kind_name(StrategyKind kind) {
  return kind == StrategyKind::Speculative ? "speculative" : "autoregressive";
}

namespace {

const char* type_name(FieldValue::Type t) {
  switch (t) {
    case FieldValue::Type::Integer: return "integer";
    case FieldValue::Type::Float: return "float";
    case FieldValue::Type::String: return "string";
    case FieldValue::Type::Bool: return "boolean";
  }
  return "?";
}

// Integer field with an inclusive range.
std::string set_int(const FieldValue& v, int& out, int64_t lo, int64_t hi) {
  if (v.type != FieldValue::Type::Integer) return fmt::format("expected an integer, got {}", type_name(v.type));
  if (v.i < lo) return fmt::format("must be >= {}, got {}", lo, v.i);
  if (v.i > hi) return fmt::format("must be <= {}, got {}", hi, v.i);
  out = static_cast<int>(v.i);
  return "";
}

// Float field (integers accepted) in a range with open or closed ends.
std::string set_float(const FieldValue& v, double& out, double lo, bool lo_open, double hi, bool hi_open) {
  double x;
  if (v.type == FieldValue::Type::Float) x = v.f;
  else if (v.type == FieldValue::Type::Integer) x = static_cast<double>(v.i);
  else return fmt::format("expected a number, got {}", type_name(v.type));
  bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  if (!ok) {
    if (std::isinf(hi)) return fmt::format("must be {} {}, got {}", lo_open ? ">" : ">=", lo, x);
    return fmt::format("must be in {}{}, {}{}, got {}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]", x);
  }
  out = x;
  return "";
}

std::string set_string(const FieldValue& v, std::string& out) {
  if (v.type != FieldValue::Type::String) return fmt::format("expected a string, got {}", type_name(v.type));
  if (v.s.empty()) return "must not be empty";
  out = v.s;
  return "";
}

// "4,2,2,1" (an integer w: one level of w); checked by draft::parse_tree_widths.
std::string set_tree_widths(const FieldValue& v, std::string& out) {
  std::string text;
  if (v.type == FieldValue::Type::Integer) text = std::to_string(v.i);
  else if (v.type == FieldValue::Type::String) text = v.s;
  else return fmt::format("expected a string of widths such as \"4,2,2,1\" or an array of integers, got {}",
                          type_name(v.type));
  try {
    out = draft::format_tree_widths(draft::parse_tree_widths(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string set_tree_sampling(const FieldValue& v, std::string& out) {
  if (v.type != FieldValue::Type::String) return fmt::format("expected a string, got {}", type_name(v.type));
  try {
    out = draft::tree_sampling_name(draft::parse_tree_sampling(v.s));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

constexpr double kInf = INFINITY;
constexpr int64_t kMaxDraft = 64;      // beyond this a verification batch is no longer cheap
constexpr int64_t kMaxTokens = 1 << 20;

struct FieldDef {
  const char* name;
  bool strategy;       // else sampling
  const char* abbrev;  // run-name prefix of a swept value
  std::string (*apply)(const FieldValue&, StrategySpec&, SamplingSpec&);
};

const FieldDef kFields[] = {
    {"drafter", true, "", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_string(v, s.drafter); }},
    {"draft", true, "d", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_string(v, s.draft); }},
    {"verifier", true, "v", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_string(v, s.verifier); }},
    {"draft_max", true, "g", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.draft_max, 1, kMaxDraft); }},
    {"draft_min", true, "gmin", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.draft_min, 0, kMaxDraft); }},
    {"draft_p_min", true, "pmin", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_float(v, s.draft_p_min, 0, false, 1, false); }},
    {"ngram_min", true, "nmin", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.ngram_min, 1, 64); }},
    {"ngram_max", true, "nmax", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.ngram_max, 1, 64); }},
    {"exit_layer", true, "L", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.exit_layer, 0, 100000); }},
    {"draft_vocab", true, "dv", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.draft_vocab, 0, 1 << 24); }},
    {"tree_widths", true, "w", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_tree_widths(v, s.tree_widths); }},
    {"tree_nodes", true, "N", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.tree_nodes, 0, 512); }},
    {"tree_depth", true, "D", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.tree_depth, 0, 16); }},
    {"tree_top_k", true, "K", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_int(v, s.tree_top_k, 0, 64); }},
    {"tree_sampling", true, "ts", [](const FieldValue& v, StrategySpec& s, SamplingSpec&) { return set_tree_sampling(v, s.tree_sampling); }},
    {"temperature", false, "t", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_float(v, p.temperature, 0, false, kInf, false); }},
    {"top_k", false, "k", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_int(v, p.top_k, 0, 1 << 30); }},
    {"top_p", false, "p", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_float(v, p.top_p, 0, true, 1, false); }},
    {"min_p", false, "mp", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_float(v, p.min_p, 0, false, 1, false); }},
    {"max_tokens", false, "n", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_int(v, p.max_tokens, 1, kMaxTokens); }},
    {"repeat_penalty", false, "rp", [](const FieldValue& v, StrategySpec&, SamplingSpec& p) { return set_float(v, p.repeat_penalty, 0, true, kInf, false); }},
};

// Old spelling -> current name; kept for one release (deprecation note when parsed).
const std::pair<const char*, const char*> kDeprecatedFields[] = {{"layerskip_layers", "exit_layer"}};

const FieldDef* find_field(std::string_view key) {
  key = canonical_field_name(key);
  for (const auto& f : kFields)
    if (key == f.name) return &f;
  return nullptr;
}

}  // namespace

std::string_view canonical_field_name(std::string_view key) {
  for (const auto& [old_name, name] : kDeprecatedFields)
    if (key == old_name) return name;
  return key;
}

bool is_strategy_field(std::string_view key) {
  const FieldDef* f = find_field(key);
  return f && f->strategy;
}

bool is_sampling_field(std::string_view key) {
  const FieldDef* f = find_field(key);
  return f && !f->strategy;
}

std::vector<std::string> sweepable_field_names() {
  std::vector<std::string> names;
  for (const auto& f : kFields) names.push_back(f.name);
  return names;
}

std::string field_abbreviation(std::string_view key) {
  const FieldDef* f = find_field(key);
  return f ? f->abbrev : std::string(key) + "=";
}

std::string apply_field(std::string_view key, const FieldValue& value, StrategySpec& strategy,
                        SamplingSpec& sampling) {
  const FieldDef* f = find_field(key);
  if (!f) return "unknown field";
  return f->apply(value, strategy, sampling);
}

const ModelSpec* ExperimentSpec::find_model(std::string_view name) const {
  for (const auto& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

std::string ExperimentSpec::strategy_key(int strategy_index, const std::string& field) const {
  return fmt::format("strategy[{}]{}{}", strategy_index, field.empty() ? "" : ".", field);
}

void ExperimentSpec::validate() const {
  if (models.empty()) src.fail("models", "no models defined (add a [models.NAME] table with path or synth)");
  if (strategies.empty()) src.fail("strategy", "no strategies defined (add a [[strategy]] table)");
  if (prompts.empty()) src.fail("prompts", "the prompt set is empty");

  std::string model_names;
  for (const auto& m : models) model_names += (model_names.empty() ? "" : ", ") + m.name;
  std::set<std::string> names;
  for (const auto& s : strategies) {
    auto key = [&](const std::string& field) { return strategy_key(s.index, field); };
    if (!names.insert(s.name).second) src.fail(key("name"), fmt::format("duplicate strategy name '{}'", s.name));
    if (!find_model(s.target))
      src.fail(key("target"), fmt::format("undefined model '{}' (defined: {})", s.target, model_names));
    if (s.kind == StrategyKind::Autoregressive) {
      if (!s.drafter.empty()) src.fail(key("drafter"), "only speculative strategies take a drafter");
      continue;
    }
    if (s.drafter.empty()) src.fail(key(""), "missing required key 'drafter' for a speculative strategy");
    if ((s.drafter == "model" || s.drafter == "eagle3" || s.drafter == "dflash") && s.draft.empty())
      src.fail(key(""), fmt::format("missing required key 'draft' ({}) for drafter '{}'",
                                    s.drafter == "model"    ? "the draft model"
                                    : s.drafter == "eagle3" ? "the EAGLE-3 head"
                                                            : "the DFlash draft",
                                    s.drafter));
    if (!s.draft.empty() && !find_model(s.draft))
      src.fail(key("draft"), fmt::format("undefined model '{}' (defined: {})", s.draft, model_names));
    if (!s.tree_widths.empty() && s.tree_nodes > 0)
      src.fail(key("tree_nodes"), "give tree_widths (a static tree) or tree_nodes (a dynamic tree), not both");
    if (!s.tree_widths.empty() && (s.tree_depth > 0 || s.tree_top_k > 0))
      src.fail(key(s.tree_depth > 0 ? "tree_depth" : "tree_top_k"),
               "tree_depth and tree_top_k shape a dynamic tree (tree_nodes), not tree_widths");
  }
  for (const auto& name : sweep.only)
    if (!names.count(name)) src.fail("sweep.only", fmt::format("undefined strategy '{}'", name));
}

draft::TreeSpec tree_spec_of(const StrategySpec& s) {
  draft::TreeSpec t;
  if (!s.tree_widths.empty()) t.widths = draft::parse_tree_widths(s.tree_widths);
  t.nodes = s.tree_nodes;
  t.depth = s.tree_depth;
  t.top_k = s.tree_top_k;
  t.sampling = draft::parse_tree_sampling(s.tree_sampling);
  return t;
}

std::string synth_cache_dir() {
  namespace fs = std::filesystem;
  if (const char* d = std::getenv("SPECMOE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return (fs::path(d) / "specmoe").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "specmoe").string();
  return (fs::temp_directory_path() / "specmoe-cache").string();
}

}  // namespace specmoe::exp
