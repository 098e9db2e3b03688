// The transfer graph (Isometry §4.1) as the planner sees it: memories and the
// channels between them. Pure data; the planner never includes a channel.
#pragma once

#include <string>
#include <vector>

#include "core/channel_kind.h"
#include "core/layout.h"
#include "core/memory.h"
#include "planner/throughput.h"

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
  // Throughput as a function of the request size (Isometry §4.1). The
  // default, 1 GB/s for any request, keeps graphs built without
  // measurements plannable.
  ThroughputFunction tp;
  bool operator==(const TopologyEdge&) const = default;
};

struct Topology {
  std::vector<TopologyMemory> memories;
  std::vector<TopologyEdge> edges;

  const TopologyMemory* FindMemory(MemoryId id) const;
  // A memory as users name it, for messages: its name ("sys0"; in a
  // cross-node graph "node-b:sys0"), or its id ("0:3") when the graph has
  // no such memory.
  std::string NameOf(MemoryId id) const;
  // The edge src -> dst, or null when no channel connects them.
  const TopologyEdge* FindEdge(MemoryId src, MemoryId dst) const;
};

// A path <(m_s,l_s), (m_1,l_1), ..., (m_d,l_d)>: nodes.size() == edges.size() + 1.
struct PathNode {
  MemoryId memory;
  Layout layout;
  bool operator==(const PathNode&) const = default;
};
struct Path {
  std::vector<PathNode> nodes;
  std::vector<TopologyEdge> edges;
  std::string algorithm;  // which planner produced it

  // The cost model's view of the path (planner/full_planner.h,
  // EvaluatePath). Empty / 0 when nobody evaluated it.
  //   predicted_bps      the path's throughput: the slowest hop's
  //   hop_bps[h]         hop h's throughput with its largest request
  //   request_bytes[h]   the request size hop h should use: the smallest one
  //                      that sustains predicted_bps (at least the model's
  //                      minimum request), never more than the hop allows
  //   run_bytes[h]       the contiguous runs hop h moves (PREFIX, capped by TH
  //                      next to an intermediate buffer): the request size
  //                      its throughput function is read at (on cma, one
  //                      iovec each)
  //   buffer_bytes[k]    the minimum size of the intermediate buffer at
  //                      nodes[k + 1] (one entry per intermediate memory)
  double predicted_bps = 0;
  std::vector<double> hop_bps;
  std::vector<uint64_t> request_bytes;
  std::vector<uint64_t> run_bytes;
  std::vector<uint64_t> buffer_bytes;

  std::string ToString(const Topology& topo) const;
  bool operator==(const Path&) const = default;
};

}  // namespace isometry
