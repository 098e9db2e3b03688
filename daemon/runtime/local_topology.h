// The transfer graph of one node's configuration (Isometry §4.1), before
// calibration: memory i of `config` is MemoryId{config.node, i}, and every
// edge a channel serves (channels/channel_edges.h: ChannelEdges) is an
// edge with channel index = the channel's position in config.channels and
// the model its kind's descriptor gives until measured
// (ChannelBackend::model: a run-size curve `tp` and, where plain copies
// cost differently, `tp_contiguous`; the figures and why are in each
// channel folder's *_backend.cc).
//
// Edges naming a memory `config` lacks (PROCESS before the runtime adds
// it) are left out.
// Pure: reads only `config` (after the runtime added PROCESS memory) and
// the constant descriptors, so planner tests build a GPU node's graph
// without a GPU.
#pragma once

#include "config/runtime_config.h"
#include "planner/topology.h"

namespace isometry {

Topology LocalTopology(const RuntimeConfig& config);

}  // namespace isometry
