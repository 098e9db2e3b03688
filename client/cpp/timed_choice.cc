#include "client/cpp/timed_choice.h"

#include <algorithm>
#include <cmath>

namespace isometry::client {
namespace {

// A new time moves the estimate by this share: a few runs follow a
// change of the machine, one preempted run does not flip the choice.
constexpr double kWeight = 1.0 / 8;
// A time is counted as at most this many times the estimate.
constexpr double kOutlier = 4;
// A scaled interval is at most this many times the plain one: a way
// once far slower is still looked at now and then.
constexpr double kMaxScale = 64;

}  // namespace

uint32_t TimedChoice::Interval(int faster) const {
  if (!scaled_ || ways_[faster].ns_per_kib <= 0) return explore_;
  const double ratio = ways_[1 - faster].ns_per_kib / ways_[faster].ns_per_kib;
  return static_cast<uint32_t>(std::lround(explore_ * std::clamp(ratio, 1.0, kMaxScale)));
}

int TimedChoice::Next() {
  const Estimate& a = ways_[0];
  const Estimate& b = ways_[1];
  if (a.samples < kSeed || b.samples < kSeed) return a.samples <= b.samples ? 0 : 1;
  const int faster = b.ns_per_kib < a.ns_per_kib ? 1 : 0;
  if (++since_explore_ < Interval(faster)) return faster;
  since_explore_ = 0;
  return 1 - faster;
}

void TimedChoice::Took(int way, uint64_t bytes, std::chrono::nanoseconds elapsed) {
  if (bytes == 0) return;
  Estimate& e = ways_[way];
  const double t = static_cast<double>(elapsed.count()) * 1024.0 / static_cast<double>(bytes);
  if (e.samples == 0) {
    e.ns_per_kib = t;
  } else {
    e.ns_per_kib += (std::min(t, kOutlier * e.ns_per_kib) - e.ns_per_kib) * kWeight;
  }
  if (e.samples < UINT32_MAX) ++e.samples;
}

}  // namespace isometry::client
