#include "core/huge_mapping.h"

#include <cerrno>

// Linux 6.1; older headers lack it, older kernels answer EINVAL.
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace isometry {

void* MapHugeAligned(uint64_t length, int flags, int fd) {
  const int prot = PROT_READ | PROT_WRITE;
  if (length < kHugePageBytes) return mmap(nullptr, length, prot, flags, fd, 0);
  // Reserve length + 2 MiB of address space, place the mapping at the
  // first aligned address inside it, and give back what is left on either
  // side (mmap only promises page alignment).
  const uint64_t reserved = length + kHugePageBytes;
  void* r = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return r;
  auto* base = static_cast<std::byte*>(r);
  const uint64_t at = reinterpret_cast<uintptr_t>(base);
  auto* aligned = base + ((kHugePageBytes - at % kHugePageBytes) % kHugePageBytes);
  void* p = mmap(aligned, length, prot, flags | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    munmap(base, reserved);
    errno = e;
    return p;
  }
  if (aligned > base) munmap(base, static_cast<size_t>(aligned - base));
  std::byte* const end = aligned + length;
  if (end < base + reserved) munmap(end, static_cast<size_t>(base + reserved - end));
  return p;
}

uint64_t CollapseToHugePages(std::byte* p, uint64_t length) {
  const uint64_t at = reinterpret_cast<uintptr_t>(p);
  const uint64_t first = (at + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uint64_t last = (at + length) / kHugePageBytes * kHugePageBytes;
  if (last <= first) return 0;
  if (madvise(p + (first - at), last - first, MADV_COLLAPSE) != 0) return 0;
  return last - first;
}

void Unmap(void* p, uint64_t length) {
  if (!p) return;
  (void)mprotect(p, length, PROT_NONE);
  munmap(p, length);
}

}  // namespace isometry
