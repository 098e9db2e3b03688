// The final reports of the transfers that ended last (isoctl transfers
// --recent): a ring of fixed capacity, so the memory it holds does not grow
// with the transfers a daemon runs. Capacity 0 keeps nothing.
//
// Thread-safety: none; Node::Impl holds it under its mu.
#pragma once

#include <cstddef>
#include <vector>

#include "daemon/node/node.h"

namespace isometry {

class TransferHistory {
 public:
  explicit TransferHistory(size_t capacity = 0) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  size_t size() const { return ring_.size(); }

  // Keeps `report`; once full, in the place of the oldest.
  void Add(TransferReport report);
  // Every kept report, the last added first.
  std::vector<TransferReport> NewestFirst() const;

 private:
  size_t capacity_;
  // Grows to capacity_, then each Add overwrites ring_[next_], the oldest.
  std::vector<TransferReport> ring_;
  size_t next_ = 0;
};

}  // namespace isometry
