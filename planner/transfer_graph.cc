#include "planner/transfer_graph.h"

#include <algorithm>

#include "planner/simple_planner.h"

namespace isometry::full_planner_internal {

Graph::Graph(Topology t, FullPlannerOptions o) : topo(std::move(t)), options(o) {
  const size_t n = topo.memories.size();
  for (size_t i = 0; i < n; ++i) {
    index.push_back({topo.memories[i].id, static_cast<int>(i)});
  }
  std::sort(index.begin(), index.end());
  out.resize(n);
  in.resize(n);
  for (const TopologyMemory& m : topo.memories) {
    node.push_back(m.id.node);
  }
  std::vector<const ThroughputFunction*> curves;
  edge_curve.assign(topo.edges.size(), -1);
  edge_poor.assign(topo.edges.size(), 0);
  for (size_t e = 0; e < topo.edges.size(); ++e) {
    const TopologyEdge& te = topo.edges[e];
    const int s = Index(te.src), d = Index(te.dst);
    if (s < 0 || d < 0) {
      continue;
    }
    const uint64_t key = static_cast<uint64_t>(s) * n + static_cast<uint64_t>(d);
    auto at = std::lower_bound(pairs.begin(), pairs.end(), std::pair<uint64_t, int>{key, -1});
    if (at != pairs.end() && at->first == key) {
      continue;  // FindEdge keeps the first
    }
    pairs.insert(at, {key, static_cast<int>(e)});
    const double peak = te.tp.Peak();
    // A per-run function (CMA: one iovec per run) lets the model compare a
    // direct fragmented hop with packing first: the small-request heuristic
    // would hide the direct hop from every layout change, however coarse.
    const bool poor = !te.traits.tp_is_per_run &&
                      te.tp.At(options.probe_request_bytes) < options.poor_fraction * peak;
    int curve = -1;
    for (size_t c = 0; c < curves.size() && curve < 0; ++c) {
      if (*curves[c] == te.tp) {
        curve = static_cast<int>(c);
      }
    }
    if (curve < 0 && curves.size() < kMaxCurves) {
      curve = static_cast<int>(curves.size());
      curves.push_back(&te.tp);
    }
    out[static_cast<size_t>(s)].push_back({d, static_cast<int>(e), peak, poor, curve});
    in[static_cast<size_t>(d)].push_back({s, static_cast<int>(e), peak, poor, curve});
    edge_curve[e] = curve;
    edge_poor[e] = poor;
  }
  curve_count = curves.size();
  at_least.assign(curve_count * curve_count, 0);
  for (size_t a = 0; a < curve_count; ++a) {
    for (size_t b = 0; b < curve_count; ++b) {
      at_least[a * curve_count + b] = curves[a]->AtLeast(*curves[b]);
    }
  }
  out_in_topo_order = out;
  // Fast channels first: good paths are found early and prune the rest.
  for (auto& arcs : out) {
    std::stable_sort(arcs.begin(), arcs.end(),
                     [](const Arc& a, const Arc& b) { return a.peak > b.peak; });
  }
}

// PlanSimple (simple_planner.cc) step for step, on adjacency lists: the BFS
// visits memories and, per memory, edges in the topology's order, so the
// same shortest path wins; the conversion hop is chosen by the same rule.
Result<Path> Graph::Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const {
  const int s = Index(src.memory), d = Index(dst.memory);
  if (s < 0) {
    return NotFound("unknown memory ", ToString(src.memory));
  }
  if (d < 0) {
    return NotFound("unknown memory ", ToString(dst.memory));
  }
  std::vector<const TopologyEdge*> edges;
  if (const TopologyEdge* self = s == d ? EdgeBetween(s, s) : nullptr) {
    edges.push_back(self);
  } else {
    // BFS as PlanSimple's: without a self-loop, a copy within one memory
    // is the shortest round trip through others. PlanSimple stops at the
    // first memory it dequeues with a channel to d, taking that memory's
    // first such edge; BFS dequeues in the order it enqueues, so the search
    // stops as soon as it enqueues one (the same path, without scanning
    // every memory of that depth: on a large cluster's full mesh those
    // scans were most of the planning time).
    const size_t n = topo.memories.size();
    std::vector<int> edge_to_d(n, -1);  // a memory's first edge to d (topo order)
    for (const Arc& a : in[static_cast<size_t>(d)]) {
      int& e = edge_to_d[static_cast<size_t>(a.to)];
      if (a.to != d && (e < 0 || a.edge < e)) e = a.edge;
    }
    std::vector<const Arc*> via(n, nullptr);
    std::vector<char> seen(n, 0);
    std::vector<int> queue{s};
    seen[static_cast<size_t>(s)] = 1;
    int last = edge_to_d[static_cast<size_t>(s)];
    for (size_t q = 0; q < queue.size() && last < 0; ++q) {
      for (const Arc& a : out_in_topo_order[static_cast<size_t>(queue[q])]) {
        const size_t t = static_cast<size_t>(a.to);
        if (a.to == queue[q] || a.to == d || seen[t]) {
          continue;  // a self-loop, or d itself (the round trip's start)
        }
        seen[t] = 1;
        via[t] = &a;
        queue.push_back(a.to);
        if (edge_to_d[t] >= 0) {
          last = edge_to_d[t];
          break;
        }
      }
    }
    if (last < 0) {
      if (s == d) {
        return NotFound("no channel copies within memory '", topo.NameOf(src.memory), "'",
                        ", directly or through another memory");
      }
      return NotFound("no path of channels leads from memory '", topo.NameOf(src.memory), "' to '",
                      topo.NameOf(dst.memory), "'");
    }
    edges.push_back(&topo.edges[static_cast<size_t>(last)]);
    for (int m = Index(edges.back()->src); m != s;) {
      const Arc* a = via[static_cast<size_t>(m)];
      edges.push_back(&topo.edges[static_cast<size_t>(a->edge)]);
      m = Index(edges.back()->src);
    }
    std::reverse(edges.begin(), edges.end());
  }
  return PlaceConversion(topo, src, dst, std::move(edges), [this](MemoryId m) {
    const int i = Index(m);
    return i < 0 ? nullptr : EdgeBetween(i, i);
  });
}

}  // namespace isometry::full_planner_internal
