// The git commit this build was made from, refreshed at every build (cmake/GitCommit.cmake), so a
// report's environment block names the code that produced it even when CMake did not re-run.
#pragma once

namespace specmoe::exp {
extern const char* const kGitCommit;  // "1a2b3c4d5e6f", "...-dirty", or "unknown"
}
