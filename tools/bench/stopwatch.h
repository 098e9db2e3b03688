// The benchmark's clock: steady, seconds since a point or of one call as a
// double, paired rounds in alternating order, and bytes over seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

namespace isometry::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Seconds of one call of `fn`.
inline double Timed(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return SecondsSince(t0);
}

// One paired round: `ours` and `base` back to back, in an order that
// alternates with the round (drift in the machine's speed then favours
// neither side), as (our seconds, baseline seconds).
inline std::pair<double, double> PairedRound(int round, const std::function<void()>& ours,
                                             const std::function<void()>& base) {
  double o = 0, b = 0;
  if (round % 2) {
    b = Timed(base);
    o = Timed(ours);
  } else {
    o = Timed(ours);
    b = Timed(base);
  }
  return {o, b};
}

// GB/s (10^9 bytes per second).
inline double GBps(uint64_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace isometry::bench
