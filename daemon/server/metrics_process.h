// The standard process_* numbers of the daemon itself, read from /proc
// (what every Prometheus client library serves: start time, CPU, memory,
// file descriptors), for MetricsSnapshot::process.
#pragma once

#include <optional>
#include <string_view>

#include "daemon/server/metrics_text.h"

namespace isometry {

// This process's numbers now; nullopt where /proc/self/stat cannot be read
// or parsed (the families are then left out, not served as zeros).
std::optional<ProcessMetrics> ReadProcessMetrics();

// /proc/self/stat's line parsed: `boot_time_s` is /proc/stat's btime,
// `ticks_per_s` sysconf(_SC_CLK_TCK), `page_bytes` the page size. The fd
// counts are left at 0. nullopt on a line that does not parse.
std::optional<ProcessMetrics> ParseProcStat(std::string_view stat, double boot_time_s,
                                            double ticks_per_s, uint64_t page_bytes);

}  // namespace isometry
