#include "client/cpp/pack_chooser.h"

#include <algorithm>

namespace isometry::client {
namespace {

constexpr uint64_t kShortRunBytes = 4096;
// A new time moves the estimate by this share: a few pieces follow a
// change of the machine, one preempted piece does not flip the choice.
constexpr double kWeight = 1.0 / 8;
// A time is counted as at most this many times the estimate: a piece
// whose thread was preempted midway says little about its way.
constexpr double kOutlier = 4;

int Index(PackWay w) { return w == PackWay::kStaged ? 0 : 1; }
PackWay Other(PackWay w) { return w == PackWay::kStaged ? PackWay::kDirect : PackWay::kStaged; }

}  // namespace

int PackChooser::KindOf(uint64_t bytes, uint64_t runs) {
  return runs > 0 && bytes / runs < kShortRunBytes ? kShortRuns : kLongRuns;
}

PackWay PackChooser::Next(int kind) {
  Kind& k = kinds_[kind];
  const Estimate& staged = k.way[Index(PackWay::kStaged)];
  const Estimate& direct = k.way[Index(PackWay::kDirect)];
  if (staged.samples < kSeed || direct.samples < kSeed) {
    return staged.samples <= direct.samples ? PackWay::kStaged : PackWay::kDirect;
  }
  const PackWay faster =
      direct.ns_per_kib < staged.ns_per_kib ? PackWay::kDirect : PackWay::kStaged;
  if (++k.since_explore < kExplore) return faster;
  k.since_explore = 0;
  return Other(faster);
}

void PackChooser::Took(int kind, PackWay way, uint64_t bytes, std::chrono::nanoseconds elapsed) {
  if (bytes == 0) return;
  Estimate& e = kinds_[kind].way[Index(way)];
  const double t = static_cast<double>(elapsed.count()) * 1024.0 / static_cast<double>(bytes);
  if (e.samples == 0) {
    e.ns_per_kib = t;
  } else {
    e.ns_per_kib += (std::min(t, kOutlier * e.ns_per_kib) - e.ns_per_kib) * kWeight;
  }
  if (e.samples < UINT32_MAX) ++e.samples;
}

double PackChooser::CostOf(int kind, PackWay way) const {
  return kinds_[kind].way[Index(way)].ns_per_kib;
}

}  // namespace isometry::client
