// Whether absl::Mutex records lock order (its deadlock detection).
//
// Debian's abseil is built without NDEBUG, so its Mutex checks lock order
// on every Lock and Unlock (a global graph under a global lock) and on
// every Mutex destruction, unless told otherwise. That costs more than the
// rest of a 4 KiB copy's bookkeeping (docs/benchmarks/design-measurements.md,
// "Locks and allocation"). Debug
// builds (the ASan test suite, whose daemons run this code too) keep the
// checks, so a lock-order inversion still fails the tests; optimized
// binaries turn them off at start.
#pragma once

#include "absl/synchronization/mutex.h"

namespace isometry {

inline void SetLockOrderChecksForBuild() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace isometry
