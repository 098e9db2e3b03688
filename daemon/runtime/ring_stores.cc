#include "daemon/runtime/ring_stores.h"

namespace isometry {

void RingStores::Restart(bool streams_first) {
  prefers_ = streams_first;
  cost_[0] = cost_[1] = 0;
  picks_ = 0;
}

bool RingStores::NextStreams() {
  ++picks_;
  return picks_ == 3 || picks_ % kTryEvery == 0 ? !prefers_ : prefers_;
}

void RingStores::Observe(bool streamed, double ns_per_byte) {
  if (!(ns_per_byte > 0)) return;
  double& cost = cost_[streamed ? 1 : 0];
  // A quarter of each sample: the way tried rarely still follows a
  // change within a few tries, and one epoch that other work slowed does
  // not turn the choice alone.
  cost = cost == 0 ? ns_per_byte : cost + (ns_per_byte - cost) / 4;
  ++timed_;
  const double mine = cost_[prefers_ ? 1 : 0], other = cost_[prefers_ ? 0 : 1];
  if (mine > 0 && other > 0 && other < mine * kTurnBelow) {
    prefers_ = !prefers_;
    ++switches_;
  }
}

}  // namespace isometry
