#include "planner/topology.h"

namespace isometry {

const TopologyMemory* Topology::FindMemory(MemoryId id) const {
  for (const TopologyMemory& m : memories) {
    if (m.id == id) {
      return &m;
    }
  }
  return nullptr;
}

std::string Topology::NameOf(MemoryId id) const {
  const TopologyMemory* m = FindMemory(id);
  return m ? m->name : isometry::ToString(id);
}

const TopologyEdge* Topology::FindEdge(MemoryId src, MemoryId dst) const {
  for (const TopologyEdge& e : edges) {
    if (e.src == src && e.dst == dst) {
      return &e;
    }
  }
  return nullptr;
}

std::string Path::ToString(const Topology& topo) const {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    StrAppend(&s, i ? " -[" : "", i ? edges[i - 1].channel_name : "", i ? "]-> " : "",
              topo.NameOf(nodes[i].memory), "<", nodes[i].layout.ToString(), ">");
  }
  return s;
}

}  // namespace isometry
