// Memory registrations with the NIC, cached by address range.
//
// Registering memory (ibv_reg_mr) pins its pages and costs tens of
// microseconds per MiB, so it is done once per range and kept: pool memory
// when its pool is made, client and staging buffers on first use. This
// cache holds the registrations; it never calls verbs itself: a Registrar
// (two functions) does, so the cache's logic is tested without a device
// (tests/unit/rdma_reg_cache_test.cc) and the transport plugs in ibv_reg_mr
// (verbs.h, VerbsRegistrar).
//
// Ranges are widened to whole pages. A request inside a cached range is a
// hit. A request that overlaps cached ranges without fitting in one gets a
// new registration over the union, which replaces them in the cache (users
// still holding the old ones keep them until they let go). Unused
// registrations are evicted least-recently-used first when the cache
// would hold more than `max_bytes` or `max_entries`; one that is in use is
// never evicted, and a request that cannot fit beside those in use fails
// with ResourceExhausted (the caller waits for a transfer to finish).
// Invalidate() drops every registration over a range whose memory is
// about to go (a pool or allocation freed): unused ones at once, used ones
// when their last user lets go, and none of them is found again.
//
// Thread safety: every member may be called from any thread. Deregistration
// runs on the thread that drops the last reference (the cache's, or a
// user's RegRef), never under the cache's lock.
#pragma once

#include <absl/synchronization/mutex.h>

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>

#include "core/status.h"

namespace isometry::rdma {

// One registration as the NIC knows it.
struct Registration {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  void* handle = nullptr;  // the registrar's own (an ibv_mr*)
};

struct Registrar {
  // Registers [addr, addr + length) (whole pages); an error is passed on.
  std::function<Result<Registration>(uint64_t addr, uint64_t length)> reg;
  // Undoes one `reg` (called exactly once per successful reg).
  std::function<void(const Registration&)> dereg;
};

class RegCache;

// A registration in use: its keys stay valid while a RegRef to it lives.
class RegRef {
 public:
  RegRef() = default;
  const Registration& registration() const;
  uint32_t lkey() const { return registration().lkey; }
  uint32_t rkey() const { return registration().rkey; }
  explicit operator bool() const { return entry_ != nullptr; }

 private:
  friend class RegCache;
  struct Entry;
  explicit RegRef(std::shared_ptr<Entry> e) : entry_(std::move(e)) {}
  std::shared_ptr<Entry> entry_;
};

struct RegCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0, invalidations = 0;
  uint64_t entries = 0, bytes = 0;  // held in the cache now
};

class RegCache {
 public:
  struct Limits {
    uint64_t max_bytes = 64ull << 30;
    size_t max_entries = 4096;
    uint64_t page_bytes = 4096;   // a power of two
    uint64_t max_region = ~0ull;  // the device's max_mr_size
  };
  RegCache(Registrar registrar, Limits limits);
  ~RegCache();  // drops its references; registrations in use live on
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A registration covering [addr, addr + length): cached, or made now.
  Result<RegRef> Acquire(uint64_t addr, uint64_t length);
  // Forgets every registration that overlaps [addr, addr + length).
  void Invalidate(uint64_t addr, uint64_t length);
  RegCacheStats stats() const;

 private:
  using Map = std::map<uint64_t, std::shared_ptr<RegRef::Entry>>;  // by start address
  // Removes `it` from the map and LRU list; returns the next position.
  Map::iterator EraseLocked(Map::iterator it, std::vector<std::shared_ptr<RegRef::Entry>>& drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `more` bytes and one more entry fit within the limits.
  bool FitsLocked(uint64_t more) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts unused entries until `more` bytes and one entry fit.
  Status MakeRoomLocked(uint64_t more, std::vector<std::shared_ptr<RegRef::Entry>>& drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const Registrar> registrar_;
  const Limits limits_;
  mutable absl::Mutex mu_;
  Map map_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);  // start addresses, most recent first
  RegCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry::rdma
