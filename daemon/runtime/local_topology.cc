#include "daemon/runtime/local_topology.h"

#include <map>

#include "daemon/runtime/runtime.h"

namespace isometry {
namespace {

// Host memory a GPU reaches by DMA: pinned (ZCM), or pageable (the rest).
bool Pinned(MemoryKind kind) { return kind == MemoryKind::kZcm; }

// The model of a host or disk edge of `kind`.
ThroughputFunction ModelOf(ChannelKind kind) {
  switch (kind) {
    case ChannelKind::kDiskRead:
    case ChannelKind::kDiskWrite:
      // So the planner keeps small requests (and layout changes) off
      // disks (Isometry fig. 9b).
      return ThroughputFunction::PerRequestOverhead(1e9, 100e-6);
    case ChannelKind::kCma:
      return ThroughputFunction::PerRequestOverhead(8e9, 0.4e-6);
    default:
      return ThroughputFunction();
  }
}

// The peak of a GPU edge before calibration (see the header).
double GpuPeak(ChannelKind kind, MemoryKind src, MemoryKind dst) {
  if (kind == ChannelKind::kGpuCopy) return 100e9;
  return Pinned(kind == ChannelKind::kGpuWrite ? src : dst) ? 12e9 : 4e9;
}

// The model of an edge of `kind` from `src` to `dst` (see the header):
// its run-size curve `tp` and, for GPU edges, the plain-copy curve.
void Model(TopologyEdge& e, MemoryKind src, MemoryKind dst) {
  switch (e.kind) {
    case ChannelKind::kGpuWrite:
    case ChannelKind::kGpuRead:
    case ChannelKind::kGpuCopy: {
      const double peak = GpuPeak(e.kind, src, dst);
      // A copy program's runs: a 2-D copy row or a pack-kernel thread
      // each, ~1 ns apiece across PCIe, ~0.05 ns within device memory.
      e.tp = ThroughputFunction::PerRequestOverhead(
          peak, e.kind == ChannelKind::kGpuCopy ? 0.05e-9 : 1e-9);
      // Plain copies: one cudaMemcpyAsync per request, ~10 us each
      // (launch and the completion callback).
      e.tp_contiguous = ThroughputFunction::PerRequestOverhead(peak, 10e-6);
      return;
    }
    default:
      e.tp = ModelOf(e.kind);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ChannelEdges(const RuntimeConfig& config,
                                                              const ChannelConfig& c) {
  std::vector<std::pair<std::string, std::string>> edges;
  if (c.kind != ChannelKind::kCma) {
    // PROCESS memory is only ever reached by cma.
    for (auto& e : config.EdgesOf(c)) {
      if (e.first != kProcessMemoryName && e.second != kProcessMemoryName) edges.push_back(e);
    }
    return edges;
  }
  for (const MemoryConfig& m : config.memories) {
    if (!IsHostMemory(m.kind)) continue;
    edges.emplace_back(kProcessMemoryName, m.name);
    edges.emplace_back(m.name, kProcessMemoryName);
  }
  return edges;
}

Topology LocalTopology(const RuntimeConfig& config) {
  Topology topo;
  std::map<std::string, std::pair<MemoryId, MemoryKind>> ids;
  for (size_t i = 0; i < config.memories.size(); ++i) {
    const MemoryConfig& m = config.memories[i];
    const MemoryId id{config.node, static_cast<uint32_t>(i)};
    topo.memories.push_back({id, m.kind, m.name});
    ids[m.name] = {id, m.kind};
  }
  for (size_t c = 0; c < config.channels.size(); ++c) {
    const ChannelConfig& cc = config.channels[c];
    for (const auto& [s, d] : ChannelEdges(config, cc)) {
      const auto src = ids.find(s), dst = ids.find(d);
      if (src == ids.end() || dst == ids.end()) continue;  // PROCESS memory not added
      TopologyEdge e{src->second.first, dst->second.first, static_cast<int>(c), cc.kind, cc.name};
      e.rate_limit_bytes_per_s = static_cast<double>(cc.rate_limit_bytes_per_s);
      e.max_request_bytes = cc.request_bytes;
      Model(e, src->second.second, dst->second.second);
      topo.edges.push_back(std::move(e));
    }
  }
  return topo;
}

}  // namespace isometry
