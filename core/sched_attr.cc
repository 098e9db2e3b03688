#include "core/sched_attr.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace isometry {

bool GetThreadSchedAttr(pid_t tid, SchedAttr& attr) {
  return syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) == 0;
}

bool SetThreadSchedAttr(pid_t tid, SchedAttr attr) {
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  return syscall(SYS_sched_setattr, tid, &attr, 0) == 0;
}

}  // namespace isometry
