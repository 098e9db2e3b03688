// M:N redistribution through a private isometryd (issue #50 item 9):
// into DSK files whose every run is one element, against a plain durable
// write of the same bytes into the same files.
#pragma once

#include <cstdint>
#include <string>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

struct RedistributionOptions {
  std::string isometryd;         // the daemon binary
  std::string dir = "/var/tmp";  // where the DSK memory's directory is made
  uint64_t bytes = 64ull << 20;  // of the global array
  int rounds = 5;
};

// redistribution_files: a global array of doubles, rows CYCLIC over 4
// producer ranks (row-major, each in the daemon's pool), redistributed into
// 2 consumer ranks holding BLOCK columns in column-major DSK files, so
// every run of a file is one element; the baseline writes the same bytes
// into the same files as 2 durable contiguous copies from the pool, at
// once. Paired rounds; the first round's files are checked element by
// element. Removes its directory.
void RunRedistributionFiles(const RedistributionOptions& o, Report& report);

}  // namespace isometry::bench
