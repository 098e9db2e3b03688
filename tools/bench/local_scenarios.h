// Scenarios of the local runtime (foundation issue): contiguous copy vs
// memcpy, AOS->SOA vs a hand-written loop, pipelined vs staged two-hop
// paths (plain and bandwidth-capped hops), priority under load. Every row
// is the median of `rounds` paired rounds (Isometry and its baseline back
// to back, their order alternating between rounds) with the range of the
// per-round ratios, and the plan's predicted throughput beside it.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

struct LocalOptions {
  std::vector<uint64_t> contiguous_bytes = {1ull << 30};  // one row pair per size
  uint64_t aos_entries = 4ull << 20;
  uint64_t pipeline_bytes = 512ull << 20;
  uint64_t hop_rate = 1ull << 30;  // bytes/s cap per hop in the capped variant
  int rounds = 5;
  // Calibrate each Runtime's channels at start, as isometryd does by
  // default, so the plans' predictions are the model a user gets (off:
  // every edge counts as 1 GB/s and the predictions mean nothing).
  bool calibrate = true;
};

void RunContiguous(const LocalOptions& o, Report& report);
void RunAosToSoa(const LocalOptions& o, Report& report);
void RunPipeline(const LocalOptions& o, Report& report);
void RunPriority(const LocalOptions& o, Report& report);

}  // namespace isometry::bench
