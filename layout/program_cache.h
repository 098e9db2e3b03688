// Memoized layout translation (FALCON-X §4.3): compiled copy programs cached
// by a hash of (source shape, destination shape, box), least recently used
// entries evicted first. Bounded by entries and by bytes: a client that
// sends many distinct copies of large programs must not grow the daemon
// without limit; a program larger than the whole byte budget is returned
// but not kept.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "layout/compiler.h"

namespace isometry {

class ProgramCache {
 public:
  explicit ProgramCache(size_t capacity, uint64_t capacity_bytes = 256ull << 20)
      : capacity_(capacity), capacity_bytes_(capacity_bytes), id_(next_id_.fetch_add(1)) {}

  // Returns the cached program or compiles, caches and returns it. Errors are
  // not cached. Thread-safe; compilation runs outside the lock.
  Result<std::shared_ptr<const CopyProgram>> Get(const InstanceShape& src, const InstanceShape& dst,
                                                 const Box& box) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t hits() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t misses() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);  // what the kept programs hold (estimate)

  // Heap bytes of a program and its key, as the byte budget counts them.
  static uint64_t FootprintOf(const CopyProgram& p, size_t key_bytes);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CopyProgram> program;
    uint64_t bytes = 0;
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The calling thread's last program of this cache when `src`, `dst` and
  // `box` are the ones it was got for (a hit), else null; RememberForThread
  // makes `program` that last one.
  std::shared_ptr<const CopyProgram> LastOfThread(const InstanceShape& src,
                                                  const InstanceShape& dst, const Box& box) const;
  void RememberForThread(const InstanceShape& src, const InstanceShape& dst, const Box& box,
                         std::shared_ptr<const CopyProgram> program) const;

  static inline std::atomic<uint64_t> next_id_{1};
  const size_t capacity_;
  const uint64_t capacity_bytes_;
  const uint64_t id_;  // never reused, unlike an address: names this cache to its threads
  mutable std::atomic<uint64_t> thread_hits_{0};  // hits of LastOfThread
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isometry
