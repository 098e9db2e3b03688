// Planning time (Isometry §4.4, §6.3): the simple and full algorithms and a
// plan-cache hit, for a 1-D AOS -> SOA transfer and a 2-D transpose between
// the GPUs of the first and last node, on the paper's 2-node graph (fig. 4,
// table 5) and on its 16-node generalisation. Pure planner: no daemon.
#pragma once

#include "tools/bench/bench_report.h"

namespace isometry::bench {

// Rows "planning_<1d|2d>_<2|16>node" / "simple" | "full" | "cache_hit", in
// microseconds per plan (the median of `rounds` timed batches), against the
// targets 10, 100 and 1 us; ratio = target / value (>= 1 meets it).
void RunPlanning(int rounds, Report& report);

}  // namespace isometry::bench
