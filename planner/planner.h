// The planner the runtime calls: the plan cache in front of the simple
// (§4.4) and full (§4.2) algorithms, chosen by transfer size.
//
//   data bytes (points x |F|) <  full_threshold  -> simple algorithm
//   data bytes                >= full_threshold  -> full algorithm
//
// Small transfers cannot afford the full search (its cost would rival the
// copy); large ones cannot afford a poor path. The paper's threshold is
// 16 MiB. Every returned path carries the model's estimates
// (Path::predicted_bps, request_bytes, buffer_bytes: see EvaluatePath); a
// simple path the model rejects (SUFFIX̄ over TH between two intermediate
// buffers) is still returned, with the estimates left empty; so is the
// simple path of a large transfer for which the full algorithm finds no
// path within TH. Layout changes are never placed on disk hops
// (EdgeTraits::converts_layout) unless the caller forces them.
//
// The topology is fixed for the planner's life: when channels or their
// calibration change, build a new Planner (its cache starts empty).
// Thread-safe: Plan may be called from any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "planner/full_planner.h"
#include "planner/plan_cache.h"
#include "planner/simple_planner.h"
#include "planner/topology.h"

namespace isometry {

struct PlannerOptions {
  uint64_t full_threshold = uint64_t{16} << 20;
  uint64_t space_threshold = uint64_t{32} << 20;  // TH
  size_t cache_capacity = 4096;                   // paths; 0 disables the cache
  int max_hops = 5;                               // for the full algorithm
  bool relays = false;                            // full algorithm: paths through third nodes too
};

struct PlannerStats {
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t simple_plans = 0;   // paths the simple algorithm produced
  uint64_t full_plans = 0;     // paths the full algorithm produced
  uint64_t failures = 0;       // requests that ended in an error
  uint64_t cache_entries = 0;  // paths kept now
  uint64_t cache_bytes = 0;    // what they hold (PlanCache::bytes)
};

class Planner {
 public:
  explicit Planner(Topology topo, PlannerOptions options = {});

  // `field_bytes` is |F| (the entry); `element_bytes` the smallest field's
  // size, the unit of a run where a hop's layouts share no F (see
  // full_planner.h; 1 counts such runs in points). Errors: those of
  // PlanSimple / FullPlanner::Plan (unknown memory, bad layouts or index
  // space, no path). Errors are not cached.
  Result<Path> Plan(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                    uint64_t field_bytes, uint64_t element_bytes = 1);
  // The same, sharing the cached path instead of copying it.
  Result<std::shared_ptr<const Path>> PlanShared(const PlanEndpoint& src, const PlanEndpoint& dst,
                                                 const Box& bounds, uint64_t field_bytes,
                                                 uint64_t element_bytes = 1);

  // The model's estimates for a path the caller chose (a forced `via`
  // path): EvaluatePath over this planner's topology and options. Errors:
  // those of EvaluatePath (the space constraint among them). Not cached.
  // `durable` false: a copy without the closing fdatasync
  // (FullPlanner::Evaluate).
  Result<Path> Evaluate(Path path, const Box& bounds, uint64_t field_bytes,
                        uint64_t element_bytes = 1, bool durable = true) const {
    return full_.Evaluate(std::move(path), bounds, field_bytes, element_bytes, durable);
  }

  PlannerStats stats() const;
  const Topology& topology() const { return full_.topology(); }
  const PlannerOptions& options() const { return options_; }

 private:
  static inline std::atomic<uint64_t> next_id_{1};
  // Never reused, unlike an address: names this planner to the thread
  // that remembers its last plan (planner.cc).
  const uint64_t id_ = next_id_.fetch_add(1, std::memory_order_relaxed);
  const PlannerOptions options_;  // constant after construction
  const FullPlanner full_;        // const and thread-safe
  PlanCache cache_;               // thread-safe
  std::atomic<uint64_t> simple_plans_{0}, full_plans_{0}, failures_{0};
};

}  // namespace isometry
