// Disk channel scenarios (disk issue): DiskWrite and DiskRead throughput of
// sequential O_DIRECT I/O in 1 MiB runs against fio (io_uring, direct,
// bs=1M, same queue depth) on the same file in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

// Writes then reads `bytes` (default 1 GiB) of a scratch file in `dir` with
// the channels and with fio, alternating, best of five each; removes the
// file. A missing or failing fio gives a row whose baseline says why.
void RunDisk(const std::string& dir, uint64_t bytes, Report& report);

}  // namespace isometry::bench
