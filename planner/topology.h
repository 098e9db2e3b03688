// The transfer graph (Isometry §4.1) as the planner sees it: memories and the
// channels between them. Pure data; the planner never includes a channel.
#pragma once

#include <string>
#include <vector>

#include "core/channel_kind.h"
#include "core/layout.h"
#include "core/memory.h"

namespace isometry {

struct TopologyMemory {
  MemoryId id;
  MemoryKind kind = MemoryKind::kSys;
  std::string name;
};

struct TopologyEdge {
  MemoryId src;
  MemoryId dst;
  int channel = 0;  // index of the channel serving it, in the runtime's table
  ChannelKind kind = ChannelKind::kMemcpy;
  std::string channel_name;
};

struct Topology {
  std::vector<TopologyMemory> memories;
  std::vector<TopologyEdge> edges;

  const TopologyMemory* FindMemory(MemoryId id) const;
  // The edge src -> dst, or null when no channel connects them.
  const TopologyEdge* FindEdge(MemoryId src, MemoryId dst) const;
};

// A path <(m_s,l_s), (m_1,l_1), ..., (m_d,l_d)>: nodes.size() == edges.size() + 1.
struct PathNode {
  MemoryId memory;
  Layout layout;
};
struct Path {
  std::vector<PathNode> nodes;
  std::vector<TopologyEdge> edges;
  std::string algorithm;  // which planner produced it
  std::string ToString(const Topology& topo) const;
};

}  // namespace isometry
