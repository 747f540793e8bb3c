// A small fork-join pool: run(n, fn) calls fn(item, worker) for every item in [0, n) on the
// caller plus size()-1 background threads, and returns when all are done. Items are handed out
// dynamically, so callers that want thread-count-independent results must make each item write
// only its own outputs in a fixed order (the MoE layer does). One pool can serve many layers;
// run() must not be called concurrently on the same pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specmoe::moe {

class ThreadPool {
 public:
  // n_threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Rethrows the first exception an item threw (after every worker has stopped).
  void run(int64_t n_items, const std::function<void(int64_t item, int worker)>& fn);

 private:
  void worker_loop(int worker);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int active_ = 0;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_items_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace specmoe::moe
