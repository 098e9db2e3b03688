#include "daemon/runtime/staging_pool.h"

#include <algorithm>

#include "channels/host_pages.h"

namespace isometry {

Result<std::byte*> StagingPool::Take(uint64_t bytes) {
  if (!Fits(bytes)) {
    return ResourceExhausted("staging memory ", ToString(id_), ": ", bytes, " bytes requested, ",
                             budget_ - used_, " of ", budget_, " free");
  }
  // Huge-page advised (channels/host_pages.h): disks and NICs move ring
  // slots in few physically contiguous segments.
  Result<HostPages> pages = HostPages::Map(bytes);
  if (!pages.ok()) {
    return ResourceExhausted("staging memory ", ToString(id_), ": ", pages.status().message());
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  largest_ = std::max(largest_, bytes);
  return pages->release();
}

void StagingPool::Give(std::byte* block, uint64_t bytes) {
  UnmapHostPages(block, HostPagesLength(bytes));
  used_ -= bytes;
}

}  // namespace isometry
