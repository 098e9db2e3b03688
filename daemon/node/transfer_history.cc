#include "daemon/node/transfer_history.h"

#include <utility>

namespace isometry {

void TransferHistory::Add(TransferReport report) {
  if (capacity_ == 0) {
    return;
  }
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(report));
    return;
  }
  ring_[next_] = std::move(report);
  next_ = (next_ + 1) % capacity_;
}

std::vector<TransferReport> TransferHistory::NewestFirst() const {
  std::vector<TransferReport> out;
  out.reserve(ring_.size());
  // Before the ring is full next_ stays 0 and the newest is the last pushed.
  for (size_t i = 0; i < ring_.size(); ++i) {
    out.push_back(ring_[(next_ + ring_.size() - 1 - i) % ring_.size()]);
  }
  return out;
}

}  // namespace isometry
