#include "channels/disk/staging.h"

#include <iterator>
#include <utility>

#include "channels/disk/direct_io.h"

namespace isometry::disk {

Result<StagingMemory> StagingMemory::Map(uint64_t bytes) {
  ISO_ASSIGN_OR_RETURN(HostPages pages, HostPages::Map(bytes, /*populate=*/true));
  return StagingMemory(std::move(pages));
}

std::optional<uint64_t> StagingMemory::Take(uint64_t bytes) {
  bytes = AlignUp(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const uint64_t off = it->first, left = it->second - bytes;
    free_.erase(it);
    if (left) free_[off + bytes] = left;
    return off;
  }
  return std::nullopt;
}

void StagingMemory::GiveBack(uint64_t offset, uint64_t bytes) {
  bytes = AlignUp(bytes);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_[offset] = bytes;
}

}  // namespace isometry::disk
