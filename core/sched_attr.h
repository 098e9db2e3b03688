// The kernel's sched_getattr/sched_setattr: glibc 2.36 has no wrappers.
// Used to set a thread's slice (thread_slice.h) and its policy
// (thread_nice.h) without losing what the other one set.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>

namespace isometry {

// struct sched_attr (include/uapi/linux/sched/types.h).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // a SCHED_OTHER thread's custom slice, ns (0: the default)
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

// SCHED_OTHER or SCHED_BATCH: the policies whose threads take a nice value,
// a custom slice, and may go to SCHED_IDLE and back.
inline bool IsNormalPolicy(uint32_t policy) {
  return policy == SCHED_OTHER || policy == SCHED_BATCH;
}

// Thread `tid`'s attributes (0: the calling thread's); false when the
// kernel refused.
bool GetThreadSchedAttr(pid_t tid, SchedAttr& attr);
inline bool GetThisThreadSchedAttr(SchedAttr& attr) { return GetThreadSchedAttr(0, attr); }

// Sets them (size and flags are filled in); false when the kernel refused
// (errno says why).
bool SetThreadSchedAttr(pid_t tid, SchedAttr attr);
inline bool SetThisThreadSchedAttr(SchedAttr attr) { return SetThreadSchedAttr(0, attr); }

}  // namespace isometry
