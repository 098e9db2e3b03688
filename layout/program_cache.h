// Memoized layout translation (FALCON-X §4.3): compiled copy programs cached
// by a hash of (source shape, destination shape, box), least recently used
// entries evicted first. Bounded by entries and by bytes: a client that
// sends many distinct copies of large programs must not grow the daemon
// without limit; a program larger than the whole byte budget is returned
// but not kept.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "layout/compiler.h"

namespace isometry {

class ProgramCache {
 public:
  explicit ProgramCache(size_t capacity, uint64_t capacity_bytes = 256ull << 20)
      : capacity_(capacity), capacity_bytes_(capacity_bytes) {}

  // Returns the cached program or compiles, caches and returns it. Errors are
  // not cached. Thread-safe; compilation runs outside the lock.
  Result<std::shared_ptr<const CopyProgram>> Get(const InstanceShape& src, const InstanceShape& dst,
                                                 const Box& box);

  uint64_t hits() const;
  uint64_t misses() const;
  size_t size() const;
  uint64_t bytes() const;  // what the kept programs hold (estimate)

  // Heap bytes of a program and its key, as the byte budget counts them.
  static uint64_t FootprintOf(const CopyProgram& p, size_t key_bytes);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CopyProgram> program;
    uint64_t bytes = 0;
  };
  void EvictLocked();
  const size_t capacity_;
  const uint64_t capacity_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // guarded by mu_; front = most recent
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;  // guarded by mu_
  uint64_t hits_ = 0;                                               // guarded by mu_
  uint64_t misses_ = 0;                                             // guarded by mu_
  uint64_t bytes_ = 0;                                              // guarded by mu_
};

}  // namespace isometry
