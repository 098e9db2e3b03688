// A plain pack/unpack pipeline between two threads of this process, as a
// reference for datatype copies between two processes: pinned to two CPUs
// and spinning, one thread packs the send type's runs piece by piece into a
// ring of slots (one memcpy a run), the other unpacks each piece into the
// receive type's runs; one message at a time, as a copy is. It is how a
// served read (docs/guides/client-memory.md, "Served reads") and MPI's
// shared-memory send move a datatype, with nothing else on the way: no
// process boundary, no protocol, no sleeping. Where its runs are long
// enough for one memcpy each to be the fastest way (hundreds of bytes and
// up), it is about what the machine allows such a copy; on short runs a
// packing loop made for them beats it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/datatype.h"

namespace isometry::bench {

class PackPipeline {
 public:
  // Runs that move `count` elements of `send` from `src` to `count_recv`
  // elements of `recv` at `dst`, the same packed bytes on both sides, in
  // pieces of `piece_bytes` through `slots` slots. Both buffers must hold
  // the types' extents and outlive this object. Dies on types whose runs
  // cannot be listed (over 2^20 runs) or whose packed sizes differ.
  PackPipeline(const std::byte* src, const Datatype& send, int64_t count, std::byte* dst,
               const Datatype& recv, int64_t count_recv, int64_t piece_bytes = 128 << 10,
               int slots = 16);

  // Seconds per message over `n` messages back to back, after a tenth of
  // them (at least one) untimed. Starts and joins its two threads.
  double Time(int n) const;

  // Whether the two threads ran on CPUs of their own (false on a process
  // allowed one CPU: the figure is then one CPU doing both sides in turn).
  bool pinned() const { return !cpus_.empty(); }

 private:
  struct Run {
    int64_t from = 0, to = 0, length = 0;  // offsets in the source / destination side
  };
  // Runs of each piece, packing (source -> slot offset) and unpacking
  // (slot offset -> destination), piece p's in [first[p], first[p + 1]).
  struct Side {
    std::vector<Run> runs;
    std::vector<size_t> first;
  };
  static Side Cut(const std::vector<Segment>& segments, int64_t piece_bytes, bool packing);
  // Moves `messages` messages; seconds from the threads' start to the end.
  double Move(int messages) const;

  const std::byte* src_;
  std::byte* dst_;
  int64_t piece_bytes_;
  int slots_;
  Side pack_, unpack_;
  mutable std::vector<std::byte> ring_;
  std::vector<int> cpus_;  // the two CPUs the threads are pinned to; none: not pinned
};

}  // namespace isometry::bench
