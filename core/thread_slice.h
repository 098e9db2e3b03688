// A short scheduler slice for the threads a small copy waits on: the ring
// thread, the DMA workers, the memcpy and cma channels' express threads,
// the data link's express connection and the gRPC threads that start
// copies (docs/operations/tuning.md, "Threads: names and slices").
//
// Why: under a busy background class (qos.class.nice) those threads wake
// to find every core taken by lower-weight copy threads, and with the
// default slice a woken thread may wait for the running one's slice to
// end, once per hop, several hops per copy. With a short slice EEVDF lets
// it preempt at once (measured in docs/benchmarks/history/2026-12.md).
// The threads run for microseconds at a time, so the slice costs them
// nothing. Linux 6.12 and later (sched_setattr's sched_runtime for
// SCHED_OTHER); older kernels keep their scheduler's own slice, and
// ShortSliceSupported says so.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace isometry {

// The kernel's smallest custom slice.
inline constexpr std::chrono::microseconds kShortSlice{100};

// Runs the calling thread with kShortSlice slices, at its policy and nice
// value of now. Does nothing where the kernel has no custom slices.
void RequestShortSlice();

// The calling thread's slice in ns as the kernel reports it (sched_getattr's
// sched_runtime): its slice where the kernel has custom slices, 0 on older
// kernels; nullopt when the call fails.
std::optional<uint64_t> ThisThreadSliceNs();

// Whether the kernel honours a custom slice for this process's threads
// (probed once): not where it is older than 6.12, nor where the daemon
// runs under a policy other than SCHED_OTHER or SCHED_BATCH.
bool ShortSliceSupported();

}  // namespace isometry
