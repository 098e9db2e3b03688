// Channel kinds of Isometry table 2 (plus CMA): vocabulary shared by the
// planner, the channels and the runtime.
#pragma once

#include <optional>
#include <string_view>

namespace isometry {

// What the planners need to know of an edge's channel kind. The kind's
// descriptor says it (ChannelBackend::edge_traits; EdgeTraitsOf in
// channels/channel_factory.h fills it in for local edges, a peer's edges
// and network links); the planner never asks which kind an edge is
// (planner/topology.h, TopologyEdge::traits). The defaults are a channel that converts at no
// special cost and shares nothing.
struct EdgeTraits {
  // A hop on it may change the layout. Disk channels move whole runs
  // between a file and memory (one I/O per run): a layout change there is
  // millions of tiny I/Os, so the planners put it on a converting hop
  // instead (the caller may still force it with `via`).
  bool converts_layout = true;
  // The simple algorithm (§4.4) changes a layout on the first hop of this
  // kind, or on a self-loop of it on the first host memory: the CPU copy.
  bool simple_converter = false;
  // Its hops of one node on separate channels run in parallel and share the
  // node's memory bandwidth (TopologyEdge::node_copy_bps, node_pipe_bps;
  // planner/full_planner.h, SHARED), unless it is capped.
  bool shares_node_memory = false;
  // Its curve (TopologyEdge::tp) is the channel's per-run cost itself (cma: one iovec per run), so
  // a fragmented hop is costed as it runs: the small-request ("poor")
  // heuristic of §4.2, which would hide it from every layout change however
  // coarse, does not apply.
  bool tp_is_per_run = false;
  // Its hops leave the node: a network link between daemons. A cross-node
  // path is cut into one stretch per node where it takes such a hop.
  bool crosses_nodes = false;
  bool operator==(const EdgeTraits&) const = default;
};

enum class ChannelKind : uint8_t {
  kMemcpy,
  kCma,
  kGpuRead,
  kGpuWrite,
  kGpuCopy,
  kDiskRead,
  kDiskWrite,
  kRemoteMemcpy,
};

std::string_view ChannelKindName(ChannelKind kind);
std::optional<ChannelKind> ParseChannelKind(std::string_view name);

}  // namespace isometry
