// The environment block of a report: what built and ran the experiment (specmoe commit, compiler,
// build type, CPU model, cores, threads used, SIMD level, CUDA device, host, date).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace specmoe::exp {

// threads_used: the thread count the runs use. cuda_device is added by the executor when it runs
// on a GPU (null otherwise).
nlohmann::json capture_environment(int threads_used);

std::string utc_now_iso8601();  // "2025-01-31T12:34:56Z"
std::string simd_level();       // "avx512", "avx2+fma+f16c", "sse4.2" or "scalar"

}  // namespace specmoe::exp
