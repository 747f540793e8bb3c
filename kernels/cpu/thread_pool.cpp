// ThreadPool: persistent workers that spin briefly, then sleep on a condition variable between
// jobs. Workers and the caller pull fixed-size chunks from an atomic counter (load balancing on a
// busy machine); callers guarantee each item's result does not depend on the thread that computes
// it. A forward pass issues ~40 small jobs per token, so the hand-off must cost microseconds:
// no allocation per call (the template parallel_for), no wake-up system call while workers still
// spin, and the caller never waits for a worker that did not join the job.
#include <algorithm>

#include "kernels/cpu/ops.h"

namespace specmoe::kernels::cpu {

namespace {
// Set while a thread runs chunks of some pool's job: nested parallel_for calls then run
// serially instead of waiting on workers that are busy with the outer job.
thread_local bool t_inside_job = false;

// Polls before a worker sleeps (or the caller sleeps waiting for workers): ~50 us with pause's
// ~40-140 cycle latency, longer than the gap between two ops of a forward, much shorter than a
// scheduler time slice.
constexpr int kSpinPolls = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(n_threads - 1);
  for (int i = 0; i + 1 < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
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
      fn_(ctx_, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);  // stop handing out work
    }
  }
  t_inside_job = was_inside;
}

void ThreadPool::leave_job() {
  // The last worker out of a closed job wakes the caller if it went to sleep.
  if (state_.fetch_sub(1, std::memory_order_acq_rel) == (kClosed | 1)) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_done_.notify_one();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = generation_.load();
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinPolls && !stop_.load(std::memory_order_relaxed); ++i) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst, paired with the publisher's generation_ bump
      cv_start_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      g = generation_.load();
    }
    if (stop_.load()) return;
    seen = g;
    // Join whatever job is open now (it may be a later one than generation g; that is fine, the
    // job's fields are read only after joining). A closed job is left at once.
    if (state_.fetch_add(1, std::memory_order_acq_rel) & kClosed) {
      leave_job();
      continue;
    }
    run_chunks();
    leave_job();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  run_job(n, grain, const_cast<void*>(static_cast<const void*>(&fn)), [](void* ctx, int64_t b, int64_t e) {
    (*static_cast<const std::function<void(int64_t, int64_t)>*>(ctx))(b, e);
  });
}

void ThreadPool::run_job(int64_t n, int64_t grain, void* ctx, ChunkFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  std::unique_lock<std::mutex> call_lock(call_mu_, std::defer_lock);
  if (workers_.empty() || n <= grain || t_inside_job || !call_lock.try_lock()) {
    for (int64_t b = 0; b < n; b += grain) fn(ctx, b, std::min(n, b + grain));
    return;
  }
  // Publish. Every worker of the previous job has left (checked before it returned); a worker
  // may still be passing through the closed state for a moment, so open with a CAS.
  ctx_ = ctx;
  fn_ = fn;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  for (int64_t closed = kClosed; !state_.compare_exchange_weak(closed, 0, std::memory_order_acq_rel);
       closed = kClosed)
    cpu_relax();
  generation_.fetch_add(1);  // seq_cst: a worker about to sleep either sees it or is counted below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_start_.notify_all();
  }
  run_chunks();
  // Close: workers arriving from now on leave at once; wait for those inside.
  if ((state_.fetch_or(kClosed, std::memory_order_acq_rel) & ~kClosed) != 0) {
    bool done = false;
    for (int i = 0; i < kSpinPolls && !done; ++i) {
      cpu_relax();
      done = state_.load(std::memory_order_acquire) == kClosed;
    }
    if (!done) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_done_.wait(lock, [&] { return state_.load(std::memory_order_acquire) == kClosed; });
    }
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace specmoe::kernels::cpu
