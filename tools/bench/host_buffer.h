// Page-aligned, pre-faulted host memory for benchmarks (first-touch page
// faults would otherwise be measured as copy time).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace isometry::bench {

class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes, int fill = 1)
      : bytes_(bytes),
        data_(static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {
    if (!data_) {
      std::abort();
    }
    std::memset(data_.get(), fill, bytes);
  }
  std::byte* data() const { return data_.get(); }
  size_t size() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t bytes_;
  std::unique_ptr<std::byte, Free> data_;
};

}  // namespace isometry::bench
