// The simple path planning algorithm (Isometry §4.4).
//
// The shortest path by hop count; every intermediate buffer uses the source
// or the destination layout, and exactly one hop converts, always a Memcpy
// channel: the first Memcpy hop on the path, or, when the path has none, a
// Memcpy self-loop added after the first host memory on it.
#pragma once

#include "planner/topology.h"

namespace isometry {

struct PlanEndpoint {
  MemoryId memory;
  Layout layout;
};

// Errors: unknown memory, no path, a conversion with no Memcpy channel to
// carry it. Thread-safe (pure function of its inputs).
Result<Path> PlanSimple(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst);

}  // namespace isometry
