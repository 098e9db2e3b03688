#include "core/thread_nice.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include "core/sched_attr.h"
#include "core/status.h"
#include "core/strings.h"

namespace isometry {
namespace {

struct Probe {
  bool supported = false;
  int base = 0;                   // the daemon's own nice value, which threads return to
  uint32_t policy = SCHED_OTHER;  // ... and its policy
  std::string why;
};

// The calling thread under `policy`, its slice and nice value kept.
bool SetPolicy(uint32_t policy) {
  SchedAttr attr{};
  if (!GetThisThreadSchedAttr(attr)) return false;
  attr.sched_policy = policy;
  attr.sched_priority = 0;
  return SetThisThreadSchedAttr(attr);
}

// What the scratch thread found: "" when it may go up and back.
std::string TryUpAndBack(int base, uint32_t policy) {
  if (setpriority(PRIO_PROCESS, gettid(), base + 1) != 0) {
    return StrCat("a thread may not raise its nice value (", ErrnoString(errno), ")");
  }
  if (setpriority(PRIO_PROCESS, gettid(), base) != 0) {
    return StrCat("a thread may not lower its nice value back to ", base, " (", ErrnoString(errno),
                  "): allow it with RLIMIT_NICE (systemd: LimitNICE=+0) or CAP_SYS_NICE");
  }
  if (!SetPolicy(SCHED_IDLE)) {
    return StrCat("a thread may not take SCHED_IDLE (", ErrnoString(errno), ")");
  }
  if (!SetPolicy(policy)) {
    return StrCat("a thread may not come back from SCHED_IDLE (", ErrnoString(errno),
                  "): allow it with RLIMIT_NICE (systemd: LimitNICE=+0) or CAP_SYS_NICE");
  }
  return "";
}

const Probe& ProbeOnce() {
  static const Probe probe = [] {
    Probe p;
    errno = 0;
    const int base = getpriority(PRIO_PROCESS, 0);  // the calling thread's
    if (base == -1 && errno != 0) {
      p.why = StrCat("getpriority: ", ErrnoString(errno));
      return p;
    }
    p.base = base;
    SchedAttr attr{};
    if (!GetThisThreadSchedAttr(attr)) {
      p.why = StrCat("sched_getattr: ", ErrnoString(errno));
      return p;
    }
    p.policy = attr.sched_policy;
    if (base >= kMaxThreadNice) {
      p.why = StrCat("the daemon runs at nice ", base, " already");
      return p;
    }
    if (!IsNormalPolicy(p.policy)) {
      p.why = StrCat("the daemon runs under scheduling policy ", p.policy,
                     ", not SCHED_OTHER or SCHED_BATCH");
      return p;
    }
    // A scratch thread: what it changes dies with it. Where none can be
    // started (the task limit), no thread changes its value.
    try {
      std::thread scratch([&p] { p.why = TryUpAndBack(p.base, p.policy); });
      scratch.join();
    } catch (const std::system_error& e) {
      p.why = StrCat("no thread to probe with (", e.what(), ")");
      return p;
    }
    p.supported = p.why.empty();
    return p;
  }();
  return probe;
}

constexpr int kNiceNotKnown = -1;
thread_local int applied = 0;  // over the base, in force on this thread (kIdleThreadNice: idle)

}  // namespace

bool ThreadNiceSupported() { return ProbeOnce().supported; }

const std::string& ThreadNiceUnsupportedReason() { return ProbeOnce().why; }

void SetThreadNice(int nice) {
  nice = std::clamp(nice, 0, kIdleThreadNice);
  if (nice == applied) return;
  const Probe& p = ProbeOnce();
  if (!p.supported) return;
  if (nice == kIdleThreadNice) {
    if (SetPolicy(SCHED_IDLE)) applied = nice;
    return;
  }
  // Back from SCHED_IDLE first: it needs the permission the nice value does.
  if (applied == kIdleThreadNice && !SetPolicy(p.policy)) return;
  if (setpriority(PRIO_PROCESS, gettid(), std::min(kMaxThreadNice, p.base + nice)) == 0) {
    applied = nice;
  } else {
    applied = kNiceNotKnown;  // the next call sets it again
  }
}

bool RestoreThreadNice(pid_t tid) {
  const Probe& p = ProbeOnce();
  if (!p.supported) return false;
  SchedAttr attr{};
  if (!GetThreadSchedAttr(tid, attr)) return false;
  attr.sched_policy = p.policy;
  attr.sched_priority = 0;
  attr.sched_nice = p.base;
  return SetThreadSchedAttr(tid, attr);
}

bool ThreadRunsIdle() { return applied == kIdleThreadNice; }

std::string ThreadNiceText(int nice) {
  return nice == kIdleThreadNice ? "idle" : std::to_string(nice);
}

}  // namespace isometry
