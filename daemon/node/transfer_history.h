// What is kept of the transfers that ended last (isoctl transfers
// --recent): a ring of fixed capacity, so the memory it holds does not grow
// with the transfers a daemon runs. Capacity 0 keeps nothing. The node
// keeps each ended transfer's final report, shared with its record, and
// its path, so keeping one costs no copy on the thread that finishes a
// copy.
//
// Thread-safety: none; Node::Impl holds it under its mu.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace isometry {

template <typename Entry>
class TransferHistory {
 public:
  explicit TransferHistory(size_t capacity = 0) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  size_t size() const { return ring_.size(); }

  // Keeps `entry`; once full, in the place of the oldest.
  void Add(Entry entry) {
    if (capacity_ == 0) return;
    if (ring_.size() < capacity_) {
      ring_.push_back(std::move(entry));
      return;
    }
    ring_[next_] = std::move(entry);
    next_ = (next_ + 1) % capacity_;
  }

  // Every kept entry, the last added first.
  std::vector<Entry> NewestFirst() const {
    std::vector<Entry> out;
    out.reserve(ring_.size());
    // Before the ring is full next_ stays 0 and the newest is the last pushed.
    for (size_t i = 0; i < ring_.size(); ++i) {
      out.push_back(ring_[(next_ + ring_.size() - 1 - i) % ring_.size()]);
    }
    return out;
  }

 private:
  size_t capacity_;
  // Grows to capacity_, then each Add overwrites ring_[next_], the oldest.
  std::vector<Entry> ring_;
  size_t next_ = 0;
};

}  // namespace isometry
