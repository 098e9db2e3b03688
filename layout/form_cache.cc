#include "layout/form_cache.h"

namespace isometry {

namespace {

uint64_t FootprintOf(const FormCopy& c, size_t key_bytes) {
  // List node, index slot and allocator overhead, roughly: 128 bytes.
  return sizeof(FormCopy) + c.program.ops.capacity() * sizeof(CopyOp) + key_bytes + 128;
}

}  // namespace

Result<std::shared_ptr<const FormCopy>> FormProgramCache::Get(const CanonicalForm& src,
                                                              const CanonicalForm& dst) {
  // The serializations are self-delimiting (magic, then counts), so their
  // concatenation identifies the pair.
  std::string key = SerializeForm(src) + SerializeForm(dst);
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->copy;
    }
    ++misses_;
  }
  ISO_ASSIGN_OR_RETURN(FormCopy compiled, CompileFormCopy(src, dst));
  auto shared = std::make_shared<const FormCopy>(std::move(compiled));
  const uint64_t footprint = FootprintOf(*shared, key.size());
  if (footprint > capacity_bytes_) {
    return shared;  // used once, never kept
  }
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {  // compiled twice concurrently: keep the newer
    bytes_ -= it->second->bytes;
    auto old = it->second;
    index_.erase(it);
    lru_.erase(old);
  }
  lru_.push_front({std::move(key), shared, footprint});
  bytes_ += footprint;
  index_[lru_.front().key] = lru_.begin();
  EvictLocked();
  return shared;
}

void FormProgramCache::EvictLocked() {
  while (!lru_.empty() && (lru_.size() > capacity_ || bytes_ > capacity_bytes_)) {
    index_.erase(lru_.back().key);
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
  }
}

uint64_t FormProgramCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

uint64_t FormProgramCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

size_t FormProgramCache::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

uint64_t FormProgramCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace isometry
