// Host memory on 2 MiB pages where the kernel grants them: for what is streamed whole on every
// token (packed weights) and for the read-bandwidth measurement that is their ceiling.
//
// Why: with 4 KiB pages a 1 GB weight stream misses the TLB on every page (the second-level TLB
// of a Zen 4 core covers 12 MB of 4 KiB pages), in a virtual machine each miss is a two-level
// page walk, and the hardware prefetchers stop at page boundaries; 2 MiB pages remove all three.
// Linux gives transparent huge pages to a range advised with MADV_HUGEPAGE when its setting is
// "madvise" or "always"; elsewhere the advice is ignored and the memory is ordinary.
//
// What they cost: the first touch of a fresh huge page. On bare metal that is zeroing 2 MiB
// (~0.1-0.2 ms); in a virtual machine whose free memory has been handed back to the host (free
// page reporting reports exactly the free 2 MiB blocks), each one is also faulted in by the host:
// on the development VM (2026-12-05, 1 GiB touched once, /tmp test after a few seconds idle)
// 4.5-6.0 s on huge pages against 0.39-0.41 s on 4 KiB pages, and 0.10 s when huge pages freed a
// moment before are reused. Decode of the 1.5B Q4_K_M reads them 7% faster, so a long run gains
// and a one-shot command pays seconds: HugePages::Auto takes huge pages while they come cheaply.
#pragma once
#include <cstddef>
#include <memory>
#include <string_view>

namespace specmoe::kernels::cpu {

enum class HugePages {
  Auto,  // advise huge pages and fault them in 8 at a time; once a group takes longer than
         // kSlowHugePageMs per page, advise the rest of the range against them, and every later
         // Auto allocation of the process too (the probe costs at most one slow group)
  On,    // advise huge pages for the whole range
  Off,   // advise against them (4 KiB pages even where transparent huge pages are "always")
};
// A first touch slower than this per 2 MiB page costs more than filling it with 4 KiB pages (0.7-0.8
// ms on the development VM; the slow huge pages there took 5-18 ms, bare metal ~0.1-0.2).
constexpr double kSlowHugePageMs = 1.0;

// "auto", "on", "off" (and the names these return); false for anything else.
bool parse_huge_pages(std::string_view name, HugePages& out);
const char* huge_pages_name(HugePages p);

// `bytes` bytes (rounded up to 2 MiB), 2 MiB aligned, on pages as `policy` says, not initialised
// (Auto has touched one byte of some pages). The environment variable SPECMOE_HUGE_PAGES (auto,
// on, off) overrides `policy` when set. Throws Error(Runtime) when the allocation fails and
// Error(InvalidArgument) for another value of the variable.
std::shared_ptr<void> allocate_huge(size_t bytes, HugePages policy = HugePages::On);

}  // namespace specmoe::kernels::cpu
