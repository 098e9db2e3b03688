// The nice value a daemon thread runs at while it moves one traffic
// class's bytes (qos.class.nice, docs/guides/qos.md, "CPU time").
//
// Linux keeps a nice value and a policy per thread. A worker takes its
// request's class value before the work and goes back to the daemon's own
// once it has nothing left to do, so a thread that wakes for a foreground
// request is not slowed by the background one before it. The value
// kIdleThreadNice ("idle" in the config) runs the work under SCHED_IDLE:
// any other thread that wakes on its CPU takes the CPU at once, where a
// nice value only lowers the thread's share and a woken thread may still
// wait for the running one's slice. Raising a thread's value (or moving it
// to SCHED_IDLE) is always allowed; coming back needs RLIMIT_NICE
// (systemd's LimitNICE=+0, which the shipped unit sets) or CAP_SYS_NICE.
// Without either, a thread could never come back from a background
// request, so then no thread changes its value at all and the daemon says
// why once.
#pragma once

#include <string>

namespace isometry {

// The largest nice value (the kernel's).
inline constexpr int kMaxThreadNice = 19;
// Past it: the class's work runs under SCHED_IDLE (qos.class.nice = "idle").
inline constexpr int kIdleThreadNice = kMaxThreadNice + 1;

// Whether this process may move its threads' nice values and policy up
// and back (probed once, on a scratch thread); why not, when it may not.
bool ThreadNiceSupported();
const std::string& ThreadNiceUnsupportedReason();

// Runs the calling thread at the daemon's own nice value plus `nice`
// (capped at 19), or under SCHED_IDLE for kIdleThreadNice: a system call
// only when that differs from what the thread runs at now; nothing where
// unsupported. The thread's scheduler slice (thread_slice.h) is kept.
void SetThreadNice(int nice);

// Whether the calling thread runs under SCHED_IDLE now (its last
// SetThreadNice(kIdleThreadNice) took effect).
bool ThreadRunsIdle();

// How a config and isoctl write a value: "idle" for kIdleThreadNice, the
// number otherwise.
std::string ThreadNiceText(int nice);

}  // namespace isometry
