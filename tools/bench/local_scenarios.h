// Scenarios of the local runtime (foundation issue): contiguous copy vs
// memcpy, AOS->SOA vs a hand-written loop, pipelined vs staged two-hop
// paths (plain and bandwidth-capped hops), priority under load.
#pragma once

#include <cstdint>

#include "tools/bench/bench_report.h"

namespace isometry::bench {

struct LocalOptions {
  uint64_t contiguous_bytes = 1ull << 30;
  uint64_t aos_entries = 4ull << 20;
  uint64_t pipeline_bytes = 512ull << 20;
  uint64_t hop_rate = 1ull << 30;  // bytes/s cap per hop in the capped variant
  int repeat = 3;
};

void RunContiguous(const LocalOptions& o, Report& report);
void RunAosToSoa(const LocalOptions& o, Report& report);
void RunPipeline(const LocalOptions& o, Report& report);
void RunPriority(const LocalOptions& o, Report& report);

}  // namespace isometry::bench
