#include "daemon/runtime/staging_pool.h"

#include <algorithm>
#include <cstdlib>

namespace isometry {

namespace {
constexpr uint64_t kAlign = 4096;
uint64_t RoundUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Result<std::byte*> StagingPool::Take(uint64_t bytes) {
  if (!Fits(bytes)) {
    return ResourceExhausted("staging memory ", ToString(id_), ": ", bytes, " bytes requested, ",
                             budget_ - used_, " of ", budget_, " free");
  }
  void* p = std::aligned_alloc(kAlign, RoundUp(std::max<uint64_t>(bytes, 1)));
  if (!p) return ResourceExhausted("staging memory ", ToString(id_), ": out of host memory");
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  largest_ = std::max(largest_, bytes);
  return static_cast<std::byte*>(p);
}

void StagingPool::Give(std::byte* block, uint64_t bytes) {
  std::free(block);
  used_ -= bytes;
}

}  // namespace isometry
