// The task (thread) limit the daemon runs under, read once at start so the
// local socket can keep its connection threads inside it: systemd's
// TasksMax= and a container's pids.max (the cgroup's pids controller,
// v1 or v2) and RLIMIT_NPROC. A thread past the limit is refused by the
// kernel (EAGAIN), and gRPC's own threads then starve with the rest; the
// daemon's bounds should be hit first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace isometry {

struct TaskHeadroom {
  uint64_t limit = 0;  // tasks allowed
  uint64_t free = 0;   // of which not in use now
  std::string source;  // "cgroup pids.max" or "RLIMIT_NPROC", for messages
};

// The tightest limit on this process's tasks, or nullopt when none applies
// (no pids cgroup limit, RLIMIT_NPROC unlimited or not enforced for root).
std::optional<TaskHeadroom> ReadTaskHeadroom();

// Connection threads that fit in `free` tasks, leaving the rest of the
// daemon (gRPC's pool, channels, a hop window per local session) room:
// an eighth (at least 16) is kept back and the rest halved.
uint64_t ConnectionThreadsFitting(uint64_t free);

// Process-wide: a thread start was refused (std::thread threw
// std::system_error). Whoever catches one notes it; the count shows in the
// log at SIGTERM. Thread-safe.
void NoteThreadRefused();
uint64_t ThreadsRefused();

// The pids cgroup's directory relative to its hierarchy's root, from the
// text of /proc/self/cgroup ("N:pids:/path" for v1, "0::/path" for v2),
// with whether it is v1.
std::optional<std::pair<std::string, bool>> PidsCgroupOf(std::string_view proc_self_cgroup);

}  // namespace isometry
