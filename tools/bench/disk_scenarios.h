// Disk channel scenarios (disk issue): DiskWrite and DiskRead throughput of
// sequential O_DIRECT I/O in 1 MiB runs against fio (io_uring, direct,
// bs=1M, same queue depth) on the same file in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

// Writes then reads `bytes` (default 1 GiB) of a scratch file in `dir` with
// the channels and with fio, alternating, in `rounds` paired rounds (the
// rows are medians); removes the file. A missing or failing fio gives a row whose baseline says
// why.
//
// Then the same through the Runtime (a DSK memory on `dir`), `rounds`
// rounds, each interleaved with a fio write and read of the same
// size: SYS->DSK (durable, and again with durable=false to show the cost
// of fdatasync) and DSK->SYS of a contiguous 1-D instance of 8-byte
// entries, and an AOS (SYS) -> SOA (file) write of 8 x 4-byte fields,
// pipelined in one Copy against staged (convert all in SYS, then write).
// Runtime rows carry the plan's predicted throughput (`calibrate`: the
// Runtime measures its channels first, as isometryd does by default).
// Needs 2 x `bytes` of host memory; removes its files.
void RunDisk(const std::string& dir, uint64_t bytes, Report& report, int rounds = 5,
             bool calibrate = true);

}  // namespace isometry::bench
