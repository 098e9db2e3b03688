// Throughput functions of the transfer graph (Isometry §4.1, fig. 5): for one
// channel between two memories, the throughput it sustains as a function of
// the request size.
//
// A function is built from samples (request bytes -> bytes/s), measured at
// start-up or synthetic, and is evaluated by linear interpolation in
// log2(request size) between them. Two extensions close the ends:
//   - below the smallest sample, throughput falls in proportion to the
//     request size (a fixed per-request cost dominates small requests);
//   - above the largest sample, it stays at the largest sample's value.
//
// Monotonic by construction (the paper's footnote 2): a large request can
// always be split into smaller ones, so the function the planner sees is the
// running maximum tp(r) = max over r' <= r of the interpolated samples. The
// envelope is exact: where the interpolated samples dip and rise again, the
// crossing point becomes a breakpoint, so no value is made up.
//
// Objects are immutable and cheap to copy (the curve is shared). All calls
// are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"

namespace isometry {

struct ThroughputSample {
  uint64_t request_bytes = 0;   // >= 1
  double bytes_per_second = 0;  // >= 0, finite
  bool operator==(const ThroughputSample&) const = default;
};

class ThroughputFunction {
 public:
  // 1 GB/s for every request size: a placeholder for edges nobody measured.
  ThroughputFunction();

  // The same throughput for every request of at least one byte.
  static ThroughputFunction Constant(double bytes_per_second);
  // A channel with a fixed cost per request: tp(r) = r / (r / peak + overhead),
  // sampled at every power of two from 1 B to 1 TiB. overhead_seconds == 0
  // gives Constant(peak). Used for synthetic graphs and tests.
  static ThroughputFunction PerRequestOverhead(double peak_bytes_per_second,
                                               double overhead_seconds);
  // From measurements, in any order. Errors: no samples, a request of 0
  // bytes, a negative or non-finite throughput. Repeated request sizes keep
  // the best measurement.
  static Result<ThroughputFunction> FromSamples(std::vector<ThroughputSample> samples);

  // Throughput of requests of `request_bytes` (0 for 0 bytes). Non-decreasing
  // in `request_bytes`.
  double At(uint64_t request_bytes) const;
  // The largest throughput of any request size (the peak bandwidth).
  double Peak() const;
  // The smallest request size r with At(r) >= bytes_per_second; nullopt when
  // no request reaches it (bytes_per_second > Peak()). 1 for a target <= 0.
  std::optional<uint64_t> MinRequestFor(double bytes_per_second) const;
  // The breakpoints of the monotonic envelope (request sizes rounded to
  // whole bytes; crossing points of the envelope may fall between them).
  std::vector<ThroughputSample> Breakpoints() const;

  // True when At(r) >= other.At(r) for every request size r. Exact: both
  // functions are linear in log2(r) between breakpoints and proportional to
  // r below their first one, so comparing at every breakpoint of either
  // suffices (below both first breakpoints the ratio is constant; between
  // them the difference is concave).
  bool AtLeast(const ThroughputFunction& other) const;

  // Same envelope.
  bool operator==(const ThroughputFunction& other) const;

 private:
  struct Curve;
  explicit ThroughputFunction(std::shared_ptr<const Curve> curve);

  std::shared_ptr<const Curve> curve_;  // never null; immutable
};

}  // namespace isometry
