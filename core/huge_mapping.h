// Shared mappings of a memory file (memfd) that can take huge pages.
//
// A huge page maps only where the virtual address and the file offset are
// both 2 MiB-aligned; mmap(nullptr) places a shared mapping at any page
// boundary. On hosts that walk page tables expensively (a VM with shadow
// paging), 4 KiB-page buffers copy at erratic speeds and huge-page ones
// steadily (docs/benchmarks/design-measurements.md, "Pages"): 2 MiB pages
// are what keeps a pool's first copy at the speed of a repeated one.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace isometry {

inline constexpr uint64_t kHugePageBytes = 2ull << 20;

// mmap(nullptr, length, PROT_READ | PROT_WRITE, flags, fd, 0), at a 2 MiB-
// aligned address when `length` is at least 2 MiB: `fd` -1 with
// MAP_PRIVATE | MAP_ANONYMOUS for private memory. Returns MAP_FAILED with
// errno set on failure, as mmap.
void* MapHugeAligned(uint64_t length, int flags, int fd = -1);

// The same for `length` bytes of memory file `fd`, MAP_SHARED |
// `extra_flags` (MAP_POPULATE).
inline void* MapSharedAligned(int fd, uint64_t length, int extra_flags = 0) {
  return MapHugeAligned(length, MAP_SHARED | extra_flags, fd);
}

// Asks the kernel to back the 2 MiB-aligned stretches of [p, p + length)
// with huge pages now (MADV_COLLAPSE, Linux 6.1; a stretch needs one page
// present, and for a memory file the kernel fills its holes with zeros),
// whatever transparent_hugepage/shmem_enabled says: Debian's default
// "never" otherwise leaves a memfd in 4 KiB pages. Best effort: an older
// kernel, a fragmented memory or a range that cannot collapse keeps its
// pages, and the return value says how many bytes are now huge (0 when
// any stretch failed).
uint64_t CollapseToHugePages(std::byte* p, uint64_t length);

// munmap(p, length), with the range made inaccessible first
// (mprotect PROT_NONE). On a host with shadow page tables, a plain munmap
// of a large populated range made the host drop its entries for the rest
// of the process too, so every other region paid its first accesses again;
// the mprotect first keeps that to the range itself
// (docs/benchmarks/design-measurements.md, "Pages"). Elsewhere it costs
// one page-table walk of the range. For large mappings; `p` may be null.
void Unmap(void* p, uint64_t length);

}  // namespace isometry
