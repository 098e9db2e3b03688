// How many of this process's CPUs its copy threads hold right now: the
// memcpy and cma channels' threads count themselves while they run a
// request (CpuClaim), and a thread that would spin waiting for work asks
// EveryCpuClaimed first.
//
// Why: a spinning thread keeps its CPU from whoever else is runnable.
// When the daemon's own copy threads already hold every CPU (a bulk class
// saturating memcpy on a small machine), the ring thread's poll window
// (daemon.ring_poll_us) took much of a CPU from them after every small
// copy, and bought the foreground nothing there: it sleeps at once
// instead, and its clients wake it through the eventfd, which the short
// slice (core/thread_slice.h) makes prompt (measured in
// docs/benchmarks/history/2026-12.md).
//
// A copy thread working for a class whose nice value is "idle" takes no
// claim: under SCHED_IDLE it gives its CPU to any thread that wakes, and
// such a class has asked for only the CPU time nobody else wants. The ring
// thread's window then keeps serving a foreground client beside it, which
// shortens that client's small copies under load (measured in the same
// file).
#pragma once

#include <atomic>

namespace isometry {

// Held by a copy thread while it runs a request (not under SCHED_IDLE).
class CpuClaim {
 public:
  CpuClaim() { claims_.fetch_add(1, std::memory_order_relaxed); }
  ~CpuClaim() { claims_.fetch_sub(1, std::memory_order_relaxed); }
  CpuClaim(const CpuClaim&) = delete;
  CpuClaim& operator=(const CpuClaim&) = delete;

  // Gives the calling thread's claim back while it sleeps (a paced copy
  // waiting for its next slot holds no CPU).
  class Paused {
   public:
    Paused() { claims_.fetch_sub(1, std::memory_order_relaxed); }
    ~Paused() { claims_.fetch_add(1, std::memory_order_relaxed); }
    Paused(const Paused&) = delete;
    Paused& operator=(const Paused&) = delete;
  };

  // Claims held now, by every channel of the process.
  static int Held() { return claims_.load(std::memory_order_relaxed); }

 private:
  static inline std::atomic<int> claims_{0};
};

// The CPUs this process may run on (its affinity mask), read once.
int UsableCpus();

// Whether the copy threads hold every usable CPU: a spinner would take
// its CPU from one of them.
inline bool EveryCpuClaimed() { return CpuClaim::Held() >= UsableCpus(); }

}  // namespace isometry
