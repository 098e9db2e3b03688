// The benchmark's clock: steady, and seconds since a point as a double.
#pragma once

#include <chrono>

namespace isometry::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace isometry::bench
