// How the publisher of served reads (read_server.h) packs a piece: into a
// buffer in its own cache and then into the slot with one memcpy
// (staged), or straight into the slot (direct).
//
// Which is faster is not a property of the program alone, but of where
// the slot's lines are and of what it costs, on this machine at this
// moment, to take a line another core has read:
// - where that is cheap and the lane's slots span enough that their lines
//   have left the reader's cache, direct packing saves the second copy;
// - where it is dear (one VM was so for minutes at a time, and not in
//   between), packing short runs straight into the slot waits on line
//   after line, while the staged way writes the slot in whole lines the
//   core fetches many at a time.
// Each way was several times faster than the other in one of the two
// (docs/benchmarks/design-measurements.md, "Direct and served reads").
// So the publisher times its pieces and keeps, per kind of piece, the way
// that has been faster, trying the other one piece in kExplore to see a
// change (timed_choice.h).
//
// Not thread-safe: the publisher's one thread owns it.
#pragma once

#include <chrono>
#include <cstdint>

#include "client/cpp/timed_choice.h"

namespace isometry::client {

enum class PackWay { kStaged, kDirect };

class PackChooser {
 public:
  // Kinds of piece timed apart: runs averaging under 4 KiB, and longer.
  static constexpr int kShortRuns = 0, kLongRuns = 1, kKinds = 2;
  // One piece in this many goes the other way once both ways are known.
  static constexpr uint32_t kExplore = 64;
  // Pieces each way runs first, in turns, before the faster one is kept.
  static constexpr uint32_t kSeed = TimedChoice::kSeed;

  static int KindOf(uint64_t bytes, uint64_t runs);

  // The way for the next piece of `kind`.
  PackWay Next(int kind);
  // A piece of `kind` and `bytes` took `elapsed` the way `way`.
  void Took(int kind, PackWay way, uint64_t bytes, std::chrono::nanoseconds elapsed);
  // Nanoseconds per KiB `way` has been taking for `kind` (0 before its
  // first piece).
  double CostOf(int kind, PackWay way) const;

 private:
  TimedChoice kinds_[kKinds] = {TimedChoice(kExplore), TimedChoice(kExplore)};
};

}  // namespace isometry::client
