// The machine's last-level cache size, for decisions that depend on whether
// data stays in cache (non-temporal stores, calibration sizes).
#pragma once

#include <cstdint>

namespace isometry {

// The largest cache of CPU 0 (sysfs: /sys/devices/system/cpu/cpu0/cache),
// read once; 32 MiB when sysfs does not say.
uint64_t LastLevelCacheBytes();

}  // namespace isometry
