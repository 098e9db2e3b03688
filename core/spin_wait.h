#pragma once

// One waiter's spin before it sleeps: pauses, with a sched_yield every few
// microseconds.
//
// Why not a yield at every step: each is a system call (a microsecond or
// more on a paravirtualized guest such as the CI hosts), and under the
// EEVDF scheduler a yield on a busy core can give away a whole slice: on
// busy cores, yielding at every step made 4 KiB ring copies several times
// slower, with millisecond tails, and cost nothing idle
// (docs/benchmarks/design-measurements.md, "Wake-ups"). Why not pauses
// only: a spinner that never yields
// keeps the core from whoever else is runnable until the scheduler's tick
// preempts it.

#include <immintrin.h>
#include <sched.h>

#include <chrono>
#include <cstdint>

namespace isometry {

class SpinWait {
 public:
  // One step: a pause, and a yield when kYieldEvery has passed since the last.
  void Step() {
    _mm_pause();
    if (++steps_ % kStepsPerClockLook != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_yield_ >= kYieldEvery) {
      sched_yield();
      last_yield_ = std::chrono::steady_clock::now();
    }
  }

  // The wait ended (work arrived at `now`): the next yield is due only
  // after kYieldEvery more of waiting. A loop that keeps one SpinWait
  // across its waits (the daemon's ring thread) otherwise yields every
  // kYieldEvery of wall time, busy or not.
  void Restart(std::chrono::steady_clock::time_point now) { last_yield_ = now; }

 private:
  // A clock read costs ~20-40 ns; a pause 10-140 cycles.
  static constexpr uint32_t kStepsPerClockLook = 16;
  static constexpr std::chrono::microseconds kYieldEvery{10};
  uint32_t steps_ = 0;
  std::chrono::steady_clock::time_point last_yield_ = std::chrono::steady_clock::now();
};

}  // namespace isometry
