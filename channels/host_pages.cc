#include "channels/host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "core/strings.h"

namespace isometry {

namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

uint64_t PageBytes() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

namespace {

// The bracketed word of a sysfs setting such as "always [madvise] never".
std::string BracketedSetting(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "unavailable";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return line;
  return line.substr(open + 1, close - open - 1);
}

}  // namespace

std::string TransparentHugePageMode() {
  return BracketedSetting("/sys/kernel/mm/transparent_hugepage/enabled");
}

std::string ShmemHugePageMode() {
  return BracketedSetting("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
}

uint64_t HostPagesLength(uint64_t bytes) {
  bytes = bytes ? bytes : 1;
  return bytes >= kHugePageBytes ? RoundUp(bytes, kHugePageBytes) : RoundUp(bytes, PageBytes());
}

void UnmapHostPages(std::byte* base, uint64_t length) { Unmap(base, length); }

Result<HostPages> HostPages::Map(uint64_t bytes, bool populate) {
  const uint64_t length = HostPagesLength(bytes);
  const bool huge = length >= kHugePageBytes;
  void* raw = MapHugeAligned(length, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw == MAP_FAILED) {
    return ResourceExhausted("cannot map ", bytes, " bytes of host memory: ", ErrnoString(errno));
  }
  auto* base = static_cast<std::byte*>(raw);
  // A hint: EINVAL where THP is compiled out; the pages are then small.
  if (huge) (void)::madvise(base, length, MADV_HUGEPAGE);
  HostPages pages(base, length);
  if (populate) {
    // After the advice, so the faults take huge pages (MAP_POPULATE would
    // fault before madvise could run).
    for (uint64_t off = 0; off < length; off += PageBytes()) {
      *reinterpret_cast<volatile char*>(base + off) = 0;
    }
  }
  return pages;
}

HostPages& HostPages::operator=(HostPages&& o) noexcept {
  if (this != &o) {
    Unmap();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void HostPages::Unmap() {
  UnmapHostPages(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

}  // namespace isometry
