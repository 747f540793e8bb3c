// Per-record journal of a run in progress: see run_journal.h.
#include "experiments/run_journal.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "base/error.h"
#include "experiments/atomic_file.h"
#include "experiments/result_json.h"
#include "experiments/test_hooks.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {

// Complete lines of a journal: everything up to the last '\n' (a torn last line is dropped).
std::vector<std::string> complete_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::vector<PromptRecord> read_journal(const std::string& path, const std::string& run_name,
                                       const std::string& config_hash) {
  std::vector<PromptRecord> records;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return records;
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    return records;  // unreadable: the run starts over
  }
  const std::vector<std::string> lines = complete_lines(text);
  if (lines.empty()) return records;
  try {
    const nlohmann::json header = nlohmann::json::parse(lines[0]);
    if (header.value("format", "") != kJournalFormat || header.value("run", "") != run_name ||
        header.value("config_hash", "") != config_hash)
      return records;  // another run's or another config's journal
  } catch (const nlohmann::json::exception&) {
    return records;
  }
  std::set<std::pair<int, int>> seen;
  for (size_t i = 1; i < lines.size(); ++i) {
    try {
      PromptRecord r = record_from_json(nlohmann::json::parse(lines[i]), fmt::format("{}: line {}", path, i + 1));
      if (r.run != run_name || !seen.insert({r.prompt_index, r.repeat}).second) continue;
      records.push_back(std::move(r));
    } catch (const std::exception&) {
      // A damaged line is dropped: its record is generated again.
    }
  }
  return records;
}

void write_all(int fd, const std::string& path, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_error(ErrorKind::Io, "{}: cannot append to the run journal: {}", path, std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string run_journal_path(const std::string& output_dir, const std::string& run_name) {
  return (fs::path(output_dir) / "runs" / (run_name + ".partial.jsonl")).string();
}

RunJournal RunJournal::start(const std::string& path, const std::string& run_name, const std::string& config_hash,
                             bool resume, std::vector<PromptRecord>* restored) {
  std::vector<PromptRecord> kept;
  if (resume) kept = read_journal(path, run_name, config_hash);
  // The journal is rewritten whole (atomically) with what is kept, so a torn line of the
  // previous process is gone before anything is appended.
  std::string text = dump_json({{"format", kJournalFormat}, {"run", run_name}, {"config_hash", config_hash}}) + "\n";
  for (const auto& r : kept) text += dump_json(record_to_json(r)) + "\n";
  write_file_atomic(path, text);
  RunJournal j;
  j.path_ = path;
  j.fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (j.fd_ < 0) throw_error(ErrorKind::Io, "{}: cannot open the run journal: {}", path, std::strerror(errno));
  if (restored) *restored = std::move(kept);
  return j;
}

RunJournal::RunJournal(RunJournal&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }

RunJournal& RunJournal::operator=(RunJournal&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

RunJournal::~RunJournal() {
  if (fd_ >= 0) ::close(fd_);
}

void RunJournal::append(const PromptRecord& record) {
  if (fd_ < 0) throw_error(ErrorKind::Io, "{}: the run journal is not open", path_);
  const std::string line = dump_json(record_to_json(record)) + "\n";
  if (test_hooks_armed()) {  // "journal-line": die with half a line written
    const size_t half = line.size() / 2;
    write_all(fd_, path_, line.data(), half);
    test_hook("journal-line");
    write_all(fd_, path_, line.data() + half, line.size() - half);
    return;
  }
  write_all(fd_, path_, line.data(), line.size());
}

void RunJournal::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  fs::remove(path_, ec);
}

}  // namespace specmoe::exp
