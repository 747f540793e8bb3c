// The Slurm scheduler: sbatch, squeue and scancel run as child processes (no shell between), their
// output captured; a failure becomes one Error line naming the command and Slurm's message.
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <poll.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "base/error.h"
#include "experiments/slurm.h"

extern char** environ;

namespace specmoe::exp {
namespace {

struct CommandResult {
  int status = 0;  // exit code (128 + signal when killed)
  std::string out, err;
};

CommandResult run_command(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0) throw_error(ErrorKind::Runtime, "{}: cannot create a pipe: {}", argv[0], std::strerror(errno));
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw_error(ErrorKind::Runtime, "{}: cannot create a pipe: {}", argv[0], std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[1]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw_error(ErrorKind::Runtime, "{}: cannot run it: {} (is Slurm installed and on PATH?)", argv[0], std::strerror(rc));
  }
  CommandResult res;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&res.out, &res.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  res.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
  return res;
}

std::string first_line(const std::string& text) {
  std::string s = text.substr(0, text.find('\n'));
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "no message" : s;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

CommandResult checked(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv);
  if (r.status != 0)
    throw_error(ErrorKind::Runtime, "{}: failed (exit {}): {}", command_text(argv), r.status,
                first_line(r.err.empty() ? r.out : r.err));
  return r;
}

class SlurmScheduler : public Scheduler {
 public:
  std::string submit(const std::vector<std::string>& args, const std::string& script) override {
    std::vector<std::string> argv = {"sbatch", "--parsable"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(script);
    CommandResult r = checked(argv);
    // --parsable prints "JOBID" or "JOBID;CLUSTER".
    std::string id = first_line(r.out);
    id = id.substr(0, id.find(';'));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw_error(ErrorKind::Runtime, "{}: expected a job id, got '{}'", command_text(argv), first_line(r.out));
    return id;
  }

  std::vector<QueuedJob> queue() override {
    const passwd* pw = ::getpwuid(::getuid());
    const std::string user = pw && pw->pw_name ? pw->pw_name : std::to_string(::getuid());
    CommandResult r = checked({"squeue", "--noheader", "--array", "--user=" + user, "--format=%A|%F|%K|%T|%r|%o"});
    return parse_squeue(r.out);
  }

  void cancel(const std::string& job_id) override { checked({"scancel", job_id}); }
};

}  // namespace

std::unique_ptr<Scheduler> make_slurm_scheduler() { return std::make_unique<SlurmScheduler>(); }

}  // namespace specmoe::exp
