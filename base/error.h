// specmoe::Error: the one exception type for bad input and failed operations. Every message
// names the input (file, key, tensor, flag) and the problem, so the CLI can print it as one line.
// Header-only, at the bottom of the layering (base/), so every folder can throw it.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace specmoe {

enum class ErrorKind {
  Io,               // a file could not be opened, read or written
  Format,           // a file's bytes do not follow its format (truncated, bad magic, out of bounds)
  Unsupported,      // valid input that specmoe does not handle (architecture, tensor type, version)
  InvalidArgument,  // a value outside its allowed range (flag, config field, API argument)
  Limit,            // a size or count beyond a checked limit (context length, memory, counts)
  Config,           // an experiment configuration problem (unknown key, wrong type, undefined name)
  Runtime,          // anything else that went wrong while running
};

inline const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Io: return "io";
    case ErrorKind::Format: return "format";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::InvalidArgument: return "invalid-argument";
    case ErrorKind::Limit: return "limit";
    case ErrorKind::Config: return "config";
    case ErrorKind::Runtime: return "runtime";
  }
  return "unknown";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// throw_error(ErrorKind::Format, "{}: tensor '{}' ends past the end of the file", path, name);
template <typename... Args>
[[noreturn]] void throw_error(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(kind, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace specmoe
