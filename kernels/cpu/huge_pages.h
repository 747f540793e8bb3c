// Host memory on 2 MiB pages where the kernel grants them: for what is streamed whole on every
// token (packed weights) and for the read-bandwidth measurement that is their ceiling.
//
// Why: with 4 KiB pages a 1 GB weight stream misses the TLB on every page (the second-level TLB
// of a Zen 4 core covers 12 MB of 4 KiB pages), in a virtual machine each miss is a two-level
// page walk, and the hardware prefetchers stop at page boundaries; 2 MiB pages remove all three.
// Linux gives transparent huge pages to a range advised with MADV_HUGEPAGE when its setting is
// "madvise" or "always"; elsewhere the advice is ignored and the memory is ordinary.
#pragma once
#include <cstddef>
#include <memory>

namespace specmoe::kernels::cpu {

// `bytes` bytes (rounded up to 2 MiB), 2 MiB aligned, advised for huge pages, not initialised.
// Throws Error(Runtime) when the allocation fails.
std::shared_ptr<void> allocate_huge(size_t bytes);

}  // namespace specmoe::kernels::cpu
