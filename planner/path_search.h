// The full planner's search (internal; the algorithm and its pruning rules
// are described in full_planner.h): a depth-first branch and bound over
// (memory, candidate layout) paths in passes with a falling threshold, each
// complete path's blocking factors found by a binary search on throughput
// over the constraint system of block_constraints.h.
#pragma once

#include <cstdint>

#include "planner/full_planner.h"
#include "planner/transfer_graph.h"

namespace isometry::full_planner_internal {

// FullPlanner::Plan on `g`. Pure; any number may run at once on one Graph.
Result<Path> SearchBestPath(const Graph& g, const PlanEndpoint& src, const PlanEndpoint& dst,
                            const Box& bounds, uint64_t field_bytes, uint64_t element_bytes = 1);

}  // namespace isometry::full_planner_internal
