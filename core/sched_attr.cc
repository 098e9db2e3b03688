#include "core/sched_attr.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace isometry {

bool GetThisThreadSchedAttr(SchedAttr& attr) {
  return syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0;
}

bool SetThisThreadSchedAttr(SchedAttr attr) {
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

}  // namespace isometry
