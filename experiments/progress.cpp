// Progress line with elapsed time and an ETA from the mean time per generation so far.
#include "experiments/progress.h"

#include <cmath>

#include <fmt/format.h>
#include <unistd.h>

namespace specmoe::exp {

Progress::Progress(bool enabled, long total_units, std::FILE* out)
    : enabled_(enabled), tty_(enabled && ::isatty(::fileno(out)) != 0), total_(total_units), out_(out),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

void Progress::step(int run_number, int n_runs, const std::string& run_name, int prompt_number, int n_prompts) {
  ++done_;
  if (!enabled_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = done_ > 0 ? elapsed / done_ * static_cast<double>(total_ - done_) : NAN;
  std::string line = fmt::format("run {}/{} {} | prompt {}/{} | elapsed {} | ETA {}", run_number, n_runs, run_name,
                                 prompt_number, n_prompts, format_duration(elapsed), format_duration(eta));
  if (tty_) {
    std::string padded = line;
    if (padded.size() < last_width_) padded.append(last_width_ - padded.size(), ' ');
    last_width_ = line.size();
    std::fprintf(out_, "\r%s", padded.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::message(const std::string& line) {
  if (!enabled_) return;
  if (tty_ && last_width_ > 0) std::fprintf(out_, "\r%*s\r", static_cast<int>(last_width_), "");
  last_width_ = 0;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (enabled_ && tty_ && last_width_ > 0) std::fprintf(out_, "\n");
  last_width_ = 0;
}

}  // namespace specmoe::exp
