#include "daemon/node/shared_memory.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "core/huge_mapping.h"
#include "core/strings.h"

// Linux 5.14; older headers lack it, older kernels answer EINVAL.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace isometry {

namespace {

Result<SharedMemory> Fail(const std::string& what, const std::string& name) {
  return ResourceExhausted(what, " for shared memory '", name, "': ", ErrnoString(errno));
}

// Faults every page of a fresh shared mapping in for writing: the memfd
// allocates (and zeroes) each page and this mapping's page table points at
// it. Through the mapping rather than fallocate on the fd, so that pages
// follow the mapping's MADV_HUGEPAGE advice. Returns 0 or an errno.
int PopulateRange(std::byte* p, uint64_t length) {
  if (::madvise(p, length, MADV_POPULATE_WRITE) == 0) return 0;
  if (errno != EINVAL) return errno;  // ENOMEM, EFAULT: no pages to be had
  // Before 5.14: one write per page (the memory is new, so zeros are what
  // it already holds).
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (uint64_t off = 0; off < length; off += page) *reinterpret_cast<volatile char*>(p + off) = 0;
  return 0;
}

// PopulateRange over several threads for large regions: with 4 KiB pages
// the kernel's per-page work dominates, and it divides between cores
// (docs/benchmarks/design-measurements.md, "Pages"). Slices are 2 MiB-aligned
// so huge pages are not split between threads.
int Populate(std::byte* p, uint64_t length) {
  constexpr uint64_t kSlice = 32ull << 20;  // below this a thread costs more than it saves
  constexpr uint64_t kAlign = 2ull << 20;
  const uint64_t cores = std::clamp<uint64_t>(std::thread::hardware_concurrency(), 1, 8);
  const uint64_t threads = std::min<uint64_t>(cores, length / kSlice);
  if (threads <= 1) return PopulateRange(p, length);
  const uint64_t step = (length / threads + kAlign - 1) / kAlign * kAlign;
  std::atomic<int> failed{0};
  std::vector<std::thread> helpers;
  for (uint64_t t = 1; t < threads && t * step < length; ++t) {
    helpers.emplace_back([&, t] {
      const uint64_t off = t * step;
      if (int e = PopulateRange(p + off, std::min(step, length - off))) failed = e;
    });
  }
  if (int e = PopulateRange(p, std::min(step, length))) failed = e;
  for (std::thread& h : helpers) h.join();
  return failed.load();
}

// Writes a zero at the start of each whole 2 MiB of [p, p + length),
// through this mapping: memory Create just made, so zero is what it holds.
void WriteZeroPerHugePage(std::byte* p, uint64_t length) {
  for (uint64_t off = 0; off + kHugePageBytes <= length; off += kHugePageBytes) {
    *reinterpret_cast<volatile char*>(p + off) = 0;
  }
}

}  // namespace

Result<SharedMemory> SharedMemory::Create(const std::string& name, uint64_t bytes, bool hugetlb) {
  SharedMemory m;
  const uint64_t page = hugetlb ? (2ull << 20) : static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (std::max<uint64_t>(bytes, 1) + page - 1) / page * page;
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  UniqueFd fd;
  if (hugetlb) {
    fd.reset(memfd_create(name.c_str(), flags | MFD_HUGETLB | MFD_HUGE_2MB));
    if (fd.valid() && ftruncate(fd.get(), static_cast<off_t>(mapped)) != 0) fd.reset();
    m.hugetlb_ = fd.valid();
  }
  if (!fd.valid()) {
    const uint64_t small = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    m.mapped_ = (std::max<uint64_t>(bytes, 1) + small - 1) / small * small;
    fd.reset(memfd_create(name.c_str(), flags));
    if (!fd.valid()) return Fail("memfd_create", name);
    if (ftruncate(fd.get(), static_cast<off_t>(m.mapped_)) != 0) return Fail("ftruncate", name);
  } else {
    m.mapped_ = mapped;
  }
  m.fd_ = std::move(fd);
  if (fcntl(m.fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Fail("sealing", name);
  }
  // 2 MiB-aligned, so that huge pages can map here.
  void* p = MapSharedAligned(m.fd_.get(), m.mapped_);
  if (p == MAP_FAILED) return Fail("mmap", name);
  // Where shmem THP is allowed (transparent_hugepage/shmem_enabled =
  // advise), pages this process faults in are huge: disk and network DMA
  // then see few, large segments (channels/host_pages.h). A hint; ignored
  // under "never" and for hugetlb memory.
  if (!m.hugetlb_ && m.mapped_ >= kHugePageBytes) (void)::madvise(p, m.mapped_, MADV_HUGEPAGE);
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  const auto t0 = std::chrono::steady_clock::now();
  // Under "never" (Debian's default) a memfd's pages are 4 KiB: made huge
  // here, best effort. One page of each 2 MiB is faulted in and the kernel
  // collapses around it (the rest it fills with zeros), so each huge page
  // is allocated once, not assembled from 512 small ones. In huge pages a
  // first copy into a fresh allocation runs near the speed of the next one,
  // and allocating costs a fraction of what 4 KiB pages cost
  // (docs/benchmarks/design-measurements.md, "Pages").
  if (!m.hugetlb_) {
    WriteZeroPerHugePage(m.data_, m.mapped_);
    m.huge_bytes_ = CollapseToHugePages(m.data_, m.mapped_);
  }
  if (int e = Populate(m.data_, m.mapped_)) {
    errno = e;
    return Fail("populating the pages", name);
  }
  if (m.hugetlb_) m.huge_bytes_ = m.mapped_;
  // One write per huge page through this mapping: a host with shadow page
  // tables builds its entry on the first access from user space, which
  // populating does not make; made here, not in the first copy
  // (docs/benchmarks/design-measurements.md, "Pages"). The memory is fresh,
  // so zero is what it holds.
  WriteZeroPerHugePage(m.data_, m.huge_bytes_);
  m.populate_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

SharedMemory::SharedMemory(SharedMemory&& o) noexcept
    : fd_(std::move(o.fd_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)),
      hugetlb_(o.hugetlb_),
      huge_bytes_(o.huge_bytes_),
      populate_seconds_(o.populate_seconds_) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& o) noexcept {
  if (this != &o) {
    Unmap(data_, mapped_);
    fd_ = std::move(o.fd_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    hugetlb_ = o.hugetlb_;
    huge_bytes_ = o.huge_bytes_;
    populate_seconds_ = o.populate_seconds_;
  }
  return *this;
}

SharedMemory::~SharedMemory() { Unmap(data_, mapped_); }

}  // namespace isometry
