#include "core/thread_nice.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "core/status.h"
#include "core/strings.h"

namespace isometry {
namespace {

struct Probe {
  bool supported = false;
  int base = 0;  // the daemon's own nice value, which threads return to
  std::string why;
};

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
    if (base >= kMaxThreadNice) {
      p.why = StrCat("the daemon runs at nice ", base, " already");
      return p;
    }
    // A scratch thread: what it changes dies with it.
    std::thread scratch([&p, base] {
      if (setpriority(PRIO_PROCESS, gettid(), base + 1) != 0) {
        p.why = StrCat("a thread may not raise its nice value (", ErrnoString(errno), ")");
      } else if (setpriority(PRIO_PROCESS, gettid(), base) != 0) {
        p.why =
            StrCat("a thread may not lower its nice value back to ", base, " (", ErrnoString(errno),
                   "): allow it with RLIMIT_NICE (systemd: LimitNICE=+0) or CAP_SYS_NICE");
      } else {
        p.supported = true;
      }
    });
    scratch.join();
    return p;
  }();
  return probe;
}

thread_local int applied = 0;  // over the base, in force on this thread

}  // namespace

bool ThreadNiceSupported() { return ProbeOnce().supported; }

const std::string& ThreadNiceUnsupportedReason() { return ProbeOnce().why; }

void SetThreadNice(int nice) {
  nice = std::clamp(nice, 0, kMaxThreadNice);
  if (nice == applied) return;
  const Probe& p = ProbeOnce();
  if (!p.supported) return;
  if (setpriority(PRIO_PROCESS, gettid(), std::min(kMaxThreadNice, p.base + nice)) == 0) {
    applied = nice;
  }
}

}  // namespace isometry
