// fio, the disk benchmark's peer: one sequential job with the disk
// channels' settings (io_uring, O_DIRECT, 1 MiB blocks), its figure read
// from fio's JSON output.
#pragma once

#include <cstdint>
#include <string>

namespace isometry::bench {

struct FioResult {
  bool ok = false;
  double bytes_per_s = 0;
  std::string detail;  // the command, or why it failed
};

// Runs fio on `file`: a write (or read) of `bytes` at queue depth `depth`.
// Needs fio on PATH; fails (ok false, with the reason) otherwise.
FioResult RunFio(const std::string& file, bool write, uint64_t bytes, unsigned depth,
                 bool end_fsync = false);

// Keeps in `best` the faster successful result (or the failure when there
// is none).
void KeepBest(FioResult& best, const FioResult& f);

// The table's baseline label for a fio job.
std::string FioBaseline(bool write, bool direct, bool end_fsync = false);

}  // namespace isometry::bench
