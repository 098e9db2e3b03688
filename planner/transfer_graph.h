// The transfer graph indexed for the full planner (internal): memories by
// id, adjacency lists both ways, the one edge per ordered pair of memories
// that Topology::FindEdge would find, and a table of which throughput
// functions dominate which (for the search's detour rule). Immutable after
// construction, so one Graph serves concurrent searches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/full_planner.h"

namespace isometry::full_planner_internal {

struct Arc {
  int to = 0;  // for in-arcs: the source memory
  int edge = 0;
  double peak = 0;
  bool poor = false;  // behaves poorly with small requests
  int curve = -1;     // index of its throughput function among the distinct ones
};

// Beyond this many distinct throughput functions the pairwise comparison
// table is not built and the detour rule is off.
constexpr size_t kMaxCurves = 128;

struct Graph {
  // Never fails: edges naming unknown memories are ignored.
  Graph(Topology t, FullPlannerOptions o);

  int Index(MemoryId id) const {
    auto it = std::lower_bound(index.begin(), index.end(), std::pair<MemoryId, int>{id, -1});
    return it != index.end() && it->first == id ? it->second : -1;
  }
  // The edge index of the channel s -> d, or -1.
  int EdgeIndex(int s, int d) const {
    const uint64_t key = static_cast<uint64_t>(s) * topo.memories.size() + static_cast<uint64_t>(d);
    auto at = std::lower_bound(pairs.begin(), pairs.end(), std::pair<uint64_t, int>{key, -1});
    return at != pairs.end() && at->first == key ? at->second : -1;
  }
  const TopologyEdge* EdgeBetween(int s, int d) const {
    const int e = EdgeIndex(s, d);
    return e < 0 ? nullptr : &topo.edges[static_cast<size_t>(e)];
  }
  // tp of curve a >= tp of curve b for every request size (false if unknown).
  bool CurveAtLeast(int a, int b) const {
    return a >= 0 && b >= 0 &&
           at_least[static_cast<size_t>(a) * curve_count + static_cast<size_t>(b)];
  }

  Topology topo;
  FullPlannerOptions options;
  std::vector<std::pair<MemoryId, int>> index;  // sorted by id
  std::vector<uint32_t> node;                   // node of each memory
  std::vector<std::vector<Arc>> out, in;
  std::vector<std::vector<Arc>> out_in_topo_order;  // the order PlanSimple scans
  std::vector<std::pair<uint64_t, int>> pairs;      // (src * n + dst, edge), sorted
  std::vector<int> edge_curve;                      // per edge index (-1: ignored edge)
  std::vector<char> edge_poor;                      // per edge index
  size_t curve_count = 0;
  std::vector<char> at_least;  // curve_count x curve_count: row >= column pointwise

  // PlanSimple on the adjacency lists: see FullPlanner::Simple.
  Result<Path> Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const;
};

}  // namespace isometry::full_planner_internal
