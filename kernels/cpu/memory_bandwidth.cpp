// Streaming-read bandwidth of the host: what a memory-bound decode can reach at most. Each pass
// sums a buffer many times the size of the last-level cache, in 1 MiB chunks handed out over the
// pool's threads (so every thread streams, and a thread the scheduler delays costs only its
// share), and reports bytes / seconds of the whole pass. The buffer is on huge pages where the
// system grants them, as the CPU backend's packed weights are (huge_pages.h): the ceiling of a
// decode is measured on the memory it reads.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {

constexpr size_t kChunk = size_t{1} << 20;

// Sum of a chunk as 64-bit words in 8 independent lanes: the compiler vectorises it into wide
// loads with a few adds per cache line, far below what one core can issue, so the loop waits on
// memory only.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) s[l] += p[i + l];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

}  // namespace

std::vector<double> read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int passes) {
  if (passes <= 0) return {};
  bytes = std::max(kChunk, bytes / kChunk * kChunk);
  const std::shared_ptr<void> owner = allocate_huge(bytes);
  void* raw = owner.get();
  // Written once so every page is mapped before the timed passes (the first touch of a page is a
  // page fault, not a memory read).
  std::memset(raw, 1, bytes);
  const auto* words = static_cast<const uint64_t*>(raw);
  const int64_t chunks = static_cast<int64_t>(bytes / kChunk);
  constexpr size_t kWords = kChunk / sizeof(uint64_t);
  std::vector<double> gbs;
  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      uint64_t s = 0;
      for (int64_t c = b; c < e; ++c) s += sum_words(words + c * kWords, kWords);
      sink.fetch_add(s, std::memory_order_relaxed);  // keeps the sums alive
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbs.push_back(s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0);
  }
  return gbs;
}

}  // namespace specmoe::kernels::cpu
