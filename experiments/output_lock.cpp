// flock-based output folder lock: see output_lock.h.
#include "experiments/output_lock.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/error.h"

namespace specmoe::exp {

OutputLock OutputLock::acquire(const std::string& dir, const std::string& command) {
  const std::string path = (std::filesystem::path(dir) / kLockFileName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw_error(ErrorKind::Io, "{}: cannot open the output folder's lock file: {}", path, std::strerror(errno));
  int rc;
  do rc = ::flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    std::string holder;
    if (err == EWOULDBLOCK) {
      char buf[512];
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      if (n > 0) holder.assign(buf, static_cast<size_t>(n));
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      for (char& c : holder)
        if (c == '\n') c = ' ';
    }
    ::close(fd);
    if (err != EWOULDBLOCK)
      throw_error(ErrorKind::Io, "{}: cannot lock the output folder: {}", path, std::strerror(err));
    throw_error(ErrorKind::Runtime,
                "{}: another specmoe process ({}) is writing to this output folder; wait for it to finish or "
                "choose another output folder",
                dir, holder.empty() ? "unknown pid" : holder);
  }
  // Ours: record who holds it (the file may hold a dead holder's text; replace it).
  const std::string text = fmt::format("pid {}: {}\n", static_cast<long>(::getpid()), command);
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, text.data(), text.size(), 0);
    (void)ignored;
  }
  return OutputLock(fd);
}

OutputLock& OutputLock::operator=(OutputLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the open file releases the flock
}

}  // namespace specmoe::exp
