// Timing a channel's requests for calibration (channels/calibrate.cc for
// host memory and GPUs, channels/disk/disk_calibrate.cc for disks): the
// request stream one figure comes from, and the per-size sweep of a curve.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "channels/calibrate.h"
#include "channels/channel.h"
#include "core/status.h"

namespace isometry::calibration {

using Clock = std::chrono::steady_clock;

// Back-to-back requests make(0), make(1), ... of `bytes` each, up to the
// channel's max_in_flight at a time, for `slice` (at least two). Returns
// their throughput in bytes/s.
// `finish`, when given, runs after the last request inside the timed span
// (a disk write's fdatasync).
// At least `min_requests` (and two) are timed.
Result<double> TimeRequests(Channel& channel, const std::function<ChannelRequest(uint64_t)>& make,
                            uint64_t bytes, Clock::duration slice,
                            const std::function<Status()>& finish = nullptr,
                            uint64_t min_requests = 2);

// One sample per size, `budget` shared evenly. A slow (rate-capped)
// channel would blow the budget on large requests: past the point where
// two requests take longer than the slice, the curve is flat at the last
// measured rate. A request of size s moves max(s, min_request) bytes;
// `measure(size, slice)` times one size. Only growing requests are
// extrapolated: one no larger than the last costs about what that one did,
// and where they are all min_request (runs of 1 B to 64 B) a slow first
// size would otherwise flatten the whole curve at its rate (it once held
// an 8-field curve at a twentieth of what 64 B runs move;
// docs/benchmarks/design-measurements.md, "Calibration").
// With `windows` > 1 each size's share is timed as that many windows of
// its own and the median is its figure (of an even count, the upper of
// the middle two: of two windows, the better): where a shared host takes a
// vCPU away for milliseconds at a time, one window that lost it (or ran
// while the other vCPU idled) would set the whole figure.
// The windows are passes over all the sizes, not back to back: a size's
// windows then lie tens of milliseconds apart, and a slow stretch of the
// host lowers one window of several sizes rather than every window of one.
// Not shown to narrow the predictions' spread: in runs alternating the
// two ways, the 1 GiB contiguous copy's measured/predicted was 0.92-1.21
// over 10 back to back and 0.93-1.07 over 8 in passes, but 21 full
// benchmark runs in passes read 0.73-1.49 (32 before: 0.71-1.37).
// Which sizes are timed is decided in the first pass.
// The first size at or above `fresh_from` is timed even where the size
// before it predicts it would overrun its window, up to four windows (or
// 50 ms): from there the copies run another way (a contiguous copy larger
// than the last-level cache is written with streaming stores), and a
// figure extended flat from below can be half of what they move.
Result<std::vector<RateSample>> MeasureSizes(
    const std::vector<uint64_t>& sizes, uint64_t min_request, std::chrono::milliseconds budget,
    const std::function<Result<double>(uint64_t, Clock::duration)>& measure, int windows = 1,
    uint64_t fresh_from = UINT64_MAX);

}  // namespace isometry::calibration
