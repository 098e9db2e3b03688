// Two ways of doing the same work, timed as they run, the faster kept.
//
// Which of two ways is faster often depends on the machine and on the
// moment (where cache lines are, what the kernel charges for a call), so
// the choice is measured, not fixed: both ways run kSeed times first, in
// turns; from then on the faster by its recent average runs, and the
// other one run in an exploration interval, so that a change of the
// machine is followed within a few intervals. Each time moves its way's
// average by an eighth, counted as at most four times that average (a
// preempted run says little about its way).
//
// Not thread-safe: one owner, or the owner's lock around every call.
#pragma once

#include <chrono>
#include <cstdint>

namespace isometry::client {

class TimedChoice {
 public:
  // Runs each way takes, in turns, before the faster one is kept.
  static constexpr uint32_t kSeed = 2;

  // Once both ways are known, one run in `explore` goes the other way;
  // with `scaled`, one in `explore` times the ratio of the two averages,
  // so that trying a way many times slower costs about 1/`explore` of the
  // time, however much slower it is.
  explicit TimedChoice(uint32_t explore, bool scaled = false)
      : explore_(explore), scaled_(scaled) {}

  // The way (0 or 1) for the next run.
  int Next();
  // A run of `bytes` took `elapsed` the way `way` (nothing is learnt from
  // a run of no bytes).
  void Took(int way, uint64_t bytes, std::chrono::nanoseconds elapsed);
  // Nanoseconds per KiB `way` has been taking (0 before its first run).
  double CostOf(int way) const { return ways_[way].ns_per_kib; }

 private:
  struct Estimate {
    double ns_per_kib = 0;
    uint32_t samples = 0;
  };
  uint32_t Interval(int faster) const;

  const uint32_t explore_;
  const bool scaled_;
  Estimate ways_[2];
  uint32_t since_explore_ = 0;
};

}  // namespace isometry::client
