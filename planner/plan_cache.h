// The plan cache (Isometry §4.2, last paragraph): transfers that match an
// earlier one reuse its path without planning again.
//
// Key: (source memory, source layout, destination memory, destination
// layout, size class), the size class being floor(log2(data bytes)) with
// data bytes = points x |F|. Because the full planner's blocking factors
// depend on the shape as well as the size, the key also holds a shape
// class: floor(log2(extent)) of every dimension and floor(log2(|F|)).
// Transfers that differ only within one class share a path (the blocking
// factors found for one of them are valid layouts for all of them).
//
// Bounded: least recently used entries go first. Thread-safe; counters are
// exact under concurrency.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>

#include "planner/simple_planner.h"
#include "planner/topology.h"

namespace isometry {

struct PlanKey {
  MemoryId src_memory;
  Layout src_layout;
  MemoryId dst_memory;
  Layout dst_layout;
  int size_class = -1;                             // floor(log2(points * |F|)); -1 for no data
  std::array<int8_t, kMaxDims + 1> shape_class{};  // per dimension, then |F|
  int8_t element_class = 0;  // floor(log2(smallest field bytes)): the run unit

  static PlanKey Make(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                      uint64_t field_bytes, uint64_t element_bytes = 1);
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const;
};

class PlanCache {
 public:
  explicit PlanCache(size_t capacity = 4096);

  // The cached path, counting a hit; null, counting a miss.
  std::shared_ptr<const Path> Find(const PlanKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Stores (or replaces) the path of `key`, evicting the least recently used
  // entry when full. A capacity of 0 stores nothing.
  void Insert(const PlanKey& key, Path path);
  void Insert(const PlanKey& key, std::shared_ptr<const Path> path) ABSL_LOCKS_EXCLUDED(mu_);
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);
  // Bumped by Clear: a path remembered outside the cache (Planner's last
  // plan of a thread) is good while the generation it was found in lasts.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // A hit answered from such a remembered path.
  void CountHit() { hits_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t capacity() const { return capacity_; }
  // What the kept entries hold, estimated from their keys' and paths'
  // vectors and strings (the throughput curves are shared with the
  // topology and not counted).
  uint64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  static uint64_t FootprintOf(const PlanKey& key, const Path& path);

 private:
  using Entry = std::pair<PlanKey, std::shared_ptr<const Path>>;

  const size_t capacity_;  // constant after construction
  std::atomic<uint64_t> hits_{0}, misses_{0};
  std::atomic<uint64_t> generation_{0};
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry
