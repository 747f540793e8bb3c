// Atomic file writes: the content goes to a unique temporary file in the same folder, is flushed,
// then renamed over the target, so a reader (or a run interrupted by SIGINT) never sees a
// half-written report or run file.
#pragma once
#include <string>
#include <string_view>

namespace specmoe::exp {

// Creates missing parent folders. Throws Error(Io) naming the path.
void write_file_atomic(const std::string& path, std::string_view content);

// Reads a whole file; throws Error(Io) naming the path.
std::string read_file(const std::string& path);

// Throws Error(Io) when `dir` cannot be created or a file cannot be created inside it.
void check_folder_writable(const std::string& dir);

// Removes the temporary files write_file_atomic leaves in `dir` (not below it) when its process
// dies between creating and renaming one (".NAME.tmp-PID-N"). Only for a folder this process
// holds the output lock of (output_lock.h), where no other writer can be mid-write. Returns how
// many were removed.
int remove_stale_temp_files(const std::string& dir);

}  // namespace specmoe::exp
