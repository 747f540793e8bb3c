// Locating the shared test data (../shared/data beside the checkout, or $SPECMOE_DATA_DIR).
// Suites that need it skip with a clear message when it is absent: a fresh clone has none.
// CI has the data and builds the CLI, so there a missing file or binary is a broken setup, not a
// reason to skip: with SPECMOE_FAIL_ON_MISSING=1 (scripts/test.sh sets it) these skips fail
// instead. Real-model tests ($SPECMOE_MODELS) and GPU tests still skip: CI has neither.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace specmoe::testing {

inline std::filesystem::path data_dir() {
  if (const char* env = std::getenv("SPECMOE_DATA_DIR")) return env;
  return std::filesystem::path(SPECMOE_SOURCE_DIR) / ".." / "shared" / "data";
}

inline std::filesystem::path data_path(const std::string& rel) { return data_dir() / rel; }

// SPECMOE_FAIL_ON_MISSING set to anything but "" or "0".
inline bool missing_is_failure() {
  const char* v = std::getenv("SPECMOE_FAIL_ON_MISSING");
  return v && *v && std::string(v) != "0";
}

// A scratch folder for files a test writes (synth models, reports); removed by nobody, so
// tests name files uniquely. One per checkout (named by a hash of the source folder), so that
// two checkouts' suites on one machine never write each other's files.
inline std::filesystem::path scratch_dir() {
  const std::string source = SPECMOE_SOURCE_DIR;
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : source) h = (h ^ c) * 1099511628211ULL;
  char name[40];
  std::snprintf(name, sizeof name, "specmoe-tests-%08llx", static_cast<unsigned long long>(h & 0xffffffffULL));
  auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace specmoe::testing

// Ends the current test because something it needs is missing: a skip, or a failure under
// SPECMOE_FAIL_ON_MISSING. `what` is a std::string or a string literal.
#define SPECMOE_MISSING(what)                                                                         \
  do {                                                                                                \
    if (::specmoe::testing::missing_is_failure())                                                     \
      GTEST_FAIL() << std::string(what) << " (SPECMOE_FAIL_ON_MISSING is set, so this is a failure)"; \
    GTEST_SKIP() << std::string(what);                                                                \
  } while (0)

// Skips (or, under SPECMOE_FAIL_ON_MISSING, fails) the current test when a shared data file is
// missing.
#define SPECMOE_REQUIRE_DATA(rel)                                                                       \
  do {                                                                                                  \
    if (!std::filesystem::exists(::specmoe::testing::data_path(rel)))                                   \
      SPECMOE_MISSING("shared test data not found: " + ::specmoe::testing::data_path(rel).string() +    \
                      " (set SPECMOE_DATA_DIR or place ../shared/data beside the checkout)");           \
  } while (0)
