// The transfer graph of one node's configuration (Isometry §4.1), before
// calibration: memory i of `config` is MemoryId{config.node, i}, and every
// edge a channel serves (RuntimeConfig::EdgesOf; a cma channel's to and
// from PROCESS memory) is an edge with channel index = the channel's
// position in config.channels and the model's throughput function for its
// kind until measured:
//   memcpy       1 GB/s flat (the ThroughputFunction default)
//   disk_*       1 GB/s with 100 us per request
//   cma          8 GB/s with 0.4 us per iovec (one per contiguous run)
//   gpu_write    ZCM -> FBM 12 GB/s, SYS/REG -> FBM (pageable, the copy
//                waits on the channel's thread) 4 GB/s
//   gpu_read     FBM -> ZCM 12 GB/s, FBM -> SYS/REG 4 GB/s
//   gpu_copy     within a GPU or to a peer, 100 GB/s
// with, on GPU edges, ~1 ns per contiguous run across PCIe (~0.05 ns in
// device memory: the pack kernel) as the run-size curve `tp`, and 10 us
// per request as the plain-copy curve `tp_contiguous`. The GPU figures
// are conservative PCIe 4 x16 and HBM guesses that make the planner stage
// host <-> GPU hops through pinned ZCM memory, as Isometry §3.2
// prescribes, and convert layouts between GPU instances on the GPU;
// calibration (where a GPU exists) replaces them.
//
// Edges naming a memory `config` lacks (PROCESS before the runtime adds
// it) are left out.
// Pure: reads only `config` (after the runtime added PROCESS memory), so
// planner tests build a GPU node's graph without a GPU.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/runtime_config.h"
#include "planner/topology.h"

namespace isometry {

// The memory pairs channel `c` serves, by name.
std::vector<std::pair<std::string, std::string>> ChannelEdges(const RuntimeConfig& config,
                                                              const ChannelConfig& c);

Topology LocalTopology(const RuntimeConfig& config);

}  // namespace isometry
