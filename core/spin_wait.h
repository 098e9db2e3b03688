#pragma once

// One waiter's spin before it sleeps: pauses, with a sched_yield every few
// microseconds.
//
// Why not a yield at every step: on a paravirtualized guest (this
// project's CI hosts) each system call costs a microsecond or more, so a
// yielding spinner notices the other side's write that much later, and a
// 4 KiB copy's round trip on the ring took 8-12 us. Why not pauses only:
// on a busy node a spinner that never yields keeps the core from whoever
// else is runnable until the scheduler's tick preempts it (p99 ~120 us
// against ~25 us yielding, 2 cores at load 4). A yield every few
// microseconds keeps both.

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

 private:
  // A clock read costs ~20-40 ns; a pause 10-140 cycles.
  static constexpr uint32_t kStepsPerClockLook = 16;
  static constexpr std::chrono::microseconds kYieldEvery{10};
  uint32_t steps_ = 0;
  std::chrono::steady_clock::time_point last_yield_ = std::chrono::steady_clock::now();
};

}  // namespace isometry
