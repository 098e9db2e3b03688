#include "layout/program_cache.h"

#include <xxhash.h>

namespace isometry {

namespace {

template <typename T>
void Put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Everything addressing depends on: bounds, field sizes in order, layout.
// Field names do not change offsets, so they are not part of the key.
void AppendShape(std::string& key, const InstanceShape& s) {
  Put(key, s.bounds.dims);
  for (int d = 0; d < s.bounds.dims; ++d) {
    Put(key, s.bounds.lo[d]);
    Put(key, s.bounds.hi[d]);
  }
  Put(key, s.fields.size());
  for (const Field& f : s.fields.fields()) {
    Put(key, f.size);
  }
  Put(key, s.layout.components().size());
  for (const LayoutComponent& c : s.layout.components()) {
    Put(key, c.kind);
    Put(key, c.dim);
    Put(key, c.block);
  }
}

// The same shape by identity: the same field and layout lists (shared by
// copies, never changed) and equal bounds, so the same key, without making it.
bool SameShape(const InstanceShape& a, const InstanceShape& b) {
  return a.bounds == b.bounds && a.fields.SharesListWith(b.fields) &&
         a.layout.SharesListWith(b.layout);
}

// One per thread: the program a thread got last from a cache. A thread that
// repeats one copy (the ring thread serving a client's small copies) finds
// it without building, hashing and looking up the key, or taking the lock.
// Its shapes hold their lists, so no other list can take their address.
struct LastProgram {
  uint64_t cache = 0;
  InstanceShape src, dst;
  Box box;
  std::shared_ptr<const CopyProgram> program;
};
thread_local LastProgram last_program;

}  // namespace

std::shared_ptr<const CopyProgram> ProgramCache::LastOfThread(const InstanceShape& src,
                                                              const InstanceShape& dst,
                                                              const Box& box) const {
  const LastProgram& last = last_program;
  if (last.cache != id_ || !(last.box == box) || !SameShape(last.src, src) ||
      !SameShape(last.dst, dst)) {
    return nullptr;
  }
  thread_hits_.fetch_add(1, std::memory_order_relaxed);
  return last.program;
}

void ProgramCache::RememberForThread(const InstanceShape& src, const InstanceShape& dst,
                                     const Box& box,
                                     std::shared_ptr<const CopyProgram> program) const {
  last_program = {id_, src, dst, box, std::move(program)};
}

Result<std::shared_ptr<const CopyProgram>> ProgramCache::Get(const InstanceShape& src,
                                                             const InstanceShape& dst,
                                                             const Box& box) {
  if (std::shared_ptr<const CopyProgram> last = LastOfThread(src, dst, box)) return last;
  // Built in a buffer of the calling thread's, so a hit (every repeated
  // copy) allocates nothing; a miss moves it into the entry.
  thread_local std::string key;
  key.clear();
  AppendShape(key, src);
  AppendShape(key, dst);
  Put(key, box.dims);
  for (int d = 0; d < box.dims; ++d) {
    Put(key, box.lo[d]);
    Put(key, box.hi[d]);
  }
  const uint64_t hash = XXH3_64bits(key.data(), key.size());
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(hash);
    // The full key is compared too: a hash collision is a miss, never a
    // wrong program.
    if (it != index_.end() && it->second->key == key) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      RememberForThread(src, dst, box, it->second->program);
      return it->second->program;
    }
    ++misses_;
  }
  // Field names must still match for the copy to be legal: checked by the
  // compiler on every miss and by the caller's validation on hits.
  ISO_ASSIGN_OR_RETURN(CopyProgram program, CompileCopy(src, dst, box));
  auto shared = std::make_shared<const CopyProgram>(std::move(program));
  const uint64_t footprint = FootprintOf(*shared, key.size());
  if (footprint > capacity_bytes_) {
    return shared;  // used once, never kept
  }
  absl::MutexLock lock(&mu_);
  auto it = index_.find(hash);
  if (it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  RememberForThread(src, dst, box, shared);  // kept: within the byte budget
  lru_.push_front({std::move(key), shared, footprint});
  bytes_ += footprint;
  index_[hash] = lru_.begin();
  EvictLocked();
  return shared;
}

void ProgramCache::EvictLocked() {
  while (lru_.size() > capacity_ || bytes_ > capacity_bytes_) {
    const Entry& last = lru_.back();
    index_.erase(XXH3_64bits(last.key.data(), last.key.size()));
    bytes_ -= last.bytes;
    lru_.pop_back();
  }
}

uint64_t ProgramCache::FootprintOf(const CopyProgram& p, size_t key_bytes) {
  return sizeof(CopyProgram) + p.ops.capacity() * sizeof(CopyOp) + key_bytes + sizeof(Entry) +
         64;  // list node, index slot and allocator overhead, roughly
}

uint64_t ProgramCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t ProgramCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_ + thread_hits_.load(std::memory_order_relaxed);
}
uint64_t ProgramCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}
size_t ProgramCache::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace isometry
