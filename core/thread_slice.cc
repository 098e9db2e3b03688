#include "core/thread_slice.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <system_error>
#include <thread>

namespace isometry {
namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h): glibc
// 2.36 has no wrapper.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

// The calling thread with `slice` (0: the scheduler's default), at its
// own policy and nice value: whether the kernel took the call. A thread
// the operator put under another policy (SCHED_IDLE, real time) is left
// as it is.
bool GetAttr(SchedAttr& attr) { return syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0; }

bool SetSlice(std::chrono::nanoseconds slice) {
  SchedAttr attr{};
  if (!GetAttr(attr)) return false;
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) return false;
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<uint64_t>(slice.count());
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

}  // namespace

std::optional<uint64_t> ThisThreadSliceNs() {
  SchedAttr attr{};
  if (!GetAttr(attr)) return std::nullopt;
  return attr.sched_runtime;
}

bool ShortSliceSupported() {
  // Older kernels take sched_runtime for SCHED_OTHER and ignore it; one
  // that honours it reports the slice back. Probed on a scratch thread so
  // that no daemon thread keeps what the probe set; where none can be
  // started (the task limit), no slice is set.
  static const bool supported = [] {
    bool ok = false;
    try {
      std::thread probe([&ok] {
        ok = SetSlice(kShortSlice) &&
             ThisThreadSliceNs() ==
                 static_cast<uint64_t>(std::chrono::nanoseconds(kShortSlice).count());
      });
      probe.join();
    } catch (const std::system_error&) {
      return false;
    }
    return ok;
  }();
  return supported;
}

void RequestShortSlice() {
  if (ShortSliceSupported()) (void)SetSlice(kShortSlice);
}

}  // namespace isometry
