// The nice value a daemon thread runs at while it moves one traffic
// class's bytes (qos.class.nice, docs/guides/qos.md, "CPU time").
//
// Linux keeps a nice value and a policy per thread. A thread takes a
// class's value for the bytes it moves and is back at the daemon's own
// before anything else: before it reports them done, takes a lock another
// class's copy may wait on, or waits for its next request. A thread at a
// lowered value that a busy node leaves without a CPU (for seconds, under
// SCHED_IDLE) would otherwise hold that lock, and every thread waiting on
// it, foreground ones included, the whole time. The value
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

#include <sys/types.h>

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

// Thread `tid` of this process back at the daemon's own nice value and
// policy, set from another thread: a data connection's reader that a busy
// node starves under a class's value (net/data_plane.h). That thread's
// own record of its value is not changed: its next SetThreadNice(0) makes
// system calls that change nothing. False where unsupported or refused.
bool RestoreThreadNice(pid_t tid);

// The calling thread at a class's value for one piece of byte work, and
// back at the daemon's own when the scope ends.
class ClassNiceScope {
 public:
  explicit ClassNiceScope(int nice) { SetThreadNice(nice); }
  ~ClassNiceScope() { SetThreadNice(0); }
  ClassNiceScope(const ClassNiceScope&) = delete;
  ClassNiceScope& operator=(const ClassNiceScope&) = delete;
};

// Whether the calling thread runs under SCHED_IDLE now (its last
// SetThreadNice(kIdleThreadNice) took effect).
bool ThreadRunsIdle();

// How a config and isoctl write a value: "idle" for kIdleThreadNice, the
// number otherwise.
std::string ThreadNiceText(int nice);

}  // namespace isometry
