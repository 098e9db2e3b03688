// The nice value a daemon thread runs at while it moves one traffic
// class's bytes (qos.class.nice, docs/guides/qos.md, "CPU time").
//
// Linux keeps a nice value per thread. A worker takes its request's class
// value before the work and goes back to the daemon's own once it has
// nothing left to do, so a thread that wakes for a foreground request is
// not slowed by the background one before it. Raising a thread's value is
// always allowed; lowering it back needs RLIMIT_NICE (systemd's
// LimitNICE=+0, which the shipped unit sets) or CAP_SYS_NICE. Without
// either, a thread could never come back from a background request, so
// then no thread changes its value at all and the daemon says why once.
#pragma once

#include <string>

namespace isometry {

// The largest nice value (the kernel's).
inline constexpr int kMaxThreadNice = 19;

// Whether this process may move its threads' nice values up and back
// (probed once, on a scratch thread); why not, when it may not.
bool ThreadNiceSupported();
const std::string& ThreadNiceUnsupportedReason();

// Runs the calling thread at the daemon's own nice value plus `nice`
// (capped at 19): a system call only when that differs from what the
// thread runs at now; nothing where unsupported.
void SetThreadNice(int nice);

}  // namespace isometry
