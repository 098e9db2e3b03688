// Staging budget of one memory: where intermediate ring buffers come from.
//
// Not thread-safe: the runtime calls it under its own lock, which is what
// makes a transfer's multi-buffer allocation all-or-nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/memory.h"
#include "core/status.h"

namespace isometry {

class StagingPool {
 public:
  StagingPool(MemoryId id, uint64_t budget) : id_(id), budget_(budget) {}

  bool Fits(uint64_t bytes) const { return bytes <= budget_ - used_; }
  // Page-aligned block of `bytes` (HostPages: 2 MiB-aligned, huge-page
  // advised from 2 MiB up), counted against the budget. Fails when
  // the budget is exceeded or the system is out of memory.
  Result<std::byte*> Take(uint64_t bytes);
  void Give(std::byte* block, uint64_t bytes);

  MemoryId id() const { return id_; }
  uint64_t budget() const { return budget_; }
  uint64_t used() const { return used_; }
  uint64_t peak() const { return peak_; }
  uint64_t largest() const { return largest_; }

 private:
  MemoryId id_;
  uint64_t budget_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  uint64_t largest_ = 0;
};

}  // namespace isometry
