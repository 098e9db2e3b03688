// Host memory that devices move data from and to: intermediate ring
// buffers, disk staging, network bounce buffers.
//
// Why not malloc: an O_DIRECT request is handed to the block device as one
// segment per physically contiguous piece of its buffer. malloc'ed memory
// is scattered 4 KiB pages, so a 512 KiB write is 128 segments, and a
// virtualized disk (virtio-blk) pays per segment: AOS->SOA into a file
// through a 4 KiB-page ring took about twice as long as through this memory
// (docs/benchmarks/design-measurements.md, "Disk").
// Blocks of 2 MiB or more are therefore 2 MiB-aligned and advised for
// transparent huge pages (MADV_HUGEPAGE). Where THP is off
// (/sys/kernel/mm/transparent_hugepage/enabled = never) the advice is
// ignored and the block is plain pages: slower on such disks, not wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/huge_mapping.h"
#include "core/status.h"

namespace isometry {

// A private anonymous mapping of at least `bytes` (page-aligned; 2 MiB-
// aligned and huge-page advised from 2 MiB up). Move-only; unmaps itself.
class HostPages {
 public:
  // `populate`: fault every page in now (what is pinned or registered
  // right away wants this), else on first touch. Fails with
  // RESOURCE_EXHAUSTED when the system has no memory to map.
  static Result<HostPages> Map(uint64_t bytes, bool populate = false);

  HostPages() = default;
  HostPages(HostPages&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  HostPages& operator=(HostPages&& o) noexcept;
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;
  ~HostPages() { Unmap(); }

  std::byte* data() const { return base_; }
  // The mapped length (`bytes` rounded up to the page or huge page).
  uint64_t size() const { return bytes_; }
  // Hands the mapping over: the caller unmaps it with UnmapHostPages(data,
  // size).
  std::byte* release() {
    bytes_ = 0;
    return std::exchange(base_, nullptr);
  }

 private:
  HostPages(std::byte* base, uint64_t bytes) : base_(base), bytes_(bytes) {}
  void Unmap();

  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0;
};

// The kernel's THP setting (/sys/kernel/mm/transparent_hugepage/enabled):
// "always", "madvise" (HostPages get huge pages in both) or "never"; or
// "unavailable" where the kernel has no THP. For log lines.
std::string TransparentHugePageMode();
// The same for shared memory (.../transparent_hugepage/shmem_enabled): the
// daemon's client pools (memfd) get huge pages under "always", "advise"
// and "within_size", never under the kernel's default "never".
std::string ShmemHugePageMode();

// The length HostPages::Map(bytes) maps.
uint64_t HostPagesLength(uint64_t bytes);
void UnmapHostPages(std::byte* base, uint64_t length);

}  // namespace isometry
