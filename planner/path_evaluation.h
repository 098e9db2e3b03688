// Path evaluation of the full planner (internal; the model is described in
// full_planner.h): a concrete path's PREFIX, SUFFIX̄, request caps, hop and
// path throughput, request sizes and buffer sizes, and the checks on a
// request that every entry point shares.
#pragma once

#include <string_view>
#include <vector>

#include "core/box.h"
#include "core/layout.h"
#include "core/status.h"
#include "planner/full_planner.h"

namespace isometry::full_planner_internal {

// The model on a concrete path, with its edges already looked up
// (edges[h] joins path.nodes[h] and path.nodes[h + 1]). Fills the path's
// estimates; fails only on the space constraint.
Result<Path> Evaluate(Path path, const std::vector<const TopologyEdge*>& edges, const Box& bounds,
                      uint64_t field_bytes, const FullPlannerOptions& o,
                      uint64_t element_bytes = 1);

// A non-empty, valid index space and a non-zero entry size.
Status ValidateRequest(const Box& bounds, uint64_t field_bytes);

// A layout of the index space's dimensionality; `what` names it in the error.
Status ValidateLayout(const Layout& l, const Box& bounds, std::string_view what);

// EvaluatePath with a way to find the channel between two memories:
// find(a, b) returns the edge a -> b or nullptr.
template <typename FindEdge>
Result<Path> EvaluateWith(FindEdge find, Path path, const Box& bounds, uint64_t field_bytes,
                          const FullPlannerOptions& options, uint64_t element_bytes = 1) {
  ISO_RETURN_IF_ERROR(ValidateRequest(bounds, field_bytes));
  if (path.nodes.size() < 2 || path.edges.size() + 1 != path.nodes.size()) {
    return InvalidArgument("path: ", path.nodes.size(), " memories and ", path.edges.size(),
                           " hops; a path has at least one hop and one memory more than hops");
  }
  for (const PathNode& n : path.nodes) {
    ISO_RETURN_IF_ERROR(ValidateLayout(n.layout, bounds, "path"));
  }
  std::vector<const TopologyEdge*> edges;
  for (size_t h = 0; h < path.edges.size(); ++h) {
    const MemoryId a = path.nodes[h].memory, b = path.nodes[h + 1].memory;
    const TopologyEdge* e = find(a, b);
    if (!e) {
      return FailedPrecondition("connectivity: hop ", h, " has no channel from ", ToString(a),
                                " to ", ToString(b));
    }
    if (!(path.edges[h].src == a) || !(path.edges[h].dst == b)) {
      return InvalidArgument("path: hop ", h, " names the channel ", ToString(path.edges[h].src),
                             " -> ", ToString(path.edges[h].dst), " but joins ", ToString(a),
                             " and ", ToString(b));
    }
    edges.push_back(e);
  }
  return Evaluate(std::move(path), edges, bounds, field_bytes, options, element_bytes);
}

}  // namespace isometry::full_planner_internal
