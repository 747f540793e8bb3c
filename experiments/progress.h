// The progress line of `specmoe run` on stderr: run i/n, prompt j/m, elapsed, ETA. On a terminal
// one line is rewritten in place (\r); otherwise (logs, batch jobs) one plain line per prompt.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace specmoe::exp {

class Progress {
 public:
  // total_units: generations (prompts x repeats, warmups excluded) this invocation will execute.
  Progress(bool enabled, long total_units, std::FILE* out = stderr);
  ~Progress();

  // A generation of (run_index/n_runs, prompt_index/n_prompts) finished.
  void step(int run_number, int n_runs, const std::string& run_name, int prompt_number, int n_prompts);
  void message(const std::string& line);  // a line of its own (e.g. "skipping finished run x")
  void finish();

  static std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"

 private:
  bool enabled_;
  bool tty_;
  long total_, done_ = 0;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
  size_t last_width_ = 0;
};

}  // namespace specmoe::exp
