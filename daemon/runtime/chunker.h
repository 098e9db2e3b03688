// Splits a transfer's box into the chunk sequence every XD of the transfer
// shares (DESIGN.md, "Chunked pipelines").
//
// Chunks are equal tiles of the box (edge tiles may be smaller), cut along
// the source layout's outermost dimensions first so each chunk is as
// contiguous as possible in the source, with extents rounded to multiples
// of the dimension's blocking factors so intermediate slots carry little
// padding. A chunk linearized in any intermediate layout fits one slot.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/box.h"
#include "core/field_space.h"
#include "core/layout.h"
#include "core/status.h"
#include "planner/topology.h"

namespace isometry {

class ChunkGrid {
 public:
  // `layouts` are the layouts of every path node, source first;
  // `intermediate` marks those that are ring buffers. A chunk holds about
  // `target_bytes` of entries, and a chunk in an intermediate layout never
  // exceeds `slot_limit` bytes. Fails when even one entry does not fit.
  static Result<ChunkGrid> Make(const Box& box, const FieldSpace& fields,
                                const std::vector<Layout>& layouts,
                                const std::vector<bool>& intermediate, uint64_t target_bytes,
                                uint64_t slot_limit);

  uint64_t count() const { return count_; }
  Box chunk(uint64_t k) const;
  // Extents of a full (non-edge) chunk.
  Box full_chunk() const;
  // Bytes one slot needs to hold any chunk in `layout`.
  uint64_t SlotBytes(const Layout& layout, uint64_t field_bytes) const;

 private:
  Box box_;
  std::array<int64_t, kMaxDims> ext_{};
  std::array<int64_t, kMaxDims> tiles_{};
  std::array<int, kMaxDims> order_{};  // dims, outermost first
  uint64_t count_ = 0;
};

// The grid of a transfer along `path`: every path node's layout, the inner
// nodes being ring buffers.
Result<ChunkGrid> GridAlong(const Path& path, const Box& box, const FieldSpace& fields,
                            uint64_t target_bytes, uint64_t slot_limit);

}  // namespace isometry
