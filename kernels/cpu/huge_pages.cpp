// allocate_huge (huge_pages.h).
#include "kernels/cpu/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "base/error.h"

namespace specmoe::kernels::cpu {

namespace {
// Set once an Auto allocation has seen huge pages fault in slowly: the machine's state, so every
// later Auto allocation of the process (the next matrix, a draft model's weights) skips them
// without probing again.
std::atomic<bool> g_slow_huge_pages{false};
}  // namespace

bool parse_huge_pages(std::string_view name, HugePages& out) {
  if (name == "auto") out = HugePages::Auto;
  else if (name == "on") out = HugePages::On;
  else if (name == "off") out = HugePages::Off;
  else return false;
  return true;
}

const char* huge_pages_name(HugePages p) {
  switch (p) {
    case HugePages::Auto: return "auto";
    case HugePages::On: return "on";
    default: return "off";
  }
}

std::shared_ptr<void> allocate_huge(size_t bytes, HugePages policy) {
  if (const char* env = std::getenv("SPECMOE_HUGE_PAGES"); env && *env && !parse_huge_pages(env, policy))
    throw_error(ErrorKind::InvalidArgument, "SPECMOE_HUGE_PAGES={}: must be auto, on or off", env);
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr)
    throw_error(ErrorKind::Runtime, "host memory: allocating {:.1f} MiB failed", static_cast<double>(bytes) / (1 << 20));
  if (policy == HugePages::Auto && g_slow_huge_pages.load(std::memory_order_relaxed)) policy = HugePages::Off;
  // The advice is only advice: a kernel without transparent huge pages ignores it.
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  auto* base = static_cast<char*>(p);
  if (policy == HugePages::Off) {
    madvise(base, rounded, MADV_NOHUGEPAGE);
  } else {
    madvise(base, rounded, MADV_HUGEPAGE);
    if (policy == HugePages::Auto) {
      // One written byte faults in a whole huge page (or one 4 KiB page where none is granted,
      // which is quick and leaves the rest of the 2 MiB to the caller's writes).
      constexpr size_t kGroup = 8;
      using Clock = std::chrono::steady_clock;
      size_t off = 0;
      while (off < rounded && !g_slow_huge_pages.load(std::memory_order_relaxed)) {
        const size_t end = std::min(rounded, off + kGroup * kHugePage);
        const auto t0 = Clock::now();
        for (size_t q = off; q < end; q += kHugePage) *reinterpret_cast<volatile char*>(base + q) = 0;
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (ms > kSlowHugePageMs * static_cast<double>((end - off) / kHugePage))
          g_slow_huge_pages.store(true, std::memory_order_relaxed);
        off = end;
      }
      if (off < rounded) madvise(base + off, rounded - off, MADV_NOHUGEPAGE);
    }
  }
#endif
  return std::shared_ptr<void>(p, std::free);
}

}  // namespace specmoe::kernels::cpu
