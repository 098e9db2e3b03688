// Shared memory the daemon hands to clients: a sealed memfd mapped here.
//
// The memfd is sealed against shrinking and growing, so a client holding
// the fd cannot truncate it under the daemon (which would turn the
// daemon's next access into SIGBUS).
//
// Its pages are populated when it is made: every page exists (zeroed) in
// the memfd and is mapped in this process's page table before Create
// returns, so no copy into it later takes page faults in the daemon (a
// first copy into fresh 4 KiB-page memory ran several times slower than
// the next, issue #21; docs/benchmarks/design-measurements.md, "Pages"),
// and a system out of memory fails the allocation instead of a copy. The
// cost moves to Create: about what those faults cost (see
// docs/operations/tuning.md, "Client pools and staging"). Nothing ever
// discards the pages until the memfd is closed by everyone holding it.
//
// The mapping is 2 MiB-aligned and, where the kernel can (MADV_COLLAPSE,
// Linux 6.1), its pages are made huge before the rest is populated,
// whatever transparent_hugepage/shmem_enabled says (core/huge_mapping.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

class SharedMemory {
 public:
  // `bytes` is rounded up to the page size (2 MiB with hugetlb). With
  // hugetlb requested but unavailable, falls back to normal pages and sets
  // used_hugetlb() false. Fails with RESOURCE_EXHAUSTED when the pages
  // cannot be had.
  static Result<SharedMemory> Create(const std::string& name, uint64_t bytes, bool hugetlb);

  SharedMemory() = default;
  SharedMemory(SharedMemory&& o) noexcept;
  SharedMemory& operator=(SharedMemory&& o) noexcept;
  ~SharedMemory();

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }  // usable bytes (as asked)
  uint64_t mapped_size() const { return mapped_; }
  int fd() const { return fd_.get(); }
  bool used_hugetlb() const { return hugetlb_; }
  // Bytes backed by 2 MiB pages (hugetlb, or made huge by Create).
  uint64_t huge_bytes() const { return huge_bytes_; }
  // Seconds Create spent populating the pages, making them huge included
  // (for log lines).
  double populate_seconds() const { return populate_seconds_; }

 private:
  UniqueFd fd_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  bool hugetlb_ = false;
  uint64_t huge_bytes_ = 0;
  double populate_seconds_ = 0;
};

}  // namespace isometry
