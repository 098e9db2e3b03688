// Pre-faulted host memory for benchmarks (first-touch page faults would
// otherwise be measured as copy time), in huge pages as the daemon's own
// memory is (client pools, rings, calibration areas): where the host walks
// page tables expensively, 4 KiB-page buffers copy at erratic speeds, for
// Isometry and the baselines alike (docs/benchmarks/design-measurements.md,
// "Pages").
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
