// Staging budget of one memory: where intermediate ring buffers come from.
//
// Blocks given back stay mapped, their pages resident, in a cache the next
// Take of the same length draws from: a ring's pages are faulted in by the
// first transfer that uses a block of that length, not by every transfer
// (a fresh mapping's page faults would land inside the copy;
// docs/benchmarks/design-measurements.md, "Pages"). The cache and the blocks in use together stay
// within the budget: a Take that needs room unmaps cached blocks first.
//
// Not thread-safe: the runtime calls it under its own lock, which is what
// makes a transfer's multi-buffer allocation all-or-nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "channels/gpu_memory.h"
#include "core/memory.h"
#include "core/status.h"

namespace isometry {

// Where a pool's blocks live. Default: host pages. With `gpu` and a
// `device`: device memory of that GPU (an FBM memory; a block's pointer is
// then its device address, never dereferenced here). With `gpu` alone:
// host pages pinned and mapped for the GPUs while they are mapped (ZCM).
// `gpu` must outlive the pool.
struct StagingBacking {
  GpuMemory* gpu = nullptr;
  int device = -1;
};

class StagingPool {
 public:
  // `name`: the memory as users wrote it (messages say "staging memory 'sys0'").
  StagingPool(MemoryId id, uint64_t budget, std::string name = {}, StagingBacking backing = {})
      : id_(id),
        name_(name.empty() ? ToString(id) : std::move(name)),
        budget_(budget),
        backing_(backing) {}
  StagingPool(StagingPool&& o) noexcept;
  StagingPool& operator=(StagingPool&& o) noexcept;
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool();  // unmaps the cache; blocks still taken are the taker's bug

  bool Fits(uint64_t bytes) const { return bytes <= budget_ - used_; }
  // Page-aligned block of `bytes` (HostPages: 2 MiB-aligned, huge-page
  // advised from 2 MiB up), counted against the budget: a cached block of
  // the same length when there is one, else a new mapping. Fails when the
  // budget is exceeded or the system is out of memory.
  Result<std::byte*> Take(uint64_t bytes);
  // Returns a block to the cache (`bytes` as given to Take).
  void Give(std::byte* block, uint64_t bytes);

  MemoryId id() const { return id_; }
  // >= 0: blocks are device addresses on this GPU (see StagingBacking).
  int device() const { return backing_.gpu ? backing_.device : -1; }
  uint64_t budget() const { return budget_; }
  uint64_t used() const { return used_; }
  uint64_t peak() const { return peak_; }
  uint64_t largest() const { return largest_; }
  // Mapped bytes of blocks given back and kept for reuse.
  uint64_t cached() const { return cached_; }

 private:
  // Unmaps cached blocks, largest first, until `bytes` more fit beside
  // what is in use and cached.
  void MakeRoom(uint64_t bytes);
  void UnmapCache();
  // A new block of `length` bytes / its release, by the backing.
  Result<std::byte*> Map(uint64_t length);
  void Unmap(std::byte* block, uint64_t length);

  MemoryId id_;
  std::string name_;
  uint64_t budget_;
  StagingBacking backing_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  uint64_t largest_ = 0;
  uint64_t cached_ = 0;
  std::multimap<uint64_t, std::byte*> cache_;  // mapped length -> block
};

}  // namespace isometry
