// allocate_huge (huge_pages.h).
#include "kernels/cpu/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "base/error.h"

namespace specmoe::kernels::cpu {

std::shared_ptr<void> allocate_huge(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr)
    throw_error(ErrorKind::Runtime, "host memory: allocating {:.1f} MiB failed", static_cast<double>(bytes) / (1 << 20));
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a kernel without transparent huge pages ignores it
#endif
  return std::shared_ptr<void>(p, std::free);
}

}  // namespace specmoe::kernels::cpu
