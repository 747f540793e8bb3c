// Rows over host vectors, for tests that build distributions by hand: the rows are packed into
// one host buffer and viewed on a one-thread CPU backend (core::Rows needs the backend that holds
// them, for argmax and copies).
#pragma once
#include <memory>
#include <vector>

#include "core/backend.h"

namespace specmoe::testing {

inline core::Backend& test_cpu_backend() {
  static const std::shared_ptr<core::Backend> backend = core::make_backend(Device{}, 1);
  return *backend;
}

class HostRows {
 public:
  HostRows() = default;
  HostRows(const std::vector<std::vector<float>>& rows) {  // NOLINT: implicit, as the rows it packs
    for (const auto& r : rows) push_back(r);
  }
  void push_back(const std::vector<float>& row) {
    cols_ = static_cast<int64_t>(row.size());
    data_.insert(data_.end(), row.begin(), row.end());
    ++rows_;
  }
  void clear() {
    data_.clear();
    rows_ = 0;
  }
  core::Rows view() const { return {data_.data(), rows_, cols_, &test_cpu_backend()}; }
  operator core::Rows() const { return view(); }  // NOLINT

 private:
  std::vector<float> data_;
  int64_t rows_ = 0, cols_ = 0;
};

}  // namespace specmoe::testing
