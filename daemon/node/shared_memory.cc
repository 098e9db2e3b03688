#include "daemon/node/shared_memory.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace isometry {

namespace {

Result<SharedMemory> Fail(const std::string& what, const std::string& name) {
  return ResourceExhausted(what, " for shared memory '", name, "': ", std::strerror(errno));
}

}  // namespace

Result<SharedMemory> SharedMemory::Create(const std::string& name, uint64_t bytes, bool hugetlb) {
  SharedMemory m;
  const uint64_t page = hugetlb ? (2ull << 20) : static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (std::max<uint64_t>(bytes, 1) + page - 1) / page * page;
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  int fd = -1;
  if (hugetlb) {
    fd = memfd_create(name.c_str(), flags | MFD_HUGETLB | MFD_HUGE_2MB);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
      ::close(fd);
      fd = -1;
    }
    m.hugetlb_ = fd >= 0;
  }
  if (fd < 0) {
    const uint64_t small = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    m.mapped_ = (std::max<uint64_t>(bytes, 1) + small - 1) / small * small;
    fd = memfd_create(name.c_str(), flags);
    if (fd < 0) return Fail("memfd_create", name);
    m.fd_.reset(fd);
    if (ftruncate(fd, static_cast<off_t>(m.mapped_)) != 0) return Fail("ftruncate", name);
  } else {
    m.fd_.reset(fd);
    m.mapped_ = mapped;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Fail("sealing", name);
  }
  void* p = mmap(nullptr, m.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Fail("mmap", name);
  // Where shmem THP is allowed (transparent_hugepage/shmem_enabled =
  // advise), pages this process faults in are huge: disk and network DMA
  // then see few, large segments (channels/host_pages.h). A hint; ignored
  // under "never" and for hugetlb memory.
  if (!m.hugetlb_ && m.mapped_ >= (2ull << 20)) (void)::madvise(p, m.mapped_, MADV_HUGEPAGE);
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  return m;
}

SharedMemory::SharedMemory(SharedMemory&& o) noexcept
    : fd_(std::move(o.fd_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)),
      hugetlb_(o.hugetlb_) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, mapped_);
    fd_ = std::move(o.fd_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    hugetlb_ = o.hugetlb_;
  }
  return *this;
}

SharedMemory::~SharedMemory() {
  if (data_) munmap(data_, mapped_);
}

}  // namespace isometry
