// The cluster-wide transfer graph: the graphs of several nodes joined by
// their network links, as the planner sees a cross-node copy (Isometry
// §4.1 over more than one node). Pure: domain types in, a Topology out.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "planner/topology.h"

namespace isometry {

// One node's graph as it enters the join.
struct NodeGraph {
  std::string name;   // the node's name ("node-b"); unique within a join
  uint32_t id = 0;    // its runtime.node: the `node` of its memories' ids
  Topology topology;  // its memories (named without the node) and channels
};

// A network channel from `from` to `to`: one edge from every SYS memory of
// the first to every SYS memory of the second, in that direction only.
struct NetworkLink {
  std::string from, to;  // node names
  ChannelKind kind = ChannelKind::kRemoteMemcpy;
  std::string channel_name;
  ThroughputFunction tp;
  EdgeTraits traits;  // its kind's (channels' EdgeTraitsOf)
};

// The joined graph: every node's memories, renamed "node:memory", with
// their ids as given; every node's own edges; then the links' edges.
// Memories and edges keep the order of `nodes` (and of `links`), so a
// planner's ties break the same way on every call.
//
// Errors: InvalidArgument when two nodes share a name or a link names a
// node not in `nodes`. Two nodes with the same id are NOT refused here
// (the peer hello refuses a peer with this node's own id; two peers that
// share an id are not checked anywhere): their memories keep colliding
// ids, and a link between them connects every SYS memory of both to
// every SYS memory of both.
Result<Topology> JoinTopologies(const std::vector<NodeGraph>& nodes,
                                const std::vector<NetworkLink>& links);

// Memory `memory` of node `node` (id `node_id`) in a graph JoinTopologies
// made; "" is the node's first SYS memory. NotFound when it has none.
Result<MemoryId> FindJoinedMemory(const Topology& joined, const std::string& node, uint32_t node_id,
                                  const std::string& memory);

}  // namespace isometry
