// Loading prompts from inline lists, text files and MT-bench style JSONL question files.
#include "experiments/prompt_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "base/error.h"

namespace specmoe::exp {
namespace {

std::string unescape_line(const std::string& line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      if (line[i + 1] == 'n') { out += '\n'; ++i; continue; }
      if (line[i + 1] == '\\') { out += '\\'; ++i; continue; }
    }
    out += line[i];
  }
  return out;
}

// Prompt sets are text: far below this. The cap keeps a mistyped path (a device such as /dev/zero,
// a FIFO, a huge binary) from hanging the loader or exhausting memory.
constexpr std::uintmax_t kMaxPromptFileBytes = std::uintmax_t{1} << 30;

// Inflates a gzip (or zlib) stream, refusing output beyond the prompt-file limit (a small file
// can inflate to gigabytes).
std::string gunzip(const std::string& packed, const std::string& path, const char* key, const SourceMap& src) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) src.fail(key, fmt::format("'{}': zlib initialisation failed", path));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  zs.avail_in = static_cast<uInt>(packed.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = zs.msg ? zs.msg : (rc == Z_BUF_ERROR ? "truncated data" : "invalid data");
      inflateEnd(&zs);
      src.fail(key, fmt::format("'{}' is not valid gzip data: {}", path, why));
    }
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > kMaxPromptFileBytes) {
      inflateEnd(&zs);
      src.fail(key, fmt::format("'{}' inflates to more than the {} MiB a prompt file may have", path,
                                kMaxPromptFileBytes >> 20));
    }
    // A concatenated gzip member follows: go on with it (gzip -c a b > c).
    if (rc == Z_STREAM_END && zs.avail_in > 0) {
      inflateReset(&zs);
      rc = Z_OK;
    }
  }
  inflateEnd(&zs);
  return out;
}

// Reads a prompt file after checking it is a regular file of bounded size; a name ending in ".gz"
// is gzip data (HumanEval ships as HumanEval.jsonl.gz) and is inflated.
std::string read_prompt_file(const std::string& path, const char* key, const SourceMap& src) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) src.fail(key, fmt::format("cannot open '{}': no such file", path));
  if (!std::filesystem::is_regular_file(status)) src.fail(key, fmt::format("'{}' is not a regular file", path));
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxPromptFileBytes)
    src.fail(key, fmt::format("'{}' has {} bytes, more than the {} MiB a prompt file may have", path, size,
                              kMaxPromptFileBytes >> 20));
  std::ifstream in(path, std::ios::binary);
  if (!in) src.fail(key, fmt::format("cannot open '{}'", path));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) src.fail(key, fmt::format("'{}': read error", path));
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) return gunzip(text, path, key, src);
  return text;
}

void strip_cr(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
}

void load_text_file(const PromptSource& source, const SourceMap& src, std::vector<Prompt>& out) {
  std::istringstream in(read_prompt_file(source.file, "prompts.file", src));
  std::string line;
  while (std::getline(in, line)) {
    strip_cr(line);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    out.push_back({"", "", unescape_line(line), {}});
  }
}

void load_jsonl(const PromptSource& source, const SourceMap& src, std::vector<Prompt>& out) {
  std::istringstream in(read_prompt_file(source.jsonl, "prompts.jsonl", src));
  std::set<std::string> wanted(source.categories.begin(), source.categories.end());
  std::set<std::string> seen_categories, matched_categories;
  std::string line;
  int line_no = 0;
  auto fail = [&](const std::string& problem) {
    src.fail("prompts.jsonl", fmt::format("{} line {}: {}", source.jsonl, line_no, problem));
  };
  while (std::getline(in, line)) {
    ++line_no;
    strip_cr(line);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json q;
    try {
      q = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
      fail(fmt::format("invalid JSON ({})", e.what()));
    }
    if (!q.is_object()) fail("expected a JSON object");
    Prompt p;
    const char* id_key = q.contains("question_id") ? "question_id" : "task_id";
    if (q.contains(id_key)) {
      const auto& id = q[id_key];
      if (id.is_string()) p.id = id.get<std::string>();
      else if (id.is_number_integer()) p.id = std::to_string(id.get<int64_t>());
      else fail(fmt::format("'{}' must be a string or an integer", id_key));
    }
    if (q.contains("category")) {
      if (!q["category"].is_string()) fail("'category' must be a string");
      p.category = q["category"].get<std::string>();
    }
    if (q.contains("turns")) {
      const auto& turns = q["turns"];
      if (!turns.is_array()) fail("'turns' must be an array of strings");
      if (static_cast<size_t>(source.turn) >= turns.size())
        fail(fmt::format("question '{}' has {} turn(s); prompts.turn = {} is out of range", p.id,
                         turns.size(), source.turn));
      for (int t = 0; t <= source.turn; ++t)
        if (!turns[t].is_string()) fail("'turns' must be an array of strings");
      p.text = turns[source.turn].get<std::string>();
      for (int t = 0; t < source.turn; ++t) p.history.push_back(turns[t].get<std::string>());
    } else if (q.contains("prompt") && q["prompt"].is_string()) {
      p.text = q["prompt"].get<std::string>();
    } else {
      fail("expected 'turns' (array of strings) or 'prompt' (string)");
    }
    seen_categories.insert(p.category);
    if (!wanted.empty() && !wanted.count(p.category)) continue;
    matched_categories.insert(p.category);
    out.push_back(std::move(p));
  }
  for (const auto& c : source.categories) {
    if (!matched_categories.count(c)) {
      std::string have;
      for (const auto& s : seen_categories) have += (have.empty() ? "" : ", ") + (s.empty() ? "(none)" : s);
      src.fail("prompts.categories", fmt::format("no question of category '{}' in {} (categories: {})",
                                                 c, source.jsonl, have));
    }
  }
}

}  // namespace

std::vector<Prompt> load_prompts(const PromptSource& source, const SourceMap& src) {
  std::vector<Prompt> prompts;
  for (const auto& text : source.list) prompts.push_back({"", "", text, {}});
  if (!source.file.empty()) load_text_file(source, src, prompts);
  if (!source.jsonl.empty()) load_jsonl(source, src, prompts);
  if (source.limit > 0 && prompts.size() > static_cast<size_t>(source.limit)) prompts.resize(source.limit);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].id.empty()) prompts[i].id = fmt::format("p{}", i);
    if (prompts[i].text.empty()) src.fail("prompts", fmt::format("prompt {} ('{}') is empty", i, prompts[i].id));
  }
  if (prompts.empty()) src.fail("prompts", "the prompt set is empty (check list/file/jsonl, categories and limit)");
  return prompts;
}

}  // namespace specmoe::exp
