// SPECMOE_TEST_KILL_AT / SPECMOE_TEST_STOP_AT: see test_hooks.h.
#include "experiments/test_hooks.h"

#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include <unistd.h>

namespace specmoe::exp {
namespace {

struct Trigger {
  std::string event;
  long n = 0;  // 0: not armed
};

Trigger parse(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return {};
  const std::string s(v);
  const size_t at = s.rfind('@');
  if (at == std::string::npos || at == 0) return {};
  char* end = nullptr;
  const long n = std::strtol(s.c_str() + at + 1, &end, 10);
  if (!end || *end != '\0' || n < 1) return {};
  return {s.substr(0, at), n};
}

struct Hooks {
  Trigger kill = parse("SPECMOE_TEST_KILL_AT");
  Trigger stop = parse("SPECMOE_TEST_STOP_AT");
  std::mutex mutex;
  std::map<std::string, long, std::less<>> counts;
};

Hooks& hooks() {
  static Hooks* h = new Hooks;  // never destroyed: hooks may fire during static destruction
  return *h;
}

}  // namespace

bool test_hooks_armed() {
  const Hooks& h = hooks();
  return h.kill.n > 0 || h.stop.n > 0;
}

void test_hook(std::string_view event) {
  Hooks& h = hooks();
  if (h.kill.n == 0 && h.stop.n == 0) return;
  long count = 0;
  {
    std::lock_guard lock(h.mutex);
    auto it = h.counts.find(event);
    if (it == h.counts.end()) it = h.counts.emplace(std::string(event), 0).first;
    count = ++it->second;
  }
  if (h.kill.n > 0 && event == h.kill.event && count == h.kill.n) ::kill(::getpid(), SIGKILL);
  if (h.stop.n > 0 && event == h.stop.event && count == h.stop.n) ::kill(::getpid(), SIGSTOP);
}

}  // namespace specmoe::exp
