// StepTimer: the decoding loops' one timing helper. A scoped timer adds the seconds from its
// construction to its end into up to two accumulators; given a backend's memory it first waits for
// the work queued there, so that a device forward's time is counted as the forward's and not as
// whatever next waits for it. seconds() reads the elapsed time without stopping.
#pragma once
#include <chrono>

#include "core/backend.h"

namespace specmoe::verify {

class StepTimer {
 public:
  explicit StepTimer(double* seconds = nullptr, core::Memory* sync = nullptr, double* also = nullptr)
      : start_(Clock::now()), seconds_(seconds), also_(also), sync_(sync) {}
  ~StepTimer() {
    if (sync_) sync_->synchronize();
    const double s = this->seconds();
    if (seconds_) *seconds_ += s;
    if (also_) *also_ += s;
  }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  double* seconds_;
  double* also_;
  core::Memory* sync_;
};

}  // namespace specmoe::verify
