// Environment capture for reports.
#include "experiments/environment.h"

#include "experiments/git_commit.h"

#include <ctime>
#include <fstream>
#include <thread>

#include <sys/utsname.h>
#include <unistd.h>

#ifndef SPECMOE_BUILD_TYPE
#define SPECMOE_BUILD_TYPE "unknown"
#endif
#ifndef SPECMOE_COMPILER
#define SPECMOE_COMPILER "unknown"
#endif

namespace specmoe::exp {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
}

}  // namespace

std::string utc_now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string simd_level() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2+fma+f16c";
  if (__builtin_cpu_supports("sse4.2")) return "sse4.2";
  return "scalar";
#elif defined(__aarch64__)
  return "neon";
#else
  return "scalar";
#endif
}

nlohmann::json capture_environment(int threads_used) {
  utsname uts{};
  std::string os = uname(&uts) == 0 ? std::string(uts.sysname) + " " + uts.release + " " + uts.machine : "unknown";
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return {{"specmoe_commit", kGitCommit},
          {"compiler", SPECMOE_COMPILER},
          {"build_type", SPECMOE_BUILD_TYPE},
          {"cpu_model", cpu_model()},
          {"cores", std::thread::hardware_concurrency()},
          {"threads", threads_used},
          {"simd", simd_level()},
          {"cuda_device", nullptr},
          {"host", host},
          {"os", os},
          {"date", utc_now_iso8601()}};
}

}  // namespace specmoe::exp
