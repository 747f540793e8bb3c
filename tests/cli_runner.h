// Running the specmoe CLI (build/specmoe) from a test: argv without a shell (arguments may hold
// any bytes), stdout and stderr captured separately (stdout must stay the raw bytes), extra
// environment variables, a time limit, and the exit status or the signal that ended it.
// SPECMOE_REQUIRE_CLI() skips a test when the binary is missing (fails instead when
// SPECMOE_FAIL_ON_MISSING is set, as CI does: see test_data.h).
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_data.h"

namespace specmoe::testing {

inline std::string cli_binary() {
  const char* dir = std::getenv("SPECMOE_BINARY_DIR");
  return (std::filesystem::path(dir ? dir : SPECMOE_BINARY_DIR) / "specmoe").string();
}

struct CliRun {
  int exit_code = -1;    // exit status, or -1 when a signal ended the process
  int term_signal = 0;   // the signal that ended it (0: it exited)
  bool timed_out = false;
  std::string out, err;  // stdout, stderr
  std::string describe() const {
    return (term_signal ? "signal " + std::to_string(term_signal) : "exit " + std::to_string(exit_code)) +
           (timed_out ? " (timed out)" : "") + "\nstdout: " + out + "\nstderr: " + err;
  }
};

using Env = std::vector<std::pair<std::string, std::string>>;

// Forks and runs `cli_binary() args...` with `env` added; stdout/stderr go to the pipes given
// (-1: /dev/null). Returns the child's pid.
inline pid_t spawn_cli(const std::vector<std::string>& args, const Env& env, int out_fd, int err_fd) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int null_fd = ::open("/dev/null", O_RDWR);
  ::dup2(out_fd >= 0 ? out_fd : null_fd, 1);
  ::dup2(err_fd >= 0 ? err_fd : null_fd, 2);
  ::dup2(null_fd, 0);
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  const std::string bin = cli_binary();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(bin.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(bin.c_str(), argv.data());
  ::_exit(127);
}

// Runs the CLI to completion (SIGKILL after timeout_s) and collects its output.
inline CliRun run_cli(const std::vector<std::string>& args, const Env& env = {}, int timeout_s = 300) {
  CliRun r;
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) return r;
  const pid_t pid = spawn_cli(args, env, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (std::chrono::steady_clock::now() > deadline && !r.timed_out) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
    }
    if (::poll(fds, 2, 200) < 0) break;
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = ::read(f.fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(f.fd);
        f.fd = -1;
        --open_fds;
        continue;
      }
      (f.fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

}  // namespace specmoe::testing

#define SPECMOE_REQUIRE_CLI()                                                                        \
  do {                                                                                               \
    if (!std::filesystem::exists(::specmoe::testing::cli_binary()))                                  \
      SPECMOE_MISSING("CLI binary " + ::specmoe::testing::cli_binary() +                             \
                      " not built (cmake --build build --target specmoe)");                          \
  } while (0)
