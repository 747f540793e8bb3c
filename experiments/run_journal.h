// The journal of a run in progress: runs/<run>.partial.jsonl, a header line naming the run and
// its config hash, then one line per finished record, appended as each record finishes. A
// process killed at any point (SIGKILL, OOM, a preempted job) leaves complete lines plus at most
// one torn last line, so `--resume` continues the run where it stopped instead of redoing it: it
// keeps the complete lines whose run and config hash match and drops the rest. The journal is
// removed once runs/<run>.json, the finished run, is saved. Records are independent of each
// other (each draws from its own RNG stream, prompt_stream_id), so a resumed run's records equal
// an uninterrupted run's in tokens and counts; only timings differ.
#pragma once
#include <string>
#include <vector>

#include "experiments/run_result.h"

namespace specmoe::exp {

inline constexpr const char* kJournalFormat = "specmoe-journal/1";

// "runs/<run>.partial.jsonl" inside an output folder.
std::string run_journal_path(const std::string& output_dir, const std::string& run_name);

class RunJournal {
 public:
  // Starts the journal of `run_name`. With `resume`, the records of an existing journal of the
  // same run and config hash are returned in *restored (complete, parseable lines only; a record
  // whose (prompt_index, repeat) repeats is kept once) and kept in the new journal; otherwise any
  // old journal is discarded. Throws Error(Io) naming the path when it cannot be written.
  static RunJournal start(const std::string& path, const std::string& run_name, const std::string& config_hash,
                          bool resume, std::vector<PromptRecord>* restored);

  RunJournal() = default;
  RunJournal(RunJournal&& o) noexcept;
  RunJournal& operator=(RunJournal&& o) noexcept;
  RunJournal(const RunJournal&) = delete;
  RunJournal& operator=(const RunJournal&) = delete;
  ~RunJournal();

  // Appends one record as one line (one write(2) call, unless test hooks split it). Throws
  // Error(Io) naming the journal on failure.
  void append(const PromptRecord& record);
  // Closes and deletes the journal (after the run file is saved).
  void remove();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace specmoe::exp
