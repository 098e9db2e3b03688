#include "net/rdma/reg_cache.h"

#include <algorithm>
#include <vector>

namespace isometry::rdma {

struct RegRef::Entry {
  Registration reg;
  std::shared_ptr<const Registrar> registrar;
  std::list<uint64_t>::iterator lru;  // valid while in the cache's map

  Entry(Registration r, std::shared_ptr<const Registrar> owner)
      : reg(r), registrar(std::move(owner)) {}
  ~Entry() { registrar->dereg(reg); }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
};

const Registration& RegRef::registration() const { return entry_->reg; }

RegCache::RegCache(Registrar registrar, Limits limits)
    : registrar_(std::make_shared<const Registrar>(std::move(registrar))), limits_(limits) {}

RegCache::~RegCache() {
  Map map;
  {
    absl::MutexLock lock(&mu_);
    map.swap(map_);
  }
  // Deregistered here, outside the lock, unless a RegRef still holds one.
}

RegCache::Map::iterator RegCache::EraseLocked(Map::iterator it,
                                              std::vector<std::shared_ptr<RegRef::Entry>>& drop) {
  stats_.bytes -= it->second->reg.length;
  stats_.entries -= 1;
  lru_.erase(it->second->lru);
  drop.push_back(std::move(it->second));
  return map_.erase(it);
}

bool RegCache::FitsLocked(uint64_t more) const {
  return stats_.bytes + more <= limits_.max_bytes && stats_.entries + 1 <= limits_.max_entries;
}

Status RegCache::MakeRoomLocked(uint64_t more, std::vector<std::shared_ptr<RegRef::Entry>>& drop) {
  // Least recently used first: the back of the list.
  for (auto l = lru_.end(); !FitsLocked(more) && l != lru_.begin();) {
    --l;
    auto it = map_.find(*l);
    if (it->second.use_count() > 1) continue;  // in use: only its users' refs beside ours
    ++stats_.evictions;
    l = std::next(l);  // EraseLocked removes *prev(l) from the list
    EraseLocked(it, drop);
  }
  if (FitsLocked(more)) return OkStatus();
  return absl::ResourceExhaustedError(
      StrCat("RDMA registration cache full: ", stats_.entries, " registrations of ", stats_.bytes,
             " bytes in use (limits ", limits_.max_entries, ", ", limits_.max_bytes,
             " bytes); a request for ", more, " more bytes waits for one to be released"));
}

Result<RegRef> RegCache::Acquire(uint64_t addr, uint64_t length) {
  const uint64_t page = limits_.page_bytes;
  if (length == 0) return InvalidArgument("RDMA registration of 0 bytes at ", addr);
  if (addr + length < addr || addr + length > ~0ull - page) {
    return InvalidArgument("RDMA registration of ", length, " bytes at ", addr,
                           " runs past the end of the address space");
  }
  uint64_t lo = addr & ~(page - 1);
  uint64_t hi = (addr + length + page - 1) & ~(page - 1);
  if (hi - lo > limits_.max_region) {
    return InvalidArgument("RDMA registration of ", hi - lo,
                           " bytes is larger than the device's largest memory region (",
                           limits_.max_region, " bytes)");
  }
  std::vector<std::shared_ptr<RegRef::Entry>> drop;  // released after the lock
  absl::MutexLock lock(&mu_);
  // Cached ranges are disjoint: only the last one starting at or before
  // `lo` can cover the request.
  auto it = map_.upper_bound(lo);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    const Registration& r = prev->second->reg;
    if (r.addr + r.length >= hi) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, prev->second->lru);
      return RegRef(prev->second);
    }
    if (r.addr + r.length > lo) it = prev;  // overlaps the start
  }
  ++stats_.misses;
  // One registration over the request and every cached range it touches,
  // when the device allows one that large; else the request alone. Either
  // way the ranges it touches leave the cache, which stays disjoint.
  uint64_t ulo = lo, uhi = hi;
  for (auto o = it; o != map_.end() && o->first < hi; ++o) {
    ulo = std::min(ulo, o->first);
    uhi = std::max(uhi, o->first + o->second->reg.length);
  }
  if (uhi - ulo <= limits_.max_region) {
    lo = ulo;
    hi = uhi;
  }
  while (it != map_.end() && it->first < hi) it = EraseLocked(it, drop);
  ISO_RETURN_IF_ERROR(MakeRoomLocked(hi - lo, drop));
  ISO_ASSIGN_OR_RETURN(Registration reg, registrar_->reg(lo, hi - lo));
  reg.addr = lo;
  reg.length = hi - lo;
  auto entry = std::make_shared<RegRef::Entry>(reg, registrar_);
  lru_.push_front(lo);
  entry->lru = lru_.begin();
  map_.emplace(lo, entry);
  stats_.bytes += reg.length;
  stats_.entries += 1;
  return RegRef(std::move(entry));
}

void RegCache::Invalidate(uint64_t addr, uint64_t length) {
  std::vector<std::shared_ptr<RegRef::Entry>> drop;
  absl::MutexLock lock(&mu_);
  const uint64_t end = addr + length < addr ? ~0ull : addr + length;
  auto it = map_.upper_bound(addr);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second->reg.length > addr) it = prev;
  }
  while (it != map_.end() && it->first < end) {
    ++stats_.invalidations;
    it = EraseLocked(it, drop);
  }
}

RegCacheStats RegCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace isometry::rdma
