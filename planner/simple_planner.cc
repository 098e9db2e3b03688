#include "planner/simple_planner.h"

#include <deque>
#include <map>

namespace isometry {

namespace {

// Shortest memory sequence src -> dst by hop count (BFS). A copy within one
// memory is its self-loop or, without one, the shortest round trip through
// other memories (DSK -> SYS -> DSK: disk channels have no self-loop).
Result<std::vector<const TopologyEdge*>> ShortestPath(const Topology& topo, MemoryId src,
                                                      MemoryId dst) {
  if (src == dst) {
    if (const TopologyEdge* self = topo.FindEdge(src, dst)) {
      return std::vector{self};
    }
  }
  // The edge that first reached each memory; src is reached by none.
  std::map<MemoryId, const TopologyEdge*> via;
  std::deque<MemoryId> queue{src};
  via[src] = nullptr;
  const TopologyEdge* last = nullptr;  // the edge into dst
  while (!queue.empty() && !last) {
    const MemoryId m = queue.front();
    queue.pop_front();
    for (const TopologyEdge& e : topo.edges) {
      if (e.src != m || e.src == e.dst) {
        continue;
      }
      if (e.dst == dst) {
        last = &e;
        break;
      }
      const TopologyMemory* next = topo.FindMemory(e.dst);
      // Client process memory is a copy's end, never a staging memory.
      if (!via.count(e.dst) && !(next && next->kind == MemoryKind::kProcess)) {
        via[e.dst] = &e;
        queue.push_back(e.dst);
      }
    }
  }
  if (!last) {
    if (src == dst) {
      return NotFound("no channel copies within memory '", topo.NameOf(src), "'",
                      ", directly or through another memory");
    }
    return NotFound("no path of channels leads from memory '", topo.NameOf(src), "' to '",
                    topo.NameOf(dst), "'");
  }
  std::vector<const TopologyEdge*> path{last};
  for (MemoryId m = last->src; m != src; m = via[m]->src) {
    path.insert(path.begin(), via[m]);
  }
  return path;
}

}  // namespace

Result<Path> PlanSimple(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst) {
  for (const PlanEndpoint* e : {&src, &dst}) {
    if (!topo.FindMemory(e->memory)) {
      return NotFound("unknown memory ", ToString(e->memory));
    }
  }
  ISO_ASSIGN_OR_RETURN(std::vector<const TopologyEdge*> edges,
                       ShortestPath(topo, src.memory, dst.memory));
  return PlaceConversion(topo, src, dst, std::move(edges),
                         [&topo](MemoryId m) { return topo.FindEdge(m, m); });
}

Result<Path> PlaceConversion(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst,
                             std::vector<const TopologyEdge*> edges,
                             const std::function<const TopologyEdge*(MemoryId)>& self_loop) {
  // Which hop converts: the first simple converter (EdgeTraits: memcpy);
  // without one, insert such a self-loop after the first host memory.
  int convert = -1;
  if (!(src.layout == dst.layout)) {
    for (size_t i = 0; i < edges.size() && convert < 0; ++i) {
      if (edges[i]->traits.simple_converter) {
        convert = static_cast<int>(i);
      }
    }
    if (convert < 0) {
      for (size_t i = 0; i <= edges.size(); ++i) {
        const MemoryId m = i == 0 ? src.memory : edges[i - 1]->dst;
        const TopologyMemory* mem = topo.FindMemory(m);
        const TopologyEdge* self = self_loop(m);
        if (mem && IsHostMemory(mem->kind) && self && self->traits.simple_converter) {
          edges.insert(edges.begin() + static_cast<ptrdiff_t>(i), self);
          convert = static_cast<int>(i);
          break;
        }
      }
    }
    if (convert < 0) {
      return FailedPrecondition("layout conversion from '", src.layout.ToString(), "' to '",
                                dst.layout.ToString(),
                                "' needs a Memcpy channel on a host memory of the path");
    }
  }
  Path path;
  path.algorithm = "simple";
  path.nodes.push_back({src.memory, src.layout});
  for (size_t i = 0; i < edges.size(); ++i) {
    const bool before_conversion = convert >= 0 && static_cast<int>(i) < convert;
    path.nodes.push_back({edges[i]->dst, before_conversion ? src.layout : dst.layout});
    path.edges.push_back(*edges[i]);
  }
  path.nodes.back().layout = dst.layout;
  return path;
}

}  // namespace isometry
