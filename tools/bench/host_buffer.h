// Pre-faulted host memory for benchmarks (first-touch page faults would
// otherwise be measured as copy time), in huge pages as the daemon's own
// memory is (client pools, rings, calibration areas): on the development
// VM, whose host walks page tables expensively, a 4 KiB-page buffer of
// 1 GiB copied at 0.6-20 GB/s from one pass to the next and a huge-page
// one at 14-21, for Isometry and the baselines alike.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "channels/host_pages.h"

namespace isometry::bench {

class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes, int fill = 1) : bytes_(bytes) {
    auto pages = HostPages::Map(bytes);
    if (!pages.ok()) {
      std::abort();
    }
    pages_ = *std::move(pages);
    std::memset(pages_.data(), fill, bytes);
  }
  std::byte* data() const { return pages_.data(); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  HostPages pages_;
};

}  // namespace isometry::bench
