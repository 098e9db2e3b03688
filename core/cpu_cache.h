// The machine's last-level cache size, for decisions that depend on whether
// data stays in cache (non-temporal stores, calibration areas).
#pragma once

#include <cstdint>
#include <string_view>

namespace isometry {

// The largest data or unified cache of CPU 0 (sysfs:
// /sys/devices/system/cpu/cpu0/cache), read once; 32 MiB when sysfs does
// not say.
uint64_t LastLevelCacheBytes();

// A sysfs cache size ("32768K", "1M", "512"), in bytes; 0 when malformed.
uint64_t ParseCacheSize(std::string_view text);

}  // namespace isometry
