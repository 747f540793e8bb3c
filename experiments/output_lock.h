// One writer per output folder: `specmoe run` and `specmoe merge` hold an advisory lock
// (flock(2), exclusive) on <folder>/.specmoe.lock while they write there. The kernel drops the
// lock when its holder exits or is killed (SIGKILL, OOM), so a lock file left by a dead run never
// blocks --resume: only a live holder does. The file itself stays (removing it would race with a
// process that has just opened it); it records the holder's pid and command for the message.
// flock works on local file systems and on NFS (Linux emulates it with fcntl locks there).
#pragma once
#include <string>

namespace specmoe::exp {

inline constexpr const char* kLockFileName = ".specmoe.lock";

class OutputLock {
 public:
  // Locks `dir` (which must exist) without waiting. When another process holds it: Error(Runtime)
  // "<dir>: another specmoe process (pid N: <command>) is writing to this output folder; ...".
  // `command` is stored in the lock file for that message.
  static OutputLock acquire(const std::string& dir, const std::string& command);

  OutputLock() = default;
  OutputLock(OutputLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OutputLock& operator=(OutputLock&& o) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock();  // releases the lock

  bool held() const { return fd_ >= 0; }

 private:
  explicit OutputLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace specmoe::exp
