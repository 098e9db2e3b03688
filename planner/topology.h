// The transfer graph (Isometry §4.1) as the planner sees it: memories and the
// channels between them. Pure data; the planner never includes a channel.
#pragma once

#include <cstdint>
#include <optional>
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

// The largest run TopologyEdge::tp_fields8 is measured at and read for.
inline constexpr uint64_t kFields8MaxRun = 64;

struct TopologyEdge {
  MemoryId src;
  MemoryId dst;
  int channel = 0;  // index of the channel serving it, in the runtime's table
  ChannelKind kind = ChannelKind::kMemcpy;
  std::string channel_name;
  // Throughput as a function of the request size (Isometry §4.1). The
  // default, 1 GB/s for any request, keeps graphs built without
  // measurements plannable. On a converting channel the size is the
  // contiguous run of a layout conversion (how it is calibrated).
  ThroughputFunction tp;
  // The throughput of a hop that moves one contiguous run (no layout
  // change), as a function of its bytes: measured with the requests,
  // stores and parallelism a plain copy of that size really runs with
  // (channels/calibrate.h, MeasureContiguous). Unset: `tp` serves both.
  std::optional<ThroughputFunction> tp_contiguous;
  // The run-size curve of conversions that interleave 8 fields (`tp`:
  // two), for runs up to kFields8MaxRun: each field pass reads the source
  // again, so an AOS -> SOA of many narrow fields runs well below a 2-field
  // one (docs/benchmarks/design-measurements.md, "Copy loops and plans").
  // Unset: `tp` serves every field count.
  std::optional<ThroughputFunction> tp_fields8;
  // DiskWrite edges: the throughput of the writes alone, before the
  // fdatasync that `tp` includes (a durable copy's cost): what a copy with
  // durable = false pays (FullPlanner::Evaluate's `durable`). Unset: `tp`.
  std::optional<ThroughputFunction> tp_unsynced;
  // The channel's configured rate cap in bytes/s (0: none). A capped hop
  // runs at its cap, not at what the memory system allows, so it is left
  // out of the shared-memory bound (full_planner.h).
  double rate_limit_bytes_per_s = 0;
  // The largest request the runtime issues on the channel (its configured
  // request size; 0: unknown, no limit). A hop's run-size curve is read at
  // no more than this: a 1 GiB run goes out as requests of this size.
  uint64_t max_request_bytes = 0;
  // Edges that share node memory (traits): what the node's memory moves
  // with every core copying at once (calibration, MeasureNodeCopy; 0: not
  // measured). Such hops of one node on separate channels run in parallel
  // and share it (full_planner.h, SHARED).
  double node_copy_bps = 0;
  // Edges that share node memory: what two hops of one node on separate
  // channels move pipelined through the runtime's ring (calibration,
  // MeasureNodePipe; 0: not measured). Two such hops share it instead of
  // node_copy_bps / 2.
  double node_pipe_bps = 0;
  EdgeTraits traits;
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
  //   predicted_bps      the path's throughput: the slowest hop's, and no
  //                      more than the host-memory hops of one node reach
  //                      together (full_planner.h)
  //   hop_bps[h]         hop h's throughput with its largest request (for a
  //                      pipelined pair of Memcpy hops, what the pair moves
  //                      through the ring: full_planner.h, SHARED)
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
