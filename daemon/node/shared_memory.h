// Shared memory the daemon hands to clients: a sealed memfd mapped here.
//
// The memfd is sealed against shrinking and growing, so a client holding
// the fd cannot truncate it under the daemon (which would turn the
// daemon's next access into SIGBUS).
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
  // used_hugetlb() false.
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

 private:
  UniqueFd fd_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  bool hugetlb_ = false;
};

}  // namespace isometry
