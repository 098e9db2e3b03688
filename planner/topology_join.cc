#include "planner/topology_join.h"

#include <map>

namespace isometry {

Result<Topology> JoinTopologies(const std::vector<NodeGraph>& nodes,
                                const std::vector<NetworkLink>& links) {
  Topology joined;
  std::map<std::string, uint32_t> ids;
  for (const NodeGraph& n : nodes) {
    if (!ids.emplace(n.name, n.id).second) {
      return InvalidArgument("node '", n.name, "' appears twice in the cluster graph");
    }
    for (TopologyMemory m : n.topology.memories) {
      m.name = StrCat(n.name, ":", m.name);
      joined.memories.push_back(std::move(m));
    }
    for (const TopologyEdge& e : n.topology.edges) joined.edges.push_back(e);
  }
  for (const NetworkLink& l : links) {
    const auto from = ids.find(l.from), to = ids.find(l.to);
    if (from == ids.end() || to == ids.end()) {
      return InvalidArgument("network link '", l.channel_name, "' from '", l.from, "' to '", l.to,
                             "' names a node not in the cluster graph");
    }
    // By id, over the whole joined graph, as the planner tells memories
    // apart (see the header on nodes that share an id).
    const size_t n = joined.memories.size();
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        const TopologyMemory &ma = joined.memories[a], &mb = joined.memories[b];
        if (ma.id.node == from->second && mb.id.node == to->second && ma.kind == MemoryKind::kSys &&
            mb.kind == MemoryKind::kSys) {
          joined.edges.push_back({ma.id, mb.id, -1, l.kind, l.channel_name, l.tp});
          joined.edges.back().traits = l.traits;
        }
      }
    }
  }
  return joined;
}

Result<MemoryId> FindJoinedMemory(const Topology& joined, const std::string& node, uint32_t node_id,
                                  const std::string& memory) {
  const std::string prefix = StrCat(node, ":");
  for (const TopologyMemory& m : joined.memories) {
    // The name check keeps a node that shares the id out (see the header).
    if (m.id.node != node_id || m.name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string short_name = m.name.substr(prefix.size());
    if (memory.empty() ? m.kind == MemoryKind::kSys : short_name == memory) return m.id;
  }
  return NotFound("node '", node, "' has no memory '", memory, "'");
}

}  // namespace isometry
