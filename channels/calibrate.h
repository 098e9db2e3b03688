// Measures a channel's throughput function tp(r) (Isometry §4.1): the
// throughput of back-to-back requests of size r, for r from 4 KiB to
// 64 MiB, within a time budget. The planner turns the samples into a
// monotonic throughput function.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "channels/channel.h"

namespace isometry {

struct RateSample {
  uint64_t request_bytes = 0;
  double bytes_per_s = 0;
};

// Request sizes measured: powers of four from 4 KiB to 64 MiB.
std::vector<uint64_t> CalibrationSizes();

// Runs contiguous requests of each size on `channel` between two scratch
// host buffers, keeping up to caps().max_in_flight requests in flight, for
// about budget / sizes each (at least two requests per size). Host-memory
// channels only. Thread-safe with respect to other users of the channel
// only in the sense that their traffic makes the figures lower.
Result<std::vector<RateSample>> MeasureChannel(Channel& channel,
                                                     std::chrono::milliseconds budget);

}  // namespace isometry
