#include "core/thread_slice.h"

#include <cstdint>
#include <system_error>
#include <thread>

#include "core/sched_attr.h"

namespace isometry {
namespace {

// The calling thread with `slice` (0: the scheduler's default), at its
// own policy and nice value: whether the kernel took the call. A thread
// the operator put under another policy (SCHED_IDLE, real time) is left
// as it is.
bool SetSlice(std::chrono::nanoseconds slice) {
  SchedAttr attr{};
  if (!GetThisThreadSchedAttr(attr)) return false;
  if (!IsNormalPolicy(attr.sched_policy)) return false;
  attr.sched_runtime = static_cast<uint64_t>(slice.count());
  return SetThisThreadSchedAttr(attr);
}

}  // namespace

std::optional<uint64_t> ThisThreadSliceNs() {
  SchedAttr attr{};
  if (!GetThisThreadSchedAttr(attr)) return std::nullopt;
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
