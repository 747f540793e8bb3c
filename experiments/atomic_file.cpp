// Atomic writes by temporary file + rename (rename is atomic within one POSIX file system).
#include "experiments/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "base/error.h"
#include "experiments/test_hooks.h"

namespace specmoe::exp {
namespace fs = std::filesystem;

namespace {
std::string temp_name_for(const fs::path& target) {
  static std::atomic<uint64_t> counter{0};
  return (target.parent_path() / fmt::format(".{}.tmp-{}-{}", target.filename().string(),
                                             static_cast<long>(::getpid()), counter++))
      .string();
}
}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw_error(ErrorKind::Io, "{}: cannot create folder: {}", path, ec.message());
  }
  std::string tmp = temp_name_for(target);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_error(ErrorKind::Io, "{}: cannot create temporary file: {}", path, std::strerror(errno));
  // Test hooks (test_hooks.h): "write:FILE" fires with the first half of the content written.
  const bool hook = test_hooks_armed();
  const size_t half = content.size() / 2;
  size_t done = 0;
  bool hooked = !hook;
  while (done < content.size()) {
    if (!hooked && done >= half) {
      test_hook("write:" + target.filename().string());
      hooked = true;
    }
    const size_t chunk = hooked ? content.size() - done : half - done;
    ssize_t n = ::write(fd, content.data() + done, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;  // SIGINT arrives here too: finish the write regardless
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw_error(ErrorKind::Io, "{}: write failed: {}", path, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // No fsync: rename already makes the write atomic for readers and for an interrupted process;
  // after a power loss a run file may be empty, which --resume treats as unfinished and re-runs.
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_error(ErrorKind::Io, "{}: cannot flush: {}", path, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_error(ErrorKind::Io, "{}: cannot rename temporary file into place: {}", path, std::strerror(err));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorKind::Io, "{}: cannot open for reading", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_error(ErrorKind::Io, "{}: read failed", path);
  return ss.str();
}

static bool is_temp_name(const std::string& name) {
  // "." NAME ".tmp-" PID "-" COUNTER, as temp_name_for writes them.
  const size_t tmp = name.rfind(".tmp-");
  if (name.size() < 2 || name[0] != '.' || tmp == std::string::npos || tmp < 2) return false;
  const std::string rest = name.substr(tmp + 5);
  const size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) return false;
  auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  return digits(rest.substr(0, dash)) && digits(rest.substr(dash + 1));
}

int remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec) || !is_temp_name(e.path().filename().string())) continue;
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

void check_folder_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_error(ErrorKind::Io, "{}: cannot create output folder: {}", dir, ec.message());
  if (!fs::is_directory(dir)) throw_error(ErrorKind::Io, "{}: output path is not a folder", dir);
  std::string probe = temp_name_for(fs::path(dir) / "write-probe");
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_error(ErrorKind::Io, "{}: output folder is not writable: {}", dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace specmoe::exp
