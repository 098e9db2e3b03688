#include "planner/planner.h"

namespace isometry {

namespace {

FullPlannerOptions FullOptions(const PlannerOptions& o) {
  FullPlannerOptions f;
  f.space_threshold = o.space_threshold;
  f.max_hops = o.max_hops;
  f.relays = o.relays;
  return f;
}

// One per thread: the plan a thread got last from a planner, with what it
// asked. A thread that repeats one copy (the ring thread serving a client's
// small copies) finds it again without making the key and taking the
// cache's lock. The layouts hold their lists, so no other list can take
// their address.
struct LastPlan {
  uint64_t planner = 0;
  uint64_t generation = 0;
  PlanEndpoint src, dst;
  Box bounds;
  uint64_t field_bytes = 0, element_bytes = 0;
  std::shared_ptr<const Path> path;

  bool Answers(uint64_t p, uint64_t g, const PlanEndpoint& s, const PlanEndpoint& d, const Box& b,
               uint64_t f, uint64_t e) const {
    return planner == p && generation == g && src.memory == s.memory && dst.memory == d.memory &&
           bounds == b && field_bytes == f && element_bytes == e &&
           src.layout.SharesListWith(s.layout) && dst.layout.SharesListWith(d.layout);
  }
};
thread_local LastPlan last_plan;

}  // namespace

Planner::Planner(Topology topo, PlannerOptions options)
    : options_(options),
      full_(std::move(topo), FullOptions(options)),
      cache_(options.cache_capacity) {}

Result<std::shared_ptr<const Path>> Planner::PlanShared(const PlanEndpoint& src,
                                                        const PlanEndpoint& dst, const Box& bounds,
                                                        uint64_t field_bytes,
                                                        uint64_t element_bytes) {
  // What was planned for the same request before was checked then.
  const uint64_t generation = cache_.generation();
  if (last_plan.Answers(id_, generation, src, dst, bounds, field_bytes, element_bytes)) {
    cache_.CountHit();
    return last_plan.path;
  }
  if (Status s = bounds.Validate("index space"); !s.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  for (const PlanEndpoint* e : {&src, &dst}) {
    if (e->layout.dims() != bounds.dims) {
      failures_.fetch_add(1, std::memory_order_relaxed);
      return InvalidArgument(e == &src ? "source" : "destination", " layout '",
                             e->layout.ToString(), "' has ", e->layout.dims(),
                             " dimension(s); the index space has ", bounds.dims);
    }
  }
  // Remembered only where the cache keeps plans (a capacity of 0 plans
  // every copy afresh).
  const auto remember = [&](const std::shared_ptr<const Path>& path) {
    if (cache_.capacity() == 0) return;
    last_plan = {id_, generation, src, dst, bounds, field_bytes, element_bytes, path};
  };
  const PlanKey key = PlanKey::Make(src, dst, bounds, field_bytes, element_bytes);
  if (std::shared_ptr<const Path> hit = cache_.Find(key)) {
    remember(hit);
    return hit;
  }

  const unsigned __int128 bytes = static_cast<unsigned __int128>(bounds.volume()) * field_bytes;
  Result<Path> path;
  // A PROCESS end is reached by CMA, whose cost per run decides between a
  // direct hop and packing through a slot: the simple planner always
  // packs, so those copies get the full search whatever their size.
  const auto is_process = [this](MemoryId m) {
    const TopologyMemory* tm = topology().FindMemory(m);
    return tm && tm->kind == MemoryKind::kProcess;
  };
  const bool process_end = is_process(src.memory) || is_process(dst.memory);
  if (bytes < options_.full_threshold && !process_end) {
    path = full_.Simple(src, dst);  // PlanSimple on the indexed graph
    if (path.ok()) {
      simple_plans_.fetch_add(1, std::memory_order_relaxed);
      // The estimates, when the model accepts the path (it may not, and the
      // path is still the simple algorithm's answer).
      if (Result<Path> evaluated = full_.Evaluate(*path, bounds, field_bytes, element_bytes);
          evaluated.ok()) {
        path = std::move(evaluated);
      }
    }
  } else {
    path = full_.Plan(src, dst, bounds, field_bytes, element_bytes);
    if (path.ok()) {
      full_plans_.fetch_add(1, std::memory_order_relaxed);
    } else if (absl::IsFailedPrecondition(path.status())) {
      // No path satisfies the model's space threshold (a large transpose
      // between two intermediate buffers, e.g. DSK -> SYS -> SYS -> DSK).
      // The runtime's buffers hold whole chunks, which any layout can
      // address, so the simple path still runs well: return it, without
      // estimates, as for small transfers.
      if (Result<Path> simple = full_.Simple(src, dst); simple.ok()) {
        simple_plans_.fetch_add(1, std::memory_order_relaxed);
        path = std::move(simple);
      }
    }
  }
  if (!path.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return path.status();
  }
  auto shared = std::make_shared<const Path>(*std::move(path));
  cache_.Insert(key, shared);
  remember(shared);
  return shared;
}

Result<Path> Planner::Plan(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                           uint64_t field_bytes, uint64_t element_bytes) {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const Path> p,
                       PlanShared(src, dst, bounds, field_bytes, element_bytes));
  return *p;
}

PlannerStats Planner::stats() const {
  PlannerStats s;
  s.cache_hits = cache_.hits();
  s.cache_misses = cache_.misses();
  s.simple_plans = simple_plans_.load(std::memory_order_relaxed);
  s.full_plans = full_plans_.load(std::memory_order_relaxed);
  s.failures = failures_.load(std::memory_order_relaxed);
  s.cache_entries = cache_.size();
  s.cache_bytes = cache_.bytes();
  return s;
}

}  // namespace isometry
