#include "planner/plan_cache.h"

#include <algorithm>
#include <bit>

namespace isometry {

namespace {

int FloorLog2(uint64_t v) { return v == 0 ? -1 : static_cast<int>(std::bit_width(v)) - 1; }

size_t Mix(size_t h, uint64_t v) {
  // 64-bit multiply-xorshift: cheap and well spread for small keys.
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

size_t HashLayout(size_t h, const Layout& l) {
  h = Mix(h, static_cast<uint64_t>(l.dims()));
  for (const LayoutComponent& c : l.components()) {
    h = Mix(h, (static_cast<uint64_t>(c.kind) << 56) ^ (static_cast<uint64_t>(c.dim) << 48) ^
                   static_cast<uint64_t>(c.block));
  }
  return h;
}

}  // namespace

PlanKey PlanKey::Make(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                      uint64_t field_bytes, uint64_t element_bytes) {
  PlanKey k{src.memory, src.layout, dst.memory, dst.layout};
  k.element_class = static_cast<int8_t>(FloorLog2(std::max<uint64_t>(element_bytes, 1)));
  const unsigned __int128 bytes = static_cast<unsigned __int128>(bounds.volume()) * field_bytes;
  k.size_class = bytes == 0    ? -1
                 : bytes >> 64 ? 64 + FloorLog2(static_cast<uint64_t>(bytes >> 64))
                               : FloorLog2(static_cast<uint64_t>(bytes));
  for (int d = 0; d < bounds.dims && d < kMaxDims; ++d) {
    const int64_t e = bounds.extent(d);
    k.shape_class[static_cast<size_t>(d)] =
        static_cast<int8_t>(e <= 0 ? -1 : FloorLog2(static_cast<uint64_t>(e)));
  }
  k.shape_class[kMaxDims] = static_cast<int8_t>(FloorLog2(field_bytes));
  return k;
}

size_t PlanKeyHash::operator()(const PlanKey& k) const {
  size_t h = 0;
  h = Mix(h, (uint64_t{k.src_memory.node} << 32) | k.src_memory.memory);
  h = Mix(h, (uint64_t{k.dst_memory.node} << 32) | k.dst_memory.memory);
  h = HashLayout(h, k.src_layout);
  h = HashLayout(h, k.dst_layout);
  h = Mix(h, static_cast<uint64_t>(k.size_class) + 1);
  for (int8_t c : k.shape_class) {
    h = Mix(h, static_cast<uint64_t>(c + 1));
  }
  h = Mix(h, static_cast<uint64_t>(k.element_class));
  return h;
}

PlanCache::PlanCache(size_t capacity) : capacity_(capacity) {}

std::shared_ptr<const Path> PlanCache::Find(const PlanKey& key) {
  {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second->second;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void PlanCache::Insert(const PlanKey& key, Path path) {
  if (capacity_ == 0) {
    return;
  }
  Insert(key, std::make_shared<const Path>(std::move(path)));
}

void PlanCache::Insert(const PlanKey& key, std::shared_ptr<const Path> value) {
  if (capacity_ == 0 || !value) {
    return;
  }
  absl::MutexLock lock(&mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    bytes_ -= FootprintOf(key, *it->second->second);
    bytes_ += FootprintOf(key, *value);
    it->second->second = std::move(value);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  if (map_.size() >= capacity_) {
    bytes_ -= FootprintOf(lru_.back().first, *lru_.back().second);
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  bytes_ += FootprintOf(key, *value);
  lru_.emplace_front(key, std::move(value));
  map_.emplace(key, lru_.begin());
}

uint64_t PlanCache::FootprintOf(const PlanKey& key, const Path& path) {
  auto layout_bytes = [](const Layout& l) {
    return l.components().capacity() * sizeof(LayoutComponent);
  };
  // The LRU node and the index node, each holding a key or a pointer.
  uint64_t n = 2 * sizeof(PlanKey) + sizeof(Path) + 4 * sizeof(void*);
  n += layout_bytes(key.src_layout) + layout_bytes(key.dst_layout);
  for (const PathNode& node : path.nodes) n += sizeof(PathNode) + layout_bytes(node.layout);
  for (const TopologyEdge& edge : path.edges) {
    n += sizeof(TopologyEdge) + edge.channel_name.capacity();
  }
  n += path.algorithm.capacity();
  n += path.hop_bps.capacity() * sizeof(double);
  n += (path.request_bytes.capacity() + path.buffer_bytes.capacity()) * sizeof(uint64_t);
  return n;
}

uint64_t PlanCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

void PlanCache::Clear() {
  absl::MutexLock lock(&mu_);
  generation_.fetch_add(1, std::memory_order_release);
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

size_t PlanCache::size() const {
  absl::MutexLock lock(&mu_);
  return map_.size();
}

}  // namespace isometry
