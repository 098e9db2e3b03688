// A short scheduler slice for the threads a small copy waits on: the ring
// thread, the DMA workers, the memcpy and cma channels' express threads
// and the data link's express connection.
//
// Why: under a busy background class those threads wake to find both
// cores taken by lower-weight copy threads (qos.class.nice). With the
// default slice, a woken thread waited a p99 of 100-170 us for a core,
// once per hop, four or five hops per copy; with a 100 us slice EEVDF lets
// it preempt at once (a p99 of 7-33 us; docs/benchmarks/history/2026-12.md).
// The threads run for microseconds at a time, so the slice costs them
// nothing. Linux 6.12 and later (sched_setattr's sched_runtime for
// SCHED_OTHER); older kernels keep their scheduler's own slice, and
// ShortSliceSupported says so.
#pragma once

#include <chrono>

namespace isometry {

// The kernel's smallest custom slice.
inline constexpr std::chrono::microseconds kShortSlice{100};

// Runs the calling thread with kShortSlice slices, at its nice value of
// now. Does nothing where the kernel has no custom slices.
void RequestShortSlice();

// Whether the kernel honours a custom slice (probed once).
bool ShortSliceSupported();

}  // namespace isometry
