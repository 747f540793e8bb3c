// Test helper: SPECMOE_REQUIRE_CUDA() skips a GPU test (GTEST_SKIP) with the reason when no CUDA
// device is usable, so the GPU suites pass on CPU-only machines.
#pragma once
#include <gtest/gtest.h>

#include "core/environment.h"

#define SPECMOE_REQUIRE_CUDA()                                                                        \
  do {                                                                                                \
    if (::specmoe::core::cuda_device_count() == 0)                                                    \
      GTEST_SKIP() << "no CUDA device (" << ::specmoe::core::query_compute_environment().cuda_status \
                   << "): GPU test skipped";                                                          \
  } while (0)
