// ThreadPool: persistent workers that sleep on a condition variable between jobs. Workers and
// the caller pull fixed-size chunks from an atomic counter (load balancing on a busy machine);
// callers guarantee each item's result does not depend on the thread that computes it.
#include <algorithm>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {
// Set while a thread runs chunks of some pool's job: nested parallel_for calls then run
// serially instead of waiting on workers that are busy with the outer job.
thread_local bool t_inside_job = false;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(n_threads - 1);
  for (int i = 0; i + 1 < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks() {
  const bool was_inside = t_inside_job;
  t_inside_job = true;
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) break;
    const int64_t end = std::min(n_, begin + grain_);
    try {
      (*job_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);  // stop handing out work
    }
  }
  t_inside_job = was_inside;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--running_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  std::unique_lock<std::mutex> call_lock(call_mu_, std::defer_lock);
  if (workers_.empty() || n <= grain || t_inside_job || !call_lock.try_lock()) {
    for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    running_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  run_chunks();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return running_ == 0; });
    job_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace specmoe::kernels::cpu
