// The disk channel's staging memory and how requests take and give back
// pieces of it.
//
// One mapping per channel, populated at creation (huge pages where the
// kernel has them: few segments per O_DIRECT request) and registered with
// the channel's ring as fixed buffer 0 where the kernel allows it. Requests
// take 4 KiB-aligned pieces: a bounce buffer for an aligned file range whose
// host memory is not aligned, or the whole file range of a small-run
// program. A piece stays taken until the I/O or request that took it
// finishes; a request that finds no piece waits for one to come back.
//
// Thread safety: none. The channel's worker thread alone takes and gives
// back pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "channels/host_pages.h"
#include "core/status.h"

namespace isometry::disk {

class StagingMemory {
 public:
  // Maps and populates at least `bytes`; fails like HostPages::Map.
  static Result<StagingMemory> Map(uint64_t bytes);

  std::byte* data() const { return pages_.data(); }
  uint64_t size() const { return pages_.size(); }

  // The offset in data() of a free piece of `bytes` rounded up to 4 KiB
  // (first fit), or nullopt while no free range is that large.
  std::optional<uint64_t> Take(uint64_t bytes);
  // Gives back the piece at `offset` that Take(bytes) returned.
  void GiveBack(uint64_t offset, uint64_t bytes);

 private:
  explicit StagingMemory(HostPages pages) : pages_(std::move(pages)) { free_[0] = pages_.size(); }

  HostPages pages_;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, coalesced
};

}  // namespace isometry::disk
