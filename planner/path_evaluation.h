// Path evaluation of the full planner (internal; the model is described in
// full_planner.h): a concrete path's PREFIX, SUFFIX̄, request caps, hop and
// path throughput, request sizes and buffer sizes, and the checks on a
// request that every entry point shares.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "core/box.h"
#include "core/layout.h"
#include "core/status.h"
#include "planner/full_planner.h"

namespace isometry::full_planner_internal {

// The curve a hop reads: the edge's contiguous one (when it has one) for a
// hop that moves one contiguous run, else its run-size one.
const ThroughputFunction& CurveOf(const TopologyEdge& e, bool contiguous);

// Hop h's throughput: its curve (CurveOf, returned in `curve`) at `run`
// bytes; a run-size curve at no more than the edge's max_request_bytes
// (the contiguous curve is of whole copies, already in such requests).
// A conversion whose runs are smaller than an entry (`field_bytes`, |F|)
// interleaves fan = |F| / run of them: for runs up to kFields8MaxRun on
// an edge with tp_fields8, the figure goes from tp's (fan <= 2) to tp_fields8's (fan >= 8),
// linear in log2(fan) between. `curve` is what MinRequestFor reads.
double HopThroughput(const TopologyEdge& e, uint64_t run, bool contiguous, uint64_t field_bytes,
                     const ThroughputFunction*& curve);

// The path's pipelined pairs (full_planner.h, SHARED), as pairs of hop
// indices: on each node with exactly two of the path's uncapped Memcpy
// hops, those two when they are on separate channels and the pair was
// measured (node_pipe_bps).
std::vector<std::pair<size_t, size_t>> PipedPairs(const std::vector<double>& hop_bps,
                                                  const std::vector<const TopologyEdge*>& edges);

// Each hop's figure in its path: `hop_bps`, except for a pipelined pair
// (full_planner.h, SHARED): where a node has exactly two of the path's
// uncapped Memcpy hops, on separate channels, and the pair was measured
// (node_pipe_bps), both read node_pipe_bps times the smaller of the two
// hops' hop_bps over what a plain copy of the hop's request moves (its
// contiguous curve at run_bytes; the pipe's own kind of copy), at most 1.
// Next to the ring, which stays in the cache, each hop runs above the
// curve it was measured at between two memory-sized areas.
std::vector<double> PipedHopRates(const std::vector<double>& hop_bps,
                                  const std::vector<uint64_t>& run_bytes,
                                  const std::vector<const TopologyEdge*>& edges);

// The shared-memory bound (full_planner.h): for each node with two or
// more of the path's uncapped Memcpy hops, 1 / the sum of 1 / hop_bps over
// each channel's hops, and node_copy_bps / their count (when unmeasured,
// 1 / the sum over all of them), or node_pipe_bps for exactly two where it
// was measured; the smallest such figure (infinity when none).
double SharedMemoryBound(const std::vector<double>& hop_bps,
                         const std::vector<const TopologyEdge*>& edges);

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
