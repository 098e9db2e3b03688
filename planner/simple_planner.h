// The simple path planning algorithm (Isometry §4.4).
//
// The shortest path by hop count; every intermediate buffer uses the source
// or the destination layout, and exactly one hop converts, always a Memcpy
// channel: the first Memcpy hop on the path, or, when the path has none, a
// Memcpy self-loop added after the first host memory on it.
#pragma once

#include <functional>
#include <vector>

#include "planner/topology.h"

namespace isometry {

struct PlanEndpoint {
  MemoryId memory;
  Layout layout;
};

// Errors: unknown memory, no path, a conversion with no Memcpy channel to
// carry it. Thread-safe (pure function of its inputs).
Result<Path> PlanSimple(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst);

// The second half of the simple algorithm, shared by planners that find the
// shortest path their own way: places the one layout conversion on `edges`
// (in path order) and builds the Path. `self_loop(m)` is m's self-loop edge
// or null.
Result<Path> PlaceConversion(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst,
                             std::vector<const TopologyEdge*> edges,
                             const std::function<const TopologyEdge*(MemoryId)>& self_loop);

}  // namespace isometry
