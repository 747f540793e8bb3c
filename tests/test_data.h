// Locating the shared test data (../shared/data beside the checkout, or $SPECMOE_DATA_DIR).
// Suites that need it skip with a clear message when it is absent: a fresh clone has none.
#pragma once
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

// A scratch folder for files a test writes (synth models, reports); removed by nobody, so
// tests name files uniquely.
inline std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::temp_directory_path() / "specmoe-tests";
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace specmoe::testing

// Skips the current test when a shared data file is missing.
#define SPECMOE_REQUIRE_DATA(rel)                                                            \
  do {                                                                                       \
    if (!std::filesystem::exists(::specmoe::testing::data_path(rel)))                        \
      GTEST_SKIP() << "shared test data not found: " << ::specmoe::testing::data_path(rel)   \
                   << " (set SPECMOE_DATA_DIR or place ../shared/data beside the checkout)"; \
  } while (0)
