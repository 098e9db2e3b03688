// Single-producer single-consumer rings in memory shared with another
// process: the local ring ABI's submission and completion rings
// (proto/ring_abi.h), a hop window's work and done rings
// (layout/hop_window.h), and the index type of the access logs
// (active/log_abi.h). The ABIs lay out their headers; this header is how
// either side moves entries through them.
//
// The other process may be hostile or broken. So each end keeps its own
// index privately and only publishes it (it moves on from its own copy,
// never from the shared one), reads the other side's index as untrusted
// input (a value more than a ring away counts as no progress, or as a
// broken ring), and copies each entry out of shared memory once before
// anything looks at it.
//
// Thread-safety: an end is used by one thread at a time (its owner's lock),
// except the queries marked "any thread", which read only the shared
// indexes; the two ends of a ring live in different processes.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

namespace isometry::shm {

// A free-running index that one side writes, alone on its cache line so
// that the two sides' indexes never share one.
template <typename T>
struct alignas(64) SharedIndex {
  static_assert(std::atomic<T>::is_always_lock_free);
  std::atomic<T> value;
};

// How far `ahead` runs past `behind` (free-running indexes), or nullopt
// when that is more than `capacity`: the side that wrote one of them is
// not keeping the ring's rules.
template <typename T>
std::optional<T> Distance(T behind, T ahead, T capacity) {
  static_assert(std::is_unsigned_v<T>);
  const T d = static_cast<T>(ahead - behind);
  if (d > capacity) return std::nullopt;
  return d;
}

// The producing end of a ring of `entries` (a power of two) fixed-size
// entries at `slots`, whose consumer publishes `head` and whose producer
// (this end) publishes `tail`.
template <typename Entry>
class RingWriter {
  static_assert(std::is_trivially_copyable_v<Entry>);

 public:
  RingWriter() = default;
  // Starts at the tail as published (a ring set up or handed over earlier).
  RingWriter(Entry* slots, uint32_t entries, const SharedIndex<uint32_t>* head,
             SharedIndex<uint32_t>* tail)
      : slots_(slots),
        entries_(entries),
        head_(head),
        tail_(tail),
        mine_(tail->value.load(std::memory_order_acquire)) {}

  // Slots free by the consumer's head; 0 when its head is not within a
  // ring of this tail (a consumer that lies stalls only its own ring).
  uint32_t Room() const {
    const auto used = Distance(head(), mine_, entries_);
    return used ? entries_ - *used : 0;
  }
  // Whether the consumer has entries left to take. Any thread.
  bool Unconsumed() const {
    return head_->value.load(std::memory_order_acquire) !=
           tail_->value.load(std::memory_order_acquire);
  }
  // The consumer's head, as it published it (untrusted).
  uint32_t head(std::memory_order order = std::memory_order_acquire) const {
    return head_->value.load(order);
  }
  uint32_t tail() const { return mine_; }

  // Writes `e` at the tail and publishes it: release, or seq_cst where a
  // wake-up handshake reads the other side's flag next (ring_abi.h). The
  // caller has made sure of the room (Room, or its own accounting).
  void Push(const Entry& e, std::memory_order order = std::memory_order_release) {
    std::memcpy(&slots_[mine_ & (entries_ - 1)], &e, sizeof e);
    ++mine_;
    tail_->value.store(mine_, order);
  }

 private:
  Entry* slots_ = nullptr;
  uint32_t entries_ = 0;
  const SharedIndex<uint32_t>* head_ = nullptr;
  SharedIndex<uint32_t>* tail_ = nullptr;
  uint32_t mine_ = 0;  // the tail, kept here: the shared one is only written
};

// The consuming end of such a ring: takes entries from its head up to the
// producer's tail.
template <typename Entry>
class RingReader {
  static_assert(std::is_trivially_copyable_v<Entry>);

 public:
  RingReader() = default;
  RingReader(const Entry* slots, uint32_t entries, SharedIndex<uint32_t>* head,
             const SharedIndex<uint32_t>* tail)
      : slots_(slots),
        entries_(entries),
        head_(head),
        tail_(tail),
        mine_(head->value.load(std::memory_order_acquire)) {}

  // The producer's tail, as it published it (untrusted).
  uint32_t tail(std::memory_order order = std::memory_order_acquire) const {
    return tail_->value.load(order);
  }
  uint32_t head() const { return mine_; }
  // Entries published and not taken up to `tail` (a value of tail()), or
  // nullopt when it runs more than a ring ahead of this head.
  std::optional<uint32_t> Ready(uint32_t tail) const { return Distance(mine_, tail, entries_); }
  // Whether the producer has published past the head this end published:
  // a waiter deciding whether to sleep (seq_cst where a wake-up handshake
  // stored a flag just before, ring_abi.h). Any thread.
  bool Waiting(std::memory_order order = std::memory_order_acquire) const {
    return head_->value.load(std::memory_order_relaxed) != tail_->value.load(order);
  }

  // Copies the next entry out of shared memory (check the copy, never the
  // slot: the producer may rewrite it) and moves past it; Publish tells
  // the producer.
  Entry Take() {
    Entry e;
    std::memcpy(&e, &slots_[mine_ & (entries_ - 1)], sizeof e);
    ++mine_;
    return e;
  }
  // Gives up on the entries up to `tail` without reading them (a producer
  // that broke the ring's rules).
  void SkipTo(uint32_t tail) { mine_ = tail; }
  void Publish(std::memory_order order = std::memory_order_release) {
    head_->value.store(mine_, order);
  }

 private:
  const Entry* slots_ = nullptr;
  uint32_t entries_ = 0;
  SharedIndex<uint32_t>* head_ = nullptr;
  const SharedIndex<uint32_t>* tail_ = nullptr;
  uint32_t mine_ = 0;  // the head, kept here: the shared one is only written
};

}  // namespace isometry::shm
