// Locating the real GGUF models that scripts/fetch-models.sh downloads ($SPECMOE_MODELS, else
// ~/.cache/specmoe/models, the script's default). Suites that need one skip with a clear message
// when it is absent: a fresh clone, and CI, have none.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace specmoe::testing {

// The real models by file name, as scripts/fetch-models.sh names them.
inline constexpr const char* kQwen15B = "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf";
inline constexpr const char* kQwen05B = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf";
inline constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";
inline constexpr const char* kRealModels[] = {kQwen15B, kQwen05B, kSmolLM2, kGemma3};

inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("SPECMOE_MODELS"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/nonexistent") / ".cache" / "specmoe" / "models";
}

inline std::filesystem::path model_path(const std::string& file) { return models_dir() / file; }

inline bool have_model(const std::string& file) { return std::filesystem::is_regular_file(model_path(file)); }

}  // namespace specmoe::testing

// Skips the current test when a real model is missing.
#define SPECMOE_REQUIRE_MODEL(file)                                                                      \
  do {                                                                                                   \
    if (!::specmoe::testing::have_model(file))                                                           \
      GTEST_SKIP() << "real model not found: " << ::specmoe::testing::model_path(file)                   \
                   << " (run scripts/fetch-models.sh, or set SPECMOE_MODELS to the folder holding it)"; \
  } while (0)
