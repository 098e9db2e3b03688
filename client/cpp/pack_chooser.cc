#include "client/cpp/pack_chooser.h"

namespace isometry::client {
namespace {

constexpr uint64_t kShortRunBytes = 4096;

// The ways' numbers in each kind's TimedChoice.
int Index(PackWay w) { return w == PackWay::kStaged ? 0 : 1; }
PackWay WayOf(int index) { return index == 0 ? PackWay::kStaged : PackWay::kDirect; }

}  // namespace

int PackChooser::KindOf(uint64_t bytes, uint64_t runs) {
  return runs > 0 && bytes / runs < kShortRunBytes ? kShortRuns : kLongRuns;
}

PackWay PackChooser::Next(int kind) { return WayOf(kinds_[kind].Next()); }

void PackChooser::Took(int kind, PackWay way, uint64_t bytes, std::chrono::nanoseconds elapsed) {
  kinds_[kind].Took(Index(way), bytes, elapsed);
}

double PackChooser::CostOf(int kind, PackWay way) const { return kinds_[kind].CostOf(Index(way)); }

}  // namespace isometry::client
