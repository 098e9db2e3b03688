#include "daemon/runtime/staging_pool.h"

#include <algorithm>
#include <utility>

#include "channels/host_pages.h"

namespace isometry {

StagingPool::StagingPool(StagingPool&& o) noexcept
    : id_(o.id_),
      name_(o.name_),
      budget_(o.budget_),
      backing_(o.backing_),
      used_(std::exchange(o.used_, 0)),
      peak_(o.peak_),
      largest_(o.largest_),
      cached_(std::exchange(o.cached_, 0)),
      cache_(std::exchange(o.cache_, {})) {}

StagingPool& StagingPool::operator=(StagingPool&& o) noexcept {
  if (this != &o) {
    UnmapCache();
    id_ = o.id_;
    name_ = o.name_;
    budget_ = o.budget_;
    backing_ = o.backing_;
    used_ = std::exchange(o.used_, 0);
    peak_ = o.peak_;
    largest_ = o.largest_;
    cached_ = std::exchange(o.cached_, 0);
    cache_ = std::exchange(o.cache_, {});
  }
  return *this;
}

StagingPool::~StagingPool() { UnmapCache(); }

void StagingPool::UnmapCache() {
  for (const auto& [length, block] : cache_) Unmap(block, length);
  cache_.clear();
  cached_ = 0;
}

Result<std::byte*> StagingPool::Map(uint64_t length) {
  if (backing_.gpu && backing_.device >= 0) {
    Result<uint64_t> address = backing_.gpu->AllocateDevice(backing_.device, length);
    if (!address.ok()) {
      return ResourceExhausted("staging memory '", name_, "': ", address.status().message());
    }
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a device address, never dereferenced here
    return reinterpret_cast<std::byte*>(*address);
  }
  // Huge-page advised (channels/host_pages.h): disks and NICs move ring
  // slots in few physically contiguous segments.
  Result<HostPages> pages = HostPages::Map(length);
  if (!pages.ok()) {
    return ResourceExhausted("staging memory '", name_, "': ", pages.status().message());
  }
  if (backing_.gpu) {
    if (Status s = backing_.gpu->PinHost(pages->data(), length); !s.ok()) {
      return ResourceExhausted("staging memory '", name_, "': ", s.message());
    }
  }
  return pages->release();
}

void StagingPool::Unmap(std::byte* block, uint64_t length) {
  if (backing_.gpu && backing_.device >= 0) {
    backing_.gpu->FreeDevice(backing_.device, reinterpret_cast<uint64_t>(block));
    return;
  }
  if (backing_.gpu) backing_.gpu->UnpinHost(block);
  UnmapHostPages(block, length);
}

void StagingPool::MakeRoom(uint64_t bytes) {
  while (!cache_.empty() && used_ + cached_ + bytes > budget_) {
    auto largest = std::prev(cache_.end());
    Unmap(largest->second, largest->first);
    cached_ -= largest->first;
    cache_.erase(largest);
  }
}

Result<std::byte*> StagingPool::Take(uint64_t bytes) {
  if (!Fits(bytes)) {
    return ResourceExhausted("staging memory '", name_, "': ", bytes, " bytes requested, ",
                             budget_ - used_, " of ", budget_, " free");
  }
  const uint64_t length = HostPagesLength(bytes);
  std::byte* block = nullptr;
  if (auto hit = cache_.find(length); hit != cache_.end()) {
    block = hit->second;
    cached_ -= length;
    cache_.erase(hit);
  } else {
    MakeRoom(length);
    ISO_ASSIGN_OR_RETURN(block, Map(length));
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  largest_ = std::max(largest_, bytes);
  return block;
}

void StagingPool::Give(std::byte* block, uint64_t bytes) {
  used_ -= bytes;
  const uint64_t length = HostPagesLength(bytes);
  MakeRoom(length);
  if (used_ + cached_ + length > budget_) {  // a block longer than the budget's rest
    Unmap(block, length);
    return;
  }
  cache_.emplace(length, block);
  cached_ += length;
}

}  // namespace isometry
