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
//
// Why spinning stops on a busy machine: while a waiter spins, the other
// side skips its wake-up (the rings' daemon_awake and client_spinning
// flags), so a yield that hands the core to another thread for a slice
// strands the work that arrives meanwhile until the slice ends
// (milliseconds). A sleeping waiter is woken instead, and the scheduler
// lets a woken thread preempt a lower-weight one (a background class's,
// qos.class.nice). So once a yield comes back late, every SpinWait in the
// process stops spinning for kContendedFor (Contended), and the waiters
// sleep at once.

#include <immintrin.h>
#include <sched.h>

#include <atomic>
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
      if (last_yield_ - now >= kLateYield) {
        contended_until_ns.store(Ns(last_yield_ + kContendedFor), std::memory_order_relaxed);
      }
    }
  }

  // Whether a yield of any SpinWait in this process came back late within
  // the last kContendedFor: other threads want the cores, and a waiter
  // should sleep rather than spin (see the top of this file).
  static bool Contended(std::chrono::steady_clock::time_point now) {
    return Ns(now) < contended_until_ns.load(std::memory_order_relaxed);
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
  // An idle core's yield takes a few microseconds; one that ran another
  // thread takes that thread's slice.
  static constexpr std::chrono::microseconds kLateYield{50};
  // How long one late yield stops the spinning: long enough that the
  // slice it lost is paid rarely while the machine stays busy, short
  // enough that spinning resumes soon after it goes quiet.
  static constexpr std::chrono::milliseconds kContendedFor{100};
  static int64_t Ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  static inline std::atomic<int64_t> contended_until_ns{0};
  uint32_t steps_ = 0;
  std::chrono::steady_clock::time_point last_yield_ = std::chrono::steady_clock::now();
};

}  // namespace isometry
